"""Hostile and careless input, recorded, with the outcome each must give (issue 18: bad input gets a reason code,
never a silent pass or a traceback).

One table, `CASES`: what the input is, where it comes from, and its outcome (a reason code, or "config error
(exit 4)" for what is refused before any API call). Each case runs the suite's own code on the recorded input at
the edge where the suite reads it (config.load, counts, the kubelet reader in gpuconform/pytest_plugin/kubelet.py, the probe
parsers, the pod log reader against a local HTTP server, the baseline loader). The table in the docs' "bad-input"
section of docs/security.md lists the same ids and outcomes:
test_the_docs_table_lists_every_case keeps the two in step.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import yaml
from kubernetes import client as k8s
from recorded import probe_log

from gpuconform.pytest_plugin import options
from gpuconform.pytest_plugin.kubelet import Kubelet
from gpuconform import baseline, config as gconfig, counts, kube, verdicts
from gpuconform.reasons import Verdict, code_of

REPO = Path(__file__).resolve().parents[2]
CONFIG_ERROR = "config error (exit 4)"


@dataclass(frozen=True)
class Case:
    id: str
    input: str  # what it is
    source: str  # where it comes from
    outcome: str  # a reason code, CONFIG_ERROR, or "kept" (read without loss)
    must_say: str  # a fragment the message must carry (the cause, for the user)
    run: Callable[[Path], tuple[str, str]]  # tmp_path -> (outcome, message)


# ------------------------------------------------------------------ config (gpuconform/config.py)

def _config_file(content: str | bytes) -> Callable[[Path], tuple[str, str]]:
    def run(tmp: Path) -> tuple[str, str]:
        p = tmp / "gpuconform.yaml"
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return _load(lambda: gconfig.load(p, environ={}), str(p))
    return run


def _load(attempt: Callable[[], object], source: str) -> tuple[str, str]:
    try:
        attempt()
    except gconfig.ConfigError as e:
        msg = str(e)
        # one line naming where the bad value came from
        return (CONFIG_ERROR if "\n" not in msg and source in msg[:len(source) + 12] else "badly worded"), msg
    return "loaded", ""


def _directory(tmp: Path) -> tuple[str, str]:
    (tmp / "conf.d").mkdir()
    return _load(lambda: gconfig.load(tmp / "conf.d", environ={}), "config file")


def _env(var: str, value: str) -> Callable[[Path], tuple[str, str]]:
    return lambda tmp: _load(lambda: gconfig.load(None, environ={var: value}), f"environment variable {var}")


def _cli(key: str, value: str) -> Callable[[Path], tuple[str, str]]:
    return lambda tmp: _load(lambda: gconfig.load(None, {key: value}, environ={}), f"--gpuconform-set {key}")


# ~430 bytes; 10^5 strings once built, and every entry a mapping: the old check (a list of mappings) took it
ALIAS_BOMB = ("tolerations:\n"
              "- &a {key: a, operator: Exists, effect: [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]}\n"
              "- &b {key: b, operator: Exists, effect: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]}\n"
              "- &c {key: c, operator: Exists, effect: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]}\n"
              "- &d {key: d, operator: Exists, effect: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]}\n"
              "- {key: e, operator: Exists, effect: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]}\n")


# ------------------------------------------------------------------ cluster data

def _node(labels: dict, capacity: dict) -> dict:
    return {"metadata": {"name": "gpu-a", "labels": labels}, "status": {"capacity": capacity, "allocatable": capacity}}


def _count(labels: dict, capacity: dict) -> Callable[[Path], tuple[str, str]]:
    def run(tmp: Path) -> tuple[str, str]:
        node = _node(labels, capacity)
        found = verdicts.count_findings(node, counts.expectation(node, gconfig.Config({})))
        return (found[0].code, found[0].message) if found else ("passed", "")
    return run


class _FakeCluster:
    """kube.Cluster's kubelet_get, answering every node-proxy path with the recorded body."""

    def __init__(self, body: str):
        self.body = body

    def kubelet_get(self, node: str, path: str) -> str:
        return self.body


def _kubelet(path: str, body: bytes | str) -> Callable[[Path], tuple[str, str]]:
    """The kubelet reader (gpuconform/pytest_plugin/kubelet.py) given `body` through the node proxy, as a check reads it."""
    def run(tmp: Path) -> tuple[str, str]:
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body  # as kube.kubelet_get
        k = Kubelet(_FakeCluster(text), {"nodes/proxy": True})  # type: ignore[arg-type]
        try:
            k.config("gpu-a") if path == "configz" else k.metrics("gpu-a")
        except pytest.skip.Exception as e:
            return code_of(str(e.msg)) or "uncoded skip", str(e.msg)
        except Verdict as e:
            return e.code, e.message
        return "read", ""
    return run


def _numa(log: str) -> Callable[[Path], tuple[str, str]]:
    def run(tmp: Path) -> tuple[str, str]:
        found = verdicts.numa_findings("gpu-a", verdicts.alignment_from_log(log))
        return (found[0].code, found[0].message) if found else ("passed", "")
    return run


class _LogServer:
    """A local API server stand-in answering one pod's log with raw bytes."""

    def __init__(self, body: bytes):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


def _pod_log(body: bytes, kept: str) -> Callable[[Path], tuple[str, str]]:
    """The pod log read through the real client (kube.Cluster.pod_log, what every check's run.pod_log uses)."""
    def run(tmp: Path) -> tuple[str, str]:
        srv = _LogServer(body)
        try:
            cfg = k8s.Configuration()
            cfg.host, cfg.retries = srv.url, False
            api = kube.CountingApiClient(cfg, kube.RateLimiter(1000, 1000), request_timeout=5)
            cluster = kube.Cluster(api, k8s.CoreV1Api(api), None, "stub", 5)  # type: ignore[arg-type]
            text = cluster.pod_log("ns", "probe")
        finally:
            srv.httpd.shutdown()
            srv.httpd.server_close()
        return ("kept" if kept in text else "lost"), text
    return run


def _baseline(summary: dict) -> Callable[[Path], tuple[str, str]]:
    """The baseline loader (gpuconform/pytest_plugin/options.py, at pytest_configure: a UsageError is exit 4 before any API call)."""
    def run(tmp: Path) -> tuple[str, str]:
        p = tmp / "base.json"
        p.write_text(json.dumps(summary))
        try:
            options.load_baseline(str(p))
        except pytest.UsageError as e:
            return (CONFIG_ERROR if "\n" not in str(e) and str(p) in str(e) else "badly worded"), str(e)
        return "loaded", ""
    return run


GOOD_ROW = {"test": "tests/x.py::test_a[gpu-a]", "check": "test_a", "node": "gpu-a", "outcome": "passed",
            "reason": None, "message": "", "duration_s": 1.0}
NUMA_NODES = {"numa_0": "0-7", "numa_1": "8-15"}

CASES: list[Case] = [
    # config: refused before any API call, one line naming the file, variable or option
    Case("config-nan-duration", "`thresholds.startP99: .nan`", "config file", CONFIG_ERROR, "'thresholds.startP99'",
         _config_file("thresholds:\n  startP99: .nan\n")),
    Case("config-inf-timeout", "`timeouts.podStart: .inf`", "config file", CONFIG_ERROR, "'timeouts.podStart'",
         _config_file("timeouts:\n  podStart: .inf\n")),
    Case("config-inf-qps", "`limits.qps: .inf`", "config file", CONFIG_ERROR, "'limits.qps'",
         _config_file("limits:\n  qps: .inf\n")),
    Case("config-binary", "a PNG header instead of YAML", "config file", CONFIG_ERROR, "not UTF-8 text",
         _config_file(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")),
    Case("config-nul", "a NUL byte inside a value", "config file", CONFIG_ERROR, "not valid YAML",
         _config_file(b"vendor: nv\x00idia\n")),
    Case("config-directory", "a directory named as the config", "config file", CONFIG_ERROR, "is a directory",
         _directory),
    Case("config-deep-nesting", "5000 nested `[`", "config file", CONFIG_ERROR, "nested deeper than 20 levels",
         _config_file("tolerations: " + "[" * 5000 + "]" * 5000 + "\n")),
    Case("config-alias-bomb", "430 bytes of nested YAML aliases in tolerations", "config file", CONFIG_ERROR,
         "anchors and aliases", _config_file(ALIAS_BOMB)),
    Case("config-alias-env", "a YAML alias in a list value", "environment variable", CONFIG_ERROR,
         "anchors and aliases", _env("GPUCONFORM_TOLERATIONS", "[&t {operator: Exists}, *t, *t]")),
    Case("config-oversized", "a 2 MiB file", "config file", CONFIG_ERROR, "larger than 1048576 bytes",
         _config_file("# " + "x" * (2 << 20) + "\n")),
    Case("config-toleration-operator", "toleration `operator: exists`", "config file", CONFIG_ERROR,
         "entry 0 is not a Kubernetes toleration: operator must be Exists or Equal",
         _config_file("tolerations:\n- key: nvidia.com/gpu\n  operator: exists\n")),
    Case("config-toleration-seconds", "`tolerationSeconds` with effect NoSchedule", "command line", CONFIG_ERROR,
         "only allowed with effect NoExecute",
         _cli("tolerations", "[{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 60}]")),
    Case("config-toleration-type", "a toleration that is a string", "environment variable", CONFIG_ERROR,
         "entry 1 is not a Kubernetes toleration: must be a mapping",
         _env("GPUCONFORM_TOLERATIONS", "[{operator: Exists}, nvidia.com/gpu]")),
    # node objects and labels
    Case("gpu-count-not-integer", "`nvidia.com/gpu.count: eight`", "node label (GFD)", "ERROR-MALFORMED-DATA",
         "nvidia.com/gpu.count='eight' (malformed", _count({"nvidia.com/gpu.count": "eight"},
                                                              {"nvidia.com/gpu": "8"})),
    Case("gpu-count-underscore", "`nvidia.com/gpu.count: 4_0` (Python reads it as 40)", "node label (GFD)",
         "ERROR-MALFORMED-DATA", "(malformed", _count({"nvidia.com/gpu.count": "4_0"}, {"nvidia.com/gpu": "40"})),
    Case("gpu-count-missing", "no `nvidia.com/gpu.count`", "node label (GFD)", "NOTCHECKED-OPTIONAL",
         "nvidia.com/gpu.count (missing)", _count({}, {"nvidia.com/gpu": "8"})),
    Case("capacity-1k", "capacity `1k` (1000 devices, the API server's canonical form)", "node status", "passed", "",
         _count({"nvidia.com/gpu.count": "1000"}, {"nvidia.com/gpu": "1k"})),
    # the kubelet through the node proxy
    Case("metrics-html", "an HTML error page served with 200", "kubelet /metrics", "ERROR-MALFORMED-DATA",
         "no Prometheus sample", _kubelet("metrics", "<!DOCTYPE html>\n<html><body>502 Bad Gateway</body></html>\n")),
    Case("metrics-binary", "binary junk", "kubelet /metrics", "ERROR-MALFORMED-DATA", "malformed",
         _kubelet("metrics", bytes(range(256)) * 4)),
    Case("metrics-bad-le", 'a bucket with `le="abc"`', "kubelet /metrics", "ERROR-MALFORMED-DATA",
         "le='abc', not a number",
         _kubelet("metrics", 'kubelet_device_plugin_alloc_duration_seconds_bucket{le="abc"} 3\n')),
    Case("metrics-nan-counter", "`kubelet_device_plugin_registration_total NaN`", "kubelet /metrics",
         "ERROR-MALFORMED-DATA", "not a count",
         _kubelet("metrics", 'kubelet_device_plugin_registration_total{resource_name="nvidia.com/gpu"} NaN\n')),
    Case("metrics-nan-start", "`process_start_time_seconds NaN`", "kubelet /metrics", "ERROR-MALFORMED-DATA",
         "not a count", _kubelet("metrics", "process_start_time_seconds NaN\n")),
    Case("configz-not-json", "a configz that is not JSON", "kubelet /configz", "ERROR-MALFORMED-DATA", "not JSON",
         _kubelet("configz", "<html>proxy error</html>")),
    Case("configz-list", "a configz that is a JSON list", "kubelet /configz", "ERROR-MALFORMED-DATA",
         "no kubeletconfig object", _kubelet("configz", "[1, 2]")),
    # probe pods' output
    Case("cpulist-bomb", "`Cpus_allowed_list: 0-4000000000`", "probe pod log", "ERROR-MALFORMED-DATA",
         "past CPU 65535", _numa(probe_log(pci_numa="0000:17:00.0 0", cpus="Cpus_allowed_list:\t0-4000000000",
                                           **NUMA_NODES))),
    Case("cpulist-garbage", "a NUMA node cpulist `0-3,x`", "probe pod log", "ERROR-MALFORMED-DATA",
         "'x' is not a CPU", _numa(probe_log(pci_numa="0000:17:00.0 0", cpus="Cpus_allowed_list:\t0",
                                             numa_0="0-3,x", numa_1="8-15"))),
    Case("numa-no-cpus", "a NUMA probe with no Cpus_allowed_list", "probe pod log", "NOTCHECKED-OPTIONAL",
         "no Cpus_allowed_list", _numa(probe_log(pci_numa="0000:17:00.0 0", **NUMA_NODES))),
    Case("numa-no-node-cpulists", "a NUMA probe with no `numa N` sections", "probe pod log", "NOTCHECKED-OPTIONAL",
         "no NUMA node cpulists", _numa(probe_log(pci_numa="0000:17:00.0 0", cpus="Cpus_allowed_list:\t0-1"))),
    Case("pod-log-invalid-utf8", "a log with byte 0xFF and ESC sequences", "pod log", "kept", "Test PASSED",
         _pod_log(b"\x1b[2J\x1b]0;title\x07start \xff\xfe end\nTest PASSED\n", "Test PASSED")),
    # the previous run's summary
    Case("baseline-missing-test", "a baseline result without `test`", "--gpuconform-baseline", CONFIG_ERROR,
         "results[1]: no 'test'",
         _baseline({"schema": baseline.SCHEMA, "results": [GOOD_ROW, {k: v for k, v in GOOD_ROW.items()
                                                                      if k != "test"}]})),
    Case("baseline-latency-no-node", "a baseline latency entry without `node`", "--gpuconform-baseline",
         CONFIG_ERROR, "latency[0]: no 'node'",
         _baseline({"schema": baseline.SCHEMA, "results": [GOOD_ROW], "latency": [{"pods": []}]})),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_gets_its_outcome(case: Case, tmp_path: Path):
    outcome, message = case.run(tmp_path)
    assert outcome == case.outcome, message
    assert case.must_say in message, message
    assert len(message) < 20_000  # a cause, not the input echoed back


def test_no_case_is_a_silent_pass():
    """Only the well-formed-but-unusual inputs may pass; every other case is a named non-pass."""
    assert {c.id for c in CASES if c.outcome in ("passed", "kept")} == {"capacity-1k", "pod-log-invalid-utf8"}


def test_a_malformed_kubelet_read_at_start_is_logged_not_raised(monkeypatch):
    """The start-of-run read (registration counters) is evidence for later: a malformed page is said, not fatal."""
    said: list[str] = []
    monkeypatch.setattr("gpuconform.pytest_plugin.kubelet.log", said.append)
    k = Kubelet(_FakeCluster("<html>no</html>"), {"nodes/proxy": True})  # type: ignore[arg-type]
    k.read_start_counters(["gpu-a"], lambda n: True, lambda n: ["nvidia.com/gpu"])
    assert k.registration_before == {} and k.metrics_before == {}
    assert len(said) == 1 and "gpu-a at start are malformed: no Prometheus sample" in said[0]


def test_the_baseline_comparison_names_a_malformed_field_rather_than_crashing():
    bad = {"schema": baseline.SCHEMA, "results": [{"outcome": "passed"}]}
    good = {"schema": baseline.SCHEMA, "results": [GOOD_ROW]}
    with pytest.raises(ValueError, match=r"previous summary: results\[0\]: no 'test'"):
        baseline.compare(bad, good)
    assert baseline.problems(good) == [] and baseline.problems([1]) == ["a JSON list, not a summary object"]


def test_the_docs_table_lists_every_case():
    """docs/security.md has one row per case id with its outcome."""
    docs = [REPO / "docs" / "security.md"]
    text = next(p.read_text() for p in docs if "hostile-input cases" in p.read_text())
    # input | where it comes from | outcome | test (test_hostile_input.py[<case id>])
    row = re.compile(r"^\|[^|\n]*\|[^|\n]*\|([^|\n]*)\|[^|\n]*test_hostile_input\.py\[([a-z0-9-]+)\][^|\n]*\|$", re.M)
    rows = {m.group(2): m.group(1).strip() for m in row.finditer(text)}
    for c in CASES:
        assert c.id in rows, f"{c.id} missing from the docs table"
        assert c.outcome in rows[c.id], f"{c.id}: docs say {rows[c.id]!r}, the test {c.outcome!r}"
    assert set(rows) == {c.id for c in CASES}


def test_the_alias_bomb_really_is_one():
    """Read without the guard, its ~430 bytes build 10^5 strings, and the old check (a list of mappings) took it."""
    assert len(ALIAS_BOMB) < 500

    def size(v) -> int:
        return sum(size(x) for x in v) if isinstance(v, list) else sum(size(x) for x in v.values()) \
            if isinstance(v, dict) else 1

    tolerations = yaml.safe_load(ALIAS_BOMB)["tolerations"]
    assert size(tolerations) > 10**5 and all(isinstance(t, dict) for t in tolerations)
