"""Allocation verdicts (tests/allocation): the advertised counts, the CUDA workload, what probe pods see
(isolation, bursts) and the pod that must wait when every device is held, each from what the check read."""

from __future__ import annotations

from dataclasses import dataclass

from .. import counts, probes, runtimemode
from ..counts import Expectation
from ..probes import Gpu, exclusive_ids
from .common import Finding, folded
from .counts import check_counts, stale_resources


def unhealthy_ids_needed(node: dict, exp: Expectation) -> bool:
    """Whether the count check should read the plugin log for Unhealthy device IDs: capacity > allocatable."""
    cap, alloc = counts.advertised(node, exp.resource)
    return cap is not None and alloc is not None and cap > alloc


def count_findings(node: dict, exp: Expectation, plugin_logs: list[str] | None = None) -> list[Finding]:
    """Advertised = physical x replicas (or the MIG profile counts), no Unhealthy device, no stale GPU resource key
    (check_counts, stale_resources), folded into one finding: the first code, the others listed.
    `plugin_logs` (read where unhealthy_ids_needed) name the Unhealthy devices."""
    unhealthy = None if plugin_logs is None else [i for log in plugin_logs for i in counts.unhealthy_from_log(log)]
    found = check_counts(node, exp, unhealthy) + stale_resources(node, exp)
    if exp.advertised is None and exp.mig_strategy != "mixed":  # nothing to compare the count with: never a pass
        # a missing label is the operator's choice (no GFD, no nodes.expectedGpus): not checked; a malformed one is
        # data someone wrote wrong, and a label writer must not certify a node by it (issue 29, review T4)
        found.append(Finding("ERROR-MALFORMED-DATA" if exp.malformed else "NOTCHECKED-OPTIONAL",
                             f"{node['metadata']['name']}: the node's GPU count is unknown "
                             f"({exp.source}): what it advertises ({counts.advertised(node, exp.resource)[0]} "
                             f"{exp.resource}) was not compared with the hardware"))
    return folded(found)


def vector_add_findings(node: str, pod: str, resource: str, log: str, exit_code: int | None) -> list[Finding]:
    """The CUDA vector-add sample printed 'Test PASSED' and exited 0; otherwise its mapped cause (F12 when the
    container saw no device, F13 for a CUDA failure), with the output's tail."""
    result = probes.vector_add_result(log, exit_code)
    if result.passed:
        return []
    return [Finding(result.code or "FAIL-F13-CUDA-FAILURE", f"{node}: vector-add pod {pod} ({resource}) exited "
                    f"{exit_code}: {result.cause}; output tail: {log.strip()[-300:]!r}")]


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

    @classmethod
    def from_log(cls, pod: str, requested: int, log: str) -> "Seen":
        """From the probe's log (pods.PROBE_SCRIPT's sections: dev, nvidia-smi -L, env)."""
        s = probes.sections(log)
        devs = [d for d in s.get("dev", "").splitlines() if d.strip()]
        return cls(pod, requested, devs, probes.parse_nvidia_smi_l(s.get("nvidia-smi -L", "")), s.get("env", ""))

    def evidence(self) -> dict:
        return {"dev": self.dev, "nvidia-smi": [g.uuid for g in self.gpus],
                "mig": [m.uuid for g in self.gpus for m in g.migs], "env": self.env}


def isolation_request(exp: Expectation, free: int, max_per_node: int) -> int:
    """How many devices the isolation check's pod requests: 2 where the node has them free, else 1. A time-sliced
    node hands out replicas and upstream can refuse requests for more than one (failRequestsGreaterThanOne), so
    one replica is the request every healthy sharing config admits."""
    return 1 if exp.per_device > 1 else min(2, free, max_per_node)


def burst_size(free: int, max_per_node: int, wanted: int = 0) -> int:
    """How many single-device pods a burst creates at once: `wanted` (the latency check's burst.size; 0 = every
    free device), at most the free devices and limits.maxGpusPerNode."""
    return min(wanted or free, free, max_per_node)


def isolation_findings(node: str, zero: Seen, some: Seen, unit: str, per_device: int = 1,
                       mode: runtimemode.Mode | None = None, runtime_class: str = "",
                       sidecar: Seen | None = None) -> list[Finding]:
    """A pod requesting nothing sees no GPU; a pod requesting N sees exactly its N devices, and its `sidecar`
    container, which asks for none (no resource, no claim), sees none. `unit` (Expectation.unit)
    says what one device is: a whole GPU, a MIG device (counted by MIG UUID; the parent's device node is
    shared), or a time-sliced replica (N replicas may be the same GPU, so it sees 1..N GPUs). `per_device` > 1:
    time-sliced MIG devices, whose replicas may likewise be one MIG device. `mode` (gpuconform/runtimemode.py,
    read when the zero-request pod saw GPUs) and the configured `runtime_class`: where that class does not fit the
    install (an NVIDIA runtime class on a CDI install), the finding names the configuration as the cause. It stays
    FAIL-ISOLATION: any pod naming that class does see every GPU, but the plugin is not what let it."""
    out: list[Finding] = []
    why = runtimemode.mismatch(mode, runtime_class) if mode is not None else None
    cause = (f"; caused by the configuration (runtimeClassName={runtime_class}), not the device plugin: {why} "
             f"[{mode.why}]") if why and mode is not None else ""
    if zero.dev or zero.gpus:
        out.append(Finding("FAIL-ISOLATION", f"{node}: pod {zero.pod} requested no GPU but sees {len(zero.dev)} device "
                           f"node(s) {zero.dev} and {len(zero.gpus)} GPU(s) in nvidia-smi ({zero.env.strip()})"
                           + cause))
    if sidecar is not None and (sidecar.dev or sidecar.gpus):
        out.append(Finding("FAIL-ISOLATION", f"{node}: container {sidecar.pod}, which asks for no GPU beside a "
                           f"container granted {some.requested}, sees {len(sidecar.dev)} device node(s) "
                           f"{sidecar.dev} and {len(sidecar.gpus)} GPU(s) in nvidia-smi ({sidecar.env.strip()}): the "
                           "devices are injected into every container of the pod, not only the one that asked"
                           + cause))
    n = some.requested
    if unit == "mig":
        migs = [m.uuid for g in some.gpus for m in g.migs]
        if len(migs) < (1 if per_device > 1 else n) or not some.dev:
            out.append(Finding("FAIL-F12-DEVICE-NOT-INJECTED", f"{node}: pod {some.pod} was granted {n} MIG device(s) "
                               f"but sees {len(migs)} MIG device(s) and {len(some.dev)} device node(s) "
                               f"({some.env.strip()})"))
        elif len(migs) > n:
            out.append(Finding("FAIL-ISOLATION", f"{node}: pod {some.pod} requested {n} MIG device(s) but sees "
                               f"{len(migs)}: {migs}" + cause))
        return out
    lo, hi = (1, n) if unit == "replica" else (n, n)
    if len(some.dev) < lo or len(some.gpus) < lo:
        out.append(Finding("FAIL-F12-DEVICE-NOT-INJECTED", f"{node}: pod {some.pod} was granted {n} "
                           f"{'replica(s)' if unit == 'replica' else 'GPU(s)'} but sees {len(some.dev)} device "
                           f"node(s) and {len(some.gpus)} in nvidia-smi ({some.env.strip()})"))
    elif max(len(some.dev), len(some.gpus)) > hi:
        out.append(Finding("FAIL-ISOLATION", f"{node}: pod {some.pod} requested {n} "
                           f"{'replica(s)' if unit == 'replica' else 'GPU(s)'} but sees "
                           f"{max(len(some.dev), len(some.gpus))} GPU(s)" + cause))
    return out


def burst_findings(node: str, seen: list[Seen], per_device: int,
                   twice: tuple[str, str] = ("FAIL-DOUBLE-ALLOCATION", "")) -> tuple[list[Finding], dict[str, list[str]]]:
    """Single-device pods running at once: each sees exactly one device, and no device is held by more pods than
    it may be (1; a time-sliced GPU: its replica count). Returns the findings and device -> pods. `twice`
    (AllocationPath.seen_twice): the code for a device seen by more pods than that, and what it means there
    (where each pod holds its own ResourceClaim, one device injected into two claims' containers)."""
    out: list[Finding] = []
    owners: dict[str, list[str]] = {}
    for s in seen:
        ids = s.ids
        if not ids:
            out.append(Finding("FAIL-F12-DEVICE-NOT-INJECTED", f"{node}: burst pod {s.pod} was granted 1 device but "
                               f"sees none ({s.env.strip()})"))
            continue
        if len(ids) > 1:
            out.append(Finding("FAIL-ISOLATION", f"{node}: burst pod {s.pod} was granted 1 device but sees "
                               f"{len(ids)}: {ids}"))
        for i in ids:
            owners.setdefault(i, []).append(s.pod)
    for dev, holders in sorted(owners.items()):
        if len(holders) > per_device:
            allowed = "1 pod" if per_device == 1 else f"{per_device} pods (its time-slicing replicas)"
            out.append(Finding(twice[0], f"{node}: device {dev} is visible in {len(holders)} pods at the same time "
                                         f"({', '.join(holders)}){twice[1] or f'; it may be held by {allowed}'}"))
    return out, owners


def extra_pod_findings(node: str, pod: dict, resource: str, held: int, freed: int = 0) -> list[Finding]:
    """Pod N+1 of a burst that holds all `held` free devices must stay Pending (FAIL-F04-OVERADVERTISED if not),
    unless `freed` devices were released meanwhile by pods outside the burst (the node's free count, the burst's
    own devices counted free, grew while it ran): then another team's churn, not the plugin, let it run."""
    phase = pod.get("status", {}).get("phase")
    if phase == "Pending" or freed > 0:
        return []
    return [Finding("FAIL-F04-OVERADVERTISED", f"{node}: pod {pod['metadata']['name']} ({resource} #{held + 1}) reached "
                    f"{phase} although all {held} free devices were held by the burst")]


def access_findings(node: str, pod: str, first: Seen | None, last: Seen | None, rounds: int) -> list[Finding]:
    """A pod that held one device from the start of the run to its end sees at the end what it saw at the start
    (`first`, `last`: its first and last complete device check; `rounds`: how many it printed). Access lost in
    between (device cgroup rules reset, e.g. by a systemd daemon-reload) is FAIL-F12-ACCESS-LOST; a pod that never
    saw its device is FAIL-F12-DEVICE-NOT-INJECTED."""
    if first is None:
        return [Finding("ERROR-TIMEOUT", f"{node}: pod {pod} printed no complete device check")]
    had = sorted(set(exclusive_ids(first.gpus)))
    if not had:
        return [Finding("FAIL-F12-DEVICE-NOT-INJECTED", f"{node}: pod {pod} was granted a device but saw none at the "
                                                       f"start of the run ({first.env.strip()})")]
    if last is None or rounds < 2:
        return [Finding("ERROR-TIMEOUT", f"{node}: pod {pod} printed no device check after the node's other checks "
                                       f"ended ({rounds} round(s) in all)")]
    has = sorted(set(exclusive_ids(last.gpus)))
    if has != had:
        return [Finding("FAIL-F12-ACCESS-LOST", f"{node}: pod {pod} saw {had} in nvidia-smi at the start of the run and "
                                               f"{has or 'no GPU'} at its end (round {rounds}; device nodes still "
                                               f"present: {last.dev or 'none'})")]
    return []
