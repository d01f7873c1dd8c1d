"""Latency verdict (tests/latency): the configured percentile thresholds on server-side pod timings, and the
kubelet's Allocate p99 from the delta of its histogram over the check."""

from __future__ import annotations

from .. import latency, metrics, nodemode
from ..allocpath import AllocationPath
from .common import Finding


def allocate_delta(before: list[metrics.Sample] | None, after: list[metrics.Sample] | None,
                   name: str, labels: dict[str, str]) -> metrics.Histogram | None:
    """The histogram `name` (with `labels`) of the kubelet's allocation step over the check
    (AllocationPath.allocate_metric: the device plugin's Allocate RPC, or a DRA driver's NodePrepareResources):
    after minus before (None when the kubelet's metrics were not read, or it exported no such histogram)."""
    if before is None or after is None:
        return None
    h = metrics.histogram(after, name, **labels)
    return h.minus(metrics.histogram(before, name, **labels)) if h else None


def latency_summary(node: str, times: list[latency.PodTimes], alloc: metrics.Histogram | None,
                    kubelet_read: bool, path: str = nodemode.DEVICE_PLUGIN,
                    step: str = AllocationPath().allocate_step) -> dict:
    """What the check measured, for the evidence, the properties and the run's latency figures: the node's
    allocation path (nodemode), each pod's schedule and start seconds, their percentiles, and the kubelet's
    allocation-step histogram delta (when the kubelet was read)."""
    out: dict = {"node": node, "path": path,
                 "pods": [{"pod": t.pod, "schedule_s": t.phase("schedule"), "start_s": t.phase("start"),
                                         "scheduled_from_event": t.scheduled_precise} for t in times]}
    aside = [f"{t.pod}: {why}" for t in times for why in t.events_set_aside]
    if aside:  # forged or foreign events: the PodScheduled condition gave those pods' times
        out["events_set_aside"] = aside
    skews = latency.clock_skew(times)
    if skews:
        out["clock_skew"] = [s.render() for s in skews]
    for ph in ("schedule", "start"):
        vals = [v for t in times if (v := t.phase(ph)) is not None]
        if vals:
            s = latency.summarize(vals)
            out[ph] = {"n": s.n, "p50": s.p50, "p95": s.p95, "p99": s.p99, "max": s.max, "note": s.note}
    if not kubelet_read:
        out["allocate"] = "not checked (the kubelet's metrics not read: see the check's evidence)"
    elif alloc and alloc.count > 0:
        out["allocate"] = {"n": int(alloc.count), "mean_s": alloc.sum / alloc.count,
                           "p99_bucket_le_s": alloc.quantile_upper_bound(0.99), "step": step}
    return out


def latency_properties(summary: dict) -> dict[str, float | None]:
    """The figures a latency_summary puts on the test report (JUnit properties): p50/p99 per phase, Allocate p99."""
    props: dict[str, float | None] = {f"{ph}_{q}_s": summary[ph][q] for ph in ("schedule", "start") if ph in summary
                                      for q in ("p50", "p99")}
    if isinstance(summary.get("allocate"), dict):
        props["allocate_p99_bucket_le_s"] = summary["allocate"]["p99_bucket_le_s"]
    return props


def latency_findings(node: str, times: list[latency.PodTimes], thresholds: dict[str, float],
                     alloc: metrics.Histogram | None, allocate_p99: float,
                     step: str = AllocationPath().allocate_step) -> list[Finding]:
    """Every configured threshold (scheduleP99, startP50, startP99 from server timestamps; allocateP99 from the
    allocation step's histogram delta's p99 bucket bound, `step` naming that step) holds; all violations in one
    FAIL-LATENCY-THRESHOLD finding.

    A clock more than 1 s off the API server's (latency.clock_skew: a negative phase, or a container that ended
    after the server stored its status) makes the phases it stamps meaningless: a node behind would pass silently,
    one ahead fail falsely. Those thresholds (start* for the node's clock, schedule* for the scheduler's) are not
    judged and ERROR-CLOCK-SKEW says which clock, by how much at least, from which pod's figures; a threshold on
    another phase that fails still fails first, naming the skew too."""
    skews = latency.clock_skew(times)
    off = {s.clock for s in skews}
    judged = {m: v for m, v in thresholds.items()
              if not (m.startswith("start") and "node" in off) and not (m.startswith("schedule") and "scheduler" in off)}
    violations = latency.evaluate(times, judged)
    if alloc and alloc.count > 0:
        p99 = alloc.quantile_upper_bound(0.99)
        if p99 is not None and p99 > allocate_p99:
            violations.append(latency.Violation(f"allocateP99 ({step})", p99, allocate_p99,
                                                int(alloc.count), [("mean", alloc.sum / alloc.count)]))
    skew_text = ""
    if skews:
        worst = {}
        for s in skews:  # the largest bound per clock and direction
            key = (s.clock, s.ahead)
            if key not in worst or s.at_least_s > worst[key].at_least_s:
                worst[key] = s
        unjudged = sorted(set(thresholds) - set(judged))
        skew_text = ("; ".join(s.render() for s in worst.values()) + f" ({len(skews)} figure(s) of "
                     f"{len({s.pod for s in skews})} pod(s)); not judged: {', '.join(unjudged) or 'none'}")
    out = []
    if violations:
        out.append(Finding("FAIL-LATENCY-THRESHOLD", f"{node}: " + "; ".join(v.render() for v in violations)
                           + " (creation/start timestamps have 1 s resolution)"
                           + (f"; and clock skew: {skew_text}" if skews else "")))
    if skews:
        out.append(Finding("ERROR-CLOCK-SKEW", f"{node}: {skew_text}"))
    return out
