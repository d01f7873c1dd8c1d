"""Issue 16 classes 7 (AMD) and 8 (Intel): healthy nodes of each shape pass under the vendor preset with no other
config, and a broken node of each shape still fails with the right reason code.

The recorded objects (testing/unit/data/layouts/amd-operator.json, amd-mixed.json, intel-dual.json,
intel-sriov.json, intel-filter.json) were built by hand from upstream source; each file's "source" names the
repository, commit and files it follows.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuconform import config as gconfig, discovery, nodes, vendors
from gpuconform.counts import expectation
from gpuconform.verdicts.counts import check_counts, stale_resources
from gpuconform.verdicts import capacity_findings

DATA = Path(__file__).parent / "data" / "layouts"
PRESET = {"amd": "amd", "intel": "intel-i915"}
FILES = {"amd-operator.json": "amd", "amd-mixed.json": "amd", "intel-dual.json": "intel",
         "intel-sriov.json": "intel", "intel-filter.json": "intel"}


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def node_of(f: str, name: str) -> tuple[dict, list[dict]]:
    data = load(f)
    return (copy.deepcopy(next(n for n in data["nodes"] if n["metadata"]["name"] == name)),
            [p for p in data["pods"] if p["spec"].get("nodeName") == name])


def judge(node: dict, pods: list[dict], vendor: str, preset: str | None = None):
    cfg = gconfig.load(None, {"preset": preset or PRESET[vendor]}, environ={}).data
    plugin = discovery.find_plugin_pods(pods, vendor)
    exp = expectation(node, cfg, plugin.pods)
    return exp, [f.code for f in check_counts(node, exp) + stale_resources(node, exp) + capacity_findings(node, exp)]


def set_gpus(node: dict, resource: str, n: int) -> dict:
    for k in ("capacity", "allocatable"):
        node["status"][k][resource] = str(n)
    return node


def cases():
    for f, vendor in FILES.items():
        for n in load(f)["nodes"]:
            yield pytest.param(f, vendor, n["metadata"]["name"], id=f"{f.removesuffix('.json')}-{n['metadata']['name']}")


@pytest.mark.parametrize("f,vendor,name", list(cases()))
def test_healthy_amd_and_intel_shapes_pass_with_zero_config(f, vendor, name):
    node, pods = node_of(f, name)
    cfg = gconfig.load(None, {"preset": PRESET[vendor]}, environ={}).data
    assert nodes.is_gpu_node(node, vendor, cfg["nodes"]["selector"], cfg["nodes"]["exclude"])
    exp, codes = judge(node, pods, vendor)
    assert codes == [], (exp.source, codes)
    assert exp.physical is not None, exp.source  # a verified count, not "unknown"
    assert exp.workload_resource in node["status"]["allocatable"], exp


# --- AMD (class 7) ---

def test_amd_operator_plugin_found_by_layout_and_container_not_by_its_label_alone():
    node, pods = node_of("amd-operator.json", "amd-op-cpx-0")
    found = discovery.find_plugin_pods(pods, "amd")
    assert [p["metadata"]["name"] for p in found.pods] == ["default-device-plugin-j7k8l"], found.why
    assert found.layout == "amd-operator", found.why
    # the labeller and metrics exporter carry the same daemonset-name label: never the plugin
    exporter = next(p for p in pods if "metrics-exporter" in p["metadata"]["name"])
    assert discovery.layout_of(exporter, "amd") is None


def test_amd_vf_guest_is_a_gpu_node():
    node, _ = node_of("amd-operator.json", "amd-op-vf-0")
    assert "feature.node.kubernetes.io/amd-gpu" not in node["metadata"]["labels"]
    for k in ("capacity", "allocatable"):  # before (or without) the plugin registering: by its label alone
        del node["status"][k]["amd.com/gpu"]
    assert nodes.is_gpu_node(node, "amd", "", "")


def test_amd_mixed_naming_expects_the_nodes_own_partition_resource():
    node, pods = node_of("amd-mixed.json", "amd-mixed-cpx-0")
    exp, codes = judge(node, pods, "amd")
    assert exp.resource == "amd.com/cpx_nps4" and exp.advertised == 64 and codes == []
    assert exp.sockets() == ["amd.com_cpx_nps4"]
    assert "8 CPX partitions" in exp.source


def test_amd_cpx_under_single_naming_multiplies_the_gpu_count():
    node, pods = node_of("amd-operator.json", "amd-op-cpx-0")
    exp, codes = judge(node, pods, "amd")
    assert (exp.resource, exp.physical, codes) == ("amd.com/gpu", 64, [])


def test_amd_mixed_node_with_more_partitions_than_its_mode_allows_is_overadvertised():
    node, pods = node_of("amd-mixed.json", "amd-mixed-cpx-0")
    _, codes = judge(set_gpus(node, "amd.com/cpx_nps4", 72), pods, "amd")
    assert codes == ["FAIL-F04-OVERADVERTISED"]
    node, pods = node_of("amd-mixed.json", "amd-mixed-spx-0")
    _, codes = judge(set_gpus(node, "amd.com/spx_nps1", 7), pods, "amd")
    assert codes == ["FAIL-F04-UNDERADVERTISED"]


def test_amd_single_naming_cpx_node_missing_partitions_is_underadvertised():
    node, pods = node_of("amd-operator.json", "amd-op-cpx-0")
    _, codes = judge(set_gpus(node, "amd.com/gpu", 56), pods, "amd")
    assert codes == ["FAIL-F04-UNDERADVERTISED"]


def test_amd_partitions_without_the_mode_label_are_unknown_not_failed_and_say_why():
    node, pods = node_of("amd-operator.json", "amd-op-cpx-0")
    del node["metadata"]["labels"][vendors.AMD_PARTITION_LABEL]
    exp, codes = judge(node, pods, "amd")
    assert exp.physical is None and codes == []
    assert "count not verified" in exp.source and "compute-memory-partition" in exp.source
    # a plain (not partition-capable) model advertising more than its GPUs still fails
    plain, pods = node_of("amd-operator.json", "amd-op-vf-0")
    _, codes = judge(set_gpus(plain, "amd.com/gpu", 2), pods, "amd")
    assert codes == ["FAIL-F04-OVERADVERTISED"]


def test_amd_without_device_id_labels_the_count_is_unknown_and_says_so():
    node, pods = node_of("amd-operator.json", "amd-op-spx-0")
    for k in [k for k in node["metadata"]["labels"] if "device-id" in k]:
        del node["metadata"]["labels"][k]
    exp, _ = judge(node, pods, "amd")
    assert exp.physical is None
    assert "-device-id" in exp.source and "set nodes.expectedGpus" in exp.source


# --- Intel (class 8) ---

def test_intel_i915_beside_xe_is_healthy_and_judged_by_the_sum():
    node, pods = node_of("intel-dual.json", "intel-dual-0")
    exp, codes = judge(node, pods, "intel")
    assert codes == [] and exp.resource == "gpu.intel.com/i915" and exp.physical == 1
    assert "gpu.intel.com/xe" in exp.source
    exp, codes = judge(node, pods, "intel", "intel-xe")  # the other preset: the same verdict
    assert codes == [] and exp.resource == "gpu.intel.com/xe"


def test_intel_dual_node_advertising_more_than_its_cards_is_overadvertised():
    node, pods = node_of("intel-dual.json", "intel-dual-flex-0")
    _, codes = judge(set_gpus(node, "gpu.intel.com/i915", 20), pods, "intel")
    assert codes == ["FAIL-F04-OVERADVERTISED"]


def test_intel_dual_node_missing_a_card_is_underadvertised():
    node, pods = node_of("intel-dual.json", "intel-dual-0")
    _, codes = judge(set_gpus(node, "gpu.intel.com/xe", 0), pods, "intel")
    assert codes == ["FAIL-F04-UNDERADVERTISED"]


def test_intel_sriov_vfs_advertised_instead_of_the_pf_is_healthy_and_bounded():
    node, pods = node_of("intel-sriov.json", "intel-sriov-0")
    exp, codes = judge(node, pods, "intel")
    assert codes == [] and exp.physical == 4 and "isPfWithVfs" in exp.source and "bounded" in exp.source
    _, codes = judge(set_gpus(node, "gpu.intel.com/i915", 1), pods, "intel")  # fewer than any PF/VF split allows
    assert codes == ["FAIL-F04-UNDERADVERTISED"]
    _, codes = judge(set_gpus(node, "gpu.intel.com/i915", 6), pods, "intel")
    assert codes == ["FAIL-F04-OVERADVERTISED"]


def test_intel_allow_and_deny_ids_filter_the_expected_cards():
    node, pods = node_of("intel-filter.json", "intel-deny-0")
    exp, codes = judge(node, pods, "intel")
    assert codes == [] and exp.physical == 2 and "-deny-ids=0xa780" in exp.source and "bounded" not in exp.source
    node, pods = node_of("intel-filter.json", "intel-allow-0")
    exp, codes = judge(node, pods, "intel")
    assert codes == [] and "-allow-ids=0x56a0" in exp.source and "bounded" in exp.source
    _, codes = judge(set_gpus(node, "gpu.intel.com/i915", 3), pods, "intel")  # the filtered iGPU advertised too
    assert codes == ["FAIL-F04-OVERADVERTISED"]


def test_intel_without_filter_args_a_missing_card_is_still_underadvertised():
    node, pods = node_of("intel-filter.json", "intel-deny-0")
    for p in pods:
        p["spec"]["containers"][0]["args"] = p["spec"]["containers"][0]["args"][:-2]
    _, codes = judge(node, pods, "intel")
    assert codes == ["FAIL-F04-UNDERADVERTISED"]  # 3 Intel GPUs in the labels, 2 advertised


def test_intel_device_count_and_generic_labels():
    # Flex node: device.count (Max/Flex rules only) agrees with the generic per-class count
    from gpuconform.counts import _count_label
    flex, _ = node_of("intel-dual.json", "intel-dual-flex-0")
    assert _count_label(flex["metadata"]["labels"], "intel")[0] == 2  # the iGPU beside the Flex card counts too
    dual, _ = node_of("intel-dual.json", "intel-dual-0")
    assert _count_label(dual["metadata"]["labels"], "intel") == (2, "NFD labels gpu.intel.com/device-id.<class>-<device>.count")
