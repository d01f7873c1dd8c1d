"""verdicts.latency: threshold findings, the Allocate p99 from the kubelet histogram's delta over the check, and the
figures the check reports. The kubelet snapshots are testing/unit/samples/kubelet_metrics_*.txt (constructed from
the kubelet's metric definitions, as their headers say); pod timings are PodTimes as latency.pod_times builds them."""

from __future__ import annotations

import pytest
from recorded import text

from gpuconform.allocpath import AllocationPath
from gpuconform import metrics, verdicts
from gpuconform.latency import PodTimes

DP = AllocationPath(resource="nvidia.com/gpu")
DRA = AllocationPath("dra", "", "gpu.nvidia.com", "gpu.nvidia.com")

START = metrics.parse(text("kubelet_metrics_at_start.txt"))
FAST = metrics.parse(text("kubelet_metrics_at_end_fast.txt"))
SLOW = metrics.parse(text("kubelet_metrics_at_end_slow_allocate.txt"))
THRESHOLDS = {"scheduleP99": 5.0, "startP50": 5.0, "startP99": 10.0}  # the config's defaults
T0 = 1764742000.0


def times(*start_s: float, schedule_s: float = 0.2) -> list[PodTimes]:
    """Pods created at T0 + i, scheduled `schedule_s` and started `start_s[i]` seconds later (server clocks)."""
    return [PodTimes(f"lat-s{i}-gpu-a", "gpu-a", T0 + i, T0 + i + schedule_s, T0 + i + s, T0 + i + s + 0.1, True)
            for i, s in enumerate(start_s)]


def test_allocate_delta_over_the_check():
    fast = verdicts.allocate_delta(START, FAST, *DP.allocate_metric)
    assert fast.count == 8 and fast.quantile_upper_bound(0.99) == 0.005
    slow = verdicts.allocate_delta(START, SLOW, *DP.allocate_metric)
    assert slow.count == 8 and slow.quantile_upper_bound(0.99) == 2.5
    assert verdicts.allocate_delta(None, SLOW, *DP.allocate_metric) is None  # nodes/proxy not granted
    assert verdicts.allocate_delta(START, SLOW, *AllocationPath(resource="nvidia.com/mig-1g.10gb").allocate_metric) is None  # no such histogram


def test_fast_pods_and_allocations_are_under_the_thresholds():
    alloc = verdicts.allocate_delta(START, FAST, *DP.allocate_metric)
    assert verdicts.latency_findings("gpu-a", times(1.1, 1.3, 0.9), THRESHOLDS, alloc, 1.0) == []


def test_slow_start_breaks_the_start_thresholds():
    f = verdicts.latency_findings("gpu-a", times(1.1, 12.0, 0.9), THRESHOLDS, None, 1.0)
    assert [x.code for x in f] == ["FAIL-LATENCY-THRESHOLD"]
    assert "startP99: observed 12.00s > threshold 10.00s (n=3); slowest: lat-s1-gpu-a 12.00s" in f[0].message
    assert f[0].message.endswith("(creation/start timestamps have 1 s resolution)")


def test_slow_plugin_allocate_breaks_allocate_p99():
    alloc = verdicts.allocate_delta(START, SLOW, *DP.allocate_metric)
    f = verdicts.latency_findings("gpu-a", times(1.1, 1.3, 0.9), THRESHOLDS, alloc, 1.0)
    assert [x.code for x in f] == ["FAIL-LATENCY-THRESHOLD"]
    assert "allocateP99 (kubelet Allocate RPC): observed 2.50s > threshold 1.00s (n=8)" in f[0].message


def test_on_a_dra_node_the_kubelets_prepare_step_is_judged():
    """Recorded from the bed's DRA node around one vector-add pod: NodePrepareResources successes only (the
    is_error="true" series of the fault runs before it is not counted)."""
    before = metrics.parse(text("kubelet_dra_metrics_before.txt"))
    after = metrics.parse(text("kubelet_dra_metrics_after.txt"))
    alloc = verdicts.allocate_delta(before, after, *DRA.allocate_metric)
    assert alloc is not None and alloc.count == 1 and 0 < alloc.sum < 0.1
    assert verdicts.allocate_delta(before, after, *DP.allocate_metric) is None  # no device-plugin histogram there
    s = verdicts.latency_summary("gpu-node-dra", times(1.0, 2.0), alloc, kubelet_read=True, path="dra",
                                 step=DRA.allocate_step)
    assert s["path"] == "dra" and s["allocate"]["step"] == "kubelet NodePrepareResources"
    s = verdicts.latency_summary("gpu-node-dra", times(1.0, 2.0), alloc, kubelet_read=True,
                                 path="dra-extended-resource", step=DRA.allocate_step)
    assert s["path"] == "dra-extended-resource" and s["allocate"]["step"] == "kubelet NodePrepareResources"
    found = verdicts.latency_findings("gpu-node-dra", times(1.0, 2.0), THRESHOLDS, alloc, 0.0001, DRA.allocate_step)
    assert [f.code for f in found] == ["FAIL-LATENCY-THRESHOLD"] and "allocateP99 (kubelet NodePrepareResources)" in \
        found[0].message


def test_summary_and_properties_of_a_check():
    alloc = verdicts.allocate_delta(START, FAST, *DP.allocate_metric)
    s = verdicts.latency_summary("gpu-a", times(1.0, 2.0), alloc, kubelet_read=True)
    assert [p["pod"] for p in s["pods"]] == ["lat-s0-gpu-a", "lat-s1-gpu-a"] and s["start"]["p99"] == 2.0
    assert s["allocate"] == {"n": 8, "mean_s": (0.0178 - 0.0061) / 8, "p99_bucket_le_s": 0.005,
                             "step": "kubelet Allocate RPC"}
    assert verdicts.latency_properties(s) == pytest.approx({"schedule_p50_s": 0.2, "schedule_p99_s": 0.2,
                                                            "start_p50_s": 1.0, "start_p99_s": 2.0,
                                                            "allocate_p99_bucket_le_s": 0.005})
    unread = verdicts.latency_summary("gpu-a", [], None, kubelet_read=False)
    assert unread == {"node": "gpu-a", "path": "device-plugin", "pods": [],
                      "allocate": "not checked (the kubelet's metrics not read: see the check's evidence)"}
    assert verdicts.latency_properties(unread) == {}
