"""Plugin discovery and per-node expectations against recorded Node and Pod objects of each real install layout.

testing/unit/data/layouts/*.json were built by hand from the upstream templates (each file's "source" names the
repository, commit and files), not dumped from a live cluster: the NVIDIA Helm chart (time-sliced renamed and
MPS nodes, with GFD, MPS control daemon and NFD workers), the static manifest, the GPU operator (a MIG mixed node
with a whole GPU beside its MIG devices, and a plain node labelled with the cluster's MIG strategy), AMD's Helm
chart with its node labeller, and Intel's operator with sharedDevNum and monitoring on an i915 and an xe node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuconform import config as gconfig, discovery, nodes, pods
from gpuconform.counts import expectation
from gpuconform.verdicts.counts import check_counts, stale_resources
from gpuconform.verdicts import capacity_findings

DATA = Path(__file__).parent / "data" / "layouts"
# file -> (preset, vendor, plugin pod name prefix, layout)
LAYOUTS = {
    "nvidia-helm.json": ("nvidia", "nvidia", "nvdp-nvidia-device-plugin-", "nvidia-helm"),
    "nvidia-static.json": ("nvidia", "nvidia", "nvidia-device-plugin-daemonset-", "nvidia-static"),
    "nvidia-operator.json": ("nvidia", "nvidia", "nvidia-device-plugin-daemonset-", "nvidia-operator"),
    "amd.json": ("amd", "amd", "amd-gpu-device-plugin-daemonset-", "amd-helm"),
    "intel.json": ("intel-i915", "intel", "intel-gpu-plugin-", "intel"),
    # issue 16 classes 7 and 8 (more checks in test_layouts_amd_intel.py)
    "amd-operator.json": ("amd", "amd", "default-device-plugin-", "amd-operator"),
    "amd-mixed.json": ("amd", "amd", "default-device-plugin-", "amd-operator"),
    "intel-dual.json": ("intel-i915", "intel", "intel-gpu-plugin-", "intel"),
    "intel-sriov.json": ("intel-i915", "intel", "intel-gpu-plugin-", "intel"),
    "intel-filter.json": ("intel-i915", "intel", "intel-gpu-plugin-", "intel"),
}


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def cases():
    for f in LAYOUTS:
        for n in load(f)["nodes"]:
            yield pytest.param(f, n["metadata"]["name"], id=f"{f.removesuffix('.json')}-{n['metadata']['name']}")


@pytest.mark.parametrize("layout_file,node_name", list(cases()))
def test_plugin_found_by_what_it_is_and_companions_set_aside(layout_file, node_name):
    preset, vendor, prefix, layout = LAYOUTS[layout_file]
    data = load(layout_file)
    on_node = [p for p in data["pods"] if p["spec"].get("nodeName") == node_name
               and not pods.is_terminal(p)]  # what the field-selected LIST returns
    found = discovery.find_plugin_pods(on_node, vendor)
    names = [p["metadata"]["name"] for p in found.pods]
    assert len(names) == 1 and names[0].startswith(prefix) and "feature-discovery" not in names[0], found.why
    assert found.layout == layout, found.why
    others = {p["metadata"]["name"] for p in on_node} - set(names)
    assert set(found.companions) <= {f"{p['metadata']['namespace']}/{n}" for p in on_node
                                     for n in [p["metadata"]["name"]] if n in others}


@pytest.mark.parametrize("layout_file,node_name", list(cases()))
def test_healthy_recorded_node_passes_under_its_vendor_preset_with_no_other_config(layout_file, node_name):
    preset, vendor, _, _ = LAYOUTS[layout_file]
    data = load(layout_file)
    node = next(n for n in data["nodes"] if n["metadata"]["name"] == node_name)
    cfg = gconfig.load(None, {"preset": preset}, environ={}).data
    assert nodes.is_gpu_node(node, vendor, cfg["nodes"]["selector"], cfg["nodes"]["exclude"])
    plugin = discovery.find_plugin_pods([p for p in data["pods"] if p["spec"].get("nodeName") == node_name], vendor)
    exp = expectation(node, cfg, plugin.pods)
    assert check_counts(node, exp) == [], exp
    assert stale_resources(node, exp) == [], exp
    assert capacity_findings(node, exp) == [], exp
    assert exp.workload_resource in node["status"]["allocatable"], exp


def test_one_nvidia_config_covers_every_pool_shape_of_the_recorded_layouts():
    cfg = gconfig.load(None, {"preset": "nvidia"}, environ={}).data
    shapes = {}
    for f in ("nvidia-helm.json", "nvidia-static.json", "nvidia-operator.json"):
        for n in load(f)["nodes"]:
            exp = expectation(n, cfg)
            shapes[n["metadata"]["name"]] = (exp.workload_resource, exp.unit, exp.per_device)
    assert shapes == {
        "gpu-ts-0": ("nvidia.com/gpu.shared", "replica", 4),  # time-slicing, renamed
        "gpu-mps-0": ("nvidia.com/gpu", "replica", 2),  # MPS, not renamed (product -SHARED)
        "gpu-node-0": ("nvidia.com/gpu", "gpu", 1),
        "gpu-mig-0": ("nvidia.com/mig-1g.10gb", "mig", 1),  # 3x 1g.10gb + 1x 4g.40gb + 1 whole GPU
        "gpu-plain-0": ("nvidia.com/gpu", "gpu", 1),  # labelled mig.strategy=mixed by the operator, no MIG devices
    }


def test_sockets_of_the_recorded_nodes_follow_upstream_naming():
    cfg = gconfig.load(None, {"preset": "nvidia"}, environ={}).data
    mig = next(n for n in load("nvidia-operator.json")["nodes"] if n["metadata"]["name"] == "gpu-mig-0")
    assert expectation(mig, cfg).sockets() == ["nvidia-mig-1g.10gb.sock", "nvidia-mig-4g.40gb.sock", "nvidia-gpu.sock"]
    ts = next(n for n in load("nvidia-helm.json")["nodes"] if n["metadata"]["name"] == "gpu-ts-0")
    assert expectation(ts, cfg).sockets() == ["nvidia-gpu.shared.sock"]
    intel = gconfig.load(None, {"preset": "intel-i915"}, environ={}).data
    xe = next(n for n in load("intel.json")["nodes"] if n["metadata"]["name"] == "intel-xe-0")
    assert expectation(xe, intel).sockets() == ["gpu.intel.com-xe.sock"]  # the node's own driver


def test_override_selector_limits_discovery_to_the_selection():
    data = load("nvidia-helm.json")
    on_node = [p for p in data["pods"] if p["spec"].get("nodeName") == "gpu-ts-0"]
    found = discovery.find_plugin_pods(on_node, "nvidia", "nvidia-device-plugin", "app.kubernetes.io/name=nvidia-device-plugin")
    # the chart's GFD pod carries the same labels but is a companion: a selection still has to do the job
    assert found.layout == "configured" and [p["metadata"]["name"] for p in found.pods] == ["nvdp-nvidia-device-plugin-a1b2c"]
    assert found.companions == ["nvidia-device-plugin/nvdp-nvidia-device-plugin-gpu-feature-discovery-c2b1a"]
    assert discovery.find_plugin_pods(on_node, "nvidia", "kube-system", "name=x").pods == []


def test_plugin_namespace_alone_restricts_discovery():
    on_node = [p for p in load("nvidia-helm.json")["pods"] if p["spec"].get("nodeName") == "gpu-ts-0"]
    assert len(discovery.find_plugin_pods(on_node, "nvidia", "nvidia-device-plugin").pods) == 1
    elsewhere = discovery.find_plugin_pods(on_node, "nvidia", "kube-system")
    assert elsewhere.pods == [] and "in namespace kube-system" in elsewhere.why
    assert elsewhere.look_alikes == ["nvidia-device-plugin/nvdp-nvidia-device-plugin-a1b2c (not in plugin.namespace "
                                     "kube-system)"]


def test_nothing_found_says_what_was_looked_for():
    found = discovery.find_plugin_pods([], "nvidia")
    assert found.pods == [] and found.layout == "none" and "device-plugins" in found.why
