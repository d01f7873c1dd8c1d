"""Before/after comparison against the local test bed: a run compared with a baseline whose latencies were
better beyond the tolerance exits 8 and shows the deltas in the report and the summary. Needs `make cluster-up`.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from bedtools import KUBECONFIG, run_pytest

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]


def suite(tmp, name: str, *extra: str) -> subprocess.CompletedProcess:
    return run_pytest("tests", "-q", "-k", "advertised or latency", "--gpuconform-config", "localcluster/gpuconform.yaml",
                     "--gpuconform-set", "burst.samples=1", "--gpuconform-summary", str(tmp / f"{name}.json"),
                     "--html", str(tmp / f"{name}.html"), "--self-contained-html", *extra)


def test_latency_regression_against_baseline_exits_8_and_is_shown(tmp_path):
    first = suite(tmp_path, "before")
    assert first.returncode == 0, first.stdout[-3000:]
    before = json.loads((tmp_path / "before.json").read_text())
    for node in before["latency"]:  # the "previous rollout" scheduled instantly
        node["schedule"].update({"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0})
    (tmp_path / "baseline.json").write_text(json.dumps(before))

    same = suite(tmp_path, "same", "--gpuconform-baseline", str(tmp_path / "before.json"))
    assert same.returncode == 0, "comparing with an equal-enough baseline must not fail:\n" + same.stderr[-2000:]

    after = suite(tmp_path, "after", "--gpuconform-baseline", str(tmp_path / "baseline.json"),
                  "--gpuconform-set", "baseline.latencyAbsolute=0.01s")
    assert after.returncode == 8, after.stdout[-3000:] + after.stderr[-2000:]
    data = json.loads((tmp_path / "after.json").read_text())
    regressions = data["baseline"]["regressions"]
    assert any("schedule" in r and "gpu-node-0" in r for r in regressions), regressions
    assert "regression against baseline" in after.stderr
    html = (tmp_path / "after.html").read_text()
    assert 'id="gc-baseline"' in html
