"""report: HTML fragments (pool summary, node x check matrix, latency plots and table, environment), and the
config dump's redaction (gpuconform/redaction.py)."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

import pytest

from gpuconform import catalog, auditpage
from gpuconform.redaction import is_secret_key, redact
from gpuconform.auditpage import (environment_html, latency_cdf_svg, matrix_html, outcome_counts, percentile_table_html,
                               phase_breakdown_svg, pool_summary_html, undrawn_rows_html)

SVG = "{http://www.w3.org/2000/svg}"
THRESHOLDS = {"scheduleP99": 5.0, "startP50": 5.0, "startP99": 10.0, "allocateP99": 1.0}


def _result(check, node, outcome, reason=None, message="", module="tests/allocation/test_counts.py"):
    test = f"{module}::{check}" + (f"[{node}]" if node else "")
    return {"test": test, "check": check, "node": node, "outcome": outcome, "reason": reason, "message": message,
            "duration_s": 1.23}


RESULTS = [
    _result("test_allocatable_matches_hardware", "gpu-node-0", "passed", message="8 GPUs advertised, 8 present"),
    _result("test_allocatable_matches_hardware", "gpu-node-1", "failed", "FAIL-F04-OVERADVERTISED",
            "16 GPUs advertised, 8 present (sharing.replicas=2 not expected)"),
    _result("test_gpu_pod_start_latency_is_under_thresholds", "gpu-node-0", "passed",
            module="tests/latency/test_latency.py"),
    _result("test_gpu_pod_start_latency_is_under_thresholds", "gpu-node-1", "error", "ENV-POD-START-TIMEOUT",
            "lat-s0-gpu-node-1 not started within timeouts.podStart=120s", module="tests/latency/test_latency.py"),
    _result("test_plugin_daemonset_ready", None, "passed", module="tests/registration/test_registration.py"),
    _result("test_kubelet_socket_present", "gpu-node-0", "skipped", "NOTCHECKED-OPTIONAL",
            "nodeProbe.enabled is false: socket not checked", module="tests/registration/test_registration.py"),
]


def _pods(node, starts, schedules):
    return [{"pod": f"lat-s{i}-{node}", "schedule_s": sc, "start_s": st, "scheduled_from_event": True}
            for i, (st, sc) in enumerate(zip(starts, schedules))]


LATENCY = [
    {"node": "gpu-node-0",
     "pods": _pods("gpu-node-0", [1.0, 1.0, 2.0, 1.0, 0.0, 2.0, 1.0], [0.012, 0.009, 0.02, 0.011, 0.0, 0.015, 0.01]),
     "schedule": {"n": 7, "p50": 0.011, "p95": 0.02, "p99": 0.02, "max": 0.02, "note": "p99 is the maximum (n < 100)"},
     "start": {"n": 7, "p50": 1.0, "p95": 2.0, "p99": 2.0, "max": 2.0, "note": "p99 is the maximum (n < 100)"},
     "allocate": {"n": 7, "mean_s": 0.0004, "p99_bucket_le_s": 0.005}},
    {"node": "gpu-node-1",
     "pods": _pods("gpu-node-1", [3.0, 12.0], [1.0, 6.0]),
     "schedule": {"n": 2, "p50": 1.0, "p95": 6.0, "p99": 6.0, "max": 6.0, "note": "p99 is the maximum (n < 100)"},
     "start": {"n": 2, "p50": 3.0, "p95": 12.0, "p99": 12.0, "max": 12.0, "note": "p99 is the maximum (n < 100)"},
     "allocate": "not checked (nodes/proxy not granted)"},
]


def _svg(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    return root


def _texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


# ---------------------------------------------------------------- matrix

def test_outcome_counts():
    assert outcome_counts(RESULTS) == {"passed": 3, "failed": 1, "error": 1, "skipped": 1}
    assert outcome_counts([]) == {"passed": 0, "failed": 0, "error": 0, "skipped": 0}


LATENCY_CHECK = "test_gpu_pod_start_latency_is_under_thresholds"


def _text(el: ET.Element) -> str:
    return "".join(el.itertext())


def _matrix_rows(table: ET.Element) -> list[tuple[str, list[str]]]:
    """(row header: node name or group label, cell classes) per matrix row, without the rows that list a group's
    node names."""
    return [(tr[0].text, [td.get("class") for td in tr[1:]]) for tr in table.find("tbody")
            if tr.get("class") != "gc-group-names"]


def _names(table: ET.Element) -> list[list[str]]:
    return [_text(tr.find("td/details/p")).split(", ") for tr in table.find("tbody")
            if tr.get("class") == "gc-group-names"]


def _fleet(n: int, checks: list[str], bad: dict[tuple[str, str], tuple[str, str, str]]) -> list[dict]:
    """n nodes gpu-node-0.. x checks, all passed except bad[(check, node)] = (outcome, reason, message)."""
    out = []
    for i in range(n):
        node = f"gpu-node-{i}"
        for c in checks:
            outcome, reason, message = bad.get((c, node), ("passed", None, f"{node}: fine"))
            out.append(_result(c, node, outcome, reason, message))
    return out


def test_matrix_one_row_per_node_one_column_per_check():
    out = matrix_html(RESULTS, ["gpu-node-0", "gpu-node-1"])
    table = ET.fromstring(out)  # the fragment is well-formed
    assert table.get("id") == "gc-matrix"
    head = table.find("thead/tr")
    # each check in words, whole (not cut to a few characters); its test function's name on hover and in the legend
    assert [_text(th) for th in head] == ["node", "Allocatable matches hardware", "GPU pod start latency is under "
                                          "thresholds", "Plugin daemonset ready", "Kubelet socket present"]
    assert [th.get("title") for th in head[1:]] == [
        "test_allocatable_matches_hardware", LATENCY_CHECK, "test_plugin_daemonset_ready",
        "test_kubelet_socket_present"]
    legend = _text(table.find("caption"))  # the full names stay visible: the browser self-test looks for one
    assert all(c in legend for c in ("test_allocatable_matches_hardware", LATENCY_CHECK))
    assert LATENCY_CHECK in _text(table)
    # gpu-node-1 failed; gpu-node-0 passed everything but one 'not checked' skip, so it is collapsed.
    assert _matrix_rows(table) == [
        ("gpu-node-1", ["gc-failed", "gc-error", "gc-none", "gc-none"]),
        ("cluster", ["gc-none", "gc-none", "gc-passed", "gc-none"]),
        ("1 node, all passed or not checked", ["gc-passed", "gc-passed", "gc-none", "gc-skipped"]),
    ]
    failed = table.find("tbody")[0][1]
    assert failed.get("title") == "16 GPUs advertised, 8 present (sharing.replicas=2 not expected)"
    assert "FAIL-F04-OVERADVERTISED" in _text(failed)
    skipped = table.find("tbody")[2][4]
    assert skipped.get("title") == "nodeProbe.enabled is false: socket not checked"
    assert "NOTCHECKED-OPTIONAL" in _text(skipped)
    assert _names(table) == [["gpu-node-0"]]


def test_matrix_orders_failures_then_errors_then_skips_by_name():
    checks = ["test_a", "test_b"]
    rs = _fleet(12, checks, {
        ("test_a", "gpu-node-10"): ("failed", "FAIL-F02-CAPACITY-ZERO", "capacity 0"),
        ("test_b", "gpu-node-2"): ("error", "ERROR-API", "API unreachable"),
        ("test_a", "gpu-node-3"): ("skipped", "SKIP-F07-BUSY", "no free GPU"),
        ("test_a", "gpu-node-1"): ("error", "ERROR-API", "API unreachable"),
        ("test_b", "gpu-node-1"): ("failed", "FAIL-F02-CAPACITY-ZERO", "capacity 0"),
        ("test_b", "gpu-node-9"): ("failed", "FAIL-F02-CAPACITY-ZERO", "capacity 0"),
    })
    table = ET.fromstring(matrix_html(rs, [f"gpu-node-{i}" for i in range(12)]))
    assert [name for name, _ in _matrix_rows(table)] == ["gpu-node-1", "gpu-node-9", "gpu-node-10", "gpu-node-2",
                                                  "gpu-node-3", "7 nodes, all passed"]
    assert _matrix_rows(table)[0][1] == ["gc-error", "gc-failed"]


def test_matrix_collapses_nodes_that_passed_everything_per_pool():
    checks = ["test_a", "test_b", "test_c"]
    rs = _fleet(9, checks, {("test_b", "gpu-node-4"): ("failed", "FAIL-F02-CAPACITY-ZERO", "capacity 0")})
    pools = {f"gpu-node-{i}": "a100 x8" if i % 3 else "l4 x1" for i in range(9)}
    out = matrix_html(rs, [f"gpu-node-{i}" for i in range(9)], pools)
    table = ET.fromstring(out)
    assert _matrix_rows(table) == [("gpu-node-4", ["gc-passed", "gc-failed", "gc-passed"]),
                                   ("5 nodes, all passed", ["gc-passed"] * 3),
                                   ("3 nodes, all passed", ["gc-passed"] * 3)]
    # The pool, under the node name or the group's label.
    assert [_text(tr.find("th/span")) for tr in table.find("tbody") if tr.find("th") is not None] == [
        "a100 x8", "a100 x8", "l4 x1"]
    assert _names(table) == [["gpu-node-1", "gpu-node-2", "gpu-node-5", "gpu-node-7", "gpu-node-8"],
                             ["gpu-node-0", "gpu-node-3", "gpu-node-6"]]
    names = table.find("tbody")[2].find("td")
    assert names.get("colspan") == "4" and names.find("details/summary") is not None
    # Passed cells never carry a message; collapsed nodes are no table cells of their own.
    assert all(td.get("title") is None for td in table.iter("td") if td.get("class") == "gc-passed")
    assert "fine" not in out
    assert [_text(th) for th in table.iter("th")].count("gpu-node-1") == 0


def test_matrix_keeps_not_checked_apart_from_passed_and_skips_that_cost_certification_in_full():
    checks = ["test_metrics", "test_numa"]
    bad = {("test_metrics", f"gpu-node-{i}"): ("skipped", "NOTCHECKED-OPTIONAL", "nodes/proxy not granted")
           for i in range(4)}
    bad[("test_numa", "gpu-node-5")] = ("skipped", "SKIP-NUMA-NA", "gpu-node-5: numa_node = -1")
    table = ET.fromstring(matrix_html(_fleet(6, checks, bad), [f"gpu-node-{i}" for i in range(6)] + ["gpu-node-9"]))
    assert _matrix_rows(table) == [("gpu-node-5", ["gc-passed", "gc-skipped"]),
                            ("4 nodes, all passed or not checked", ["gc-skipped", "gc-passed"]),
                            ("1 node, all passed", ["gc-passed", "gc-passed"]),
                            ("1 node, no results", ["gc-none", "gc-none"])]
    assert table.find("tbody")[0][2].get("title") == "gpu-node-5: numa_node = -1"
    assert table.find("tbody")[1][1].get("title") == "nodes/proxy not granted"
    assert _names(table) == [[f"gpu-node-{i}" for i in range(4)], ["gpu-node-4"], ["gpu-node-9"]]


def test_matrix_cell_with_several_results_shows_the_worst():
    rs = [_result("test_mig", "gpu-node-0", "passed", message="ok"),
          {**_result("test_mig", "gpu-node-0", "failed", "FAIL-F04-UNDERADVERTISED", "1 of 7 missing"),
           "test": "tests/x.py::test_mig[gpu-node-0-mixed]"}]
    td = ET.fromstring(matrix_html(rs, ["gpu-node-0"])).find("tbody/tr")[1]
    assert td.get("class") == "gc-failed" and _text(td).startswith("failed (2)")
    assert td.get("title") == "passed: ok\nfailed: 1 of 7 missing"


def test_matrix_cuts_long_messages_in_titles():
    rs = [_result("test_a", "gpu-node-0", "failed", "FAIL-F08-PLUGIN-CRASHLOOP", "x" * 5000)]
    td = ET.fromstring(matrix_html(rs, ["gpu-node-0"])).find("tbody/tr")[1]
    assert len(td.get("title")) == auditpage._TITLE_MAX and td.get("title").endswith("\u2026")


def test_matrix_escapes_messages_and_names():
    rs = [_result("test_<b>", "gpu-<i>-0", "failed", "FAIL-F01-NOT-REGISTERED",
                  'plugin log: <script>alert("x")</script> & more'),
          _result("test_<b>", "gpu-&-1", "passed")]
    out = matrix_html(rs, ["gpu-<i>-0", "gpu-&-1"], {"gpu-<i>-0": "<script>pool</script>", "gpu-&-1": "p&q"})
    assert "<script>" not in out and "<b>" not in out and "<i>-" not in out
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in out
    table = ET.fromstring(out)
    assert table.find("tbody/tr")[1].get("title") == 'plugin log: <script>alert("x")</script> & more'
    assert _text(table.find("tbody/tr/th")) == "gpu-<i>-0<script>pool</script>"
    assert _names(table) == [["gpu-&-1"]]
    assert _text(table.find("thead/tr")[1]) == "<b>" and "test_<b>" in _text(table.find("caption"))


def test_matrix_empty():
    assert "no results" in matrix_html([], ["gpu-node-0"])


# ---------------------------------------------------------------- summary by pool

def _pool_rows(out: str) -> dict[str, list[str]]:
    table = ET.fromstring(out)
    assert table.get("id") == "gc-pools"
    assert [_text(th) for th in table.find("thead/tr")] == [
        "GPU pool", "nodes", "certified", "with a failure", "with an error", "skipped only", "passed", "failed",
        "error", "skipped"]
    return {_text(tr[0]): [_text(td) for td in tr[1:]] for tr in table.find("tbody")}


def test_pool_summary_counts_nodes_and_outcomes_per_pool():
    checks = ["test_a", "test_b", "test_c"]
    rs = _fleet(10, checks, {
        ("test_a", "gpu-node-0"): ("failed", "FAIL-F02-CAPACITY-ZERO", ""),
        ("test_b", "gpu-node-0"): ("error", "ERROR-API", ""),
        ("test_c", "gpu-node-3"): ("error", "ERROR-API", ""),
        ("test_b", "gpu-node-6"): ("skipped", "SKIP-F07-BUSY", ""),
        ("test_c", "gpu-node-9"): ("skipped", "NOTCHECKED-OPTIONAL", ""),  # certified all the same
    }) + [_result("test_daemonset", None, "passed")]
    nodes = [f"gpu-node-{i}" for i in range(10)]
    pools = {n: "h100 (MIG mixed)" if i < 4 else "a100 x8" for i, n in enumerate(nodes)}
    certified = [n for n in nodes if n not in ("gpu-node-0", "gpu-node-3", "gpu-node-6")]
    rows = _pool_rows(pool_summary_html(rs, nodes, certified, pools))
    assert rows == {
        "a100 x8": ["6", "5", "0", "0", "1", "16", "0", "0", "2"],
        "h100 (MIG mixed)": ["4", "2", "1", "2", "0", "9", "1", "2", "0"],
        "cluster (results of no node)": ["\u2013"] * 5 + ["1", "0", "0", "0"],
        "total": ["10", "7", "1", "2", "1", "26", "1", "2", "2"],
    }
    # Without certified_nodes (no run) the same verdicts are worked out from the results.
    assert _pool_rows(pool_summary_html(rs, nodes, None, pools)) == rows


def test_pool_summary_without_pools_is_one_pool_all():
    rs = _fleet(3, ["test_a"], {("test_a", "gpu-node-1"): ("failed", "FAIL-F02-CAPACITY-ZERO", "")})
    rows = _pool_rows(pool_summary_html(rs, ["gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3"], None))
    assert rows == {"all": ["4", "2", "1", "0", "0", "2", "1", "0", "0"]}  # gpu-node-3: no results, not certified
    assert "no GPU nodes" in pool_summary_html([], [])


def test_pool_summary_escapes_pool_names():
    rs = [_result("test_a", "n0", "passed")]
    out = pool_summary_html(rs, ["n0"], ["n0"], {"n0": '<img src=x onerror="alert(1)">'})
    assert "<img" not in out
    assert list(_pool_rows(out)) == ['<img src=x onerror="alert(1)">']


# ---------------------------------------------------------------- at scale

@pytest.mark.parametrize("nodes_proxy", [True, False], ids=["nodes-proxy", "no-nodes-proxy"])
def test_a_thousand_nodes_stay_small(nodes_proxy):
    """1,000 GPU nodes x the suite's checks, 3 pools, about 2 % of nodes not passing: pool summary + matrix
    < 150 KB."""
    bad = {}
    for i in range(1000):
        node = f"gpu-node-{i}"
        if i % 97 == 13:
            bad[("test_advertised_gpus_match_the_hardware", node)] = (
                "failed", "FAIL-F04-OVERADVERTISED", f"{node}: capacity 16, expected 8 from nvidia.com/gpu.count=8 "
                "x replicas 1 (sharing.timeSlicing.replicas=2 in the plugin config?)")
        if i % 149 == 7:
            bad[("test_vector_add_succeeds_through_the_plugin", node)] = (
                "error", "ERROR-F14-IMAGE-PULL", f"{node}: ImagePullBackOff nvcr.io/nvidia/k8s/cuda-sample:"
                "vectoradd-cuda12.5.0: dial tcp: lookup nvcr.io: i/o timeout")
        if not nodes_proxy:
            bad[("test_kubelet_counts_the_plugin_registration", node)] = (
                "skipped", "NOTCHECKED-OPTIONAL", "nodes/proxy not granted: kubelet metrics not checked")
    nodes = [f"gpu-node-{i}" for i in range(1000)]
    rs = _fleet(1000, list(catalog.NAMES), bad)
    pools = {n: ("nvidia.com/gpu x8 (plain)", "nvidia.com/mig-1g.10gb x56 (MIG mixed)",
                 "nvidia.com/gpu.shared x4 (time-slicing)")[i % 3] for i, n in enumerate(nodes)}
    matrix = matrix_html(rs, nodes, pools)
    summary = pool_summary_html(rs, nodes, None, pools)
    size = len((matrix + summary).encode())
    assert size < 150_000, size  # about 35 KB
    table = ET.fromstring(matrix)
    rows = _matrix_rows(table)
    failing = {n for (_, n), (outcome, _, _) in bad.items() if outcome != "skipped"}
    failed = {n for (_, n), (outcome, _, _) in bad.items() if outcome == "failed"}
    assert [name for name, _ in rows[:len(failing)]] == sorted(
        failing, key=lambda n: (n not in failed, int(n.rsplit("-", 1)[1])))
    assert len(rows) == len(failing) + 3  # one collapsed row per pool
    assert sum(len(names) for names in _names(table)) == 1000 - len(failing)
    assert _pool_rows(summary)["total"][:2] == ["1000", str(1000 - len(failing))]


def _visible(out: str) -> list[str]:
    assert out.startswith("<script>")
    return out.split("set('visible', '")[1].split("'")[0].split(",")


def test_rows_are_drawn_on_demand_above_the_limit():
    limit = auditpage.ROWS_DRAWN_UP_TO
    assert undrawn_rows_html({"passed": limit, "failed": 0, "error": 0, "skipped": 0}) == ""
    out = undrawn_rows_html({"passed": limit - 5, "failed": 3, "error": 2, "skipped": 1})
    assert _visible(out) == ["skipped", "failed", "error", "xfailed", "xpassed", "rerun"]
    assert f"{limit - 5} passed results are not drawn" in out and "tick Passed below" in out
    # Still too many without the passes: the skips wait too; failures and errors are always drawn.
    out = undrawn_rows_html({"passed": 5000, "failed": 10, "error": 2, "skipped": 2000})
    assert _visible(out) == ["failed", "error", "xfailed", "xpassed", "rerun"]
    assert "5000 passed and 2000 skipped results" in out and "tick Passed and Skipped below" in out
    assert undrawn_rows_html({"passed": 0, "failed": 3000, "error": 0, "skipped": 0}) == ""
    assert undrawn_rows_html({"passed": 3, "failed": 0, "error": 0, "skipped": 0}, limit=2) != ""


def test_style_is_scoped():
    selectors = re.findall(r"^([^{}\n]+)\{", auditpage.STYLE, re.M)
    assert selectors and all(s.startswith(".gc-") for sel in selectors for s in sel.split(","))
    for outcome in ("passed", "failed", "error", "skipped", "none"):
        assert f".gc-{outcome}{{" in auditpage.STYLE


# ---------------------------------------------------------------- latency plots

def test_cdf_svg_parses_and_has_threshold_lines():
    root = _svg(latency_cdf_svg(LATENCY, THRESHOLDS))
    assert root.get("id") == "gc-latency-cdf"
    texts = _texts(root)
    for label in ("startP50 5 s", "startP99 10 s", "scheduleP99 5 s"):
        assert label in texts
    assert not any("allocateP99" in t for t in texts)  # not a per-pod phase
    assert len([ln for ln in root.iter(SVG + "line") if ln.get("class") == "gc-threshold"]) == 3
    assert {"start (n=9)", "schedule (n=9)", "threshold", "seconds since pod creation"} <= set(texts)
    assert {p.get("class") for p in root.iter(SVG + "polyline")} == {"gc-cdf-start", "gc-cdf-schedule"}


def _xs(root: ET.Element) -> list[float]:
    out = []
    for pl in root.iter(SVG + "polyline"):
        out += [float(pt.split(",")[0]) for pt in pl.get("points").split()]
    return out


def test_cdf_x_range_includes_thresholds_beyond_the_samples():
    root = _svg(latency_cdf_svg(LATENCY[:1], {"startP99": 30.0}))
    ticks = [float(t) for t in _texts(root) if re.fullmatch(r"[\d.]+", t)]
    assert max(ticks) >= 30.0
    line = next(ln for ln in root.iter(SVG + "line") if ln.get("class") == "gc-threshold")
    assert float(line.get("x1")) <= max(_xs(root))  # inside the plot


@pytest.mark.parametrize("latency", [
    [],
    [{"node": "gpu-node-0", "pods": []}],
    [{"node": "gpu-node-0", "pods": [{"pod": "p", "schedule_s": None, "start_s": None}]}],
])
def test_empty_latency_gives_a_note_not_a_plot(latency):
    for out in (latency_cdf_svg(latency, THRESHOLDS), phase_breakdown_svg(latency)):
        assert "<svg" not in out and "no latency samples" in out


@pytest.mark.parametrize("starts,schedules", [
    ([0.0], [0.0]),  # one sample, zero
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),  # all zero
    ([2.0, 2.0, 2.0], [1.0, 1.0, 1.0]),  # all equal (whole seconds)
    ([1.0], [None]),  # no schedule series
])
def test_degenerate_samples_render(starts, schedules):
    lat = [{"node": "gpu-node-0", "pods": _pods("gpu-node-0", starts, schedules)}]
    for thresholds in (THRESHOLDS, {}):
        cdf = _svg(latency_cdf_svg(lat, thresholds))
        assert all(x == x for x in _xs(cdf))  # no NaN
    phases = _svg(phase_breakdown_svg(lat))
    assert phases.get("id") == "gc-latency-phases"
    assert all(float(r.get("width")) >= 0 for r in phases.iter(SVG + "rect"))


def test_phase_breakdown_bars_and_floor():
    lat = [{"node": "gpu-node-0", "pods": [
        {"pod": "lat-s0", "schedule_s": 0.5, "start_s": 2.0, "scheduled_from_event": True},
        {"pod": "lat-s1", "schedule_s": 1.0, "start_s": 0.0, "scheduled_from_event": False},  # start < scheduled
    ]}]
    root = _svg(phase_breakdown_svg(lat))
    texts = _texts(root)
    assert {"create\u2192scheduled", "scheduled\u2192started", "lat-s0", "lat-s1"} <= set(texts)
    groups = [g for g in root.iter(SVG + "g")]
    assert len(groups) == 2
    w0 = [float(r.get("width")) for r in groups[0].iter(SVG + "rect")]
    w1 = [float(r.get("width")) for r in groups[1].iter(SVG + "rect")]
    assert w0[0] > 0 and w0[1] == pytest.approx(3 * w0[0], abs=0.2)  # 0.5 s then 1.5 s
    assert w1[1] == 0.0  # scheduled->started floored at 0


def test_plots_escape_pod_names():
    lat = [{"node": "n<1>", "pods": [{"pod": "<script>x</script>", "schedule_s": 0.1, "start_s": 1.0}]}]
    out = phase_breakdown_svg(lat)
    assert "<script>" not in out
    _svg(out)


# ---------------------------------------------------------------- percentile table

def _rows(out: str) -> dict[tuple[str, str], list[str]]:
    table = ET.fromstring(out)
    assert table.get("id") == "gc-percentiles"
    return {(tr[0].text, tr[1].text): ["".join(td.itertext()) for td in tr] for tr in table.find("tbody")}


def test_percentile_table_verdicts_and_notes():
    rows = _rows(percentile_table_html(LATENCY, THRESHOLDS))
    assert len(rows) == 6
    n0s = rows[("gpu-node-0", "start")]
    assert n0s[2:7] == ["7", "1", "2", "2", "2"]
    assert n0s[7] == "startP50 \u2264 5 s, startP99 \u2264 10 s"
    assert n0s[8] == "within"
    assert n0s[9] == "p99 is the maximum (n < 100)"
    assert rows[("gpu-node-1", "start")][8] == "startP99 exceeded"
    assert rows[("gpu-node-1", "schedule")][8] == "scheduleP99 exceeded"
    alloc = rows[("gpu-node-0", "allocate")]
    assert alloc[5] == "\u2264 0.005" and alloc[8] == "within" and "mean 0.0004 s" in alloc[9]
    assert rows[("gpu-node-1", "allocate")][-1] == "not checked (nodes/proxy not granted)"


def test_percentile_table_row_classes():
    table = ET.fromstring(percentile_table_html(LATENCY, THRESHOLDS))
    classes = {(tr[0].text, tr[1].text): tr.get("class") for tr in table.find("tbody")}
    assert classes[("gpu-node-0", "start")] == "gc-passed"
    assert classes[("gpu-node-1", "start")] == "gc-failed"
    assert classes[("gpu-node-1", "allocate")] == "gc-none"


def test_percentile_table_infinite_bucket_and_missing_thresholds():
    lat = [{"node": "gpu-node-0", "pods": [], "allocate": {"n": 3, "mean_s": 2.5, "p99_bucket_le_s": float("inf")}}]
    rows = _rows(percentile_table_html(lat, THRESHOLDS))
    assert rows[("gpu-node-0", "allocate")][5] == "\u2264 +Inf"
    assert rows[("gpu-node-0", "allocate")][8] == "allocateP99 exceeded"
    assert rows[("gpu-node-0", "start")][-1] == "no samples"
    rows = _rows(percentile_table_html(LATENCY, {}))
    assert rows[("gpu-node-0", "start")][7:9] == ["none", "no threshold"]


def test_percentile_table_empty():
    assert "no latency samples" in percentile_table_html([], THRESHOLDS)


# ---------------------------------------------------------------- environment and redact

CONFIG = {
    "resourceName": "nvidia.com/gpu",
    "nodes": {"selector": "nvidia.com/gpu.present=true", "exclude": "", "expectedGpus": "auto"},
    "images": {"probe": "busybox:1.36", "pullPolicy": "IfNotPresent", "pullSecrets": ["ngc-pull", "mirror"]},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "thresholds": {"scheduleP99": "5s", "startP50": "5s"},
    "mig": {"strategy": "auto", "profiles": {}},
    "nodeProbe": {"enabled": True},
    "auth": {"token": "eyJhbGciOi", "bearerToken": "abc", "password": "hunter2", "clientKey": "/etc/k.pem",
             "clientKeyData": "LS0tLS1", "clientCertificateData": "LS0tLS2", "client-certificate-data": "LS0tLS3",
             "secret": "s3", "apiKey": "k-123", "api_key": "k-456", "credentials": {"user": "u", "pass": "p"},
             "secretName": "gpuconform-creds", "keyboardLayout": "de", "monkey": "banana"},
}


def test_redact_secret_values_and_keeps_names_and_plain_keys():
    original = copy.deepcopy(CONFIG)
    out = redact(CONFIG)
    assert CONFIG == original  # input untouched
    auth = out["auth"]
    for k in ("token", "bearerToken", "password", "clientKey", "clientKeyData", "clientCertificateData",
              "client-certificate-data", "secret", "apiKey", "api_key", "credentials"):
        assert auth[k] == "<redacted>", k
    assert auth["secretName"] == "gpuconform-creds"  # names a Secret, holds no value
    assert (auth["keyboardLayout"], auth["monkey"]) == ("de", "banana")  # 'key' only as a whole word
    # the configured pull secrets: the config reference promises them redacted (one rule, gpuconform/redaction.py)
    assert out["images"]["pullSecrets"] == ["<redacted>", "<redacted>"]
    assert out["tolerations"][0]["key"] == "nvidia.com/gpu"  # a taint key
    assert out["resourceName"] == "nvidia.com/gpu"
    assert {k: out[k] for k in CONFIG if k not in ("auth", "images")} == \
        {k: CONFIG[k] for k in CONFIG if k not in ("auth", "images")}
    out["images"]["pullSecrets"].append("x")
    assert CONFIG["images"]["pullSecrets"] == ["ngc-pull", "mirror"]  # a deep copy


@pytest.mark.parametrize("key,secret", [
    ("token", True), ("tokens", True), ("APIKey", True), ("privateKeys", True), ("imagePullSecrets", True),
    ("pullSecrets", True), ("resourceName", False), ("key", False), ("tokenizer", False), ("passwd", True),
    ("sshKeyRef", False), ("caCert", True),
])
def test_is_secret_key(key, secret):
    assert is_secret_key(key) is secret


def test_redact_custom_words():
    assert redact({"session": "x", "token": "y"}, secret_keys=("session",)) == {"session": "<redacted>", "token": "y"}


def test_check_titles_are_the_whole_name_in_words():
    assert [auditpage.check_title(c) for c in catalog.NAMES[:2]] == [
        "Plugin pod is ready and not crash looping", "GPU resource is in node capacity"]
    assert auditpage.check_title("test_a_mig_device_and_its_parent_gpu_are_never_both_allocated") == \
        "A MIG device and its parent GPU are never both allocated"
    assert auditpage.check_title("test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node") == \
        "Guaranteed GPU pod gets CPUs and GPU on one NUMA node"
    assert all(len(auditpage.check_title(c)) > 20 for c in catalog.NAMES)  # no name cut short
    assert auditpage.check_title("test_") == "test_"


@pytest.mark.parametrize("status, word, meaning", [(0, "PASS", "every check passed"), (1, "FAIL", "a check failed"),
                                                   (6, "FAIL", "nothing certified")])
def test_verdict_line_leads_with_pass_or_fail_and_names_both_allocation_paths(status, word, meaning):
    summary = {"exit_status": status, "gpu_nodes": ["a", "b"], "certified_nodes": ["a"] if status else ["a", "b"],
               "coverage": {"certified_fraction": 0.5, "gate": 1.0},
               "environment": {"allocation paths (GPU nodes)": "device-plugin 1 (certified here), dra 1 <x>"}}
    out = auditpage.verdict_html(summary, meaning)
    root = ET.fromstring(f"<div>{out}</div>")
    verdict = root.find("p[@id='gc-verdict']")
    assert _text(verdict).startswith(f"Verdict: {word}: {1 if status else 2} of 2 GPU nodes certified (coverage gate "
                                     f"1.0); exit status {status}: {meaning}")
    assert "gc-passed" in verdict.get("class") if word == "PASS" else "gc-failed" in verdict.get("class")
    assert _text(root.find("p[@class='gc-paths']")).endswith("device-plugin 1 (certified here), dra 1 <x>")
    assert "dra 1 &lt;x&gt;" in out  # escaped once
    assert auditpage.verdict_html({"exit_status": 7}, "pre-flight failed") == (
        '<p id="gc-verdict" class="gc-verdict gc-failed">Verdict: FAIL; exit status 7: pre-flight failed</p>')


def test_environment_html():
    fp = {"server_version": "v1.34.4", "plugin_image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
          "gpu_count": 16, "driver": None, "note": "<script>x</script>"}
    out = environment_html(fp, redact(CONFIG))
    root = ET.fromstring(out)
    assert root.get("id") == "gc-environment"
    # the fingerprint, the place the report moves pytest-html's own table to, and the config dump last
    assert [c.tag + (f"#{c.get('id')}" if c.get("id") else "") for c in root] == [
        "h3", "table#gc-fingerprint", "div#gc-runner", "h3", "pre#gc-config"]
    cells = {tr[0].text: tr[1].text for tr in root.find("table[@id='gc-fingerprint']/tbody")}
    assert cells["driver"] == "n/a" and cells["gpu_count"] == "16" and cells["note"] == "<script>x</script>"
    assert "<script>" not in out
    pre = root.find("pre").text
    assert "token: <redacted>" in pre and "hunter2" not in pre
    assert "  pullSecrets:\n    - <redacted>\n    - <redacted>" in pre and "ngc-pull" not in pre
    assert "tolerations:\n  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule" in pre
    assert '  exclude: ""' in pre and "  profiles: {}" in pre and "  enabled: true" in pre
    assert '  expectedGpus: auto' in pre


def test_yamlish_round_trips_through_yaml():
    yaml = pytest.importorskip("yaml")
    data = {**CONFIG, "odd": ["yes", "1.5", "a: b", " pad", "#x", "-", 3, 2.5, None, [], [1, [2, 3]], {"k": [{}]}]}
    assert yaml.safe_load("\n".join(auditpage.yamlish(data))) == data


def test_the_rollout_timeline_draws_windows_plugin_pods_devices_and_probes():
    from gpuconform.verdicts.rollout import ENDING, READY, Probe, Rollout, Sample

    r = Rollout("gpu-node-0", "nvidia/nvidia-device-plugin", "restart", 4, ("plugin-old",),
                samples=[Sample(0.0, 4, (("plugin-old", READY),)), Sample(1.0, 4, (("plugin-old", ENDING),)),
                         Sample(2.0, 2, (("plugin-new", READY),)), Sample(3.0, 4, (("plugin-new", READY),))],
                probes=[Probe("roll1", 0.5, "rejected", "UnexpectedAdmissionError"), Probe("roll2", 2.5, "ran")],
                new_pod="plugin-new")
    svg = auditpage.rollout_timeline_svg([{"node": "gpu-node-0", **r.figures(), "timeline": r.timeline()}])
    assert svg.startswith("<svg") and 'id="gc-rollout-timeline"' in svg
    assert svg.count('class="gc-rollout-down"') == 2  # the hand-over, then two devices short
    assert "plugin-old" in svg and "plugin-new" in svg and 'class="gc-rollout-offered"' in svg
    assert "roll1: rejected UnexpectedAdmissionError" in svg and "#d62728" in svg
    assert "no rollout rehearsal" in auditpage.rollout_timeline_svg([])
