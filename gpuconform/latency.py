"""Pod start latency from server-side timestamps, percentiles, and threshold verdicts.

Phases per pod: created (metadata.creationTimestamp, the API server's clock, 1 s resolution) -> scheduled (the
scheduler's Scheduled event's eventTime, microseconds; falls back to the PodScheduled condition, 1 s; the
scheduler's clock) -> started (container state.running/terminated startedAt, 1 s; the node's clock) -> done
(terminated finishedAt, the node's clock). Second-resolution timestamps limit precision to about 1 s per phase:
results say so.

Three clocks, so a phase can come out negative, or too long, by the skew between them. Phases are never clamped:
`clock_skew` bounds each node's (and the scheduler's) skew from the pods' own timestamps (a container cannot start
before the API server created its pod, nor finish after the API server stored the kubelet's status saying so, which
the server stamps in managedFields) and names every pod whose figures show more than SKEW_TOLERANCE_S.

Only events of this pod (`involvedObject.uid`, not just its name: names are predictable and anyone with `create
events` in the namespace can write one, even before the pod exists) from its scheduler (`reportingComponent` /
`source.component`: the pod's schedulerName, `default-scheduler` by default) give the scheduled time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

from . import healthtimes


def ts(value: str | datetime | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    v = value.replace("Z", "+00:00")
    return datetime.fromisoformat(v).timestamp()


DEFAULT_SCHEDULER = "default-scheduler"
SKEW_TOLERANCE_S = 1.0  # beyond the timestamps' 1 s resolution: more than this is a clock out of sync


@dataclass(frozen=True)
class PodTimes:
    pod: str
    node: str
    created: float
    scheduled: float | None
    started: float | None
    finished: float | None
    scheduled_precise: bool  # True when from the event's microsecond eventTime
    # when the API server stored the node's last write of the container statuses (managedFields time, server
    # clock, 1 s): no node-clock timestamp in them can be later, unless the node's clock is ahead
    status_written: float | None = None
    events_set_aside: tuple[str, ...] = ()  # Scheduled events not of this pod or not from its scheduler

    def phase(self, name: str) -> float | None:
        """The phase's seconds as the timestamps give them, never clamped: a negative one is clock skew
        (`clock_skew` names it), not a zero."""
        if name == "schedule":
            return None if self.scheduled is None else self.scheduled - self.created
        if name == "start":
            return None if self.started is None else self.started - self.created
        if name == "run":
            return None if self.finished is None or self.started is None else self.finished - self.started
        raise KeyError(name)


def event_reporters(event: dict) -> set[str]:
    """Who an event says reported it: core/v1 `reportingComponent` and `source.component`, events.k8s.io/v1
    `reportingController` and `deprecatedSource.component` (empty ones left out)."""
    return {r for r in (event.get("reportingComponent"), event.get("reportingController"),
                        (event.get("source") or {}).get("component"),
                        (event.get("deprecatedSource") or {}).get("component")) if r}


def event_of(pod: dict, event: dict, reporters: set[str] | frozenset[str]) -> str | None:
    """None when `event` is about this very pod (its uid; the name alone is predictable) and every reporter it
    names is one of `reporters`; else why it is set aside."""
    md = pod.get("metadata") or {}
    obj = event.get("involvedObject") or event.get("regarding") or {}
    if obj.get("name") != md.get("name"):
        return f"about {obj.get('name')!r}, not this pod"
    if not md.get("uid") or obj.get("uid") != md.get("uid"):
        return f"about another object named {obj.get('name')!r} (uid {obj.get('uid')!r}, the pod's is {md.get('uid')!r})"
    said = event_reporters(event)
    if not said or not said <= set(reporters):
        return f"reported by {', '.join(sorted(said)) or 'no component'}, not {' or '.join(sorted(reporters))}"
    return None


def pod_times(pod: dict, events: list[dict]) -> PodTimes:
    """Builds PodTimes from a pod (as the API returns it, camelCase dict) and its events. A Scheduled event counts
    only when it is about this pod's uid and reported by the pod's scheduler; others are set aside (their reasons
    in `events_set_aside`) and the PodScheduled condition gives the time."""
    md, status = pod["metadata"], pod.get("status", {})
    created = ts(md["creationTimestamp"])
    assert created is not None
    scheduler = {(pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER}
    scheduled, precise, aside = None, False, []
    for e in events:
        if e.get("reason") != "Scheduled":
            continue
        why = event_of(pod, e, scheduler)
        if why is not None:
            aside.append(f"Scheduled event {(e.get('metadata') or {}).get('name') or '?'}: {why}")
            continue
        t = e.get("eventTime") or e.get("firstTimestamp")
        if t and scheduled is None:
            scheduled, precise = ts(t), bool(e.get("eventTime"))
    if scheduled is None:
        for c in status.get("conditions", []) or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "True":
                scheduled = ts(c.get("lastTransitionTime"))
    started = finished = None
    for cs in status.get("containerStatuses", []) or []:
        st = cs.get("state", {})
        run = st.get("running") or st.get("terminated") or {}
        if run.get("startedAt"):
            s = ts(run["startedAt"])
            started = s if started is None else max(started, s)
        if (st.get("terminated") or {}).get("finishedAt"):
            f = ts(st["terminated"]["finishedAt"])
            finished = f if finished is None else max(finished, f)
    return PodTimes(md["name"], pod.get("spec", {}).get("nodeName", ""), created, scheduled, started, finished, precise,
                    status_written(pod), tuple(aside))


def status_written(pod: dict) -> float | None:
    """When the API server stored the last write of the pod's container statuses (the managedFields entry that
    owns `status.containerStatuses`: the kubelet's, or kwok's; server clock): None when not recorded."""
    return ts(healthtimes.status_written(pod, "f:containerStatuses", "f:initContainerStatuses"))


@dataclass(frozen=True)
class Skew:
    """One pod's timestamps show a clock out of sync with the API server's by at least `at_least_s`."""

    pod: str
    clock: str  # "node" or "scheduler"
    ahead: bool  # the clock is ahead of the API server's (else behind)
    at_least_s: float
    figures: str  # the timestamps that show it

    def render(self) -> str:
        return (f"the {self.clock}'s clock is at least {self.at_least_s:.1f}s {'ahead of' if self.ahead else 'behind'}"
                f" the API server's: pod {self.pod} {self.figures}")


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def clock_skew(times: list[PodTimes], tolerance: float = SKEW_TOLERANCE_S) -> list[Skew]:
    """Every pod whose own timestamps prove a clock more than `tolerance` seconds off the API server's:
    - the scheduler's: scheduled before the pod was created (schedule phase < -tolerance);
    - the node's, behind: a container started before the pod was created (start phase < -tolerance);
    - the node's, ahead: a container started or finished later than the API server stored the status saying so.
    Timestamps are truncated to the second, which moves each bound by less than 1 s; no skew within 1 s is named.
    A node ahead by less than what its pods' status writes lag can go unseen: these are bounds, not estimates."""
    out = []
    for t in times:
        sched = t.phase("schedule")
        if sched is not None and sched < -tolerance:
            out.append(Skew(t.pod, "scheduler", False, -sched,
                            f"was scheduled at {_iso(t.scheduled)} by the scheduler's clock, {-sched:.1f}s before the "
                            f"API server created it at {_iso(t.created)}"))
        start = t.phase("start")
        if start is not None and start < -tolerance:
            out.append(Skew(t.pod, "node", False, -start,
                            f"started at {_iso(t.started)} by the node's clock, {-start:.1f}s before the API server "
                            f"created it at {_iso(t.created)}"))
        last = max((x for x in (t.started, t.finished) if x is not None), default=None)
        if last is not None and t.status_written is not None and last - t.status_written > tolerance:
            what = "finished" if last == t.finished else "started"
            out.append(Skew(t.pod, "node", True, last - t.status_written,
                            f"{what} at {_iso(last)} by the node's clock, {last - t.status_written:.1f}s after the API "
                            f"server stored the status saying so at {_iso(t.status_written)}"))
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100). With n < 100, p99 is the maximum."""
    if not values:
        raise ValueError("no samples")
    s = sorted(values)
    k = max(math.ceil(q / 100 * len(s)) - 1, 0)
    return s[min(k, len(s) - 1)]


@dataclass(frozen=True)
class Summary:
    n: int
    p50: float
    p95: float
    p99: float
    max: float

    @property
    def note(self) -> str:
        return "p99 is the maximum (n < 100)" if self.n < 100 else ""


def summarize(values: list[float]) -> Summary:
    return Summary(len(values), percentile(values, 50), percentile(values, 95), percentile(values, 99), max(values))


@dataclass
class Violation:
    metric: str  # e.g. startP99
    observed: float
    threshold: float
    n: int
    slowest: list[tuple[str, float]] = field(default_factory=list)

    def render(self) -> str:
        pods = ", ".join(f"{p} {v:.2f}s" for p, v in self.slowest)
        return (f"{self.metric}: observed {self.observed:.2f}s > threshold {self.threshold:.2f}s (n={self.n}); "
                f"slowest: {pods}")


PHASE_OF = {"schedule": "schedule", "start": "start"}


def evaluate(times: list[PodTimes], thresholds: dict[str, float], slowest: int = 3) -> list[Violation]:
    """Every threshold (e.g. {'scheduleP99': 5.0, 'startP50': 5.0}) checked; returns all violations."""
    out = []
    for metric, limit in thresholds.items():
        phase, q = metric[:-3], int(metric[-2:])
        samples = [(t.pod, v) for t in times if (v := t.phase(phase)) is not None]
        if not samples:
            continue
        observed = percentile([v for _, v in samples], q)
        if observed > limit:
            worst = sorted(samples, key=lambda pv: -pv[1])[:slowest]
            out.append(Violation(metric, observed, limit, len(samples), worst))
    return out
