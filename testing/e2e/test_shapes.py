"""End-to-end: the whole suite is green on every pool profile x plugin install layout of the bed's real node,
with no plugin.* keys in the config (localcluster/gpuconform.yaml has none), and one config certifies a cluster
with one node of each pool type (the real node plus the kwok pools).

The bed imitates upstream (localcluster/shapes.py, docs/vendors.md): time-slicing with annotated replica IDs and
renameByDefault, MIG mixed with one socket per profile, and NVIDIA's Helm chart, static manifest and GPU operator
layouts with their GPU Feature Discovery companions. Run time per shape is written to reports/shape-runs.txt and
shown in the terminal summary. Needs `make cluster-up`; the bed is restored to its start shape afterwards.
"""

from __future__ import annotations

import json
import time

import pytest
from bedtools import KUBECONFIG, ROOT, SHAPES_OUT, bed, kubectl, run_pytest, shapes

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]

_rows: list[str] = []
SHAPES = [(p, lay) for p in shapes.PROFILES for lay in shapes.LAYOUTS]


@pytest.fixture(scope="module", autouse=True)
def restore_bed():
    SHAPES_OUT.with_name("shape-labels.txt").unlink(missing_ok=True)
    yield
    bed("fault-clear")  # back to the shape the bed was started in
    if _rows:
        SHAPES_OUT.parent.mkdir(exist_ok=True)
        SHAPES_OUT.write_text(f"{'profile':22} {'layout':9} {'switch_s':>8} {'suite_s':>8} {'checks':>6}  resources\n"
                              + "\n".join(_rows) + "\n")


def suite(tmp_path, *args: str) -> tuple[int, dict, str]:
    summary = tmp_path / "summary.json"
    out = run_pytest(*args, "-q", "--gpuconform-config", "localcluster/gpuconform.yaml", "--gpuconform-summary",
                     str(summary), "--gpuconform-set", "burst.samples=1", timeout=900)
    assert summary.exists(), f"no summary (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}"
    return out.returncode, json.loads(summary.read_text()), out.stdout


def _record_labels(profile: str, layout: str, s: dict) -> None:
    """What the plugin and GFD (NVIDIA's, or the bed's stand-ins) put on the node in this shape, for the audit
    trail: reports/shape-labels.txt (GFD's timestamp left out)."""
    node = json.loads(kubectl("get", "node", "gpu-node-0", "-o", "json"))
    labels = {k: v for k, v in sorted(node["metadata"].get("labels", {}).items())
              if k.startswith("nvidia.com/") and k != "nvidia.com/gfd.timestamp"}
    res = {k: v for k, v in sorted(node["status"].get("capacity", {}).items()) if k.startswith("nvidia.com/")}
    out = SHAPES_OUT.with_name("shape-labels.txt")
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as f:
        f.write(f"{profile} x {layout}: plugin {s['environment'].get('plugin images')}\n  resources: "
                + ", ".join(f"{k}={v}" for k, v in res.items()) + "\n  labels: "
                + ", ".join(f"{k.removeprefix('nvidia.com/')}={v}" for k, v in labels.items()) + "\n")


def test_bed_config_names_no_plugin_keys():
    import yaml

    cfg = yaml.safe_load((ROOT / "localcluster" / "gpuconform.yaml").read_text())
    assert "plugin" not in cfg and cfg.get("preset") == "nvidia"


@pytest.mark.parametrize("profile,layout", SHAPES, ids=[f"{p}-{lay}" for p, lay in SHAPES])
def test_suite_is_green_on_every_profile_and_layout_with_zero_plugin_config(profile, layout, tmp_path):
    t0 = time.monotonic()
    bed("bed", profile, layout)
    switched = time.monotonic() - t0
    rc, s, out = suite(tmp_path, "tests")
    ran = time.monotonic() - t0 - switched
    want = shapes.resources(profile)
    _rows.append(f"{profile:22} {layout:9} {switched:8.1f} {ran:8.1f} {len(s['results']):6d}  "
                 + ", ".join(f"{r}={n}" for r, n in want.items()))
    _record_labels(profile, layout, s)
    bad = [r for r in s["results"] if r["outcome"] != "passed"]
    assert not bad, json.dumps(bad, indent=1)
    assert rc == 0 and s["certified_nodes"] == s["gpu_nodes"] == ["gpu-node-0"], out[-2000:]
    assert s["environment"]["plugin layouts"] == f"nvidia-{layout} (1 node)"
    assert {k: v for k, v in s["config"]["plugin"].items() if k != "maxRestarts"} == \
        {"namespace": "", "selector": "", "socket": ""}  # found by what it is
    pool = s["environment"]["GPU pools"]
    assert all(r in pool for r in want), pool


def test_one_config_certifies_a_cluster_with_one_node_of_each_pool_type(tmp_path):
    """The real node (time-sliced, renamed, Helm layout) and the kwok pools (plain, time-slicing, MIG mixed),
    all under preset nvidia with no per-pool keys: the node-level checks pass on every node."""
    bed("bed", "time-slicing-renamed", "helm")
    rc, s, out = suite(tmp_path, "tests/allocation/test_counts.py", "tests/registration/test_registration.py",
                       "-k", "(advertised or capacity) and not pci_hardware", "--gpuconform-set", "nodes.exclude=")
    by_node = {}
    for r in s["results"]:
        by_node.setdefault(r["node"], []).append((r["check"], r["outcome"], r["reason"]))
    assert sorted(by_node) == ["gpu-node-0", "kwok-gpu-0", "kwok-gpu-1", "kwok-gpu-2"], out[-2000:]
    bad = {n: rs for n, rs in by_node.items() if any(o != "passed" for _, o, _ in rs)}
    assert not bad, json.dumps(bad, indent=1)
    pools = s["environment"]["GPU pools"]
    for shape in ("nvidia.com/gpu.shared: 4 GPU(s) x 4 replicas", "nvidia.com/gpu: 4 GPU(s) x 4 replicas",
                  "nvidia.com/gpu: 4 GPU(s)", "MIG mixed"):
        assert shape in pools, pools
