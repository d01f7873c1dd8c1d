"""report: HTML fragments (outcome matrix, latency plots and table, environment) and redact."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

import pytest

from gpuconform import report
from gpuconform.report import (environment_html, is_secret_key, latency_cdf_svg, matrix_html, outcome_counts,
                               percentile_table_html, phase_breakdown_svg, redact)

SVG = "{http://www.w3.org/2000/svg}"
THRESHOLDS = {"scheduleP99": 5.0, "startP50": 5.0, "startP99": 10.0, "allocateP99": 1.0}


def _result(check, node, outcome, reason=None, message="", module="tests/allocation/test_counts.py"):
    test = f"{module}::{check}" + (f"[{node}]" if node else "")
    return {"test": test, "check": check, "node": node, "outcome": outcome, "reason": reason, "message": message,
            "duration_s": 1.23}


RESULTS = [
    _result("test_allocatable_matches_hardware", "gpu-node-0", "passed", message="8 GPUs advertised, 8 present"),
    _result("test_allocatable_matches_hardware", "gpu-node-1", "failed", "GPU-F04-OVERADVERTISED",
            "16 GPUs advertised, 8 present (sharing.replicas=2 not expected)"),
    _result("test_gpu_pod_start_latency_is_under_thresholds", "gpu-node-0", "passed",
            module="tests/latency/test_latency.py"),
    _result("test_gpu_pod_start_latency_is_under_thresholds", "gpu-node-1", "error", "ENV-POD-START-TIMEOUT",
            "lat-s0-gpu-node-1 not started within timeouts.podStart=120s", module="tests/latency/test_latency.py"),
    _result("test_plugin_daemonset_ready", None, "passed", module="tests/registration/test_registration.py"),
    _result("test_kubelet_socket_present", "gpu-node-0", "skipped", "ENV-NOT-CHECKED",
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


def test_matrix_one_row_per_check_and_cell_classes():
    out = matrix_html(RESULTS, ["gpu-node-0", "gpu-node-1"])
    table = ET.fromstring(out)  # the fragment is well-formed
    assert table.get("id") == "gc-matrix"
    assert [th.text for th in table.find("thead/tr")] == ["check", "gpu-node-0", "gpu-node-1", "cluster"]
    rows = {tr[0].text: [td.get("class") for td in tr[1:]] for tr in table.find("tbody")}
    assert rows == {
        "test_allocatable_matches_hardware": ["gc-passed", "gc-failed", "gc-none"],
        "test_gpu_pod_start_latency_is_under_thresholds": ["gc-passed", "gc-error", "gc-none"],
        "test_plugin_daemonset_ready": ["gc-none", "gc-none", "gc-passed"],
        "test_kubelet_socket_present": ["gc-skipped", "gc-none", "gc-none"],
    }
    failed = table.find("tbody")[0][2]
    assert failed.get("title") == "16 GPUs advertised, 8 present (sharing.replicas=2 not expected)"
    assert "GPU-F04-OVERADVERTISED" in "".join(failed.itertext())


def test_matrix_without_cluster_results_has_no_cluster_column_and_keeps_unlisted_nodes():
    rs = [_result("test_a", "gpu-node-0", "passed"), _result("test_a", "gpu-node-9", "failed", "GPU-F02-CAPACITY-ZERO")]
    table = ET.fromstring(matrix_html(rs, ["gpu-node-0"]))
    assert [th.text for th in table.find("thead/tr")] == ["check", "gpu-node-0", "gpu-node-9"]


def test_matrix_cell_with_several_results_shows_the_worst():
    rs = [_result("test_mig", "gpu-node-0", "passed", message="ok"),
          {**_result("test_mig", "gpu-node-0", "failed", "GPU-F04-UNDERADVERTISED", "1 of 7 missing"),
           "test": "tests/x.py::test_mig[gpu-node-0-mixed]"}]
    td = ET.fromstring(matrix_html(rs, ["gpu-node-0"])).find("tbody/tr")[1]
    assert td.get("class") == "gc-failed"
    assert td.get("title") == "passed: ok\nfailed: 1 of 7 missing"


def test_matrix_escapes_messages_and_names():
    rs = [_result("test_<b>", "gpu-node-0", "failed", "GPU-F01-NOT-REGISTERED",
                  'plugin log: <script>alert("x")</script> & more')]
    out = matrix_html(rs, ["gpu-node-0"])
    assert "<script>" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in out
    assert ET.fromstring(out).find("tbody/tr")[1].get("title") == 'plugin log: <script>alert("x")</script> & more'


def test_matrix_empty():
    assert "no results" in matrix_html([], ["gpu-node-0"])


def test_style_is_scoped():
    selectors = re.findall(r"^([^{}\n]+)\{", report.STYLE, re.M)
    assert selectors and all(s.startswith(".gc-") for sel in selectors for s in sel.split(","))
    for outcome in ("passed", "failed", "error", "skipped", "none"):
        assert f".gc-{outcome}{{" in report.STYLE


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
    assert out["images"]["pullSecrets"] == ["ngc-pull", "mirror"]  # Secret names
    assert out["tolerations"][0]["key"] == "nvidia.com/gpu"  # a taint key
    assert out["resourceName"] == "nvidia.com/gpu"
    assert {k: out[k] for k in CONFIG if k != "auth"} == {k: CONFIG[k] for k in CONFIG if k != "auth"}
    out["images"]["pullSecrets"].append("x")
    assert CONFIG["images"]["pullSecrets"] == ["ngc-pull", "mirror"]  # a deep copy


@pytest.mark.parametrize("key,secret", [
    ("token", True), ("tokens", True), ("APIKey", True), ("privateKeys", True), ("imagePullSecrets", False),
    ("pullSecrets", False), ("resourceName", False), ("key", False), ("tokenizer", False), ("passwd", True),
    ("sshKeyRef", False), ("caCert", True),
])
def test_is_secret_key(key, secret):
    assert is_secret_key(key) is secret


def test_redact_custom_words():
    assert redact({"session": "x", "token": "y"}, secret_keys=("session",)) == {"session": "<redacted>", "token": "y"}


def test_environment_html():
    fp = {"server_version": "v1.34.4", "plugin_image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
          "gpu_count": 16, "driver": None, "note": "<script>x</script>"}
    out = environment_html(fp, redact(CONFIG))
    root = ET.fromstring(out)
    assert root.get("id") == "gc-environment"
    cells = {tr[0].text: tr[1].text for tr in root.find("table[@id='gc-fingerprint']/tbody")}
    assert cells["driver"] == "n/a" and cells["gpu_count"] == "16" and cells["note"] == "<script>x</script>"
    assert "<script>" not in out
    pre = root.find("pre").text
    assert "token: <redacted>" in pre and "hunter2" not in pre
    assert "  pullSecrets:\n    - ngc-pull\n    - mirror" in pre
    assert "tolerations:\n  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule" in pre
    assert '  exclude: ""' in pre and "  profiles: {}" in pre and "  enabled: true" in pre
    assert '  expectedGpus: auto' in pre


def test_yamlish_round_trips_through_yaml():
    yaml = pytest.importorskip("yaml")
    data = {**CONFIG, "odd": ["yes", "1.5", "a: b", " pad", "#x", "-", 3, 2.5, None, [], [1, [2, 3]], {"k": [{}]}]}
    assert yaml.safe_load("\n".join(report.yamlish(data))) == data
