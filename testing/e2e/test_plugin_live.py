"""The pytest plugin against the local test bed, in a child pytest: evidence is collected only for failing tests,
keepNamespaceOnFailure keeps the run namespace, and Ctrl-C / SIGTERM delete everything the run created.

The child tests are tiny (one 0-GPU pod each) so these stay quick. Needs `make cluster-up`.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest
from bedtools import KUBECONFIG, ROOT, kubectl

pytest_plugins = ["pytester"]

CONFIG = ROOT / "localcluster" / "gpuconform.yaml"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]

CHILD_TESTS = '''
import pathlib, time
from gpuconform.pytest_plugin.handover import raise_for


def probe(check, tag, command):
    m = check.probe_pod(f"live-{tag}", "live", 0, deadline=120)
    m["metadata"]["name"] = f"live-{tag}"
    m["spec"]["containers"][0]["command"] = ["sh", "-c", command]
    return check.start(m)


def test_passes(check):
    check.wait_done(probe(check, "ok", "echo hello-from-ok"))


def test_fails(check):
    check.wait_done(probe(check, "bad", "echo hello-from-bad"))
    raise_for("FAIL-F04-OVERADVERTISED", "deliberate failure from the child test")


def test_slow(check):
    m = check.probe_pod("live-slow", "live", 0, deadline=120)
    m["metadata"]["name"] = "live-slow"
    c = dict(m["spec"]["containers"][0], name="init", command=["sleep", "17"])
    m["spec"]["initContainers"] = [c]
    m["spec"]["containers"][0]["command"] = ["true"]
    check.wait_done(check.start(m))


def test_hangs(check):
    name = probe(check, "hang", "sleep 300")
    check.wait_running(name)
    pathlib.Path("pod-running").write_text(name)
    time.sleep(300)
'''

CHILD_CONFTEST = '''
import json, pathlib
SEEN = {}


def pytest_runtest_logreport(report):
    if report.when == "call":
        SEEN[report.nodeid.split("::")[-1]] = sorted(k for k, _ in report.sections if k.startswith("evidence"))


def pytest_sessionfinish(session):
    pathlib.Path("sections.json").write_text(json.dumps(SEEN))
'''


def run_namespaces(run_id: str) -> list[str]:
    """Namespaces of one run that are not already being deleted."""
    items = json.loads(kubectl("get", "namespaces", "-l", f"gpuconform.dev/run={run_id}", "-o", "json"))["items"]
    return [n["metadata"]["name"] for n in items if not n["metadata"].get("deletionTimestamp")]


@pytest.fixture
def child(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_child=CHILD_TESTS)
    pytester.makeconftest(CHILD_CONFTEST)
    run_id = f"live-{secrets.token_hex(3)}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(KUBECONFIG)}
    argv = [sys.executable, "-m", "pytest", "-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider",
            "--gpuconform-config", str(CONFIG), "--gpuconform-run-id", run_id,
            "--gpuconform-summary", "summary.json"]
    yield pytester.path, run_id, env, argv
    if run_namespaces(run_id):  # never leave a kept namespace behind
        kubectl("delete", "namespace", "-l", f"gpuconform.dev/run={run_id}", "--wait=false")


def test_evidence_is_collected_only_for_the_failing_test(child):
    path, run_id, env, argv = child
    out = subprocess.run([*argv, "-k", "passes or fails", "--html", "report.html", "--self-contained-html"],
                         cwd=path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    seen = json.loads((path / "sections.json").read_text())
    assert seen["test_passes[gpu-node-0]"] == [], "a passing test must carry no evidence"
    failing = seen["test_fails[gpu-node-0]"]
    assert "evidence: log live-bad" in failing and "evidence: events live-bad" in failing, failing
    assert any(k.startswith("evidence: plugin log on gpu-node-0") for k in failing), failing
    html = (path / "report.html").read_text()
    assert "hello-from-bad" in html and "hello-from-ok" not in html
    assert run_namespaces(run_id) == [], "the run namespace must be deleted by default"


def test_keep_namespace_on_failure_keeps_the_run_namespace(child):
    path, run_id, env, argv = child
    out = subprocess.run([*argv, "-k", "fails", "--gpuconform-set", "keepNamespaceOnFailure=true"],
                         cwd=path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    assert "keeping namespace(s)" in out.stderr
    kept = run_namespaces(run_id)
    assert len(kept) == 1, kept
    pods = json.loads(kubectl("get", "pods", "-n", kept[0], "-o", "json"))["items"]
    assert [p["metadata"]["name"] for p in pods] == ["live-bad"], "the failing test's pod is kept for inspection"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupted_run_deletes_what_it_created_within_25s(child, sig):
    path, run_id, env, argv = child
    proc = subprocess.Popen([*argv, "-k", "hangs"], cwd=path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 120
        while not (path / "pod-running").exists():
            assert proc.poll() is None and time.monotonic() < end, "child never got its pod running"
            time.sleep(0.5)
        assert run_namespaces(run_id), "the run namespace should exist while the run is going"
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=25)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, out[-3000:]
    assert took <= 25, f"cleanup took {took:.1f}s"
    assert run_namespaces(run_id) == [], f"namespace(s) still active after {sig.name}:\n{out[-3000:]}"


def test_long_waits_print_a_live_progress_line_naming_node_pod_and_state(child):
    path, run_id, env, argv = child
    out = subprocess.run([*argv, "-k", "slow"], cwd=path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if "not done after" in ln]
    assert len(lines) == 1, out.stderr
    assert "gpu-node-0" in lines[0] and "live-slow" in lines[0] and "Pending" in lines[0], lines[0]
