"""The one redaction rule in a child pytest (issue 18): the client's bearer token never reaches the terminal or
JUnit, even through `--showlocals` on a raw kubernetes client exception (its frames hold the token in
header_params); a CI variable with credentials never reaches the HTML report's environment table; configured pull
secrets never reach the JSON summary.

No cluster: the child's kubeconfig points at 127.0.0.1:9, where nothing listens, so the raw client call fails at
once with the token in its frames' locals.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cr3t-static-token-0123456789"  # opaque: no pattern knows its shape, only the rule's memory of it
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

RAW_CALL = '''
from gpuconform import kube


def test_raw_client_exception(record_property):
    cluster = kube.connect("kc.yaml", None, 50, 100, 0.3)
    record_property("server said", "Authorization: Bearer {token}")
    api_client = cluster.api  # a local holding the Configuration, and with it the token
    cluster.core.list_namespace()
'''


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\njunit_family = xunit1\n")  # as the suite's own pyproject.toml
    pytester.makefile(".yaml", kc=(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        f"users: [{{name: u, user: {{token: {TOKEN}}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "kc.yaml"))

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider", *args, timeout=120)

    return run


def test_showlocals_on_a_raw_client_exception_never_prints_the_token(pytester: pytest.Pytester, child):
    pytester.makepyfile(test_raw=RAW_CALL.format(token=TOKEN))
    res = child("--showlocals", "-ra", "--junitxml", "junit.xml")
    res.assert_outcomes(failed=1)
    out = res.stdout.str() + res.stderr.str()
    junit = (pytester.path / "junit.xml").read_text()
    assert "header_params" in out and "'authorization': '<redacted>'" in out  # the locals are shown, scrubbed
    assert TOKEN not in out, [ln for ln in out.splitlines() if TOKEN in ln][:3]
    assert TOKEN not in junit and "&lt;redacted&gt;" in junit
    res.stdout.fnmatch_lines(["FAILED test_raw.py::test_raw_client_exception - *"])  # the crash line is kept


def test_ci_credentials_and_pull_secrets_stay_out_of_the_html_and_summary(pytester: pytest.Pytester, child,
                                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GIT_URL", f"https://bot:{GHP}@github.com/org/repo.git")  # pytest-metadata copies it
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    res = child("--html", "r.html", "--self-contained-html", "--gpuconform-summary", "s.json",
                "--gpuconform-set", "images.pullSecrets=[ngc-regcred]")
    res.assert_outcomes(passed=1)
    page = (pytester.path / "r.html").read_text()
    summary = (pytester.path / "s.json").read_text()
    assert "github.com/org/repo.git" in page and GHP not in page and "bot:" not in page
    assert "ngc-regcred" not in summary and "ngc-regcred" not in page
