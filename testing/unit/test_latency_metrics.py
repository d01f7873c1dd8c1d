"""latency (server-side pod timings, percentiles, threshold verdicts) and metrics (kubelet /metrics parsing)."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from gpuconform import latency, metrics
from gpuconform.latency import PodTimes, evaluate, percentile, pod_times, summarize


# ---------------------------------------------------------------- percentiles

def test_percentile_nearest_rank():
    v = [float(i) for i in range(1, 11)]  # 1..10
    assert percentile(v, 50) == 5.0
    assert percentile(v, 90) == 9.0
    assert percentile(v, 95) == 10.0
    assert percentile(v, 0) == 1.0
    assert percentile(v, 100) == 10.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input


def test_percentile_p99_small_n_is_max_and_large_n_is_rank():
    assert percentile([0.5, 9.0, 1.0], 99) == 9.0
    assert percentile([float(i) for i in range(1, 100)], 99) == 99.0
    assert percentile([float(i) for i in range(1, 201)], 99) == 198.0


@pytest.mark.parametrize("n", [20, 40, 60, 100, 200, 1000])
@pytest.mark.parametrize("q", [50, 90, 95, 99])
def test_percentile_exact_rank(n, q):
    v = [float(i) for i in range(1, n + 1)]
    assert percentile(v, q) == float(-(-q * n // 100))  # ceil(q*n/100), integer arithmetic


def test_percentile_empty():
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summarize_note():
    s = summarize([1.0, 2.0, 3.0])
    assert (s.n, s.p50, s.p99, s.max) == (3, 2.0, 3.0, 3.0)
    assert s.note == "p99 is the maximum (n < 100)"
    assert summarize([float(i) for i in range(100)]).note == ""


# ---------------------------------------------------------------- pod_times

POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "lat-s0", "namespace": "gpuconform-r1", "uid": "6f1d0c1e-7b1a-4a52-9a5e-1f2e3d4c5b6a",
                 "creationTimestamp": "2024-05-01T10:00:00Z"},
    "spec": {"nodeName": "gpu-a", "containers": [{"name": "probe", "image": "busybox:1.36"}]},
    "status": {
        "phase": "Succeeded",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T10:00:01Z"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-05-01T10:00:01Z"},
        ],
        "containerStatuses": [{
            "name": "probe", "image": "busybox:1.36", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2024-05-01T10:00:03Z",
                                     "finishedAt": "2024-05-01T10:00:05Z"}},
        }],
    },
}

SCHEDULED = {
    "kind": "Event", "reason": "Scheduled", "type": "Normal",
    "involvedObject": {"kind": "Pod", "name": "lat-s0", "namespace": "gpuconform-r1",
                       "uid": "6f1d0c1e-7b1a-4a52-9a5e-1f2e3d4c5b6a"},
    "eventTime": "2024-05-01T10:00:00.250123Z", "firstTimestamp": None,
    "message": "Successfully assigned gpuconform-r1/lat-s0 to gpu-a",
    "reportingComponent": "default-scheduler",
}


def at(s: str) -> float:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc).timestamp()


def test_pod_times_from_event():
    t = pod_times(POD, [SCHEDULED])
    assert t.pod == "lat-s0" and t.node == "gpu-a"
    assert t.scheduled_precise is True
    assert t.scheduled == pytest.approx(at("2024-05-01T10:00:00.250123"))
    assert t.phase("schedule") == pytest.approx(0.250123)
    assert t.phase("start") == pytest.approx(3.0)
    assert t.phase("run") == pytest.approx(2.0)


def test_pod_times_falls_back_to_condition():
    other = {**SCHEDULED, "involvedObject": {"kind": "Pod", "name": "someone-else"}}
    t = pod_times(POD, [other])
    assert t.scheduled_precise is False
    assert t.phase("schedule") == pytest.approx(1.0)


def test_pod_times_events_v1_regarding():
    ev = {"reason": "Scheduled", "regarding": {"kind": "Pod", "name": "lat-s0", "uid": POD["metadata"]["uid"]},
          "reportingController": "default-scheduler", "eventTime": "2024-05-01T10:00:00.500000Z"}
    assert pod_times(POD, [ev]).phase("schedule") == pytest.approx(0.5)


def test_pod_times_pending_pod():
    pod = {"metadata": {"name": "p", "creationTimestamp": "2024-05-01T10:00:00Z"}, "spec": {},
           "status": {"phase": "Pending"}}
    t = pod_times(pod, [])
    assert t.phase("schedule") is None and t.phase("start") is None and t.phase("run") is None
    assert t.node == ""
    with pytest.raises(KeyError):
        t.phase("allocate")


def test_pod_times_running_container():
    pod = {**POD, "status": {"phase": "Running", "containerStatuses": [
        {"name": "probe", "state": {"running": {"startedAt": "2024-05-01T10:00:02Z"}}}]}}
    t = pod_times(pod, [])
    assert t.phase("start") == pytest.approx(2.0) and t.phase("run") is None


# ---------------------------------------------------------------- evaluate / Violation

def times(starts: dict[str, float], sched: float = 0.1) -> list[PodTimes]:
    return [PodTimes(p, "gpu-a", 1000.0, 1000.0 + sched, 1000.0 + s, None, True) for p, s in starts.items()]


def test_evaluate_no_violation():
    t = times({"a": 1.0, "b": 2.0})
    assert evaluate(t, {"scheduleP99": 5.0, "startP50": 5.0, "startP99": 10.0}) == []


def test_evaluate_reports_all_violations_with_slowest():
    t = times({"a": 1.0, "b": 12.0, "c": 7.0, "d": 6.0, "e": 2.0}, sched=6.0)
    v = evaluate(t, {"scheduleP99": 5.0, "startP50": 5.0, "startP99": 10.0})
    assert [x.metric for x in v] == ["scheduleP99", "startP50", "startP99"]
    start99 = v[2]
    assert start99.observed == 12.0 and start99.threshold == 10.0 and start99.n == 5
    assert start99.slowest == [("b", 12.0), ("c", 7.0), ("d", 6.0)]
    assert v[1].observed == 6.0  # p50 of [1,2,6,7,12]


def test_evaluate_skips_metrics_without_samples():
    t = [PodTimes("a", "n", 0.0, None, 20.0, None, False)]
    v = evaluate(t, {"scheduleP99": 0.1, "startP99": 10.0})
    assert [x.metric for x in v] == ["startP99"]


def test_violation_render():
    v = latency.Violation("startP99", 12.0, 10.0, 5, [("b", 12.0), ("c", 7.25)])
    assert v.render() == ("startP99: observed 12.00s > threshold 10.00s (n=5); slowest: b 12.00s, c 7.25s")


# ---------------------------------------------------------------- metrics

KUBELET_METRICS = """# HELP kubelet_device_plugin_alloc_duration_seconds [ALPHA] Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.
# TYPE kubelet_device_plugin_alloc_duration_seconds histogram
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="0.005"} 3
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="0.01"} 5
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="0.025"} 8
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="0.05"} 9
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="0.1"} 9
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="1"} 10
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="nvidia.com/gpu",le="+Inf"} 10
kubelet_device_plugin_alloc_duration_seconds_sum{resource_name="nvidia.com/gpu"} 0.8123
kubelet_device_plugin_alloc_duration_seconds_count{resource_name="nvidia.com/gpu"} 10
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="example.com/fpga",le="0.005"} 1
kubelet_device_plugin_alloc_duration_seconds_bucket{resource_name="example.com/fpga",le="+Inf"} 1
kubelet_device_plugin_alloc_duration_seconds_sum{resource_name="example.com/fpga"} 0.001
kubelet_device_plugin_alloc_duration_seconds_count{resource_name="example.com/fpga"} 1
# HELP kubelet_device_plugin_registration_total [ALPHA] Cumulative number of device plugin registrations. Broken down by resource name.
# TYPE kubelet_device_plugin_registration_total counter
kubelet_device_plugin_registration_total{resource_name="nvidia.com/gpu"} 1
kubelet_device_plugin_registration_total{resource_name="example.com/fpga"} 2
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 12
process_start_time_seconds 1.71455760049e+09
weird_line_without_value
kubelet_label_escape{path="C:\\\\x",msg="say \\"hi\\""} 4 1714557600000
"""


def test_metrics_parse_and_value():
    s = metrics.parse(KUBELET_METRICS)
    assert metrics.value(s, "kubelet_device_plugin_registration_total", resource_name="nvidia.com/gpu") == 1
    assert metrics.value(s, "kubelet_device_plugin_registration_total") == 3  # summed over resources
    assert metrics.value(s, "kubelet_running_pods") == 12
    assert metrics.value(s, "process_start_time_seconds") == pytest.approx(1.71455760049e9)
    assert metrics.value(s, "kubelet_device_plugin_registration_total", resource_name="amd.com/gpu") is None
    assert metrics.value(s, "no_such_metric") is None
    assert metrics.value(s, "kubelet_label_escape") == 4
    assert not any(name == "weird_line_without_value" for name, _, _ in s)


def test_metrics_histogram():
    s = metrics.parse(KUBELET_METRICS)
    h = metrics.histogram(s, "kubelet_device_plugin_alloc_duration_seconds", resource_name="nvidia.com/gpu")
    assert h is not None
    assert h.count == 10 and h.sum == pytest.approx(0.8123)
    assert h.buckets[0] == (0.005, 3.0) and h.buckets[-1] == (math.inf, 10.0)
    assert [le for le, _ in h.buckets] == sorted(le for le, _ in h.buckets)
    assert h.quantile_upper_bound(0.5) == 0.01
    assert h.quantile_upper_bound(0.6) == 0.025
    assert h.quantile_upper_bound(0.3) == 0.005
    assert h.quantile_upper_bound(0.99) == 1.0
    assert metrics.histogram(s, "kubelet_device_plugin_alloc_duration_seconds", resource_name="amd.com/gpu") is None


def test_metrics_histogram_minus():
    before = metrics.histogram(metrics.parse(KUBELET_METRICS), "kubelet_device_plugin_alloc_duration_seconds",
                               resource_name="nvidia.com/gpu")
    after_text = KUBELET_METRICS.replace('le="1"} 10', 'le="1"} 14').replace('le="+Inf"} 10', 'le="+Inf"} 14') \
        .replace('_count{resource_name="nvidia.com/gpu"} 10', '_count{resource_name="nvidia.com/gpu"} 14') \
        .replace("0.8123", "3.0123")
    after = metrics.histogram(metrics.parse(after_text), "kubelet_device_plugin_alloc_duration_seconds",
                              resource_name="nvidia.com/gpu")
    d = after.minus(before)
    assert d.count == 4 and d.sum == pytest.approx(2.2)
    assert dict(d.buckets)[0.1] == 0 and dict(d.buckets)[1.0] == 4
    assert d.quantile_upper_bound(0.99) == 1.0
    assert after.minus(None) is after
    assert before.minus(before).quantile_upper_bound(0.99) is None  # no new samples
