"""Pod start latency from server-side timestamps, percentiles, and threshold verdicts.

Phases per pod (all server clocks): created (metadata.creationTimestamp, 1 s resolution) -> scheduled (the
Scheduled event's eventTime, microseconds; falls back to the PodScheduled condition, 1 s) -> started
(container state.running/terminated startedAt, 1 s) -> done (terminated finishedAt). Second-resolution
timestamps limit precision to about 1 s per phase: results say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime


def ts(value: str | datetime | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    v = value.replace("Z", "+00:00")
    return datetime.fromisoformat(v).timestamp()


@dataclass(frozen=True)
class PodTimes:
    pod: str
    node: str
    created: float
    scheduled: float | None
    started: float | None
    finished: float | None
    scheduled_precise: bool  # True when from the event's microsecond eventTime

    def phase(self, name: str) -> float | None:
        if name == "schedule":
            return None if self.scheduled is None else max(self.scheduled - self.created, 0.0)
        if name == "start":
            return None if self.started is None else max(self.started - self.created, 0.0)
        if name == "run":
            return None if self.finished is None or self.started is None else max(self.finished - self.started, 0.0)
        raise KeyError(name)


def pod_times(pod: dict, events: list[dict]) -> PodTimes:
    """Builds PodTimes from a pod (as the API returns it, camelCase dict) and its events."""
    md, status = pod["metadata"], pod.get("status", {})
    created = ts(md["creationTimestamp"])
    assert created is not None
    scheduled, precise = None, False
    for e in events:
        if e.get("reason") == "Scheduled" and (e.get("involvedObject") or e.get("regarding") or {}).get("name") == md["name"]:
            t = e.get("eventTime") or e.get("firstTimestamp")
            if t:
                scheduled, precise = ts(t), bool(e.get("eventTime"))
                break
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
    return PodTimes(md["name"], pod.get("spec", {}).get("nodeName", ""), created, scheduled, started, finished, precise)


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
