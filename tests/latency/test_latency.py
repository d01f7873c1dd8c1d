"""Latency: pod submit -> scheduled -> started stays under the configured thresholds, singly and in bursts,
measured from server-side timestamps and the kubelet's Allocate histogram."""

import pytest

from gpuconform import latency, verdicts

THRESHOLDS = ("scheduleP99", "startP50", "startP99")


@pytest.mark.gpus(1, then="all")  # one device for the single samples, every free one for the burst
def test_gpu_pod_start_latency_is_under_thresholds(check):
    """MUST: for single GPU pods (burst.samples, one at a time) and a burst (all free GPUs at once), every
    configured percentile threshold holds: scheduleP99, startP50, startP99 (server timestamps) and
    allocateP99 (kubelet_device_plugin_alloc_duration_seconds delta). On a DRA node the pods get their GPU from a
    ResourceClaim each (claim made, allocated by the scheduler, prepared by the driver: the start figure is
    claim-to-running) and allocateP99 judges the kubelet's NodePrepareResources (dra_operations_duration_seconds)."""
    check.needs_free_gpus(1)
    before = check.kubelet_metrics()

    def make(tag):
        m = check.probe_pod(f"lat-{tag}", "latency", 1)
        m["spec"]["containers"][0]["command"] = ["sh", "-c", "exit 0"]
        return check.start(m)

    done = []
    for i in range(check.cfg.get("burst.samples")):
        done.append(make(f"s{i}"))
        check.wait_done(done[-1])
    check.take_every_gpu()  # the burst needs the node's devices to itself
    # free again now: a kubelet restart or another team's pod may have left none for the burst (SKIP-F07-BUSY)
    free = check.needs_free_gpus(1)
    size = verdicts.burst_size(free, check.cfg.get("limits.maxGpusPerNode"), check.cfg.get("burst.size"))
    burst = [make(f"b{i}") for i in range(size)]
    check.wait_done(*burst)
    done += burst

    times = [latency.pod_times(check.pod_state(n), check.events(n)) for n in done]
    thresholds = {k: check.cfg.seconds(f"thresholds.{k}") for k in THRESHOLDS}
    after = check.kubelet_metrics()
    alloc = verdicts.allocate_delta(before, after, *check.facts.allocate_metric)
    sample = verdicts.latency_summary(check.node, times, alloc, kubelet_read=before is not None and after is not None,
                                      path=check.facts.name, step=check.facts.allocate_step)
    for k, v in verdicts.latency_properties(sample).items():
        check.record(k, v)
    check.measure("latency", sample)
    check.note("latency", sample)
    check.hand_over(verdicts.latency_findings(check.node, times, thresholds, alloc,
                                              check.cfg.seconds("thresholds.allocateP99"), check.facts.allocate_step))
