"""gpuconform.pytest_plugin.html_report in a child pytest with pytest-html: the pool summary leads the audit record, the matrix has a row
per node that did not pass everything, and above gpuconform.auditpage.ROWS_DRAWN_UP_TO results the page opens
with pytest-html's passed rows not drawn (still in the page and counted).

No cluster: the child tests record their node with record_property, as the suite's checks do through the plugin.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

from gpuconform.auditpage import ROWS_DRAWN_UP_TO

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]

NODES = '''
import pytest
from gpuconform.reasons import Violation

NODES = ["gpu-node-%d" % i for i in range({n})]


@pytest.mark.parametrize("node", NODES)
def test_counts(node, record_property):
    record_property("node", node)
    if node in {bad}:
        raise Violation("FAIL-F04-OVERADVERTISED", node + ": 16 advertised, 8 present")
'''


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "no-such-kubeconfig"))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\n")

    def run(n: int, bad: set[str]) -> str:
        pytester.makepyfile(test_nodes=NODES.format(n=n, bad=sorted(bad)))
        pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider", "-q", "--html", "r.html",
                                      "--self-contained-html", timeout=120)
        return (pytester.path / "r.html").read_text()

    return run


def _blob(page: str) -> dict:
    return json.loads(html.unescape(re.search(r'data-jsonblob="(.*?)"', page, re.S).group(1)))


def test_verdict_first_then_pools_and_matrix_and_the_config_last(child):
    page = child(4, {"gpu-node-2"})
    assert "<h1 id=\"title\">gpuconform audit report: GPU allocation conformance of device plugins and DRA drivers" in page
    audit = page.index('id="gc-audit"')
    assert audit < page.index('id="gc-verdict"') < page.index('id="gc-pools"')
    assert "Verdict: FAIL; exit status 1: a check failed or errored" in page
    assert page.index('id="gc-pools"') < page.index('class="gc-run"') < page.index('id="gc-matrix"')
    # the environment and the config dump come after everything else: in the postfix, moved below the results
    # table (with pytest-html's own environment table) once the page is parsed
    postfix = page.index('class="additional-summary postfix"')
    assert postfix < page.index('id="gc-environment"') < page.index('id="gc-runner"') < page.index('id="gc-config"')
    assert page.index('id="gc-matrix"') < postfix and "table.after(section)" in page
    matrix = page[page.index('id="gc-matrix"'):]
    matrix = matrix[:matrix.index("</table>")]
    assert re.search(r'<tbody><tr><th class="gc-node">gpu-node-2</th><td class="gc-failed"', matrix)
    assert "3 nodes, all passed" in matrix and "gpu-node-0, gpu-node-1, gpu-node-3" in matrix
    assert 'id="gc-undrawn"' not in page


def test_many_passed_results_are_drawn_on_demand(child):
    n = ROWS_DRAWN_UP_TO + 2
    page = child(n, {"gpu-node-7"})
    assert 'id="gc-undrawn"' in page and f"{n - 1} passed results" in page
    # The script runs before pytest-html's own, which reads the filter from the address.
    assert page.index("searchParams.set('visible'") < page.index('id="data-container"')
    tests = [t for ts in _blob(page)["tests"].values() for t in ts]
    assert len(tests) == n and sum(t["result"] == "Passed" for t in tests) == n - 1
    assert re.search(rf'data-test-result="passed"\s*>\s*<span class="passed">{n - 1} Passed', page)


CHECKS = '''
import pytest
from gpuconform.reasons import Violation, skip_reason

NODES = ["gpu-node-0", "gpu-node-1"]


@pytest.mark.parametrize("node", NODES)
def test_pods_see_exactly_the_gpus_they_request(node, record_property):
    """MUST: a pod sees exactly the GPUs it requested, no more."""
    record_property("node", node)
    if node == "gpu-node-1":
        raise Violation("FAIL-ISOLATION", node + ": sees <b>&amp; 2 GPUs")


@pytest.mark.parametrize("node", NODES)
def test_kubelet_topology_and_cpu_manager_policies_are_as_expected(node, record_property):
    record_property("node", node)
    pytest.skip(skip_reason("NOTCHECKED-DRA-PATH", "not made on DRA nodes <yet> & so on"))
'''


@pytest.fixture
def checks_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """A child run of two checks named as the suite's (one fails, one is skipped NOTCHECKED-DRA-PATH) with the
    HTML report and the AI Conformance evidence files."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "no-such-kubeconfig"))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_checks=CHECKS)
    res = pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider", "-q",
                                        "--html", "r.html", "--self-contained-html", "--junitxml", "junit.xml",
                                        "--gpuconform-ai-conformance", "ai", timeout=120)
    assert res.ret == 1, res.stdout.str()
    return pytester.path


def _test(blob: dict, nodeid_part: str) -> dict:
    return next(t for tid, ts in blob["tests"].items() if nodeid_part in tid for t in ts)


def test_a_skip_shows_its_reason_and_fix_and_text_is_escaped_once(checks_run):
    page = (checks_run / "r.html").read_text()
    blob = _blob(page)
    skip = _test(blob, "test_kubelet_topology_and_cpu_manager_policies_are_as_expected[gpu-node-0]")["log"]
    # the reason and its fix, not pytest's (file, line, reason) tuple with the runner's path
    assert "[NOTCHECKED-DRA-PATH] not made on DRA nodes &lt;yet&gt; &amp; so on" in skip
    assert "<b>NOTCHECKED-DRA-PATH</b> (check not made on the DRA path yet)<br><b>fix:</b>" in skip
    assert "test_checks.py" not in skip and "Skipped:" not in skip and "(&#x27;" not in skip
    # a failure's message: escaped once by pytest-html (the page shows "<b>&amp;"), never twice
    fail = _test(blob, "test_pods_see_exactly_the_gpus_they_request[gpu-node-1]")["log"]
    assert "sees &lt;b&gt;&amp;amp; 2 GPUs" in fail and "&amp;lt;" not in fail
    # the matrix heads its columns with the checks in words
    assert ">Pods see exactly the GPUs they request</th>" in page


def test_the_ai_conformance_layout_is_written_and_parses(checks_run):
    import xml.etree.ElementTree as ET

    root = ET.parse(checks_run / "ai" / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    # the failing isolation check is the only evidence (the topology check gives none): one testcase, failed
    assert list(cases) == ["secure_accelerator_access"]
    case = cases["secure_accelerator_access"]
    assert case.find("failure").get("type") == "FAIL-ISOLATION"
    results = [p.get("value") for p in case.iter("property") if p.get("name") == "result"]
    assert results == ["test_checks.py::test_pods_see_exactly_the_gpus_they_request[gpu-node-0]: passed",
                       "test_checks.py::test_pods_see_exactly_the_gpus_they_request[gpu-node-1]: failed "
                       "[FAIL-ISOLATION]"]
    # the suite's own JUnit XML names the same tests
    own = ET.parse(checks_run / "junit.xml").getroot()
    assert {f"test_checks.py::{c.get('name')}" for c in own.iter("testcase")} >= {r.split(": ")[0] for r in results}
    log = (checks_run / "ai" / "e2e.log").read_text().splitlines()
    assert "--- FAIL: secure_accelerator_access (0.00s)" in log or any(
        ln.startswith("--- FAIL: secure_accelerator_access (") for ln in log)
    assert log[-1] == "FAIL"


def test_help_lists_the_exit_codes_and_the_evidence_option(pytester: pytest.Pytester, monkeypatch):
    from gpuconform.pytest_plugin.options import EXIT_CODES

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makeini("[pytest]\n")
    res = pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider", "--help",
                                        timeout=60)
    assert res.ret == 0
    text = " ".join(res.stdout.str().split())  # argparse wraps the help
    assert "Exit codes of the run (the summary's exit_status):" in text
    assert all(f"- {code}: {' '.join(meaning.split())}" in text for code, meaning in EXIT_CODES)
    assert "--gpuconform-ai-conformance=DIR" in text and "junit.xml#<requirement id>" in text
