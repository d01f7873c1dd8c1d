"""The count verdicts: whether a node's advertised GPU resources match what its own labels and hardware say it
should advertise (counts.Expectation), sharing- and MIG-aware."""

from __future__ import annotations

from .. import vendors
from ..counts import Expectation, Offered, advertised, extended_resources, may_count_one_model, qty
from .common import Finding


def registration_finding(node: dict, resource: str, exp: Expectation) -> Finding | None:
    """Whether the plugin registered `resource` with this node's kubelet at all: F01 when the resource is absent
    from capacity, F02 when its capacity or allocatable is 0 although devices are expected; None otherwise.
    The one verdict behind both the capacity check (each resource) and the count check (before counting)."""
    name = node["metadata"]["name"]
    cap, alloc = advertised(node, resource)
    want = exp.mig_profiles.get(resource, exp.advertised if resource == exp.resource else None)
    if cap is None:
        return Finding("FAIL-F01-NOT-REGISTERED",
                       f"{name}: {resource} is absent from node capacity although the node is a GPU node "
                       f"({exp.describe()}; {exp.source}): the plugin never registered it with this kubelet (pod "
                       f"Running is not proof of registration); extended resources present: "
                       f"{extended_resources(node) or 'none'}")
    if cap and alloc == 0 and (want is None or want > 0):
        # The kubelet counts every registered device in capacity and only healthy ones in allocatable
        # (kubernetes pkg/kubelet/cm/devicemanager/manager.go GetCapacity): the plugin is registered, every device
        # is Unhealthy. NVIDIA's plugin v0.19.3 marks all of them so on any NVML event-wait error, such as a lost
        # GPU (internal/rm/health.go checkHealth); the kubelet does the same for a plugin whose endpoint stopped.
        return Finding("FAIL-F03-UNHEALTHY-DEVICES",
                       f"{name}: all {cap} {resource} devices are Unhealthy (capacity={cap}, allocatable=0; expected "
                       f"{want if want is not None else '> 0'} healthy, {exp.source}): the plugin reported every "
                       "device unhealthy (its log says why: an XID, an NVML error such as a lost GPU), or its "
                       "endpoint stopped (the kubelet marks a stopped plugin's devices Unhealthy until it registers "
                       "again)")
    if (not cap or not alloc) and (want is None or want > 0):
        return Finding("FAIL-F02-CAPACITY-ZERO",
                       f"{name}: {resource} capacity={cap} allocatable={alloc}, expected "
                       f"{want if want is not None else '> 0'} ({exp.source}): the plugin lost or never "
                       "re-established its registration")
    return None


def check_counts(node: dict, exp: Expectation, unhealthy_ids: list[str] | None = None) -> list[Finding]:
    """Compares what the node advertises with `exp`. An empty list means conformant."""
    name = node["metadata"]["name"]
    status = node.get("status", {})
    cap_all, alloc_all = status.get("capacity", {}) or {}, status.get("allocatable", {}) or {}
    cap, alloc = advertised(node, exp.resource)
    out: list[Finding] = []

    if exp.mig_strategy == "mixed":
        for res, n in sorted(exp.mig_profiles.items()):
            got = qty(alloc_all.get(res))
            if got != n:
                out.append(Finding("FAIL-F09-MIG-MISMATCH", f"{name}: {res} allocatable is {got if got is not None else 'absent'}, "
                                   f"expected {n} (MIG strategy mixed)"))
        if not exp.mig_profiles:
            out.append(Finding("FAIL-F09-MIG-MISMATCH", f"{name}: MIG strategy mixed but no nvidia.com/mig-*.count labels "
                               "and no mig.profiles configured"))
        # Under mixed, GPUs not in MIG mode stay nvidia.com/gpu (NVIDIA/k8s-device-plugin internal/rm/device_map.go);
        # with MIG devices present at least one GPU is in MIG mode, so fewer whole GPUs than physical ones; the
        # whole GPUs may be time-sliced (replicas from their GFD labels, internal/lm/mig-strategy.go newGPULabelers).
        most = None if exp.physical is None else (exp.physical - 1) * exp.replicas
        if not out and exp.mig_profiles and cap is not None and most is not None and cap > most:
            per = f" x {exp.replicas} replicas" if exp.replicas > 1 else ""
            out.append(Finding("FAIL-F04-OVERADVERTISED", f"{name}: advertises {cap} whole {exp.resource} beside MIG "
                               f"devices, but the node has {exp.physical} GPUs ({exp.source}) and at least one is "
                               f"in MIG mode: at most {exp.physical - 1}{per} = {most}"))
        if cap is not None and alloc is not None and cap > alloc:
            out.append(Finding("FAIL-F03-UNHEALTHY-DEVICES", f"{name}: {cap - alloc} of {cap} whole {exp.resource} "
                               f"devices are Unhealthy (capacity={cap}, allocatable={alloc})"))
        return out

    if cap is None:
        vendor = exp.resource.split("/")[0]
        mig_keys = [k for k in extended_resources(node) if k.startswith(f"{vendor}/mig-") and (qty(cap_all[k]) or 0) > 0]
        if mig_keys:
            out.append(Finding("FAIL-F09-MIG-MISMATCH",
                               f"{name}: advertises MIG resources {mig_keys} (MIG strategy mixed) instead of "
                               f"{exp.resource}, but the expected MIG strategy is {exp.mig_strategy}"))
            return out
    if (unregistered := registration_finding(node, exp.resource, exp)) is not None:
        return [unregistered]
    out_of_service = cap - alloc if alloc is not None and cap > alloc else 0
    maybe = ("GPU Feature Discovery's count covers one GPU model: on a node with more than one model, enable the node "
             "probe so the PCI bus counts them all" if may_count_one_model(node, exp) else "")
    how = (f"of {cap} {exp.resource} devices are Unhealthy (capacity={cap}, allocatable={alloc})"
           + ("" if unhealthy_ids else " (device IDs not found in the plugin log)"))
    return out + offer_findings(name, exp, Offered(f"capacity {exp.resource}", cap, exp.replicas,
                                                   exp.mig_strategy == "single", out_of_service, unhealthy_ids or [],
                                                   how), maybe)


def offer_findings(name: str, exp: Expectation, offer: Offered, hint: str = "") -> list[Finding]:
    """The count check's questions of what a node offers (`offer`), on either path: no device out of service
    (FAIL-F03-UNHEALTHY-DEVICES, naming them where known), and as many as the hardware supports, exp.physical x
    offer.per_gpu where the labels count what the offer counts (GPUs, or MIG devices under the single strategy):
    FAIL-F04-OVERADVERTISED (with `hint`), FAIL-F10-SHARING-MISMATCH where a shared GPU is offered once,
    FAIL-F04-UNDERADVERTISED."""
    out: list[Finding] = []
    if offer.out_of_service:
        ids = f": {', '.join(offer.out_named)}" if offer.out_named else ""
        out.append(Finding("FAIL-F03-UNHEALTHY-DEVICES", f"{name}: {offer.out_of_service} {offer.out_how}{ids}"))
    n, per = offer.count, offer.per_gpu
    if n is None or exp.physical is None or (exp.mig_strategy == "single") != offer.mig_devices:
        return out
    want = exp.physical * per
    times = f" x {per} replicas" if per > 1 else ""
    if n > want:
        out.append(Finding("FAIL-F04-OVERADVERTISED", f"{name}: {offer.what}={n}, the hardware supports {want} "
                           f"({exp.physical} GPUs{times}; {exp.source})" + (f" ({hint})" if hint else "")))
    elif n < want and per > 1 and n == exp.physical:
        out.append(Finding("FAIL-F10-SHARING-MISMATCH", f"{name}: {offer.what}={n}, but labels say {exp.physical} GPUs "
                           f"shared{times} = {want}: the sharing config is not applied"))
    elif n < want:
        out.append(Finding("FAIL-F04-UNDERADVERTISED", f"{name}: {offer.what}={n}, expected {want} ({exp.source})"))
    return out


def stale_resources(node: dict, exp: Expectation) -> list[Finding]:
    """GPU resource keys of the same vendor that the configuration does not expect (left by an old config)."""
    name = node["metadata"]["name"]
    vendor = exp.resource.split("/")[0] + "/"
    cap_all = node.get("status", {}).get("capacity", {}) or {}
    expected = {exp.resource, *exp.mig_profiles}
    if exp.vendor == vendors.INTEL and exp.resource in vendors.INTEL_DRIVER_RESOURCES:
        expected |= set(vendors.INTEL_DRIVER_RESOURCES)  # i915 beside xe: one resource per driver (counts.intel_cards)
    out = []
    for k, v in sorted(cap_all.items()):
        if k.startswith(vendor) and k not in expected and (qty(v) or 0) > 0 and vendors.is_gpu_resource(exp.vendor, k):
            out.append(Finding("FAIL-F04-STALE-RESOURCE",
                               f"{name}: advertises {k}={v}, which the configuration does not expect "
                               f"(expected resource keys: {sorted(expected)})"))
    return out


def went_out_of_service(name: str, before: Offered, after: Offered) -> list[Finding]:
    """A device that went out of service while the node's checks ran (`before`: what the node offered when they
    started; `after`: when they had all ended, read from the kubelet's own record where it could be): an Unhealthy
    or tainted device more than at the start, or fewer devices offered at all, is FAIL-F03-UNHEALTHY-DEVICES,
    naming the new ones where they are known. Devices out of service from the start are the count check's; a GPU
    that fails in the last seconds of a run costs the node its certification here."""
    new = [n for n in after.out_named if n not in before.out_named]
    lost = (before.count or 0) - (after.count or 0)
    if after.out_of_service <= before.out_of_service and lost <= 0:
        return []
    named = f": {', '.join(new)}" if new else ""
    fewer = f"; {after.what} fell from {before.count} to {after.count}" if lost > 0 else ""
    return [Finding("FAIL-F03-UNHEALTHY-DEVICES", f"{name}: a device went out of service while the node's checks "
                    f"ran ({before.out_of_service} out of service when they started, {after.out_of_service} when they "
                    f"had ended{fewer}){named}: a GPU that fails during the run is not certified")]
