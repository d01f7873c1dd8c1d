"""Latency: pod submit -> scheduled -> started stays under the configured thresholds, singly and in bursts,
measured from server-side timestamps and the kubelet's Allocate histogram."""

import pytest

from gpuconform.pytest_plugin.checks import hand_over, require_free_gpus
from gpuconform import latency, pods, verdicts


@pytest.mark.gpus(1, then="all")  # one device for the single samples, every free one for the burst
def test_gpu_pod_start_latency_is_under_thresholds(run, cfg, gpu_node, pod_runner, evidence, record_property):
    """MUST: for single GPU pods (burst.samples, one at a time) and a burst (all free GPUs at once), every
    configured percentile threshold holds: scheduleP99, startP50, startP99 (server timestamps) and
    allocateP99 (kubelet_device_plugin_alloc_duration_seconds delta)."""
    require_free_gpus(run, gpu_node, 1)
    ns = run.ensure_namespace()
    res = run.node(gpu_node).resource
    before = run.kubelet_metrics(gpu_node)
    deadline = cfg.seconds("timeouts.podComplete")
    script = ["sh", "-c", "exit 0"]

    def make(tag):
        m = pods.probe_pod(pods.pod_name("lat", tag, gpu_node), ns, run.run_id, "latency", gpu_node, cfg, 1,
                           deadline=deadline, resource=res)
        m["spec"]["containers"][0]["command"] = script
        return pod_runner.create(m)

    done = []
    for i in range(cfg.get("burst.samples")):
        name = make(f"s{i}")
        pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node)
        done.append(name)
    run.hold_every_gpu(gpu_node)  # the burst needs the node's devices to itself
    free = run.free_gpus(gpu_node)
    size = verdicts.burst_size(free, cfg.get("limits.maxGpusPerNode"), cfg.get("burst.size"))
    burst = [make(f"b{i}") for i in range(size)]
    pod_runner.wait(burst, "done", "timeouts.podComplete", gpu_node)
    done += burst

    watch = run.pod_watch(ns)
    times = [latency.pod_times(watch.get(n), run.events_for(ns, n)) for n in done]
    thresholds = {k: cfg.seconds(f"thresholds.{k}") for k in ("scheduleP99", "startP50", "startP99")}
    after = run.kubelet_metrics(gpu_node)
    alloc = verdicts.allocate_delta(before, after, res)
    sample = verdicts.latency_summary(gpu_node, times, alloc, kubelet_read=before is not None and after is not None)
    for k, v in verdicts.latency_properties(sample).items():
        record_property(k, v)
    run.latency_samples.append(sample)
    evidence.note("latency", sample)
    hand_over(verdicts.latency_findings(gpu_node, times, thresholds, alloc, cfg.seconds("thresholds.allocateP99")))
