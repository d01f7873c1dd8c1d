"""Latency verdict (tests/latency): the configured percentile thresholds on server-side pod timings, and the
kubelet's Allocate p99 from the delta of its histogram over the check."""

from __future__ import annotations

from .. import latency, metrics, nodemode
from .common import Finding

ALLOC_DURATION = "kubelet_device_plugin_alloc_duration_seconds"
# On a DRA node the kubelet's own step is NodePrepareResources: its histogram per pod start, successes only
# (kubernetes v1.37.2 pkg/kubelet/metrics/metrics.go:1161 DRAOperationsDuration, subsystem "dra";
# pkg/kubelet/cm/dra/manager.go:243 observes "PrepareResources").
DRA_PREPARE_DURATION = "dra_operations_duration_seconds"
DRA_PREPARE = {"operation_name": "PrepareResources", "is_error": "false"}


def allocate_delta(before: list[metrics.Sample] | None, after: list[metrics.Sample] | None,
                   resource: str, dra: bool = False) -> metrics.Histogram | None:
    """The Allocate-duration histogram of `resource` over the check (on a DRA node: the kubelet's
    NodePrepareResources duration): after minus before (None when the kubelet's metrics were not read, or it
    exported no such histogram)."""
    if before is None or after is None:
        return None
    name, labels = (DRA_PREPARE_DURATION, DRA_PREPARE) if dra else (ALLOC_DURATION, {"resource_name": resource})
    h = metrics.histogram(after, name, **labels)
    return h.minus(metrics.histogram(before, name, **labels)) if h else None


def allocate_step(dra: bool) -> str:
    """What the allocateP99 threshold measures on the node's path."""
    return "kubelet NodePrepareResources" if dra else "kubelet Allocate RPC"


def latency_summary(node: str, times: list[latency.PodTimes], alloc: metrics.Histogram | None,
                    kubelet_read: bool, path: str = nodemode.DEVICE_PLUGIN) -> dict:
    """What the check measured, for the evidence, the properties and the run's latency figures: the node's
    allocation path (nodemode), each pod's schedule and start seconds, their percentiles, and the kubelet's
    allocation-step histogram delta (when the kubelet was read)."""
    dra = nodemode.is_dra(path)
    out: dict = {"node": node, "path": path,
                 "pods": [{"pod": t.pod, "schedule_s": t.phase("schedule"), "start_s": t.phase("start"),
                                         "scheduled_from_event": t.scheduled_precise} for t in times]}
    for ph in ("schedule", "start"):
        vals = [v for t in times if (v := t.phase(ph)) is not None]
        if vals:
            s = latency.summarize(vals)
            out[ph] = {"n": s.n, "p50": s.p50, "p95": s.p95, "p99": s.p99, "max": s.max, "note": s.note}
    if not kubelet_read:
        out["allocate"] = "not checked (nodes/proxy not granted)"
    elif alloc and alloc.count > 0:
        out["allocate"] = {"n": int(alloc.count), "mean_s": alloc.sum / alloc.count,
                           "p99_bucket_le_s": alloc.quantile_upper_bound(0.99), "step": allocate_step(dra)}
    return out


def latency_properties(summary: dict) -> dict[str, float | None]:
    """The figures a latency_summary puts on the test report (JUnit properties): p50/p99 per phase, Allocate p99."""
    props: dict[str, float | None] = {f"{ph}_{q}_s": summary[ph][q] for ph in ("schedule", "start") if ph in summary
                                      for q in ("p50", "p99")}
    if isinstance(summary.get("allocate"), dict):
        props["allocate_p99_bucket_le_s"] = summary["allocate"]["p99_bucket_le_s"]
    return props


def latency_findings(node: str, times: list[latency.PodTimes], thresholds: dict[str, float],
                     alloc: metrics.Histogram | None, allocate_p99: float, dra: bool = False) -> list[Finding]:
    """Every configured threshold (scheduleP99, startP50, startP99 from server timestamps; allocateP99 from the
    Allocate histogram delta's p99 bucket bound) holds; all violations in one FAIL-LATENCY-THRESHOLD finding."""
    violations = latency.evaluate(times, thresholds)
    if alloc and alloc.count > 0:
        p99 = alloc.quantile_upper_bound(0.99)
        if p99 is not None and p99 > allocate_p99:
            violations.append(latency.Violation(f"allocateP99 ({allocate_step(dra)})", p99, allocate_p99,
                                                int(alloc.count), [("mean", alloc.sum / alloc.count)]))
    if not violations:
        return []
    return [Finding("FAIL-LATENCY-THRESHOLD", f"{node}: " + "; ".join(v.render() for v in violations)
                    + " (creation/start timestamps have 1 s resolution)")]
