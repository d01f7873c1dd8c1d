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


def test_pool_summary_first_and_failing_node_first(child):
    page = child(4, {"gpu-node-2"})
    audit = page.index('id="gc-audit"')
    assert page.index('id="gc-pools"') > audit
    assert page.index('id="gc-pools"') < min(page.index('class="gc-run"'), page.index('id="gc-matrix"'))
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
