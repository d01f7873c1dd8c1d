"""gpuconform.pytest_plugin.plugin end to end in a child pytest: config errors are usage errors (exit 4) before any cluster
call, and verdict exceptions / coded skips become outcomes and reason codes in the JSON summary.

None of these tests needs a cluster: the child tests never request `run`, `gpu_node` or `evidence`, and the
kubeconfig points at a file that does not exist, so an accidental cluster call would fail loudly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from gpuconform.pytest_plugin import html_report

# Declared here, not in testing/plugin/conftest.py: pytest refuses `pytest_plugins` in a non-root conftest when
# it is found during collection (e.g. `pytest testing`), while a test module may load a plugin.
pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "no-such-kubeconfig"))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)  # the child's config must come from the test alone
    pytester.makeini("[pytest]\n")  # keep the child's rootdir in its tmp dir, away from the repo's config

    def runpytest(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider", *args, timeout=60)

    return runpytest


SCHEMA = json.loads((REPO / "docs" / "summary.schema.json").read_text())


def summary(pytester: pytest.Pytester, name: str = "out.json") -> dict:
    data = json.loads((pytester.path / name).read_text())
    jsonschema.validate(data, SCHEMA)  # docs/summary.schema.json is the published contract
    return data


def by_check(data: dict) -> dict[str, dict]:
    return {r["check"]: r for r in data["results"]}


def test_unknown_config_key_is_usage_error(pytester: pytest.Pytester, child):
    cfg = pytester.makefile(".yaml", gpuconform="thresholds:\n  startP98: 5s\n")
    pytester.makepyfile(test_never="def test_never():\n    raise SystemExit('collected although config is bad')\n")
    res = child("--gpuconform-config", str(cfg))
    assert res.ret == 4
    err = [ln for ln in res.stderr.lines if "gpuconform config:" in ln]
    assert len(err) == 1, res.stderr.str()
    assert str(cfg) in err[0] and "'thresholds.startP98'" in err[0]
    out = res.stdout.str() + res.stderr.str()
    assert "collected although config is bad" not in out
    assert "pre-flight" not in out and "kubeconfig" not in out.lower() and "Traceback" not in out


def test_bad_config_from_env_is_usage_error(pytester: pytest.Pytester, child, monkeypatch):
    cfg = pytester.makefile(".yaml", envcfg="limits:\n  maxGpusPerNode: 0\n")
    monkeypatch.setenv("GPUCONFORM_CONFIG", str(cfg))
    res = child()
    assert res.ret == 4
    res.stderr.fnmatch_lines([f"*gpuconform config: {cfg}: 'limits.maxGpusPerNode' must be an integer >= 1*"])


def test_unknown_set_key_is_usage_error(pytester: pytest.Pytester, child):
    res = child("--gpuconform-set", "nope=1")
    assert res.ret == 4
    res.stderr.fnmatch_lines(["*gpuconform config: --gpuconform-set nope=...: unknown key 'nope'*"])


def test_set_without_equals_is_usage_error(pytester: pytest.Pytester, child):
    res = child("--gpuconform-set", "thresholds.startP99")
    assert res.ret == 4
    res.stderr.fnmatch_lines(["*--gpuconform-set 'thresholds.startP99': expected KEY=VALUE*"])


def test_set_override_shows_in_header(pytester: pytest.Pytester, child):
    pytester.makepyfile(test_ok="from gpuconform.pytest_plugin.plugin import conformance\n\n\ndef test_ok(request):\n    assert conformance(request.config).cfg.get('thresholds.startP99') == '8s'\n")
    res = child("--gpuconform-set", "thresholds.startP99=8s", "--gpuconform-summary", "out.json")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*gpuconform overrides: thresholds.startP99 (--gpuconform-set thresholds.startP99)*"])
    assert summary(pytester)["exit_status"] == 0


VERDICTS = '''
import pytest
from gpuconform.reasons import EnvironmentProblem, Violation, skip_reason


def test_unhealthy():
    raise Violation("FAIL-F03-UNHEALTHY-DEVICES", "node x: 1 of 4 nvidia.com/gpu devices are Unhealthy")


def test_api():
    raise EnvironmentProblem("ERROR-API", "list nodes: 503 Service Unavailable")


def test_busy():
    pytest.skip(skip_reason("SKIP-F07-BUSY", "node x has 0 free GPU(s) of 4"))


def test_plain_assert():
    assert 1 == 2


def test_fine():
    pass
'''


def test_verdicts_become_outcomes_and_reasons(pytester: pytest.Pytester, child):
    """One child run covers (c) Violation -> failed, (d) EnvironmentProblem -> error, (e) coded skip."""
    pytester.makepyfile(test_verdicts=VERDICTS)
    res = child("-rA", "--gpuconform-summary", "out.json")
    data = summary(pytester)
    rows = by_check(data)

    unhealthy = rows["test_unhealthy"]
    assert unhealthy["outcome"] == "failed" and unhealthy["reason"] == "FAIL-F03-UNHEALTHY-DEVICES"
    assert unhealthy["message"] == "node x: 1 of 4 nvidia.com/gpu devices are Unhealthy"
    out = res.stdout.str()
    assert "[FAIL-F03-UNHEALTHY-DEVICES] node x: 1 of 4" in out and "fix: Inspect the plugin log" in out

    api = rows["test_api"]
    assert api["outcome"] == "error" and api["reason"] == "ERROR-API" and "503" in api["message"]
    res.stdout.fnmatch_lines(["ERROR*test_verdicts.py::test_api*"])

    busy = rows["test_busy"]
    assert busy["outcome"] == "skipped" and busy["reason"] == "SKIP-F07-BUSY"
    assert busy["message"].endswith("[SKIP-F07-BUSY] node x has 0 free GPU(s) of 4")

    plain = rows["test_plain_assert"]
    assert plain["outcome"] == "failed" and plain["reason"] is None and "assert 1 == 2" in plain["message"]
    assert rows["test_fine"]["outcome"] == "passed" and rows["test_fine"]["reason"] is None

    assert res.ret == 1 and data["exit_status"] == 1
    assert len(data["results"]) == 5
    assert "run_id" not in data  # no run was started: no cluster was contacted
    assert all(r["node"] is None for r in data["results"])
    # pytest's own counts agree with the summary (the ERROR-API verdict is an error, not a failure)
    res.assert_outcomes(passed=1, failed=2, skipped=1, errors=1)


def test_skip_message_has_no_pytest_prefix(pytester: pytest.Pytester, child):
    pytester.makepyfile(test_skip='''
import pytest
from gpuconform.reasons import skip_reason


def test_busy():
    pytest.skip(skip_reason("SKIP-F07-BUSY", "node x has 0 free GPU(s) of 4"))
''')
    child("--gpuconform-summary", "out.json").assert_outcomes(skipped=1)
    assert by_check(summary(pytester))["test_busy"]["message"] == "[SKIP-F07-BUSY] node x has 0 free GPU(s) of 4"


def test_environment_problem_in_fixture_is_setup_error(pytester: pytest.Pytester, child):
    pytester.makepyfile(test_fix='''
import pytest
from gpuconform.reasons import EnvironmentProblem


@pytest.fixture
def broken():
    raise EnvironmentProblem("ERROR-RBAC", "cannot list pods in kube-system")


def test_uses(broken):
    pass
''')
    res = child("--gpuconform-summary", "out.json")
    res.assert_outcomes(errors=1)
    r = by_check(summary(pytester))["test_uses"]
    assert r["outcome"] == "error" and r["reason"] == "ERROR-RBAC"


def test_unreachable_cluster_ends_the_session_with_one_line_and_exit_7(pytester: pytest.Pytester, child):
    pytester.makepyfile(test_node="def test_per_node(gpu_node):\n    pass\n\n"
                                  "def test_other(run):\n    pass\n")
    res = child("--gpuconform-summary", "out.json")
    assert res.ret == 7
    out = res.stdout.str() + res.stderr.str()
    lines = [ln for ln in out.splitlines() if "gpuconform pre-flight failed: [ERROR-API]" in ln]
    assert len(lines) == 1, out
    assert "Traceback" not in out and "ERROR collecting" not in out
    assert summary(pytester)["exit_status"] == 7


@pytest.mark.parametrize("content,expect", [
    ('{"schema": "junit/v0"}', "expected schema gpuconform.summary/v1, found 'junit/v0'"),
    ("not json", "cannot read a JSON summary"),
])
def test_bad_baseline_is_one_line_usage_error(pytester: pytest.Pytester, child, content, expect):
    base = pytester.makefile(".json", base=content)
    pytester.makepyfile(test_never="def test_never():\n    raise SystemExit('collected although the baseline is bad')\n")
    res = child("--gpuconform-baseline", str(base))
    assert res.ret == 4
    lines = [ln for ln in res.stderr.lines if "--gpuconform-baseline" in ln]
    assert len(lines) == 1 and expect in lines[0] and str(base) in lines[0], res.stderr.str()
    assert "Traceback" not in res.stdout.str() + res.stderr.str()


def test_html_report_carries_audit_sections_without_a_cluster(pytester: pytest.Pytester, child):
    """Without a run the page still gets the audit header, matrix and latency placeholders (never a crash)."""
    pytester.makepyfile(test_verdicts=VERDICTS)
    child("--html", "r.html", "--self-contained-html", "--gpuconform-summary", "out.json")
    html = (pytester.path / "r.html").read_text()
    for marker in ('id="gc-audit"', 'id="gc-verdict"', 'id="gc-matrix"', html_report.TITLE):
        assert marker in html, marker
