"""Verdicts on the DRA path: a node whose GPUs a DRA driver serves (gpuconform/nodemode.py). Facts from Kubernetes
v1.37.2 (k8s.io/api resource/v1 types.go; docs/vendors.md):
- a driver publishes each pool of a node as ResourceSlices with spec.driver, spec.nodeName and spec.pool {name,
  generation, resourceSliceCount}; a pool is complete when resourceSliceCount slices of its highest generation
  exist (slices of older generations are being replaced; the scheduler uses only the newest);
- its kubelet plugin registers through a socket in the kubelet's plugins_registry directory
  (AllocationPath.registrar_sockets), judged with the device plugin's by verdicts/registration.py.
"""

from __future__ import annotations

from collections import Counter

from ..counts import qty
from ..dradevices import (SAFE_LITERAL, attr, claim_results, claims_assigned, newest_devices, physical_gpus, pools,
                          published_topology, publishes_topology)
from .common import Finding
from .kubelet_record import _part, assignment_findings


def slice_findings(node: str, driver: str, slices: list[dict]) -> tuple[list[Finding], dict]:
    """The node's pools of `driver` are present and complete: FAIL-DRA-NO-SLICES when the driver publishes no
    slice (or no device) for the node, FAIL-DRA-POOL-INCOMPLETE when a pool lacks slices of its generation.
    Returns (findings, evidence); the evidence names who wrote each of the driver's slices (managedFields
    managers): a slice names its driver itself, and any writer with create on ResourceSlices can name the GPU
    driver's, so an auditor sees whose slices were judged (review T3)."""
    mine = pools(driver, slices)
    ev = {"driver": driver, "pools": mine, "other drivers": sorted({(s.get("spec") or {}).get("driver") or "?"
                                                                     for s in slices} - {driver}),
          "written by (managedFields manager)": writers(driver, slices)}
    if not mine:
        return [Finding("FAIL-DRA-NO-SLICES", f"{node}: the GPU DRA driver {driver} publishes no ResourceSlice for "
                        f"this node (slices naming it: {len(slices)})")], ev
    bad = [f"{name or '(unnamed)'}: {p['have']} of {p['want']} slice(s) at generation {p['generation']}"
           for name, p in sorted(mine.items()) if p["have"] != p["want"]]
    if bad:
        return [Finding("FAIL-DRA-POOL-INCOMPLETE", f"{node}: pool(s) of {driver} incomplete: {'; '.join(bad)}")], ev
    if not any(p["devices"] for p in mine.values()):
        return [Finding("FAIL-DRA-NO-SLICES", f"{node}: the ResourceSlices of {driver} list no device")], ev
    return [], ev


def writers(driver: str, slices: list[dict]) -> dict[str, list[str]]:
    """Each slice of `driver`: the managers that wrote it (metadata.managedFields; the kubelet plugin library's
    client, or whatever else did)."""
    return {(s.get("metadata") or {}).get("name") or "?": sorted({m.get("manager") or "?" for m in
                                                                (s.get("metadata") or {}).get("managedFields") or []})
            for s in slices if (s.get("spec") or {}).get("driver") == driver}


def published_topology_findings(node: str, driver: str, slices: list[dict], report: dict) -> tuple[list[Finding], dict]:
    """Where the driver says its devices sit (resource.kubernetes.io/numaNode and pcieRoot, by pciBusID:
    dradevices.published_topology) is where the PCI tree has them (sysfs numa_node, the root complex of the
    function's path): FAIL-NUMA-MISREPORTED otherwise, as a claim's matchAttribute on either (KEP-5491: the way a DRA
    claim gets its devices on one NUMA node or root; the kubelet's topology manager takes no hints from DRA
    drivers) then puts devices together that are not. NOTCHECKED-OPTIONAL where the driver publishes neither
    attribute (nothing to check, and nothing a claim can align on) or the PCI tree was not read."""
    told = published_topology(driver, slices)
    ev: dict = {"published (pciBusID: numaNode, pcieRoot)": {t["pciBusID"]: (t["numaNode"], t["pcieRoot"])
                                                             for t in told}}
    if not told:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: {driver} publishes no device with a PCI bus ID "
                        "(resource.kubernetes.io/pciBusID) for this node: no topology to check")], ev
    if not publishes_topology(told):
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: {driver} publishes neither resource.kubernetes.io/numaNode "
                        "nor resource.kubernetes.io/pcieRoot for its devices: their topology is not checked, and no "
                        "claim can ask for devices on one NUMA node or PCIe root")], ev
    pci, err = _part(report, "pci")
    if err:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: PCI hardware not read: {err}")], ev
    on_bus = {str(f.get("address") or "").lower(): f for f in pci.get("functions", [])}
    ev["PCI tree (address: numa, pcieRoot)"] = {a: (f.get("numa"), f.get("pcieRoot")) for a, f in on_bus.items()}
    wrong = []
    for t in told:
        f = on_bus.get(t["pciBusID"])
        if f is None:
            continue  # a device the bus lacks: the count is the hardware check's
        if t["numaNode"] is not None and f.get("numa") is not None and t["numaNode"] != f["numa"]:
            wrong.append(f"{t['device']} ({t['pciBusID']}) numaNode {t['numaNode']}, sysfs numa_node {f['numa']}")
        if t["pcieRoot"] and f.get("pcieRoot") and t["pcieRoot"] != f["pcieRoot"]:
            wrong.append(f"{t['device']} ({t['pciBusID']}) pcieRoot {t['pcieRoot']}, PCI tree {f['pcieRoot']}")
    if wrong:
        return [Finding("FAIL-NUMA-MISREPORTED", f"{node}: {driver} publishes its devices' topology unlike the PCI "
                        f"tree: {'; '.join(wrong)}: a claim constrained to one NUMA node or PCIe root "
                        "(matchAttribute) gets devices that are not")], ev
    return [], ev


def offered_twice_findings(node: dict, resources: list[str], driver: str, slices: list[dict]) -> tuple[list[Finding], dict]:
    """A device-plugin node whose GPUs a GPU DRA driver publishes as well: FAIL-GPU-OFFERED-TWICE when the node
    advertises one of its GPU `resources` and `driver` publishes GPUs for it. Pods requesting the resource and claims
    of the driver's class are then allocated from two ledgers that know nothing of each other, so one GPU can be
    handed to both (the NVIDIA DRA driver's chart refuses this install without gpuResourcesEnabledOverride:
    kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml)."""
    name = (node.get("metadata") or {}).get("name", "?")
    capacity = (node.get("status") or {}).get("capacity") or {}
    advertised = {r: capacity[r] for r in resources if (qty(capacity.get(r)) or 0) > 0}
    gpus = physical_gpus(driver, slices)
    ev = {"advertised by the device plugin": advertised, f"GPUs {driver} publishes": gpus}
    if advertised and gpus:
        shown = ", ".join(f"{r}={v}" for r, v in sorted(advertised.items()))
        return [Finding("FAIL-GPU-OFFERED-TWICE", f"{name}: a device plugin advertises {shown} and the DRA driver "
                        f"{driver} publishes {len(gpus)} GPU(s) of the same node ({', '.join(gpus[:4])}"
                        f"{', ...' if len(gpus) > 4 else ''}): a pod requesting the resource and a claim can be "
                        "handed the same GPU")], ev
    return [], ev


def parent_selector(driver: str, uuids: list[str], mig: bool) -> str:
    """The CEL selector for one of the GPUs `uuids` itself (mig False) or a MIG device of one of them (mig True), in
    the driver's attribute domain; each uuid must match SAFE_LITERAL (checked again here: they come from the
    cluster)."""
    bad = [u for u in uuids if not SAFE_LITERAL.match(u)]
    if bad or not uuids:
        raise ValueError(f"not plain device identifiers: {bad or uuids!r}")
    attr = f'device.attributes["{driver}"].{"parentUUID" if mig else "uuid"}'
    quoted = ", ".join(f'"{u}"' for u in uuids)
    return f"{attr} == {quoted}" if len(uuids) == 1 else f"{attr} in [{quoted}]"


def allocated_parent(driver: str, claim: dict | None, slices: list[dict]) -> str | None:
    """The `parentUUID` of the MIG device the claim was allocated (None: not allocated, or no such device)."""
    devices = {f"{p}/{d.get('name')}": d for p, d in newest_devices(driver, slices)}
    for r in claim_results([claim] if claim else [], driver):
        if (d := devices.get(f"{r.get('pool')}/{r.get('device')}")) is not None and attr(d, "type") == "mig":
            return attr(d, "parentUUID")
    return None


def mig_parent_findings(node: str, driver: str, parent: str, uuid: str, mig_claim: dict | None,
                        parent_claim: dict | None, slices: list[dict]) -> tuple[list[Finding], dict]:
    """A MIG device of the GPU `parent` (uuid `uuid`) and that GPU itself are never both allocated: `mig_claim`
    (asked for a MIG device of it) and `parent_claim` (asked for the GPU, while the first was held) as the scheduler
    left them. Partitionable devices (KEP-4815) make that so: the GPU and its MIG devices draw on one counter set
    (NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/partitions.go at 1b84773c). FAIL-DRA-MIG-AND-PARENT-ALLOCATED
    when both claims hold their device."""
    parents = {f"{p}/{d.get('name')}": attr(d, "parentUUID") for p, d in newest_devices(driver, slices)}
    mig = [f"{r.get('pool')}/{r.get('device')}" for r in claim_results([mig_claim] if mig_claim else [], driver)]
    whole = [f"{r.get('pool')}/{r.get('device')}" for r in claim_results([parent_claim] if parent_claim else [],
                                                                         driver)]
    ev = {"parent GPU": f"{parent} ({uuid})", "MIG claim allocated": mig,
          "parent claim allocated": whole or "nothing (stays pending)"}
    of_parent = [m for m in mig if parents.get(m) == uuid]
    if of_parent and parent in whole:
        return [Finding("FAIL-DRA-MIG-AND-PARENT-ALLOCATED", f"{node}: GPU {parent} ({uuid}) was allocated to claim "
                        f"{_name(parent_claim)} while its MIG device {', '.join(of_parent)} was allocated to claim "
                        f"{_name(mig_claim)}: the driver's devices do not share counters (consumesCounters, KEP-4815), "
                        "so one GPU is handed out twice")], ev
    return [], ev


def _name(obj: dict | None) -> str:
    return ((obj or {}).get("metadata") or {}).get("name") or "?"


def tainted_allocation_findings(node: str, driver: str, claims_of: dict[str, list[dict]],
                                out_of_service: dict[str, list[str]]) -> tuple[list[Finding], dict]:
    """No pod's claim (`claims_of`: pod -> its ResourceClaims as the scheduler allocated them; the suite's claims
    tolerate no taint) was allocated a device its driver tainted out of service (`out_of_service`, from withheld):
    FAIL-DRA-TAINTED-DEVICE-ALLOCATED otherwise, as where kube-scheduler runs without DRADeviceTaints."""
    ev = {"tainted out of service": out_of_service, "allocated": {}}
    out = []
    for pod, claims in claims_of.items():
        for r in claim_results(claims, driver):
            dev = f"{r.get('pool')}/{r.get('device')}"
            ev["allocated"][pod] = ev["allocated"].get(pod, []) + [dev]
            if dev in out_of_service:
                out.append(Finding("FAIL-DRA-TAINTED-DEVICE-ALLOCATED", f"{node}: pod {pod}'s claim {r.get('claim')} "
                                   f"was allocated {dev}, which {driver} tainted out of service "
                                   f"({', '.join(out_of_service[dev])}), although the claim tolerates no taint: the "
                                   "scheduler does not honour device taints (kube-scheduler's DRADeviceTaints gate "
                                   "off?)"))
    return out, ev


def health_entries(pod_objs: dict[str, dict | None]) -> list[dict[str, str]]:
    """What the kubelet reports of the health of the pods' allocated devices: one entry per resource of each
    container's status.containerStatuses[].allocatedResourcesStatus (KEP-4680, kubelet gate ResourceHealthStatus,
    beta and on since 1.36; fed by the driver's DRAResourceHealth service, Unknown without one): pod, name
    ("claim:<claim>[/<request>]"), resourceID, health, message. The kubelet names a DRA device by its first CDI
    device ID where it has one, else "<driver>/<pool>/<device>" (kubernetes v1.37.2 pkg/kubelet/cm/dra/manager.go:
    1032-1037 buildResourceHealth), so an entry is matched to a device through the pod's claims, not its ID."""
    out = []
    for pod, obj in pod_objs.items():
        for cs in ((obj or {}).get("status") or {}).get("containerStatuses") or []:
            for rs in cs.get("allocatedResourcesStatus") or []:
                out += [{"pod": pod, "name": str(rs.get("name") or ""), "resourceID": str(r.get("resourceID") or ""),
                         "health": str(r.get("health") or "Unknown"), "message": str(r.get("message") or "")}
                        for r in rs.get("resources") or []]
    return out


def health_findings(node: str, driver: str, entries: list[dict[str, str]], claims_of: dict[str, list[dict]],
                    out_of_service: dict[str, list[str]]) -> tuple[list[Finding], dict]:
    """A device the driver reports Unhealthy (`entries`, from health_entries) is one it took out of service in its
    slice (a NoSchedule / NoExecute taint, `out_of_service`): FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE when new claims can
    still be allocated it. The device is the one the pod's claims were allocated (`claims_of`: pod -> its claims,
    read for the pods with an Unhealthy entry), narrowed by the entry's resourceID where that names it."""
    by_health = Counter(e["health"] for e in entries)
    summary = ", ".join(f"{n} {h}" for h, n in sorted(by_health.items())) or "none reported (the kubelet has " \
        "ResourceHealthStatus off)"
    if by_health and set(by_health) == {"Unknown"}:
        # NVIDIA's DRA driver serves no DRAResourceHealth (kubernetes-sigs/dra-driver-nvidia-gpu: its health signal
        # is the slice taint, checked by the count check): nothing here is evidence either way
        summary += f": {driver} reports no device health to the kubelet (no DRAResourceHealth service), so no " \
                   "device is judged by it; its slice taints are"
    ev: dict = {"summary": summary, "unhealthy": {}}
    out = []
    for e in (e for e in entries if e["health"] == "Unhealthy"):
        held = [f"{r.get('pool')}/{r.get('device')}" for r in claim_results(claims_of.get(e["pod"], []), driver)]
        named = e["resourceID"][len(driver) + 1:] if e["resourceID"].startswith(f"{driver}/") else ""
        devices = [d for d in held if d == named] or held
        ev["unhealthy"][e["pod"]] = {"entry": e, "devices": devices}
        in_service = [d for d in devices if d not in out_of_service]
        if in_service:
            msg = f": {e['message']}" if e["message"] else ""
            out.append(Finding("FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE", f"{node}: the kubelet reports {e['name']} of pod "
                               f"{e['pod']} Unhealthy{msg}, yet {driver} keeps {', '.join(in_service)} in service "
                               "(no NoSchedule/NoExecute taint in its ResourceSlice): new claims are still "
                               "allocated it"))
    return out, ev


def shared_claim_findings(node: str, claim: dict | None, driver: str, slices: list[dict],
                          seen: dict[str, list[str]]) -> tuple[list[Finding], dict]:
    """Pods naming one ResourceClaim (`seen`: pod -> GPU UUIDs its container sees) each see exactly the devices the
    claim was allocated (assignment_findings on the claim's record): FAIL-DRA-WRONG-DEVICE otherwise (one of them
    sees another device, or none)."""
    name = ((claim or {}).get("metadata") or {}).get("name") or "?"
    assigned = claims_assigned([claim] if claim else [], driver, slices)
    out: list[Finding] = []
    ev: dict = {"claim": name, "reserved for": [r.get("name") for r in ((claim or {}).get("status") or {}).get(
        "reservedFor") or []], "allocated": assigned.names, "as GPU UUIDs": assigned.ids}
    for pod, ids in seen.items():
        found, _ = assignment_findings(node, f"pod {pod}", assigned, ids, "FAIL-DRA-WRONG-DEVICE")
        ev[pod] = ids
        out += [Finding(f.code, f.message + (f" (the claim {name} is shared by {', '.join(seen)})"
                                             if f.code.startswith("FAIL") else "")) for f in found]
    return out, ev


def release_findings(node: str, name: str, claim: dict | None, waited_s: float) -> tuple[list[Finding], dict]:
    """A claim whose pods have all ended is released: deleted, or kept with status.reservedFor empty and
    status.allocation cleared (the resourceclaim controller's job: kubernetes v1.37.2
    pkg/controller/resourceclaim/controller.go syncClaim). FAIL-DRA-CLAIM-NOT-DEALLOCATED when, after `waited_s`,
    it is still allocated or reserved: its devices stay unusable for every other claim."""
    if claim is None:
        return [], {"claim": name, "released": f"deleted within {waited_s:.1f}s"}
    st = claim.get("status") or {}
    holders = [f"{r.get('resource')}/{r.get('name')}" for r in st.get("reservedFor") or []]
    allocated = st.get("allocation") is not None
    ev = {"claim": name, "reserved for": holders, "allocated": allocated, "waited s": round(waited_s, 1)}
    if holders or allocated:
        held = f"still reserved for {', '.join(holders)}" if holders else "no longer reserved but still allocated"
        return [Finding("FAIL-DRA-CLAIM-NOT-DEALLOCATED", f"{node}: ResourceClaim {name} is {held} {waited_s:.0f}s "
                        "after all its pods ended: its devices cannot be allocated to any other claim (is "
                        "kube-controller-manager's resourceclaim-controller running?)")], ev
    return [], dict(ev, released=f"within {waited_s:.1f}s")


# kubernetes v1.37.2 pkg/apis/resource/types.go DRAAdminNamespaceLabelKey; enforced by the API server's
# ResourceClaim(Template) strategy, pkg/registry/resource/utils.go AuthorizedForAdmin: a request with
# exactly.adminAccess=true is Forbidden unless the claim's namespace carries this label with the value "true"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"


def _asks_admin(claim: dict | None) -> bool:
    reqs = ((((claim or {}).get("spec") or {}).get("devices") or {}).get("requests")) or []
    return any(((r.get("exactly") or {}).get("adminAccess")) is True for r in reqs)


def admin_access_findings(node: str, namespace: str, labels: dict[str, str], device_class: str,
                          trial: dict) -> tuple[list[Finding], dict]:
    """A ResourceClaim asking admin access (exactly.adminAccess: every device of the class, even one allocated to
    others, made visible to the claim's pods; KEP-5018) in the run's namespace, which the suite made without the
    admin-access label, must be refused. `trial`: the API server's answer to a dry-run create (namespaces.py
    admin_access_trial); `labels`: the namespace's labels as the API server stored them.

    Refused (422 naming adminAccess, or 403 from an admission policy) or admitted with adminAccess dropped (the
    feature off on an older server): passes. Admitted with adminAccess: FAIL-DRA-ADMIN-ACCESS-GRANTED, saying
    whether the namespace gained the label from something in the cluster or the server does not enforce it. Any
    other refusal proves nothing either way: ERROR-API with the server's message."""
    status, message = trial.get("status"), str(trial.get("message") or "")
    ev = {"namespace": namespace, "device class": device_class, "answer (dry run)": status,
          f"namespace label {ADMIN_LABEL}": labels.get(ADMIN_LABEL)}
    if message:
        ev["message"] = message
    if status == 403 or (status == 422 and "adminAccess" in message):
        return [], dict(ev, verdict="refused")
    if status != 201:
        return [Finding("ERROR-API", f"{node}: a dry-run ResourceClaim asking admin access to {device_class} in "
                        f"{namespace} was refused for another reason (HTTP {status}): {message}")], ev
    if not _asks_admin(trial.get("claim")):
        return [], dict(ev, verdict="admitted with adminAccess dropped: admin access is off on this API server")
    asked = (f"{node}: a ResourceClaim asking admin access to every {device_class} device was admitted in "
             f"namespace {namespace} (server-side dry run), which the suite made without the {ADMIN_LABEL} label")
    if labels.get(ADMIN_LABEL) == "true":
        why = (f"; the namespace carries {ADMIN_LABEL}=true all the same: something in the cluster (a mutating "
               "admission policy or webhook, a namespace template) labels new namespaces, so every namespace it "
               "labels may see and use devices allocated to other tenants")
    else:
        why = (f"; the namespace has no {ADMIN_LABEL}=true label: the API server does not enforce it (a Kubernetes "
               "release before 1.33, or an admission webhook adding adminAccess after validation)")
    return [Finding("FAIL-DRA-ADMIN-ACCESS-GRANTED", asked + why)], dict(ev, verdict="admitted with adminAccess")
