"""The rollout rehearsal's verdicts (tests/allocation/test_rollout.py): what one node went through while its device
plugin's or DRA driver's DaemonSet rolled, read as a `Rollout` (samples of what the node offered and of its plugin
pods, the held pods' device checks, the probe pods' outcomes), judged here without I/O.

Times are seconds on one clock per kind, never mixed: `t` (the runner's monotonic clock, from the moment the
rollout was started or seen) orders samples and probe pods; the plugin pods' hand-over is measured between two
API-server timestamps (the old pod's deletionTimestamp and the new pod's Ready condition)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..probes import exclusive_ids
from .allocation import Seen
from .common import Finding

SAMPLE_SLACK_S = 1.5  # a pod created this close to a window met it: samples are a second apart, admission follows


READY, NOT_READY, ENDING = "Ready", "not Ready", "ending"  # a plugin pod's state in a sample


@dataclass(frozen=True)
class Sample:
    """One look at the node during the rollout: `t` s after it began, the devices the node offered in service
    (capacity of the GPU resource less those out of service, or the GPUs its driver published less the tainted;
    None: unreadable), and its plugin pods by name with their state (READY, NOT_READY, or ENDING: asked to end)."""
    t: float
    offered: int | None
    plugin_pods: tuple[tuple[str, str], ...] = ()
    slices: int | None = None  # DRA: the driver's ResourceSlices for the node (None on the device-plugin path)

    @property
    def serving(self) -> bool:
        """A plugin pod is Ready and not ending: the kubelet has a plugin to allocate from."""
        return any(state == READY for _, state in self.plugin_pods)


@dataclass(frozen=True)
class Probe:
    """A small GPU pod created `t` s into the rollout: `outcome` ran | rejected | pending | failed, `reason` the
    kubelet's (UnexpectedAdmissionError ...), `pending_s` creation to container start (server timestamps)."""
    name: str
    t: float
    outcome: str
    reason: str = ""
    message: str = ""
    pending_s: float | None = None
    gpus: tuple[str, ...] = ()  # the GPUs the pod's device check saw (exclusive ids), when it ran


@dataclass(frozen=True)
class Held:
    """A pod holding a device through the rollout: its device checks in order (round number, what it saw), and
    whether it was still running when the rollout had passed."""
    pod: str
    rounds: tuple[tuple[int, Seen], ...]
    running_at_end: bool = True


@dataclass
class Rollout:
    """What the rehearsal saw on one node."""
    node: str
    daemonset: str  # namespace/name
    mode: str  # restart | observe
    before: int | None  # devices offered before the rollout began
    old_pods: tuple[str, ...]  # the plugin pods on the node before it began
    samples: list[Sample] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    new_pod: str = ""  # the plugin pod that replaced them ("" none seen Ready)
    handover_s: float | None = None  # old pod's deletionTimestamp -> new pod Ready (server timestamps)
    handover_from: str = ""  # "old pod asked to end", or "new pod created" where its deletion was not seen
    new_pod_state: str = ""  # how the newest plugin pod stood when the rehearsal ended (kube.describe)
    seen: bool = True  # observe: the DaemonSet's generation changed within rollout.timeout
    timed_out: bool = False  # the node had not settled within rollout.timeout
    # the kubelet's process start time (its /metrics) before the rollout and after it passed the node; None: not
    # read (the kubelet not readable, or not exported)
    kubelet_started: tuple[float | None, float | None] = (None, None)

    # after the rollout: each held pod's devices as the node's allocation record names them (the kubelet's
    # PodResources List; on DRA its claims' results, pool/device) and the devices on offer then (GetAllocatableResources;
    # the driver's published devices); None: not read (no node probe, or no grant)
    records: dict[str, tuple[str, ...]] | None = None
    offered_ids: tuple[str, ...] | None = None

    def unoffered(self) -> dict[str, list[str]]:
        """Held pod -> the devices its record names that are no longer on offer: the kubelet (or the scheduler)
        counts what the pod holds as free."""
        if self.records is None or self.offered_ids is None:
            return {}
        on = set(self.offered_ids)
        return {pod: gone for pod, ids in self.records.items() if (gone := [i for i in ids if i not in on])}

    def held_gpus(self) -> dict[str, str]:
        """GPU id -> the held pod that saw it in its first device check (before the rollout)."""
        return {g: h.pod for h in self.held if h.rounds for g in exclusive_ids(h.rounds[0][1].gpus)}

    def reassigned(self) -> list[tuple[Probe, list[str]]]:
        """Probe pods that were given a GPU a held pod had held since before the rollout, with those GPUs."""
        held = self.held_gpus()
        return [(p, sorted(set(p.gpus) & held.keys())) for p in self.probes if set(p.gpus) & held.keys()]

    def kubelet_restarted(self) -> bool | None:
        """Whether the kubelet's process started again while the rollout passed the node (None: not read)."""
        a, b = self.kubelet_started
        return None if a is None or b is None else b != a

    def down(self, s: Sample) -> bool:
        """Whether the node could not serve new GPU pods as before at sample `s`: no plugin pod serving it (the
        hand-over), or fewer devices offered than before the rollout."""
        fewer = self.before is not None and s.offered is not None and s.offered < self.before
        return fewer or not s.serving

    def windows(self) -> list[tuple[float, float]]:
        """The disruption windows, (start, end) each: from the first sample at which the node was `down` to the
        first later one at which it was not (end = the last sample's t where it never recovered)."""
        out, start = [], None
        for s in self.samples:
            if self.down(s):
                start = s.t if start is None else start
            elif start is not None:
                out.append((start, s.t))
                start = None
        if start is not None:
            out.append((start, self.samples[-1].t))
        return out

    def in_window(self, t: float, slack: float = SAMPLE_SLACK_S) -> bool:
        """Whether a pod created at `t` met the node in a window (a sample's granularity either side)."""
        return any(a - slack <= t <= b + slack for a, b in self.windows())

    def window_s(self) -> float:
        """The disruption windows' total length."""
        return round(sum(b - a for a, b in self.windows()), 1)

    def figures(self) -> dict:
        """The JSON summary's figures for this node (a baseline compares them between releases)."""
        ran = [p for p in self.probes if p.pending_s is not None]
        rejected = [p for p in self.probes if p.outcome == "rejected"]
        return {"daemonset": self.daemonset, "mode": self.mode, "window_s": self.window_s(),
                "handover_s": self.handover_s, "handover_from": self.handover_from, "devices_before": self.before,
                "devices_min": min((s.offered for s in self.samples if s.offered is not None), default=None),
                "held_pods": len(self.held), "held_rounds": sum(len(h.rounds) for h in self.held),
                "probe_pods": len(self.probes),
                "probe_rejected": len(rejected),
                "probe_rejected_in_window": sum(self.in_window(p.t) for p in rejected),
                "probe_pending_max_s": max((p.pending_s for p in ran), default=None),
                "probe_reassigned": len(self.reassigned()), "held_unoffered": len(self.unoffered()), "kubelet_restarted": self.kubelet_restarted(),
                "samples": len(self.samples), "completed": bool(self.new_pod) and not self.timed_out}

    def timeline(self) -> list[dict]:
        """The report's timeline: one row per sample (t, devices offered, Ready plugin pods) with the probe pods
        created since the previous sample."""
        rows, probes = [], sorted(self.probes, key=lambda p: p.t)
        for s in self.samples:
            here = [p for p in probes if p.t <= s.t]
            probes = [p for p in probes if p.t > s.t]
            rows.append({"t": round(s.t, 1), "offered": s.offered, "slices": s.slices,
                         "plugin pods": ", ".join(f"{n} ({state})" for n, state in s.plugin_pods) or "none",
                         "down": self.down(s),
                         "probes": ", ".join(f"{p.name}: {p.outcome}{' ' + p.reason if p.reason else ''}"
                                             for p in here)})
        return rows


def access_through(node: str, held: Held) -> list[Finding]:
    """Every device check of a held pod saw what its first saw (FAIL-ROLLOUT-ACCESS-LOST names the first round that
    did not), and the pod still ran when the rollout had passed."""
    if not held.rounds:
        return [Finding("ERROR-TIMEOUT", f"{node}: held pod {held.pod} printed no complete device check")]
    n0, first = held.rounds[0]
    had = sorted(set(exclusive_ids(first.gpus)))
    if not had:
        return [Finding("FAIL-F12-DEVICE-NOT-INJECTED", f"{node}: held pod {held.pod} was granted a device but saw "
                        f"none before the rollout ({first.env.strip()})")]
    for n, seen in held.rounds[1:]:
        has = sorted(set(exclusive_ids(seen.gpus)))
        if has != had:
            return [Finding("FAIL-ROLLOUT-ACCESS-LOST", f"{node}: held pod {held.pod} saw {had} before the rollout and "
                            f"{has or 'no GPU'} in its device check {n} during it (device nodes: "
                            f"{seen.dev or 'none'}): running GPU workloads lose their devices when this rolls out")]
    if not held.running_at_end:
        return [Finding("FAIL-ROLLOUT-ACCESS-LOST", f"{node}: held pod {held.pod} stopped running during the rollout "
                        f"(after device check {held.rounds[-1][0]}): the rollout ended a running GPU workload")]
    return []


def rollout_findings(r: Rollout, window_limit_s: float) -> list[Finding]:
    """The rehearsal's verdict on one node, every finding (the caller folds them):
    - ERROR-ROLLOUT-NOT-SEEN: in observe mode the DaemonSet did not change within rollout.timeout;
    - FAIL-ROLLOUT-STUCK: no new plugin pod became Ready on the node, or the node did not offer its devices again,
      within rollout.timeout;
    - FAIL-ROLLOUT-ACCESS-LOST: a held pod lost or changed its devices, or stopped;
    - FAIL-ROLLOUT-DEVICES-REASSIGNED: a probe pod was given a GPU that a held pod had held since before the
      rollout: the new version registered (or published) the devices under other IDs, so the kubelet's record of
      the held pods no longer covers what they hold and it hands their GPUs out again;
    - FAIL-ROLLOUT-KUBELET-RESTART: the kubelet restarted while the rollout passed the node (a co-rollout of the
      node agent, the container runtime or the toolkit under running GPU pods);
    - FAIL-ROLLOUT-ADMISSION: the kubelet rejected a probe pod while a plugin pod served the node and it offered
      its devices (outside every window): a plugin that serves but cannot allocate;
    - FAIL-DRA-SLICES-WIPED: the driver's ResourceSlices for the node were gone at some moment (no seamless
      hand-over: the scheduler could place nothing there meanwhile);
    - FAIL-ROLLOUT-WINDOW: a window (no plugin pod serving the node, or fewer devices offered) lasted longer than
      thresholds.rolloutWindow. Pods the kubelet rejected in a window are its cost, named in the message: a
      device-plugin kubelet rejects, for good, a pod it admits while no plugin serves its resource
      (kubernetes/kubernetes#109595)."""
    node, out = r.node, []
    if not r.seen:
        return [Finding("ERROR-ROLLOUT-NOT-SEEN", f"{node}: DaemonSet {r.daemonset} did not change (its generation "
                        f"stayed the same) within rollout.timeout: start the rollout (helm upgrade, an operator "
                        f"change) after the rehearsal says it is holding the node, or use rollout.mode=restart")]
    if not r.new_pod:
        out.append(Finding("FAIL-ROLLOUT-STUCK", f"{node}: no new pod of DaemonSet {r.daemonset} became Ready on the "
                           f"node within rollout.timeout (old: {', '.join(r.old_pods) or 'none'}; newest now: "
                           f"{r.new_pod_state or 'none'})"))
    elif r.timed_out:
        last = next((s.offered for s in reversed(r.samples) if s.offered is not None), None)
        out.append(Finding("FAIL-ROLLOUT-STUCK", f"{node}: the new plugin pod {r.new_pod} is Ready but the node "
                           f"offered {last} device(s) at the end of rollout.timeout, {r.before} before the rollout"))
    for h in r.held:
        out += access_through(node, h)
    clash = r.reassigned()
    if clash:
        held = r.held_gpus()
        out.append(Finding("FAIL-ROLLOUT-DEVICES-REASSIGNED", f"{node}: " + "; ".join(
            f"probe pod {p.name} ({p.t:.0f}s into the rollout) was given {', '.join(gpus)}, held by "
            f"{', '.join(sorted({held[g] for g in gpus}))} since before it" for p, gpus in clash[:3]) + (
            f" (and {len(clash) - 3} more)" if len(clash) > 3 else "") + ": the new version offers the devices "
            "under other IDs, so the kubelet no longer sees them as in use and hands a GPU to two pods"))
    if gone := r.unoffered():
        offered = sorted(r.offered_ids or ())
        out.append(Finding("FAIL-ROLLOUT-DEVICES-REASSIGNED", f"{node}: after the rollout the node's allocation "
                           f"record names devices that are no longer offered: " + "; ".join(
                               f"held pod {pod} holds {', '.join(ids)}" for pod, ids in sorted(gone.items())[:3])
                           + f" (now offered: {', '.join(offered[:6])}{' ...' if len(offered) > 6 else ''}): the "
                           "new version offers the devices under other IDs, so their holders' GPUs count as free"))
    if r.kubelet_restarted():
        a, b = r.kubelet_started
        out.append(Finding("FAIL-ROLLOUT-KUBELET-RESTART", f"{node}: the kubelet restarted while DaemonSet "
                           f"{r.daemonset} rolled out (process start time {a:.0f} -> {b:.0f}, with {len(r.held)} "
                           f"held GPU pod(s) running): the rollout restarted the node agent under running GPU "
                           f"workloads"))
    rejected = [p for p in r.probes if p.outcome == "rejected"]
    serving = [p for p in rejected if not r.in_window(p.t)]
    if serving:
        out.append(Finding("FAIL-ROLLOUT-ADMISSION", f"{node}: the kubelet rejected {len(serving)} of "
                           f"{len(r.probes)} GPU pod(s) created while a plugin pod served the node and it offered its "
                           f"devices: " + _probes(serving)))
    gone = [s.t for s in r.samples if s.slices == 0]  # slices are counted on the DRA path only (None elsewhere)
    if gone:
        out.append(Finding("FAIL-DRA-SLICES-WIPED", f"{node}: the driver's ResourceSlices for the node were gone "
                           f"from {gone[0]:.0f}s to {gone[-1]:.0f}s into the rollout ({len(gone)} sample(s)): "
                           f"no seamless upgrade, nothing could be allocated on the node meanwhile"))
    long = [(a, b) for a, b in r.windows() if b - a > window_limit_s]
    if long:
        a, b = max(long, key=lambda w: w[1] - w[0])
        cost = [p for p in rejected if a - SAMPLE_SLACK_S <= p.t <= b + SAMPLE_SLACK_S]
        out.append(Finding("FAIL-ROLLOUT-WINDOW", f"{node}: for {b - a:.0f}s ({a:.0f}s to {b:.0f}s into the rollout) "
                           f"no plugin pod served the node or it offered fewer devices than its {r.before}, above "
                           f"thresholds.rolloutWindow {window_limit_s:g}s" + (
                               f"; the kubelet rejected {len(cost)} GPU pod(s) meanwhile: " + _probes(cost)
                               if cost else "")))
    return out


def _probes(probes: list[Probe]) -> str:
    return "; ".join(f"{p.name} at {p.t:.0f}s: {p.reason}: {p.message[:160]}" for p in probes[:3]) + (
        f" (and {len(probes) - 3} more)" if len(probes) > 3 else "")


def probe_outcome(pod: dict) -> tuple[str, str, str]:
    """(outcome, reason, message) of a rollout probe pod from its status: rejected (the kubelet's admission:
    phase Failed with a reason such as UnexpectedAdmissionError), ran (a container started), failed, or pending."""
    st = pod.get("status") or {}
    reason, message = st.get("reason") or "", st.get("message") or ""
    started = any(((cs.get("state") or {}).get("running") or (cs.get("state") or {}).get("terminated") or {})
                  .get("startedAt") for cs in st.get("containerStatuses") or [])
    if st.get("phase") == "Failed" and not started and reason:
        return "rejected", reason, message
    if started:
        return "ran", "", ""
    if st.get("phase") == "Failed":
        return "failed", reason, message
    return "pending", reason, message
