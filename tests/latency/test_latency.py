"""Latency: pod submit -> scheduled -> started stays under the configured thresholds, singly and in bursts,
measured from server-side timestamps and the kubelet's Allocate histogram."""

import pytest

from fixtures.checks import raise_for
from gpuconform import latency, metrics, pods
from gpuconform.reasons import skip_reason


@pytest.mark.gpus(1, then="all")  # one device for the single samples, every free one for the burst
def test_gpu_pod_start_latency_is_under_thresholds(run, cfg, gpu_node, pod_runner, evidence, record_property):
    """MUST: for single GPU pods (burst.samples, one at a time) and a burst (all free GPUs at once), every
    configured percentile threshold holds: scheduleP99, startP50, startP99 (server timestamps) and
    allocateP99 (kubelet_device_plugin_alloc_duration_seconds delta)."""
    if (why := run.node(gpu_node).skip_reason(1)):
        pytest.skip(skip_reason(*why))
    free = run.free_gpus(gpu_node)
    if free < 1:
        pytest.skip(skip_reason("GPU-F07-BUSY", f"{gpu_node} has no free GPU now"))
    ns = run.ensure_namespace()
    res = run.node(gpu_node).resource
    before = run.kubelet_metrics(gpu_node)
    deadline = run.cfg.seconds("timeouts.podComplete")
    script = ["sh", "-c", "exit 0"]

    def make(tag):
        m = pods.probe_pod(f"lat-{tag}-{gpu_node}"[:63], ns, run.run_id, "latency", gpu_node, cfg, 1, deadline=deadline,
                           resource=res)
        m["spec"]["containers"][0]["command"] = script
        return pod_runner.create(m)

    done = []
    for i in range(cfg["burst"]["samples"]):
        name = make(f"s{i}")
        pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node)
        done.append(name)
    run.hold_every_gpu(gpu_node)  # the burst needs the node's devices to itself
    free = run.free_gpus(gpu_node)
    size = min(cfg["burst"]["size"] or free, free, cfg["limits"]["maxGpusPerNode"])
    burst = [make(f"b{i}") for i in range(size)]
    pod_runner.wait(burst, "done", "timeouts.podComplete", gpu_node)
    done += burst

    watch = run.pod_watch(ns)
    times = [latency.pod_times(watch.get(n), run.events_for(ns, n)) for n in done]
    thresholds = {k: run.cfg.seconds(f"thresholds.{k}") for k in ("scheduleP99", "startP50", "startP99")}
    violations = latency.evaluate(times, thresholds)
    sample = {"node": gpu_node, "pods": [{"pod": t.pod, "schedule_s": t.phase("schedule"), "start_s": t.phase("start"),
                                          "scheduled_from_event": t.scheduled_precise} for t in times]}
    for ph in ("schedule", "start"):
        vals = [v for t in times if (v := t.phase(ph)) is not None]
        if vals:
            s = latency.summarize(vals)
            sample[ph] = {"n": s.n, "p50": s.p50, "p95": s.p95, "p99": s.p99, "max": s.max, "note": s.note}
            for q in ("p50", "p99"):
                record_property(f"{ph}_{q}_s", getattr(s, q))
    after = run.kubelet_metrics(gpu_node)
    if before is not None and after is not None:
        name = "kubelet_device_plugin_alloc_duration_seconds"
        h = metrics.histogram(after, name, resource_name=res)
        delta = h.minus(metrics.histogram(before, name, resource_name=res)) if h else None
        if delta and delta.count > 0:
            p99 = delta.quantile_upper_bound(0.99)
            sample["allocate"] = {"n": int(delta.count), "mean_s": delta.sum / delta.count, "p99_bucket_le_s": p99}
            record_property("allocate_p99_bucket_le_s", p99)
            limit = run.cfg.seconds("thresholds.allocateP99")
            if p99 is not None and p99 > limit:
                violations.append(latency.Violation("allocateP99 (kubelet Allocate RPC)", p99, limit, int(delta.count),
                                                    [("mean", delta.sum / delta.count)]))
    else:
        sample["allocate"] = "not checked (nodes/proxy not granted)"
    run.latency_samples.append(sample)
    evidence.note("latency", sample)
    if violations:
        raise_for("GPU-LATENCY-THRESHOLD", f"{gpu_node}: " + "; ".join(v.render() for v in violations)
                  + " (creation/start timestamps have 1 s resolution)")
