"""Discovery's left-out nodes through the plugin, in a child pytest over a stand-in cluster (issue 16 classes 10
and 11): GPU-looking nodes that are not certified (nodes.selector, nodes.exclude, no container device plugin by
design) are in the JSON summary's `left_out_nodes` and the report's environment with why; they neither fail nor
lower the coverage gate, and a run where every GPU-looking node is left out still ends with exit 6.

The child's conftest replaces Run.start with a Run over an in-memory cluster (one page of nodes from
testing/unit/data/layouts, ResourceSlices, no pods, no watch): no request leaves the process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "summary.schema.json").read_text())

CONFTEST = '''
import json
from pathlib import Path
from types import SimpleNamespace

from gpuconform.pytest_plugin import inventory, run
from gpuconform import kube
from testing.plugin.standin import NoWatch, pages, run_start

DATA = Path({data!r})
NODES = json.loads((DATA / "nvidia-no-plugin.json").read_text())
SLICES = NODES["resourceslices"]
NODES = NODES["nodes"] + json.loads((DATA / "nvidia-operator.json").read_text())["nodes"]
CORE = SimpleNamespace(list_node=pages(NODES), list_pod_for_all_namespaces=pages([]))

kube.Watch = NoWatch
run.Run.start = run_start(CORE, "left-out-run")
inventory.k8s.ResourceV1Api = lambda api: SimpleNamespace(list_resource_slice=pages(SLICES),
                                                         list_device_class=pages([]),
                                                         list_device_taint_rule=pages([]),
                                                         list_resource_claim_for_all_namespaces=pages([]))
'''


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST.format(data=str(REPO / "testing" / "unit" / "data" / "layouts")))
    pytester.makepyfile(test_nodes="def test_per_node(check):\n    pass\n")

    def runpytest(*args: str) -> tuple[pytest.RunResult, dict]:
        res = pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider",
                                            "--gpuconform-summary", "out.json", *args, timeout=60)
        data = json.loads((pytester.path / "out.json").read_text())
        jsonschema.validate(data, SCHEMA)
        return res, data

    return runpytest


def test_left_out_nodes_are_listed_with_why_and_do_not_lower_coverage(child, pytester):
    res, s = child("--html", "report.html", "--self-contained-html")
    assert s["gpu_nodes"] == ["gpu-dra-0", "gpu-dra-slices-0", "gpu-mig-0", "gpu-plain-0", "gpu-plugin-and-slices-0",
                              "gpu-vmpt-label-only-0"]  # the DRA nodes on their own path
    assert s["certified_nodes"] == s["gpu_nodes"] and s["coverage"]["certified_fraction"] == 1.0
    assert s["exit_status"] == 0, res.stdout.str()[-3000:]
    left = s["left_out_nodes"]
    assert {n: v["path"] for n, v in left.items()} == {
        "gpu-noplugin-0": "none", "gpu-vgpu-0": "none", "gpu-vmpt-0": "none", "gpu-vmpt-stale-0": "none"}
    assert all(v["why"] == "not-applicable" and v["reason"] and v["evidence"] for v in left.values())
    env = s["environment"]
    assert env["GPU nodes left out"] == "4: not applicable here (no container device plugin) (4)"
    assert env["allocation paths (GPU nodes)"] == "device-plugin 4 (certified here), dra 2 (certified here), none 4"
    assert env["DRA (ResourceSlices)"].startswith("4 ResourceSlice(s) of ")
    page = (pytester.path / "report.html").read_text()
    assert "<h3>GPU nodes left out</h3>" in page and 'id="gc-left-out"' in page
    assert "none: label nvidia.com/gpu.workload.config=vm-passthrough" in page


def test_a_selector_leaves_the_other_pools_out_and_says_so(child):
    res, s = child("--gpuconform-set", "nodes.selector=kubernetes.io/hostname=gpu-plain-0")
    assert s["gpu_nodes"] == ["gpu-plain-0"] and s["exit_status"] == 0
    assert s["left_out_nodes"]["gpu-mig-0"] == {
        "why": "not-selected", "reason": "does not match nodes.selector 'kubernetes.io/hostname=gpu-plain-0'"}
    assert s["left_out_nodes"]["gpu-vmpt-0"]["why"] == "not-selected"  # the selector is asked first


def test_every_gpu_looking_node_left_out_is_still_not_exit_0(child):
    res, s = child("--gpuconform-set", "nodes.selector=nvidia.com/gpu.workload.config",
                   "--gpuconform-set", "nodes.exclude=kubernetes.io/hostname=gpu-vmpt-label-only-0")
    assert s["gpu_nodes"] == [] and s["certified_nodes"] == []
    assert s["exit_status"] == 6 and res.ret == 6
    assert {v["why"] for v in s["left_out_nodes"].values()} == {"not-applicable", "not-selected", "excluded"}
    assert any("nothing certified enough" in ln and "left out" in ln for ln in res.outlines + res.errlines)
