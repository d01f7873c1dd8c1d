"""Inputs others write steer no verdict (issue 29; review 2026-12b T2, R3 and T4): a Scheduled event counts only
when it is about the pod's uid and reported by its scheduler, and a clock out of sync with the API server's is named
with its figures (ERROR-CLOCK-SKEW), never clamped into a pass or a false FAIL-LATENCY-THRESHOLD. The pods and events
are shaped as the bed's API server returns them (a Scheduled event of kube-scheduler v1.37: `reportingComponent:
default-scheduler`, empty `source`, the pod's uid in `involvedObject`; the kubelet's status write in managedFields)."""

from __future__ import annotations

import pytest

from gpuconform import latency, verdicts
from gpuconform.latency import PodTimes, pod_times

UID = "0b7d5a3e-2f41-4c8e-9d6a-5e1f3c2b4a10"
THRESHOLDS = {"scheduleP99": 5.0, "startP50": 5.0, "startP99": 10.0}  # the config's defaults


def pod(created="2026-12-06T10:00:00Z", started="2026-12-06T10:00:02Z", finished="2026-12-06T10:00:02Z",
        status_written="2026-12-06T10:00:03Z", scheduled_cond="2026-12-06T10:00:00Z", **spec) -> dict:
    return {
        "metadata": {"name": "lat-s0-gpu-a", "namespace": "gpuconform-r1", "uid": UID, "creationTimestamp": created,
                     "managedFields": [
                         {"manager": "gpuconform", "operation": "Update", "time": created,
                          "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
                         {"manager": "kube-scheduler", "operation": "Update", "subresource": "status",
                          "time": scheduled_cond, "fieldsV1": {"f:status": {"f:conditions": {}}}},
                         {"manager": "kubelet", "operation": "Update", "subresource": "status",
                          "time": status_written,
                          "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}}}},
                     ]},
        "spec": {"nodeName": "gpu-a", **spec},
        "status": {"phase": "Succeeded",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_cond}],
                   "containerStatuses": [{"name": "probe", "state": {"terminated": {
                       "exitCode": 0, "startedAt": started, "finishedAt": finished}}}]},
    }


def scheduled(at="2026-12-06T10:00:00.300000Z", uid=UID, **reporter) -> dict:
    ev = {"metadata": {"name": "lat-s0-gpu-a.18a2b"}, "reason": "Scheduled", "type": "Normal",
          "involvedObject": {"kind": "Pod", "name": "lat-s0-gpu-a", "namespace": "gpuconform-r1", "uid": uid},
          "source": {}, "eventTime": at, "firstTimestamp": None,
          "message": "Successfully assigned gpuconform-r1/lat-s0-gpu-a to gpu-a"}
    ev.update(reporter or {"reportingComponent": "default-scheduler", "reportingInstance": "default-scheduler-vm"})
    return ev


# ---------------------------------------------------------------- events: the pod's uid and its scheduler

def test_the_schedulers_event_about_the_pod_gives_the_precise_time():
    t = pod_times(pod(), [scheduled()])
    assert t.scheduled_precise and t.phase("schedule") == pytest.approx(0.3) and t.events_set_aside == ()


@pytest.mark.parametrize("forged, why", [
    (scheduled(uid=None), "uid None"),  # written before the pod existed: its name is predictable
    (scheduled(uid="11111111-2222-3333-4444-555555555555"), "uid '11111111"),  # an earlier pod of that name
    (scheduled(reportingComponent="evil-operator"), "reported by evil-operator"),
    (scheduled(reportingComponent="", source={"component": "kubelet"}), "reported by kubelet"),
    (scheduled(reportingComponent="", source={}), "reported by no component"),
    (scheduled(reportingComponent="default-scheduler", source={"component": "evil"}), "reported by default-scheduler, evil"),
], ids=["no uid", "another uid", "another component", "the kubelet", "no reporter", "a second reporter"])
def test_a_forged_scheduled_event_is_set_aside_for_the_condition(forged, why):
    forged = {**forged, "eventTime": "2026-12-06T10:00:30.000000Z"}  # 30 s: would fail scheduleP99
    t = pod_times(pod(), [forged])
    assert not t.scheduled_precise and t.phase("schedule") == 0.0  # the PodScheduled condition's time
    assert len(t.events_set_aside) == 1 and why in t.events_set_aside[0], t.events_set_aside
    summary = verdicts.latency_summary("gpu-a", [t], None, kubelet_read=False)
    assert why in summary["events_set_aside"][0]


def test_a_forged_event_neither_fails_nor_passes_the_latency_check():
    """Before: the first Scheduled event by name decided. A forged one 30 s late failed a healthy node; a forged
    one at creation passed a node whose scheduler took 20 s."""
    late = {**scheduled(uid=None), "eventTime": "2026-12-06T10:00:30.000000Z"}
    healthy = pod_times(pod(), [late, scheduled()])  # the forged one came first
    assert healthy.phase("schedule") == pytest.approx(0.3)
    assert verdicts.latency_findings("gpu-a", [healthy], THRESHOLDS, None, 1.0) == []

    slow = pod(scheduled_cond="2026-12-06T10:00:20Z", started="2026-12-06T10:00:21Z",
               finished="2026-12-06T10:00:21Z", status_written="2026-12-06T10:00:22Z")
    early = scheduled(uid=None, at="2026-12-06T10:00:00.100000Z")
    found = verdicts.latency_findings("gpu-a", [pod_times(slow, [early])], THRESHOLDS, None, 1.0)
    assert [f.code for f in found] == ["FAIL-LATENCY-THRESHOLD"] and "scheduleP99: observed 20.00s" in found[0].message


def test_the_pods_own_scheduler_and_the_events_v1_fields_are_accepted():
    custom = pod(schedulerName="gpu-scheduler")
    ev = scheduled(reportingComponent="gpu-scheduler")
    assert pod_times(custom, [ev]).scheduled_precise
    assert not pod_times(custom, [scheduled()]).scheduled_precise  # default-scheduler did not schedule this pod
    v1 = {"reason": "Scheduled", "regarding": {"kind": "Pod", "name": "lat-s0-gpu-a", "uid": UID},
          "reportingController": "default-scheduler", "deprecatedSource": {}, "eventTime": "2026-12-06T10:00:00.5Z"}
    assert pod_times(pod(), [v1]).phase("schedule") == pytest.approx(0.5)


def test_events_of_a_pod_without_a_uid_are_never_taken():
    p = pod()
    del p["metadata"]["uid"]
    assert not pod_times(p, [scheduled(uid=None)]).scheduled_precise


# ---------------------------------------------------------------- clock skew: named, never clamped

def test_status_written_is_the_servers_time_of_the_container_statuses_write():
    assert pod_times(pod(), []).status_written == latency.ts("2026-12-06T10:00:03Z")
    p = pod()
    p["metadata"]["managedFields"] = [m for m in p["metadata"]["managedFields"] if m["manager"] != "kubelet"]
    assert pod_times(p, []).status_written is None  # the scheduler's write holds no container status


def test_a_node_5s_behind_no_longer_passes_silently():
    """Before: startedAt 5 s before the API server created the pod was clamped to a 0 s start: a pass."""
    behind = pod(started="2026-12-06T09:59:55Z", finished="2026-12-06T09:59:56Z", status_written="2026-12-06T10:00:02Z")
    t = pod_times(behind, [scheduled()])
    assert t.phase("start") == -5.0  # not clamped
    found = verdicts.latency_findings("gpu-a", [t], THRESHOLDS, None, 1.0)
    assert [f.code for f in found] == ["ERROR-CLOCK-SKEW"]
    msg = found[0].message
    assert msg.startswith("gpu-a: the node's clock is at least 5.0s behind the API server's: pod lat-s0-gpu-a "
                          "started at 2026-12-06T09:59:55.000000Z by the node's clock, 5.0s before the API server "
                          "created it at 2026-12-06T10:00:00.000000Z"), msg
    assert msg.endswith("not judged: startP50, startP99")
    s = verdicts.latency_summary("gpu-a", [t], None, kubelet_read=False)
    assert s["pods"][0]["start_s"] == -5.0 and s["clock_skew"] and "behind" in s["clock_skew"][0]


def test_a_node_ahead_is_named_instead_of_a_false_latency_failure():
    """A node 12 s ahead: a 1 s start looks like 13 s (was FAIL-LATENCY-THRESHOLD). The container finished 11 s
    after the API server stored the status that says so: the node's clock is ahead by at least that."""
    ahead = pod(started="2026-12-06T10:00:13Z", finished="2026-12-06T10:00:14Z", status_written="2026-12-06T10:00:03Z")
    t = pod_times(ahead, [scheduled()])
    assert t.phase("start") == 13.0
    found = verdicts.latency_findings("gpu-a", [t], THRESHOLDS, None, 1.0)
    assert [f.code for f in found] == ["ERROR-CLOCK-SKEW"]
    assert "the node's clock is at least 11.0s ahead of the API server's: pod lat-s0-gpu-a finished at " \
           "2026-12-06T10:00:14.000000Z by the node's clock, 11.0s after the API server stored the status saying so " \
           "at 2026-12-06T10:00:03.000000Z" in found[0].message


def test_within_the_timestamps_resolution_nothing_is_named():
    """1 s resolution on both sides: a start 1 s 'before' creation, or a finish 1 s after the status write, is
    within what truncation to the second gives with clocks in sync."""
    close = pod(started="2026-12-06T09:59:59Z", finished="2026-12-06T10:00:04Z", status_written="2026-12-06T10:00:03Z")
    t = pod_times(close, [scheduled()])
    assert t.phase("start") == -1.0 and latency.clock_skew([t]) == []
    assert verdicts.latency_findings("gpu-a", [t], THRESHOLDS, None, 1.0) == []


def test_a_scheduler_behind_leaves_the_start_thresholds_judged():
    early = scheduled(at="2026-12-06T09:59:57.000000Z")
    slow_start = pod(started="2026-12-06T10:00:12Z", finished="2026-12-06T10:00:12Z",
                     status_written="2026-12-06T10:00:13Z")
    found = verdicts.latency_findings("gpu-a", [pod_times(slow_start, [early])], THRESHOLDS, None, 1.0)
    assert [f.code for f in found] == ["FAIL-LATENCY-THRESHOLD", "ERROR-CLOCK-SKEW"]
    assert "startP99: observed 12.00s" in found[0].message and "scheduleP99" not in found[0].message.split(";")[0]
    assert "and clock skew: the scheduler's clock is at least 3.0s behind" in found[0].message
    assert found[1].message.endswith("not judged: scheduleP99")


def test_negative_phases_stay_negative():
    t = PodTimes("p", "n", 100.0, 99.5, 98.0, 97.0, True)
    assert (t.phase("schedule"), t.phase("start"), t.phase("run")) == (-0.5, -2.0, -1.0)



# ---------------------------------------------------------------- malformed data costs certification (T4)

def test_a_malformed_gpu_count_label_is_malformed_data_not_an_optional_check():
    from gpuconform import counts, reasons
    from gpuconform.config import Config

    node = {"metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.count": "eight"}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}
    found = verdicts.count_findings(node, counts.expectation(node, Config({})))
    assert [f.code for f in found] == ["ERROR-MALFORMED-DATA"]
    assert not reasons.certified([("passed", None), ("error", found[0].code)])  # was NOTCHECKED-OPTIONAL: certified


def test_a_cpulist_that_does_not_parse_is_malformed_data():
    al = verdicts.alignment_from_log("== cpus ==\nCpus_allowed_list:\t0\n== numa 0 ==\n0-3,x\n== pci numa ==\n"
                                     "0000:17:00.0 0\n")
    found = verdicts.numa_findings("gpu-a", al)
    assert [f.code for f in found] == ["ERROR-MALFORMED-DATA"] and "'x' is not a CPU" in found[0].message
