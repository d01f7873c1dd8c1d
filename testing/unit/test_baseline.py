"""baseline: before/after comparison of two JSON summaries."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from gpuconform.baseline import compare, render_html

TOL = {"latencyRelative": 0.2, "latencyAbsolute": 1.0, "allowNewFailures": 0}


def _r(check, node, outcome, reason=None, message=""):
    return {"test": f"tests/allocation/test_counts.py::{check}" + (f"[{node}]" if node else ""), "check": check,
            "node": node, "outcome": outcome, "reason": reason, "message": message, "duration_s": 0.8}


def _lat(node, start_p99=2.0, schedule_p99=0.02):
    stats = {"n": 7, "p50": 1.0, "p95": start_p99, "p99": start_p99, "max": start_p99,
             "note": "p99 is the maximum (n < 100)"}
    return {"node": node,
            "pods": [{"pod": f"lat-s{i}-{node}", "schedule_s": 0.01, "start_s": 1.0, "scheduled_from_event": True}
                     for i in range(7)],
            "schedule": {"n": 7, "p50": 0.01, "p95": schedule_p99, "p99": schedule_p99, "max": schedule_p99,
                         "note": "p99 is the maximum (n < 100)"},
            "start": stats,
            "allocate": {"n": 7, "mean_s": 0.0004, "p99_bucket_le_s": 0.005}}


def summary(run_id="a1b2c3"):
    return {
        "schema": "gpuconform.summary/v1", "suite_version": "0.1.0", "run_id": run_id, "server_version": "v1.34.4",
        "exit_status": 0,
        "results": [
            _r("test_allocatable_matches_hardware", "gpu-node-0", "passed"),
            _r("test_allocatable_matches_hardware", "gpu-node-1", "passed"),
            _r("test_no_unhealthy_devices", "gpu-node-0", "passed"),
            _r("test_no_unhealthy_devices", "gpu-node-1", "failed", "FAIL-F03-UNHEALTHY-DEVICES", "1 Unhealthy"),
            _r("test_plugin_daemonset_ready", None, "passed"),
            _r("test_kubelet_socket_present", "gpu-node-0", "skipped", "NOTCHECKED-OPTIONAL", "nodeProbe disabled"),
        ],
        "gpu_nodes": ["gpu-node-0", "gpu-node-1"], "certified_nodes": ["gpu-node-0", "gpu-node-1"],
        "coverage": {"certified_fraction": 1.0, "gate": 1.0}, "api_requests": 114,
        "latency": [_lat("gpu-node-0"), _lat("gpu-node-1")],
        "optional_permissions": {"nodes/proxy": True},
    }


def _set_outcome(s, check, node, outcome, reason=None):
    for r in s["results"]:
        if r["check"] == check and r["node"] == node:
            r["outcome"], r["reason"] = outcome, reason


def test_equal_summaries_have_no_regressions():
    c = compare(summary("a"), summary("b"), TOL)
    assert c.regressions == [] and c.changes == [] and c.notes == []
    assert c.counts["passed"] == {"before": 4, "after": 4, "delta": 0}
    assert all(not d.regression and d.before == d.after for d in c.latency)
    assert {(d.phase, d.percentile) for d in c.latency} == {
        ("schedule", "p50"), ("schedule", "p95"), ("schedule", "p99"), ("schedule", "max"),
        ("start", "p50"), ("start", "p95"), ("start", "p99"), ("start", "max"), ("allocate", "p99")}


def test_p99_from_1_to_3_is_one_regression_naming_node_phase_percentile_and_values():
    prev, cur = summary(), summary()
    prev["latency"][1]["start"]["p99"] = 1.0
    cur["latency"][1]["start"]["p99"] = 3.0
    c = compare(prev, cur, TOL)
    assert len(c.regressions) == 1
    line = c.regressions[0]
    for part in ("gpu-node-1", "start", "p99", "1 s", "3 s"):
        assert part in line
    assert line == "latency gpu-node-1 start p99: 1 s -> 3 s (+2 s)"


def test_growth_within_the_absolute_floor_is_not_a_regression():
    prev, cur = summary(), summary()
    prev["latency"][0]["start"]["p99"] = 1.0
    cur["latency"][0]["start"]["p99"] = 1.9  # +90 %, but under 1 s: timestamp resolution
    assert compare(prev, cur, TOL).regressions == []


def test_growth_within_the_relative_tolerance_is_not_a_regression():
    prev, cur = summary(), summary()
    prev["latency"][0]["start"]["max"] = 10.0
    cur["latency"][0]["start"]["max"] = 11.5  # +1.5 s but only +15 %
    assert compare(prev, cur, TOL).regressions == []


def test_latency_improvement_is_not_a_regression():
    prev, cur = summary(), summary()
    prev["latency"][0]["start"]["p99"] = 9.0
    c = compare(prev, cur, TOL)
    assert c.regressions == []
    d = next(d for d in c.latency if (d.node, d.phase, d.percentile) == ("gpu-node-0", "start", "p99"))
    assert (d.before, d.after) == (9.0, 2.0)


def test_allocate_bucket_going_to_inf_is_a_regression_and_serialises():
    prev, cur = summary(), summary()
    cur["latency"][0]["allocate"]["p99_bucket_le_s"] = float("inf")
    c = compare(prev, cur, TOL)
    assert c.regressions == ["latency gpu-node-0 allocate p99: 0.005 s -> +Inf s (+Inf s)"]
    json.loads(json.dumps(c.to_dict(), allow_nan=False))


def test_passed_to_failed_is_a_regression():
    prev, cur = summary(), summary()
    _set_outcome(cur, "test_allocatable_matches_hardware", "gpu-node-0", "failed", "FAIL-F04-OVERADVERTISED")
    c = compare(prev, cur, TOL)
    assert c.regressions == ["check test_allocatable_matches_hardware on gpu-node-0: passed -> failed "
                             "(FAIL-F04-OVERADVERTISED)"]
    assert c.counts["failed"] == {"before": 1, "after": 2, "delta": 1}
    assert [ch.kind for ch in c.changes] == ["regression"]


def test_allow_new_failures_tolerates_that_many():
    prev, cur = summary(), summary()
    _set_outcome(cur, "test_plugin_daemonset_ready", None, "error", "ENV-API-UNREACHABLE")
    assert compare(prev, cur, {**TOL, "allowNewFailures": 1}).regressions == []
    assert compare(prev, cur, TOL).regressions == [
        "check test_plugin_daemonset_ready on cluster: passed -> error (ENV-API-UNREACHABLE)"]
    _set_outcome(cur, "test_no_unhealthy_devices", "gpu-node-0", "skipped", "SKIP-F07-BUSY")
    assert len(compare(prev, cur, {**TOL, "allowNewFailures": 1}).regressions) == 2


def test_fixed_new_and_removed_checks_are_changes_not_regressions():
    prev, cur = summary(), summary()
    _set_outcome(cur, "test_no_unhealthy_devices", "gpu-node-1", "passed")
    cur["results"].append(_r("test_topology_aligned", "gpu-node-0", "failed", "FAIL-F06-TOPOLOGY-AFFINITY"))
    cur["results"] = [r for r in cur["results"] if r["check"] != "test_kubelet_socket_present"]
    c = compare(prev, cur, TOL)
    assert c.regressions == []
    assert {(ch.check, ch.kind) for ch in c.changes} == {
        ("test_no_unhealthy_devices", "fixed"), ("test_topology_aligned", "new"),
        ("test_kubelet_socket_present", "removed")}


def test_nodes_on_one_side_are_reported_not_compared():
    prev, cur = summary(), summary()
    cur["gpu_nodes"] = ["gpu-node-0", "gpu-node-2"]
    cur["results"] = [r for r in cur["results"] if r["node"] != "gpu-node-1"]
    cur["results"].append(_r("test_allocatable_matches_hardware", "gpu-node-2", "failed", "FAIL-F02-CAPACITY-ZERO"))
    cur["latency"] = [_lat("gpu-node-0"), _lat("gpu-node-2", start_p99=60.0)]
    c = compare(prev, cur, TOL)
    assert (c.nodes_only_previous, c.nodes_only_current) == (["gpu-node-1"], ["gpu-node-2"])
    assert c.regressions == [] and c.changes == []
    assert {d.node for d in c.latency} == {"gpu-node-0"}
    out = render_html(c)
    assert "gpu-node-1: only in the previous run" in out and "gpu-node-2: only in the current run" in out


def test_phase_measured_on_one_side_is_a_note():
    prev, cur = summary(), summary()
    cur["latency"][0]["allocate"] = "not checked (nodes/proxy not granted)"
    c = compare(prev, cur, TOL)
    assert c.notes == ["gpu-node-0 allocate: not compared (previous: measured, current: not checked "
                       "(nodes/proxy not granted))"]


def test_wrong_schema_is_rejected():
    prev = summary()
    prev["schema"] = "gpuconform.summary/v0"
    with pytest.raises(ValueError, match="gpuconform.summary/v0"):
        compare(prev, summary(), TOL)
    with pytest.raises(ValueError, match="None"):
        compare({"results": []}, summary(), TOL)


def test_tolerance_defaults():
    prev, cur = summary(), summary()
    cur["latency"][0]["start"]["p99"] = 5.0
    assert len(compare(prev, cur, {}).regressions) == 1


def test_to_dict_is_json_and_complete():
    prev, cur = summary("r1"), summary("r2")
    prev["latency"][1]["start"]["p99"] = 1.0
    cur["latency"][1]["start"]["p99"] = 3.0
    _set_outcome(cur, "test_allocatable_matches_hardware", "gpu-node-0", "failed", "FAIL-F04-OVERADVERTISED")
    d = json.loads(json.dumps(compare(prev, cur, TOL).to_dict(), allow_nan=False))
    assert (d["previous_run_id"], d["current_run_id"], d["new_failures"]) == ("r1", "r2", 1)
    assert len(d["regressions"]) == 2
    assert d["status_changes"][0]["kind"] == "regression" and d["status_changes"][0]["node"] == "gpu-node-0"
    assert d["counts"]["passed"]["delta"] == -1
    assert any(x["regression"] and x["percentile"] == "p99" for x in d["latency"])


def test_render_html_table_and_escaping():
    prev, cur = summary(), summary()
    cur["run_id"] = "<img src=x>"
    _set_outcome(cur, "test_allocatable_matches_hardware", "gpu-node-0", "failed", "<script>")
    out = render_html(compare(prev, cur, TOL))
    assert "<script>" not in out and "<img" not in out
    table = ET.fromstring(out[out.index("<table"):])
    assert table.get("id") == "gc-baseline"
    failed = [tr for tr in table.find("tbody") if tr.get("class") == "gc-failed"]
    assert len(failed) == 1 and failed[0][0].text == "test_allocatable_matches_hardware"


def test_compare_does_not_modify_inputs():
    prev, cur = summary(), summary()
    snapshot = copy.deepcopy((prev, cur))
    compare(prev, cur, TOL)
    assert (prev, cur) == snapshot


# ---------------------------------------------------------------- a certified node left out now (issue 29, T4)

def _left_out(cur, node, why="not-applicable", reason="nvidia.com/gpu.deploy.device-plugin=false: no container "
                                                       "device plugin by design"):
    cur["gpu_nodes"] = [n for n in cur["gpu_nodes"] if n != node]
    cur["certified_nodes"] = [n for n in cur["certified_nodes"] if n != node]
    cur["results"] = [r for r in cur["results"] if r["node"] != node]
    cur["latency"] = [x for x in cur["latency"] if x["node"] != node]
    cur["left_out_nodes"] = {node: {"why": why, "reason": reason}}
    return cur


def test_a_certified_node_left_out_by_a_label_now_is_a_regression():
    """Before: listed under 'only in the previous run' and the run exited 0 (or 6). A label any of the node, GFD, NFD
    or the operator can write took it out of the gate; now it is a regression (exit 8)."""
    c = compare(summary("a"), _left_out(summary("b"), "gpu-node-0"), TOL)
    assert c.regressions == ["node gpu-node-0: certified in the baseline, left out now (not-applicable: "
                             "nvidia.com/gpu.deploy.device-plugin=false: no container device plugin by design)"]
    assert c.to_dict()["certified_left_out"] == [c.regressions[0].removeprefix("node ")]
    out = render_html(c)
    assert "left out now (not-applicable" in out and "gpu-node-0: only in the previous run" not in out


@pytest.mark.parametrize("why", ["excluded", "not-selected"])
def test_a_certified_node_excluded_or_not_selected_now_is_a_regression_too(why):
    c = compare(summary("a"), _left_out(summary("b"), "gpu-node-1", why, "nodes.exclude"), TOL)
    assert c.regressions == [f"node gpu-node-1: certified in the baseline, left out now ({why}: nodes.exclude)"]


def test_a_node_left_out_now_that_the_baseline_did_not_certify_is_no_regression():
    prev = summary("a")
    prev["certified_nodes"] = ["gpu-node-0"]
    assert compare(prev, _left_out(summary("b"), "gpu-node-1"), TOL).regressions == []


def test_a_malformed_certified_nodes_field_is_named():
    prev = summary("a")
    prev["certified_nodes"] = "gpu-node-0"
    with pytest.raises(ValueError, match="certified_nodes: expected a list of node names"):
        compare(prev, summary("b"), TOL)
    cur = summary("b")
    cur["left_out_nodes"] = ["gpu-node-0"]
    with pytest.raises(ValueError, match="left_out_nodes: expected an object"):
        compare(summary("a"), cur, TOL)


def test_rollout_rehearsal_figures_are_compared_between_releases():
    from gpuconform import baseline as b

    def run(window, handover):
        return {"schema": "gpuconform.summary/v1", "run_id": "r", "results": [],
                "rollout": [{"node": "n1", "daemonset": "ns/p", "mode": "restart", "window_s": window,
                             "handover_s": handover, "completed": True}]}

    cmp = b.compare(run(2.0, 1.0), run(12.0, 1.0))
    rows = {(d.phase, d.percentile): d for d in cmp.latency}
    assert rows[("rollout", "window")].regression and not rows[("rollout", "hand-over")].regression
    assert any("n1 rollout window" in line for line in cmp.regressions)
    assert not b.compare(run(2.0, None), run(2.0, None)).regressions
