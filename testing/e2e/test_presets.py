"""Vendor presets end to end: the counts check against the kwok pools that imitate time-slicing and MIG mixed.

Each case selects one kwok pool (node-pool label), applies a preset, and expects the counts check to pass when
the preset matches the pool and to fail with the intended code when it does not. Needs `make cluster-up`.
"""

from __future__ import annotations

import json

import pytest
from bedtools import KUBECONFIG, run_pytest

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]

CASES = [
    # pool, preset, extra overrides, outcome, reason code
    ("kwok-plain", "nvidia", [], "passed", None),
    ("kwok-time-slicing", "nvidia", [], "passed", None),  # each node's labels decide its shape
    ("kwok-time-slicing", "nvidia-time-slicing", [], "passed", None),
    ("kwok-time-slicing", "nvidia-plain", [], "failed", "FAIL-F04-OVERADVERTISED"),
    ("kwok-time-slicing", "nvidia-time-slicing", ["sharing.replicas=2"], "failed", "FAIL-F04-OVERADVERTISED"),
    ("kwok-time-slicing", "nvidia-time-slicing-renamed", [], "failed", "FAIL-F01-NOT-REGISTERED"),
    ("kwok-mig-mixed", "nvidia", [], "passed", None),
    ("kwok-mig-mixed", "nvidia-mig-mixed", [], "passed", None),
    ("kwok-mig-mixed", "nvidia-plain", [], "failed", "FAIL-F09-MIG-MISMATCH"),
    ("kwok-mig-mixed", "nvidia-mig-mixed", ['mig.profiles={"mig-3g.20gb": 4, "mig-1g.5gb": 12}'], "failed",
     "FAIL-F09-MIG-MISMATCH"),
]


@pytest.mark.parametrize("pool,preset,extra,outcome,code", CASES,
                         ids=[f"{c[0]}-{c[1]}{'-' + c[2][0].split('=')[0] if c[2] else ''}" for c in CASES])
def test_counts_check_on_kwok_pool_with_preset(tmp_path, pool, preset, extra, outcome, code):
    summary = tmp_path / "summary.json"
    sets = [f"preset={preset}", f"nodes.exclude=node-pool!={pool}", *extra]  # the selector is a union with "has the resource"
    # kwok nodes run no pods: the node probe (the PCI check, and the count check's PCI count where a node
    # advertises more than GFD's count) would wait out its timeout there
    sets.append("nodeProbe.enabled=false")
    argv = ["tests/allocation/test_counts.py", "-q", "-m", "not node_probe", "--gpuconform-summary", str(summary)]
    for s in sets:
        argv += ["--gpuconform-set", s]
    out = run_pytest(*argv, timeout=300)
    data = json.loads(summary.read_text())
    results = [r for r in data["results"] if r["check"] == "test_advertised_gpus_match_the_hardware"]
    assert len(results) == 1, f"expected one node in pool {pool}:\n{out.stdout[-2000:]}\n{out.stderr[-1000:]}"
    r = results[0]
    assert (r["outcome"], r["reason"]) == (outcome, code), r["message"]
