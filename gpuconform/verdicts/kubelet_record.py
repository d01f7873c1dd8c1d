"""Verdicts on the node probe's report (gpuconform/nodeprobe.py): the kubelet's own record of devices (its
PodResources API) and the host's PCI hardware, judged against the node object, the labels and what a pod sees.

Facts from upstream (kubernetes v1.34):
- PodResources `List` gives every active pod's containers with the device IDs the device manager assigned them
  (pkg/kubelet/apis/podresources/server_v1.go, List -> devicesProvider.GetDevices);
- `GetAllocatableResources` gives the HEALTHY devices only (pkg/kubelet/cm/devicemanager/manager.go,
  GetAllocatableDevices = allDevices.Filter(healthyDevices)), each with the NUMA topology the plugin reported;
- the device checkpoint's RegisteredDevices are the healthy devices too (manager.go writeCheckpoint), so the
  kubelet names no Unhealthy device anywhere: they are counted (capacity - allocatable list) and named only when
  a pod still holds one (the checkpoint's PodDeviceEntries); the plugin log stays the other evidence;
- a time-sliced replica's ID is "<uuid>::<n>" (NVIDIA/k8s-device-plugin internal/rm/devices.go AnnotatedID), so
  distinct replicas of one GPU are distinct IDs, and what a pod sees of it is the GPU's UUID.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

from .. import vendors
from ..allocpath import Assigned
from ..counts import Expectation, Offered, _count_label, offered, qty
from .common import Finding
from ..nodeprobe import gpu_functions

REPLICA_SEP = "::"
VFIO_DRIVERS = ("vfio-pci", "nvgrace_gpu_vfio_pci")  # what the GPU Operator binds passthrough GPUs to


def probe_report(log: str) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The node probe's JSON report from its log (the last line that parses as one), or NOTCHECKED-OPTIONAL naming
    what the probe printed instead (an image without gpuconform.nodeprobe, a crash)."""
    for line in reversed(log.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "podResources" in doc:
            return doc, []
    return None, [Finding("NOTCHECKED-OPTIONAL", "the node probe printed no report (is images.nodeProbe the suite's own "
                                             f"image, with gpuconform.nodeprobe?): {log.strip()[-400:] or '(no output)'}")]


def _part(report: dict, key: str) -> tuple[dict, str | None]:
    part = report.get(key) or {}
    return part, part.get("error")


def _by_resource(devices: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for d in devices:
        out.setdefault(d.get("resource", ""), []).append(d)
    return out


def _ids(devices: list[dict]) -> list[str]:
    return [i for d in devices for i in d.get("ids", [])]


def gpu_id(device_id: str) -> str:
    """The GPU (or MIG device) behind a kubelet device ID: a replica "<uuid>::<n>" -> "<uuid>"."""
    return device_id.split(REPLICA_SEP, 1)[0]


# ------------------------------------------------------------------ hardware: PCI vs labels vs advertised

def _for_containers(functions: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the GPUs among the PCI functions that containers may get, those bound to a VFIO driver for VMs)."""
    gpus = gpu_functions(functions)
    return ([g for g in gpus if g.get("driver") not in VFIO_DRIVERS],
            [g for g in gpus if g.get("driver") in VFIO_DRIVERS])


def hardware_findings(node: str, exp: Expectation, node_obj: dict, report: dict,
                      offer: Offered | None = None) -> tuple[list[Finding], dict]:
    """The vendor's GPU PCI functions (physical functions of class VGA or 3D controller: an independent count that
    GPU Feature Discovery and the plugin do not write) against the count label and what the node advertises.

    - labels != PCI -> FAIL-F04-LABEL-HARDWARE-MISMATCH (a GPU fell off the bus, or the labels are stale), with
      what the node advertises against the PCI count;
    - no count label -> what the node offers (`offer`: a device plugin's capacity by default, counts.offered; a DRA
      driver's published GPUs, dradevices.published) against PCI x replicas (FAIL-F04-OVERADVERTISED / -UNDERADVERTISED;
      FAIL-F02-CAPACITY-ZERO for 0); where the labels agree with the PCI bus, the label-based count check has
      judged the advertised count against that very number, so this check confirms the labels and adds nothing;
    - MIG: the count label counts MIG devices under the single strategy, and MIG devices per GPU vary, so only
      mixed nodes compare the label, and neither compares the advertised count;
    - GPUs bound to a VFIO driver are set aside for VMs (the GPU Operator's vm-passthrough workloads:
      NVIDIA/gpu-operator cmd/nvidia-validator/main.go VfioPCI.runValidation, drivers vfio-pci and
      nvgrace_gpu_vfio_pci): neither NVML, GFD nor the container plugin sees them, so they are not counted;
    - no function of the vendor on the bus at all (not a GPU, not a bridge) is an integrated GPU (Jetson/Tegra: the
      NVIDIA plugin's tegra device has no PCI address, NVIDIA/k8s-device-plugin internal/rm/tegra_devices.go) or
      a sysfsPath that is not the host's: the count is not checked (NOTCHECKED-OPTIONAL), never a hardware failure.
    Returns (findings, evidence)."""
    if exp.vendor not in vendors.PCI_VENDOR:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: vendor {exp.vendor}: its GPUs' PCI classes are not known to the "
                                           "suite; the PCI count is not checked")], {}
    pci, err = _part(report, "pci")
    if err:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: PCI hardware not read: {err}")], {}
    functions = pci.get("functions", [])
    bridges = [f for f in functions if _is_bridge(f)]
    if len(bridges) == len(functions):
        seen = f" (only PCI bridges: {', '.join(b['address'] for b in bridges)})" if bridges else ""
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: no {exp.vendor} GPU or other device function under "
                                           f"{pci.get('root')}/bus/pci/devices{seen}: an integrated GPU (Jetson/Tegra) "
                                           "is not a PCI function and its root ports are the vendor's bridges; or "
                                           "nodeProbe.sysfsPath is not the host's sysfs. The PCI count is not "
                                           "checked")], {}
    gpus, vfio = _for_containers(functions)
    hw = len(gpus)
    labels = node_obj.get("metadata", {}).get("labels", {}) or {}
    label_n, label = _count_label(labels, exp.vendor)
    if exp.mig_strategy == "single":
        label_n = None  # it counts MIG devices, not GPUs
    offer = offer or offered(node_obj, exp)
    models = gpu_models(gpus)
    ev = {"pci GPUs": [f"{g['address']} {g['class']} device {g.get('device')} NUMA {g.get('numa')}" for g in gpus],
          "pci functions of the vendor": len(functions), "count label": f"{label}={label_n}",
          offer.what: offer.count, "replicas": offer.per_gpu, "mig": exp.mig_strategy}
    if vfio:
        ev["set aside for VMs (VFIO), not counted"] = [f"{g['address']} {g['driver']}" for g in vfio]
    out: list[Finding] = []
    # GFD labels one model per node, chosen by Go map order (NVIDIA/k8s-device-plugin v0.19.3 internal/lm/
    # mig-strategy.go newGPULabelers): on a node with several models its count is one model's
    one_model = exp.vendor == vendors.NVIDIA and len(models) > 1 and label_n in models.values()
    if one_model:
        ev["count label counts one model"] = f"{label}={label_n} of PCI models {models}"
    elif label_n is not None and label_n != hw:
        out.append(Finding("FAIL-F04-LABEL-HARDWARE-MISMATCH",
                           f"{node}: {label} says {label_n} GPU(s) but the PCI bus shows {hw} "
                           f"({', '.join(g['address'] for g in gpus) or 'none'}; {pci.get('root')}/bus/pci/devices)"))
    n, per = offer.count, offer.per_gpu
    if (label_n is None or out or one_model or exp.mig_strategy != "none") and n is not None and n != hw * per:
        times = f" x {per} replicas" if per > 1 else ""
        code = ("FAIL-F02-CAPACITY-ZERO" if n == 0 else
                "FAIL-F04-OVERADVERTISED" if n > hw * per else "FAIL-F04-UNDERADVERTISED")
        out.append(Finding(code, f"{node}: {offer.what}={n}, but the PCI bus shows {hw} GPU(s){times} = {hw * per}"))
    return out, ev


def _is_bridge(function: dict) -> bool:
    """A PCI bridge (class 0x06xx): Tegra root ports carry NVIDIA's vendor ID (Linux drivers/pci/quirks.c) and an
    NVSwitch is class 0x0680 (go-nvlib pkg/nvpci/nvpci.go PCINvSwitchClass): neither is a GPU nor part of one."""
    return str(function.get("class") or "").startswith("0x06")


def gpu_models(gpus: list[dict]) -> dict[str, int]:
    """GPUs per PCI device ID (one ID per model), e.g. {"0x20f1": 2, "0x1eb8": 1}."""
    return dict(sorted(Counter(str(g.get("device")) for g in gpus).items()))


def with_pci_count(exp: Expectation, report: dict) -> Expectation:
    """`exp` with the PCI bus's GPU count as the physical count, where the probe read the bus: on a node with more
    than one GPU model GFD's count label counts one model (see hardware_findings), the bus counts them all."""
    pci, err = _part(report, "pci")
    gpus = _for_containers(pci.get("functions", []))[0]
    if err or not gpus:
        return exp
    source = (f"PCI bus: {len(gpus)} GPU(s), by PCI device ID {gpu_models(gpus)}; {exp.source} counts one model "
              "(GPU Feature Discovery labels one model per node)")
    return replace(exp, physical=len(gpus), source=source, basis={**exp.basis, "physical": source})


def reported_numa_findings(node: str, exp: Expectation, report: dict) -> list[Finding]:
    """The NUMA nodes the plugin reports for its devices (the kubelet's allocatable list, which the topology
    manager aligns CPUs with) must be NUMA nodes the vendor's GPUs sit on (sysfs numa_node). GPUs without NUMA
    affinity (-1, typical in VMs) or devices reported without topology leave nothing to compare."""
    pci, perr = _part(report, "pci")
    alloc, aerr = _part(report, "allocatable")
    if perr or aerr:
        return []
    hw = {g["numa"] for g in _for_containers(pci.get("functions", []))[0] if g.get("numa") is not None}
    devs = [d for r in exp.resources for d in _by_resource(alloc.get("devices", [])).get(r, [])]
    told = {n for d in devs for n in d.get("numa", [])}
    if not hw or not told or told <= hw:
        return []
    return [Finding("FAIL-NUMA-MISREPORTED", f"{node}: the plugin reports {', '.join(exp.resources)} devices on NUMA "
                                            f"{sorted(told)}, but the GPUs sit on NUMA {sorted(hw)} (sysfs numa_node)")]


# ------------------------------------------------------------------ the kubelet's allocatable list

def allocatable_findings(node: str, exp: Expectation, node_obj: dict, report: dict) -> tuple[list[Finding], dict]:
    """The kubelet's allocatable device list (healthy devices) per GPU resource against the node's allocatable;
    devices counted in capacity but not in that list are Unhealthy (FAIL-F03-UNHEALTHY-DEVICES), named where a pod
    still holds one (the checkpoint). An API the kubelet does not serve leaves the part unchecked (evidence)."""
    alloc, err = _part(report, "allocatable")
    if err:
        return [], {"allocatable list": f"not read: {err}"}
    status = node_obj.get("status", {})
    entries = (report.get("checkpoint") or {}).get("entries", [])
    by_res = _by_resource(alloc.get("devices", []))
    out: list[Finding] = []
    ev: dict[str, Any] = {}
    for res in exp.resources:
        ids = _ids(by_res.get(res, []))
        node_alloc = qty((status.get("allocatable") or {}).get(res))
        cap = qty((status.get("capacity") or {}).get(res))
        ev[res] = {"kubelet allocatable list": len(ids), "node allocatable": node_alloc, "node capacity": cap,
                   "ids": sorted(ids)}
        if node_alloc is not None and node_alloc != len(ids):
            out.append(Finding("FAIL-KUBELET-RECORD-MISMATCH",
                               f"{node}: the kubelet's allocatable list has {len(ids)} {res} device(s), the node "
                               f"object says allocatable {node_alloc} (PodResources GetAllocatableResources)"))
        if cap is not None and cap > len(ids):
            gone = sorted({i for e in entries if e.get("resource") == res for i in e.get("ids", [])} - set(ids))
            named = (f"; held by pods though not healthy: {gone}" if gone
                     else " (the kubelet names none: see the plugin log)")
            out.append(Finding("FAIL-F03-UNHEALTHY-DEVICES",
                               f"{node}: capacity {res}={cap} but the kubelet lists {len(ids)} healthy device(s): "
                               f"{cap - len(ids)} Unhealthy{named}"))
    return out, ev


# The kubelet writes the device manager's counts into the node object only when it posts the node status, every
# nodeStatusUpdateFrequency (default 10s: pkg/kubelet/apis/config/v1beta1/defaults.go), so a healthy node object
# may trail the kubelet's live list by one period (e.g. just after the plugin re-registers with a restarted kubelet).
DEFAULT_STATUS_UPDATE_S = 10.0
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def status_update_s(kubelet_cfg: dict | None) -> float:
    """How often the kubelet posts its node status: configz nodeStatusUpdateFrequency (a Go duration such as
    "10s" or "1m0s"), or the kubelet's default where configz is not readable or the value does not parse."""
    text = str((kubelet_cfg or {}).get("nodeStatusUpdateFrequency") or "")
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return DEFAULT_STATUS_UPDATE_S
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def allocatable_agrees(exp: Expectation, node_obj: dict, report: dict) -> bool:
    """Whether the node object's allocatable equals the kubelet's allocatable list for every GPU resource (an
    unread list agrees: nothing to wait for)."""
    return not any(f.code == "FAIL-KUBELET-RECORD-MISMATCH" for f in allocatable_findings("", exp, node_obj, report)[0])


def node_offer(exp: Expectation, node_obj: dict, report: dict | None = None) -> Offered:
    """What a device-plugin node offers of its GPU resources now, as went_out_of_service compares it: capacity,
    and the devices out of service as capacity less the healthy ones: the kubelet's own allocatable list
    (GetAllocatableResources: healthy devices only, read now) where `report` holds it, else the node object's
    allocatable (posted with the kubelet's next node-status update)."""
    cap_all = (node_obj.get("status") or {}).get("capacity") or {}
    alloc_all = (node_obj.get("status") or {}).get("allocatable") or {}
    alloc, err = _part(report or {}, "allocatable")
    listed = None if report is None or err else _by_resource(alloc.get("devices", []))
    cap = healthy = 0
    for r in exp.resources:
        cap += qty(cap_all.get(r)) or 0
        healthy += len(_ids(listed.get(r, []))) if listed is not None else (qty(alloc_all.get(r)) or 0)
    src = "the kubelet's allocatable list" if listed is not None else "node allocatable"
    # named: the devices the kubelet's checkpoint knows (its registered devices, which are the healthy ones on
    # v1.37, and those its allocations hold) that its list leaves out: an Unhealthy device is named where a pod
    # holds it, else only counted
    cp = (report or {}).get("checkpoint") or {}
    known = {r: set((cp.get("registered") or {}).get(r, [])) | {i for e in cp.get("entries") or []
                                                                 if e.get("resource") == r for i in e.get("ids", [])}
             for r in exp.resources}
    named = [] if listed is None else sorted(
        i for r in exp.resources for i in known[r] - set(_ids(listed.get(r, []))))
    return Offered(f"capacity {', '.join(exp.resources)}", cap, exp.replicas, out_of_service=max(cap - healthy, 0),
                   out_named=named, out_how=f"of {cap} devices are not in {src}")


# ------------------------------------------------------------------ assignments: List

def holders(report: dict) -> dict[tuple[str, str], list[str]]:
    """(resource, device ID) -> the "namespace/pod/container"s the kubelet assigned it to, over every pod."""
    out: dict[tuple[str, str], list[str]] = {}
    for p in (report.get("podResources") or {}).get("pods", []):
        for c in p.get("containers", []):
            for d in c.get("devices", []):
                for i in d.get("ids", []):
                    out.setdefault((d.get("resource", ""), i), []).append(f"{p['namespace']}/{p['name']}/{c['name']}")
    return out


def double_assignment_findings(node: str, report: dict, active: set[str] | None = None) -> list[Finding]:
    """No device ID is assigned to two containers at once, across every pod on the node (the kubelet's record).

    Before Kubernetes 1.34, List also reports pods in a terminal phase (kubernetes/kubernetes#119423; 1.34's
    KubeletPodResourcesListUseActivePods, #132028, leaves them out), whose devices the kubelet may already have
    given to a new pod. `active` ("namespace/name" of the node's non-terminal pods, from the API server) keeps
    such a finished pod from counting as a second holder; None counts every pod List shows."""
    pr, err = _part(report, "podResources")
    if err:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: the kubelet's PodResources List was not read: {err}")]
    live = {k: [w for w in v if active is None or w.rsplit("/", 1)[0] in active] for k, v in holders(report).items()}
    twice = {k: v for k, v in live.items() if len(v) > 1}
    if not twice:
        return []
    return [Finding("FAIL-DOUBLE-ALLOCATION", f"{node}: the kubelet assigned " + "; ".join(
        f"{res} {dev} to {len(who)} containers ({', '.join(who)})" for (res, dev), who in sorted(twice.items())))]


def assigned_to(report: dict, namespace: str, pod: str, container: str) -> dict[str, list[str]] | None:
    """resource -> device IDs the kubelet assigned to one container; None when List does not show the pod."""
    for p in (report.get("podResources") or {}).get("pods", []):
        if p.get("namespace") == namespace and p.get("name") == pod:
            for c in p.get("containers", []):
                if c.get("name") == container:
                    return {d.get("resource", ""): list(d.get("ids", [])) for d in c.get("devices", [])}
            return {}
    return None


def held_and_offered(report: dict, namespace: str, pods: list[str], container: str,
                     resource: str) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]] | None:
    """The device IDs the kubelet's PodResources List records for each of `pods`' `container` (`resource`), and
    the IDs its GetAllocatableResources offers; None where either was not read."""
    if _part(report, "podResources")[1] or _part(report, "allocatable")[1] or not report.get("allocatable"):
        return None
    held = {p: tuple((assigned_to(report, namespace, p, container) or {}).get(resource, [])) for p in pods}
    alloc = _part(report, "allocatable")[0]
    return held, tuple(i for d in _by_resource(alloc.get("devices", [])).get(resource, []) for i in d.get("ids", []))


def kubelet_assigned(report: dict, namespace: str, pod: str, container: str, resource: str) -> Assigned:
    """The device plugin's devices the kubelet's PodResources List records for one container (replicas by their
    GPU). IDs that are not UUIDs (deviceIDStrategy=index) cannot be matched to what a pod sees."""
    src = "the kubelet's PodResources List"
    _, err = _part(report, "podResources")
    if err:
        return Assigned(src, [], unmatched=f"the kubelet's PodResources List not read: {err}")
    got = assigned_to(report, namespace, pod, container)
    if got is None:
        return Assigned(src, None)
    ids = got.get(resource, [])
    want = sorted({gpu_id(i) for i in ids})
    index = "" if all(w.startswith(("GPU-", "MIG-")) for w in want) else \
        f"the plugin names devices by index ({ids}), not by UUID (deviceIDStrategy=index)"
    return Assigned(f"{src} ({resource})", ids, want, index)


def assignment_findings(node: str, who: str, assigned: Assigned, seen: list[str],
                        code: str) -> tuple[list[Finding], dict]:
    """The devices a record (`assigned`) gives the container `who` (namespace/pod/container) are the devices it sees
    (the GPU or MIG UUIDs nvidia-smi lists in it): `code` (the path's, AllocationPath.record_mismatch) when the
    record has no entry for the pod, assigns it nothing, or names other devices; NOTCHECKED-OPTIONAL where its
    names cannot be matched to what a container sees."""
    ev = {f"{assigned.source} records": assigned.names, "as GPU UUIDs": assigned.ids, "container sees": seen}
    if assigned.names is None:
        return [Finding(code, f"{node}: {assigned.source} has no entry for {who}, which runs with a GPU")], ev
    if assigned.unmatched:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: {assigned.unmatched}: what {who} sees cannot be matched "
                                           "to its record")], ev
    if not assigned.names:
        return [Finding(code, f"{node}: {assigned.source} assigns no device to {who}, which requested one")], ev
    got = sorted(set(seen))
    if got != sorted(set(assigned.ids)):
        return [Finding(code, f"{node}: {assigned.source} gives {who} {', '.join(assigned.names)} "
                              f"({', '.join(assigned.ids)}), but the container sees {', '.join(got) or 'no GPU'}: "
                              f"{'other devices' if got else 'nothing'} than it was allocated were injected")], ev
    return [], ev


def numa_counts(report: dict) -> dict[str, int]:
    """Evidence: how many of the vendor's GPUs the PCI tree shows per NUMA node."""
    pci, err = _part(report, "pci")
    if err:
        return {}
    return {str(k): v for k, v in sorted(Counter(g.get("numa") for g in gpu_functions(pci.get("functions", [])))
                                         .items(), key=lambda kv: str(kv[0]))}


__all__ = ["Assigned", "allocatable_findings", "node_offer", "assignment_findings", "double_assignment_findings", "gpu_id",
           "hardware_findings", "holders", "kubelet_assigned", "numa_counts", "probe_report", "reported_numa_findings"]
