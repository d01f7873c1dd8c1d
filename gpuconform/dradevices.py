"""What a DRA node's devices are and which of them a claim can be given now, from upstream's own objects (pure):
the driver's ResourceSlices, the cluster's ResourceClaims (their allocations, as the scheduler wrote them) and
DeviceTaintRules. The verdicts (gpuconform/verdicts/dra.py) and the node inventory read devices through here.

Facts (Kubernetes v1.37.2, k8s.io/api resource/v1 types.go; shared/reference/dra-facts-2026-12.md):
- a driver publishes each pool of a node as ResourceSlices with spec.pool {name, generation, resourceSliceCount};
  a pool is complete when resourceSliceCount slices of its highest generation exist (the scheduler uses only
  those). From 1.35 NVIDIA's driver lays a pool out as one slice holding only sharedCounters, then one slice per GPU
  (kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/driver.go); on 1.34 each slice holds both;
- a device that consumes counters (consumesCounters: KEP-4815 partitionable devices: a GPU and the MIG devices
  carved from it draw on one counter set) is allocatable only while its counter set has enough left;
- the scheduler counts a device as allocated when a claim's status.allocation.devices.results names it, except
  results with adminAccess (pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go:55-58 "Is not
  considered as allocated"): the GPU operator's validator and dcgm-exporter hold such claims on every GPU node;
- a device tainted NoSchedule or NoExecute, in its slice or by a DeviceTaintRule (cluster-scoped, resource.k8s.io/v1
  in 1.37: "the same effect as if the taint was specified directly in the ResourceSlice", types.go:1026-1030), is
  not allocated to a claim that does not tolerate it (dynamicresources.go:840); effect None only informs.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

from .allocpath import Assigned
from .counts import Offered, qty

WITHHOLDING = ("NoSchedule", "NoExecute")
# `type` attribute values of devices that are not a whole GPU of their own: MIG devices (a part of one), and the
# VFIO twin NVIDIA's PassthroughSupport publishes of each GPU (`gpu-vfio-<n>`, uuid the SHA-1 of its PCI address,
# dropped at prepare when its sibling is taken: dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/nvlib.go, allocatable.go
# RemoveSiblingDevices)
MIG, VFIO = "mig", "vfio"
NOT_WHOLE = (MIG, VFIO)
# Devices that are not another physical GPU: VFIO twins, and Intel's SR-IOV virtual functions (`type vf`, published
# beside their PF, which stays allocatable: intel-resource-drivers-for-kubernetes pkg/gpu/device/device.go,
# node_state.go GetResources)
NOT_PHYSICAL = (VFIO, "vf")
# A part of one GPU names its GPU: NVIDIA's MIG devices by `parentUUID` (dra-driver-nvidia-gpu mig.go
# CommonAttributesMig), AMD's partitions by `parentPciAddr` (ROCm/k8s-gpu-dra-driver cmd/gpu-kubeletplugin/
# deviceinfo.go; partitions carry no uuid, nor do AMD's whole GPUs)
PARENT_ATTRIBUTES = ("parentUUID", "parentPciAddr")


NUMA_NODE = "resource.kubernetes.io/numaNode"


def attr(device: dict, name: str) -> str | None:
    """A device attribute's value (resource/v1 DeviceAttribute: one of string/int/bool/version), qualified names
    matched by their last part ("gpu.nvidia.com/uuid" and "uuid" alike)."""
    for key, val in ((device or {}).get("attributes") or {}).items():
        if key.rsplit("/", 1)[-1] == name and isinstance(val, dict):
            for v in (val.get("string"), val.get("version"), val.get("int"), val.get("bool")):
                if v is not None:
                    return str(v)
    return None


def numa_node(device: dict) -> int | None:
    """The device's resource.kubernetes.io/numaNode: the scalar int, or the first of the int list (`ints`, under
    DRAListTypeAttributes: the physical node first, then same-socket nodes; k8s.io/dynamic-resource-allocation
    v0.37.2 deviceattribute/attribute.go:41-53); None where it publishes none."""
    val = ((device or {}).get("attributes") or {}).get(NUMA_NODE)
    if not isinstance(val, dict):
        return None
    v = val.get("int") if val.get("int") is not None else next(iter(val.get("ints") or []), None)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def publishes_topology(told: list[dict]) -> bool:
    """Whether any device of `told` (published_topology) says where it sits: a numaNode or a pcieRoot."""
    return any(t["numaNode"] is not None or t["pcieRoot"] for t in told)


def published_topology(driver: str, slices: list[dict]) -> list[dict]:
    """Where `driver` says each of its devices sits: {"device": pool/name, "pciBusID", "numaNode", "pcieRoot"}
    (the standard attributes; None where it publishes one not), for the devices that publish a PCI bus ID."""
    out = []
    for pool, d in newest_devices(driver, slices):
        bus = attr(d, "pciBusID")
        if bus:
            out.append({"device": f"{pool}/{d.get('name')}", "pciBusID": bus.lower(), "numaNode": numa_node(d),
                        "pcieRoot": attr(d, "pcieRoot")})
    return out


def taint_text(t: dict) -> str:
    kv = f"{t.get('key')}={t['value']}" if t.get("value") else f"{t.get('key')}"
    return f"{kv}:{t.get('effect')}"


def pools(driver: str, slices: list[dict]) -> dict[str, dict]:
    """The driver's pools among `slices`: name -> {generation, want (resourceSliceCount), have (slices of that
    generation), devices (their device names), taints (device name -> its taints, for the devices that have
    any), counters (counter set name -> counter -> value, from the pool's sharedCounters)}."""
    out: dict[str, dict] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        pool = spec.get("pool") or {}
        gen = int(pool.get("generation") or 0)
        p = out.setdefault(pool.get("name") or "", {"generation": gen, "want": 0, "have": 0, "devices": [],
                                                    "taints": {}, "counters": {}})
        if gen > p["generation"]:
            p.update(generation=gen, have=0, devices=[], taints={}, counters={})
        if gen == p["generation"]:
            p["want"] = int(pool.get("resourceSliceCount") or 0)
            p["have"] += 1
            for d in spec.get("devices") or []:
                p["devices"].append(d.get("name"))
                if d.get("taints"):
                    p["taints"][d.get("name")] = d["taints"]
            for cs in spec.get("sharedCounters") or []:
                p["counters"][cs.get("name")] = {k: qty((v or {}).get("value")) for k, v in
                                                 (cs.get("counters") or {}).items()}
    return out


def newest_devices(driver: str, slices: list[dict]) -> list[tuple[str, dict]]:
    """(pool, device) for the driver's devices of each pool's newest generation."""
    newest = {n: p["generation"] for n, p in pools(driver, slices).items()}
    out = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        name = pool.get("name") or ""
        if spec.get("driver") == driver and int(pool.get("generation") or 0) == newest.get(name):
            out += [(name, d) for d in spec.get("devices") or []]
    return out


def _matches(selector: dict, driver: str, pool: str, device: str) -> bool:
    """A DeviceTaintRule's spec.deviceSelector (driver, pool, device; each optional, all given must match)."""
    sel = selector or {}
    return all(sel.get(k) in (None, "", v) for k, v in (("driver", driver), ("pool", pool), ("device", device)))


def rule_taints(driver: str, slices: list[dict], rules: Iterable[dict]) -> dict[str, list[tuple[str, dict]]]:
    """"pool/device" -> [(rule name, taint)] for the driver's devices (newest generation) that DeviceTaintRules
    select."""
    out: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    rules = list(rules or [])
    if not rules:
        return {}
    for pool, d in newest_devices(driver, slices):
        for r in rules:
            spec = r.get("spec") or {}
            if spec.get("taint") and _matches(spec.get("deviceSelector") or {}, driver, pool, d.get("name") or ""):
                out[f"{pool}/{d.get('name')}"].append(((r.get("metadata") or {}).get("name") or "?", spec["taint"]))
    return dict(out)


def withheld(driver: str, slices: list[dict], rules: Iterable[dict] = ()) -> dict[str, list[str]]:
    """"pool/device" -> its withholding taints ("key=value:Effect", a DeviceTaintRule's "(DeviceTaintRule <name>)"
    after it), for the driver's devices (newest generation) that a claim without tolerations cannot be allocated."""
    out: dict[str, list[str]] = {}
    for name, p in pools(driver, slices).items():
        for dev, taints in p["taints"].items():
            bad = [taint_text(t) for t in taints if t.get("effect") in WITHHOLDING]
            if bad:
                out[f"{name}/{dev}"] = bad
    for dev, taints in rule_taints(driver, slices, rules).items():
        bad = [f"{taint_text(t)} (DeviceTaintRule {rule})" for rule, t in taints if t.get("effect") in WITHHOLDING]
        if bad:
            out[dev] = out.get(dev, []) + bad
    return out


def informational(driver: str, slices: list[dict], rules: Iterable[dict] = ()) -> dict[str, list[str]]:
    """"pool/device" -> its taints that leave it in service (effect None), for devices not withheld."""
    out_of_service = withheld(driver, slices, rules)
    out: dict[str, list[str]] = {}
    for n, p in pools(driver, slices).items():
        for d, ts in p["taints"].items():
            if f"{n}/{d}" not in out_of_service:
                out[f"{n}/{d}"] = [taint_text(t) for t in ts]
    for dev, taints in rule_taints(driver, slices, rules).items():
        if dev not in out_of_service:
            out[dev] = out.get(dev, []) + [f"{taint_text(t)} (DeviceTaintRule {r})" for r, t in taints]
    return out


def gpu_devices(driver: str, slices: list[dict]) -> list[str]:
    """The driver's whole-GPU devices ("pool/device", newest generation): every device but those whose `type`
    attribute says it is part of a GPU or a twin of one (NOT_WHOLE; NVIDIA's driver publishes type gpu / mig / vfio:
    dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/deviceinfo.go; drivers without the attribute publish whole GPUs)."""
    return [f"{pool}/{d.get('name')}" for pool, d in newest_devices(driver, slices)
            if attr(d, "type") not in NOT_WHOLE]


def mig_devices(driver: str, slices: list[dict]) -> list[str]:
    """The driver's MIG devices ("pool/device", newest generation): those whose `type` attribute says "mig"."""
    return [f"{pool}/{d.get('name')}" for pool, d in newest_devices(driver, slices) if attr(d, "type") == MIG]


def physical_gpus(driver: str, slices: list[dict]) -> list[str]:
    """The physical GPUs the driver's devices stand for: each whole GPU's `uuid` and each part's parent
    (PARENT_ATTRIBUTES: a GPU in MIG mode is published as its MIG devices only, DynamicMIG's abstract MIG devices
    carry no uuid but their parent's, a partitioned AMD GPU as its partitions), by name where a device has neither.
    VFIO twins and SR-IOV VFs are no GPUs of their own (NOT_PHYSICAL)."""
    out = set()
    for pool, d in newest_devices(driver, slices):
        if attr(d, "type") in NOT_PHYSICAL:
            continue
        parent = next((v for a in PARENT_ATTRIBUTES if (v := attr(d, a))), None)
        out.add(parent or attr(d, "uuid") or f"{pool}/{d.get('name')}")
    return sorted(out)


def slice_uuids(driver: str, slices: list[dict]) -> dict[tuple[str, str], str | None]:
    """(pool, device) -> the device's `uuid` attribute (None when it has none), for `driver`'s devices."""
    out: dict[tuple[str, str], str | None] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") == driver:
            pool = (spec.get("pool") or {}).get("name") or ""
            for d in spec.get("devices") or []:
                out[(pool, d.get("name") or "")] = attr(d, "uuid")
    return out


def claim_devices(claims: list[dict], driver: str) -> list[str]:
    """The "pool/device" names `driver` allocated to `claims` (claim_results)."""
    return [f"{r.get('pool') or ''}/{r.get('device') or ''}" for r in claim_results(claims, driver)]


def claim_results(claims: list[dict], driver: str) -> list[dict]:
    """The allocation results of `driver` in the claims (status.allocation.devices.results: request, driver, pool,
    device, adminAccess), each with the claim's name."""
    out = []
    for c in claims:
        results = ((((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        out += [dict(r, claim=(c.get("metadata") or {}).get("name")) for r in results if r.get("driver") == driver]
    return out


def published(driver: str, slices: list[dict], rules: Iterable[dict] = ()) -> Offered:
    """What `driver` offers of the node's GPUs, as the count and PCI checks compare it: the physical GPUs it
    publishes (whole or as MIG devices, physical_gpus; no count where it publishes no pool for the node), and its
    devices tainted out of service (in its slices or by a DeviceTaintRule of `rules`: withheld), named with their
    taints."""
    out = withheld(driver, slices, rules)
    return Offered(f"GPUs {driver} publishes", len(physical_gpus(driver, slices)) if pools(driver, slices) else None,
                   out_of_service=len(out), out_named=[f"{d} ({', '.join(t)})" for d, t in sorted(out.items())],
                   out_how=f"device(s) of {driver} are tainted out of service, so no claim gets them")


def claims_assigned(claims: list[dict], driver: str, slices: list[dict]) -> Assigned:
    """The devices `driver` allocated to a pod's ResourceClaims (their status, written by the scheduler), with the
    GPU UUIDs its slices publish for them, as verdicts.assignment_findings judges a record."""
    names = [(c.get("metadata") or {}).get("name") or "?" for c in claims]
    uuids = slice_uuids(driver, slices)
    results = [(r.get("pool") or "", r.get("device") or "") for r in claim_results(claims, driver)]
    bare = [f"{p}/{d}" for p, d in results if uuids.get((p, d)) is None]
    return Assigned(f"the allocation of its claim(s) {', '.join(names) or '(none)'}", [f"{p}/{d}" for p, d in results],
                    sorted({u for k in results if (u := uuids.get(k))}),
                    f"{driver} publishes no uuid attribute for {', '.join(bare)}" if bare else "")


def kubelet_claims_assigned(report: dict, namespace: str, pod: str, container: str, driver: str,
                            slices: list[dict]) -> Assigned:
    """The kubelet's own record of a DRA pod's container: PodResources List `dynamic_resources` (field 5 of
    ContainerResources: kubernetes v1.37.2 pkg/kubelet/apis/podresources/server_v1.go, from the claims it prepared;
    the node probe reports it as [{"claim": ns/name, "devices": [{"driver", "pool", "device", "cdi"}]}]), with the
    GPU UUIDs the slices publish for `driver`'s devices. A kubelet that reports no dynamic resources for any
    container (KubeletPodResourcesDynamicResources off: alpha before 1.34) gives no record to match."""
    src = "the kubelet's PodResources List (dynamic_resources)"
    pr = report.get("podResources") or {}
    if pr.get("error"):
        return Assigned(src, [], unmatched=f"the kubelet's PodResources List not read: {pr['error']}")
    pods = pr.get("pods") or []
    entry = next((p for p in pods if p.get("namespace") == namespace and p.get("name") == pod), None)
    if entry is None:
        return Assigned(src, None)
    claims = next((list(c.get("claims") or []) for c in entry.get("containers") or [] if c.get("name") == container),
                  [])
    if not claims and not any(c.get("claims") for p in pods for c in p.get("containers") or []):
        return Assigned(src, [], unmatched="the kubelet reports no dynamic resources for any container "
                                          "(KubeletPodResourcesDynamicResources off: on by default since 1.34)")
    uuids = slice_uuids(driver, slices)
    keys = [(d.get("pool") or "", d.get("device") or "") for c in claims for d in c.get("devices") or []
            if d.get("driver") == driver]
    bare = [f"{p}/{d}" for p, d in keys if uuids.get((p, d)) is None]
    return Assigned(src, [f"{p}/{d}" for p, d in keys], sorted({u for k in keys if (u := uuids.get(k))}),
                    f"{driver} publishes no uuid attribute for {', '.join(bare)}" if bare else "")


def allocated(driver: str, claims: Iterable[dict], skip: Iterable[tuple[str, str]] = ()) -> dict[str, list[str]]:
    """"pool/device" -> the claims ("namespace/name") whose allocation holds it, as the scheduler counts: results
    of `driver` without adminAccess. `skip`: claims (namespace, name) left out (the suite's own run-long pods'
    claims, counted as free by a check that may use their device)."""
    skipped = set(skip)
    out: dict[str, list[str]] = defaultdict(list)
    for c in claims:
        md = c.get("metadata") or {}
        if (md.get("namespace"), md.get("name")) in skipped:
            continue
        for r in claim_results([c], driver):
            if not r.get("adminAccess"):
                out[f"{r.get('pool')}/{r.get('device')}"].append(f"{md.get('namespace')}/{md.get('name')}")
    return dict(out)


def _consumes(device: dict) -> list[tuple[str, str, int | None]]:
    return [(c.get("counterSet") or "", k, qty((v or {}).get("value")))
            for c in device.get("consumesCounters") or [] for k, v in (c.get("counters") or {}).items()]


def free_devices(driver: str, slices: list[dict], claims: Iterable[dict], rules: Iterable[dict] = (),
                 mig: bool = False, skip: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The driver's devices ("pool/device") of one kind (whole GPUs; `mig`: MIG devices) that claims for one device
    each could be allocated now, all at once, as the scheduler's allocator would: devices of complete pools, not
    withheld by a taint, not allocated to a claim (admin access aside), and taken one after another (by pool and
    name) while their counter sets have enough left, after what the allocated devices consume. With abstract MIG
    devices (DynamicMIG) this is a first-fit packing, the number the scheduler reaches for equal requests."""
    every = pools(driver, slices)
    complete = {n for n, p in every.items() if p["have"] == p["want"]}
    out_of_service = withheld(driver, slices, rules)
    held = allocated(driver, claims, skip)
    devices = {f"{pool}/{d.get('name')}": (pool, d) for pool, d in newest_devices(driver, slices) if pool in complete}
    left: dict[tuple[str, str, str], int | None] = {
        (n, cs, k): v for n in complete for cs, counters in every[n]["counters"].items() for k, v in counters.items()}

    def take(pool: str, d: dict) -> bool:
        need = [((pool, cs, k), v) for cs, k, v in _consumes(d)]
        if any(v is not None and (have := left.get(key)) is not None and have < v for key, v in need):
            return False
        for key, v in need:
            if v is not None and left.get(key) is not None:
                left[key] -= v
        return True

    for name in sorted(held):
        if name in devices:
            take(*devices[name])
    wanted = set(mig_devices(driver, slices) if mig else gpu_devices(driver, slices))
    # a device that allows multiple allocations (KEP-5075 consumable capacity: NVIDIA's ConsumableShares) is shared
    # between claims by design: another claim's allocation leaves it free (its capacity is not accounted here)
    return [name for name, (pool, d) in sorted(devices.items())
            if name in wanted and name not in out_of_service
            and (name not in held or d.get("allowMultipleAllocations")) and take(pool, d)]


def usable_count(driver: str, slices: list[dict], mig: bool = False, rules: Iterable[dict] = ()) -> int:
    """How many of the driver's whole GPUs (`mig`: MIG devices) claims could be allocated at once with nothing
    allocated: what the node offers of that kind (free_devices with no claims)."""
    return len(free_devices(driver, slices, (), rules, mig))


# A value from the cluster (a slice's attribute) put into a CEL string literal: only what a GPU UUID is made of
SAFE_LITERAL = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def mig_parents(driver: str, slices: list[dict]) -> dict[str, str]:
    """The GPUs published whole beside a MIG device of theirs (a MIG device's `parentUUID` is a whole-GPU device's
    `uuid`): uuid -> the GPU's "pool/device". Empty when there is no such pair (no MIG devices, or GPUs in MIG mode
    published as their MIG devices only). A uuid that is not a plain identifier is left out: it would go into a
    CEL expression."""
    devices = newest_devices(driver, slices)
    whole = {u: f"{p}/{d.get('name')}" for p, d in devices if attr(d, "type") not in NOT_WHOLE and (u := attr(d, "uuid"))}
    return {u: whole[u] for p, d in devices if attr(d, "type") == MIG
            and (u := attr(d, "parentUUID")) in whole and SAFE_LITERAL.match(u)}



@dataclass(frozen=True)
class Offer:
    """What a DRA node offers a claim of the suite's, from its GPU driver's objects: the DeviceClass its claims
    name, the extended resource its pods may request instead (dra-extended-resource; "" elsewhere), whether one
    device is a MIG device, how many of the class's devices fit at once with nothing allocated (`usable`) and how
    many are free now (`free`; `usable` where claims are not readable)."""

    driver: str
    device_class: str
    extended_resource: str
    mig: bool
    usable: int
    free: int


def offer(drivers: tuple[str, ...], slices: list[dict], extended: dict[str, tuple[str, str]] | None,
          mig_classes: dict[str, str], has_class: Callable[[str], bool], claims: list[dict] | None,
          rules: Iterable[dict] = ()) -> Offer:
    """The Offer of a DRA node whose slices are `slices`: its GPU driver (the first of the vendor's `drivers` that
    publishes for it), the class behind the extended resource name where `extended` names one (dra-extended-resource:
    nodemode.extended_classes), else the driver's own class; where the driver publishes no whole GPU but MIG devices
    (GPUs in MIG mode: nothing is left for the GPU class or the extended resource behind it) the driver's MIG class
    (`mig_classes`, if the cluster has it: `has_class`)."""
    mine = [s for s in slices if (s.get("spec") or {}).get("driver") in drivers]
    driver = mine[0]["spec"]["driver"] if mine else (drivers[0] if drivers else "")
    rules = list(rules)
    device_class, name = (extended or {}).get(driver, (driver, ""))
    mig_class, mig = mig_classes.get(driver, ""), False
    usable = usable_count(driver, mine, rules=rules)
    if not usable and mig_class and has_class(mig_class) and (m := usable_count(driver, mine, mig=True, rules=rules)):
        device_class, name, usable, mig = mig_class, "", m, True
    free = usable if claims is None else len(free_devices(driver, mine, claims, rules, mig=mig))
    return Offer(driver, device_class, name, mig, usable, free)
