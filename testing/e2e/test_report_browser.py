"""The HTML audit report from a real run against the local test bed, opened in headless Chromium.

A short run (counts + latency, with scheduleP99 forced to 0s so the latency check fails and carries evidence)
writes report.html; Chromium loads it over the DevTools protocol, and the test asserts that the matrix, both
latency plots, the percentile table, the environment header and the failing test's evidence are rendered
and visible (non-empty boxes, not display:none / visibility:hidden). The screenshot is kept as an artefact in
reports/browser-selftest.png.
"""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from bedtools import KUBECONFIG, ROOT, run_pytest
from chromium import CHROMIUM, chromium

SHOT = ROOT / "reports" / "browser-selftest.png"

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not KUBECONFIG.exists(), reason="local cluster not running (make cluster-up)"),
              pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make deps installs it)")]

# Each entry: a CSS selector that must be visible, and text the element must contain (or "").
VISIBLE = {
    "matrix": ("#gc-matrix", "test_gpu_pod_start_latency_is_under_thresholds"),
    "latency CDF": ("#gc-latency-cdf", "startP99"),
    "phase breakdown": ("#gc-latency-phases", ""),
    "percentile table": ("#gc-percentiles", "p99"),
    "environment": ("#gc-fingerprint", os.environ.get("K8S_VERSION") or "v1.37.2"),  # the bed's Kubernetes
    "failing test's evidence": (".extras-container, .extra", "evidence"),
}

PROBE_JS = """
(() => {
  const want = %s;
  const out = {};
  for (const [name, [sel, text]] of Object.entries(want)) {
    const els = Array.from(document.querySelectorAll(sel)).filter(e => {
      const r = e.getBoundingClientRect(), s = getComputedStyle(e);
      return r.width > 0 && r.height > 0 && s.display !== 'none' && s.visibility !== 'hidden';
    });
    const hit = els.find(e => !text || e.textContent.includes(text));
    out[name] = hit ? 'visible' : (els.length ? 'visible, text ' + JSON.stringify(text) + ' missing'
                                               : 'not visible (' + document.querySelectorAll(sel).length + ' found)');
  }
  return JSON.stringify(out);
})()
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    res = run_pytest("tests", "-q", "-k", "advertised or latency", "--gpuconform-config", "localcluster/gpuconform.yaml",
                    "--gpuconform-set", "burst.samples=1", "--gpuconform-set", "thresholds.scheduleP99=0s",
                    "--html", str(out / "report.html"), "--self-contained-html")
    assert res.returncode == 1, f"expected the forced latency failure:\n{res.stdout[-3000:]}\n{res.stderr[-2000:]}"
    return out / "report.html"


@pytest.fixture(scope="module")
def browser():
    with chromium() as devtools:
        yield devtools


def test_report_shows_matrix_plots_and_evidence_in_a_browser(report, browser):
    browser.call("Page.enable")
    browser.call("Page.navigate", url=report.as_uri())
    want = json.dumps({k: list(v) for k, v in VISIBLE.items()})
    end = time.monotonic() + 30
    while True:  # pytest-html renders its table with JavaScript after load
        got = json.loads(browser.call("Runtime.evaluate", expression=PROBE_JS % want,
                                      returnByValue=True)["result"]["value"])
        if all(v == "visible" for v in got.values()) or time.monotonic() > end:
            break
        time.sleep(0.5)
    shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    SHOT.write_bytes(base64.b64decode(shot["data"]))
    problems = {k: v for k, v in got.items() if v != "visible"}
    assert not problems, f"{problems} (screenshot: {SHOT})"
