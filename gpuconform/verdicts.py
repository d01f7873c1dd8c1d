"""Verdicts of the registration and allocation checks as pure functions of what the checks read.

Each takes recorded objects (pods, nodes, probe output) and returns findings with reason codes; an empty list
means conformant. The checks in tests/ only act (create, wait, read) and hand over.
"""

from __future__ import annotations

from dataclasses import dataclass

from .counts import Expectation, Finding, qty
from .nodes import condition
from .probes import Gpu, exclusive_ids


def plugin_pod_findings(node: str, plugin_pods: list[dict], max_restarts: int) -> list[Finding]:
    """A plugin pod crash-looping (or restarted more than allowed) or not Ready."""
    out: list[Finding] = []
    for p in plugin_pods:
        name = f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
        for cs in p.get("status", {}).get("containerStatuses", []) or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            last = (cs.get("lastState") or {}).get("terminated") or {}
            if waiting.get("reason") == "CrashLoopBackOff" or cs.get("restartCount", 0) > max_restarts:
                out.append(Finding("GPU-F08-PLUGIN-CRASHLOOP",
                                   f"{node}: plugin pod {name} container {cs['name']} restarted "
                                   f"{cs.get('restartCount', 0)} times (allowed {max_restarts}), state "
                                   f"{waiting.get('reason') or 'running'}; last termination: exit "
                                   f"{last.get('exitCode')} {last.get('reason')}: "
                                   f"{(last.get('message') or '').strip()[:400] or '(no termination message)'}"))
        if not out and condition(p, "Ready") != "True":
            out.append(Finding("GPU-F08-PLUGIN-NOT-READY", f"{node}: plugin pod {name} is not Ready "
                               f"(phase {p.get('status', {}).get('phase')})"))
    return out


def capacity_findings(node: dict, exp: Expectation) -> list[Finding]:
    """Each of the node's GPU resources present in capacity with a non-zero count (and allocatable)."""
    name = node["metadata"]["name"]
    st = node.get("status", {})
    out = []
    for res in exp.resources:
        cap, alloc = (qty((st.get(k) or {}).get(res)) for k in ("capacity", "allocatable"))
        if cap is None:
            out.append(Finding("GPU-F01-NOT-REGISTERED", f"{name}: {res} is absent from capacity ({exp.describe()}); "
                               "the plugin never registered it with this kubelet (pod Running is not proof of "
                               "registration)"))
        elif not cap or not alloc:
            out.append(Finding("GPU-F02-CAPACITY-ZERO", f"{name}: {res} capacity={cap} allocatable={alloc}; the "
                               "plugin lost or never re-established its registration"))
    if not exp.resources:
        out.append(Finding("GPU-F09-MIG-MISMATCH", f"{name}: MIG strategy mixed but no nvidia.com/mig-*.count labels "
                           "and no mig.profiles configured: no resource to look for"))
    return out


def socket_findings(node: str, listing: str, want: list[str]) -> list[Finding]:
    """`ls -la` of the device-plugins directory must show every expected socket (one per resource)."""
    entries = [ln.split()[-1] for ln in listing.splitlines()[1:] if ln.split()]
    missing = [s for s in want if s not in entries]
    if not missing:
        return []
    return [Finding("GPU-F01-NOT-REGISTERED", f"{node}: {', '.join(missing)} not found in "
                    f"/var/lib/kubelet/device-plugins (expected {want}; entries: {entries})")]


@dataclass(frozen=True)
class Seen:
    """What one probe pod saw: /dev/nvidiaN nodes, nvidia-smi -L, and its NVIDIA_VISIBLE_DEVICES line."""

    pod: str
    requested: int
    dev: list[str]
    gpus: list[Gpu]
    env: str = ""

    @property
    def ids(self) -> list[str]:
        """What it was exclusively given (MIG UUIDs, else GPU UUIDs; device nodes if nvidia-smi saw nothing)."""
        return exclusive_ids(self.gpus) or list(self.dev)


def isolation_findings(node: str, zero: Seen, some: Seen, unit: str, per_device: int = 1) -> list[Finding]:
    """A pod requesting nothing sees no GPU; a pod requesting N sees exactly its N devices. `unit` (Expectation.unit)
    says what one device is: a whole GPU, a MIG device (counted by MIG UUID; the parent's device node is
    shared), or a time-sliced replica (N replicas may be the same GPU, so it sees 1..N GPUs). `per_device` > 1:
    time-sliced MIG devices, whose replicas may likewise be one MIG device."""
    out: list[Finding] = []
    if zero.dev or zero.gpus:
        out.append(Finding("GPU-ISOLATION", f"{node}: pod {zero.pod} requested no GPU but sees {len(zero.dev)} device "
                           f"node(s) {zero.dev} and {len(zero.gpus)} GPU(s) in nvidia-smi ({zero.env.strip()})"))
    n = some.requested
    if unit == "mig":
        migs = [m.uuid for g in some.gpus for m in g.migs]
        if len(migs) < (1 if per_device > 1 else n) or not some.dev:
            out.append(Finding("GPU-F12-DEVICE-NOT-INJECTED", f"{node}: pod {some.pod} was granted {n} MIG device(s) "
                               f"but sees {len(migs)} MIG device(s) and {len(some.dev)} device node(s) "
                               f"({some.env.strip()})"))
        elif len(migs) > n:
            out.append(Finding("GPU-ISOLATION", f"{node}: pod {some.pod} requested {n} MIG device(s) but sees "
                               f"{len(migs)}: {migs}"))
        return out
    lo, hi = (1, n) if unit == "replica" else (n, n)
    if len(some.dev) < lo or len(some.gpus) < lo:
        out.append(Finding("GPU-F12-DEVICE-NOT-INJECTED", f"{node}: pod {some.pod} was granted {n} "
                           f"{'replica(s)' if unit == 'replica' else 'GPU(s)'} but sees {len(some.dev)} device "
                           f"node(s) and {len(some.gpus)} in nvidia-smi ({some.env.strip()})"))
    elif max(len(some.dev), len(some.gpus)) > hi:
        out.append(Finding("GPU-ISOLATION", f"{node}: pod {some.pod} requested {n} "
                           f"{'replica(s)' if unit == 'replica' else 'GPU(s)'} but sees "
                           f"{max(len(some.dev), len(some.gpus))} GPU(s)"))
    return out


def burst_findings(node: str, seen: list[Seen], per_device: int) -> tuple[list[Finding], dict[str, list[str]]]:
    """Single-device pods running at once: each sees exactly one device, and no device is held by more pods than
    it may be (1; a time-sliced GPU: its replica count). Returns the findings and device -> pods."""
    out: list[Finding] = []
    owners: dict[str, list[str]] = {}
    for s in seen:
        ids = s.ids
        if not ids:
            out.append(Finding("GPU-F12-DEVICE-NOT-INJECTED", f"{node}: burst pod {s.pod} was granted 1 device but "
                               f"sees none ({s.env.strip()})"))
            continue
        if len(ids) > 1:
            out.append(Finding("GPU-ISOLATION", f"{node}: burst pod {s.pod} was granted 1 device but sees "
                               f"{len(ids)}: {ids}"))
        for i in ids:
            owners.setdefault(i, []).append(s.pod)
    for dev, holders in sorted(owners.items()):
        if len(holders) > per_device:
            allowed = "1 pod" if per_device == 1 else f"{per_device} pods (its time-slicing replicas)"
            out.append(Finding("GPU-DOUBLE-ALLOCATION", f"{node}: device {dev} is visible in {len(holders)} pods at "
                               f"the same time ({', '.join(holders)}); it may be held by {allowed}"))
    return out, owners
