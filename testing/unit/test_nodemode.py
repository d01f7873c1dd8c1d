"""Issue 16 classes 10 and 11: each node's allocation path from its own objects, and a selector that selects.

testing/unit/data/layouts/nvidia-no-plugin.json holds GPU-operator nodes that run no container device plugin by
design (vm-passthrough, vm-vgpu, gpu.deploy.device-plugin=false, the DRA stack, a standalone DRA driver), the
device-plugin nodes beside them that must stay certified, their ResourceSlices and the sandbox plugin's pod; its
"source" names the upstream files. Before this change every one of them was a GPU node to certify (they carry
nvidia.com/gpu.present=true) and failed F01/F08 as not registered, and nodes.selector added every node
advertising nvidia.com/gpu whatever it said.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import urllib3

from gpuconform import nodemode, nodes, auditpage
from gpuconform.config import load

DATA = Path(__file__).parent / "data" / "layouts"
NO_PLUGIN = json.loads((DATA / "nvidia-no-plugin.json").read_text())
OPERATOR = json.loads((DATA / "nvidia-operator.json").read_text())  # healthy device-plugin nodes
BY_NAME = {n["metadata"]["name"]: n for n in NO_PLUGIN["nodes"]}
SLICES = nodemode.slices_by_node(NO_PLUGIN["resourceslices"])


@pytest.mark.parametrize("name", sorted(NO_PLUGIN["expected"]))
def test_each_recorded_node_gets_its_allocation_path_with_the_object_that_said_so(name):
    mode = nodemode.of_node(BY_NAME[name], SLICES.get(name, []), "nvidia")
    assert mode.path == NO_PLUGIN["expected"][name], mode
    assert mode.reason and mode.evidence
    decisive = {"gpu-vmpt-0": "nvidia.com/gpu.workload.config=vm-passthrough",
                "gpu-vgpu-0": "nvidia.com/gpu.workload.config=vm-vgpu",
                "gpu-noplugin-0": "nvidia.com/gpu.deploy.device-plugin=false",
                "gpu-dra-0": "nvidia.com/gpu.deploy.dra-driver=true",
                "gpu-dra-slices-0": "ResourceSlice", "gpu-plugin-and-slices-0": "capacity nvidia.com/gpu=4",
                "gpu-vmpt-label-only-0": "capacity nvidia.com/gpu=2",
                "gpu-vmpt-stale-0": "nvidia.com/gpu.workload.config=vm-passthrough"}[name]
    assert decisive in mode.evidence, mode


def test_a_plugin_node_with_slices_stays_a_plugin_node_and_says_so():
    mode = nodemode.of_node(BY_NAME["gpu-plugin-and-slices-0"], SLICES["gpu-plugin-and-slices-0"], "nvidia")
    assert mode.path == nodemode.DEVICE_PLUGIN and mode.certified_here
    assert "compute-domain.nvidia.com" in mode.reason and "FAIL-GPU-OFFERED-TWICE" in mode.reason


def test_the_sandbox_plugin_and_stale_capacity_are_no_container_plugin():
    vm = nodemode.of_node(BY_NAME["gpu-vmpt-0"], [], "nvidia")  # its sandbox plugin pod mounts device-plugins
    assert vm.path == nodemode.NONE and nodemode.SANDBOX_PLUGIN in vm.reason
    assert "sandbox-device-plugin=true" in vm.evidence
    stale = nodemode.of_node(BY_NAME["gpu-vmpt-stale-0"], [], "nvidia")
    assert stale.path == nodemode.NONE and "none allocatable" in stale.reason
    # the same leftover capacity without a label saying "no plugin" is a dead plugin: certified, so it fails
    dead = copy.deepcopy(BY_NAME["gpu-vmpt-stale-0"])
    del dead["metadata"]["labels"]["nvidia.com/gpu.workload.config"]
    assert nodemode.of_node(dead, [], "nvidia").path == nodemode.DEVICE_PLUGIN


def test_slices_of_no_single_node_say_nothing_about_a_node():
    assert set(SLICES) == {"gpu-dra-0", "gpu-dra-slices-0", "gpu-plugin-and-slices-0"}  # fabric-x9q: nodeSelector


def test_healthy_operator_nodes_stay_device_plugin_nodes():
    for n in OPERATOR["nodes"]:
        mode = nodemode.of_node(n, [], "nvidia")
        assert mode.path == nodemode.DEVICE_PLUGIN, (n["metadata"]["name"], mode)


CERTIFIED = ["gpu-dra-0", "gpu-dra-slices-0", "gpu-mig-0", "gpu-plain-0", "gpu-plugin-and-slices-0",
             "gpu-vmpt-label-only-0"]


def test_nodes_without_a_container_plugin_are_left_out_as_not_applicable_not_certified():
    """Before: a vm-passthrough node labelled nvidia.com/gpu.present=true was a GPU node to certify. DRA nodes
    are certified on their own path."""
    all_nodes = NO_PLUGIN["nodes"] + OPERATOR["nodes"]
    certify, left = nodes.select_nodes(all_nodes, NO_PLUGIN["resourceslices"], "nvidia", "", "")
    assert sorted(n["metadata"]["name"] for n in certify) == CERTIFIED
    out = {x.name: x for x in left}
    assert set(out) == {"gpu-noplugin-0", "gpu-vgpu-0", "gpu-vmpt-0", "gpu-vmpt-stale-0"}
    assert all(x.why == nodes.NOT_APPLICABLE for x in left)
    assert {n: x.path for n, x in out.items()} == {n: p for n, p in NO_PLUGIN["expected"].items() if n in out}
    assert out["gpu-vmpt-0"].to_dict()["evidence"].startswith("label nvidia.com/gpu.workload.config=vm-passthrough")


def pool_node(name: str, pool: str) -> dict:
    n = copy.deepcopy(next(n for n in OPERATOR["nodes"] if n["metadata"]["name"] == "gpu-plain-0"))
    n["metadata"]["name"] = n["metadata"]["labels"]["kubernetes.io/hostname"] = name
    n["metadata"]["labels"]["pool"] = pool
    return n


def test_a_selector_selects_the_canary_pool_only():
    """Before: nodes.selector added every node advertising nvidia.com/gpu, so pool=main came along."""
    cluster = [pool_node("canary-0", "canary"), pool_node("canary-1", "canary"), pool_node("main-0", "main"),
               pool_node("main-1", "main"), {"metadata": {"name": "cpu-0", "labels": {"pool": "main"}},
                                             "status": {"capacity": {"cpu": "8"}}}]
    main = cluster[2]
    assert "nvidia.com/gpu" in main["status"]["capacity"]
    assert not nodes.is_gpu_node(main, "nvidia", "pool=canary", "")
    certify, left = nodes.select_nodes(cluster, [], "nvidia", "pool=canary", "")
    assert [n["metadata"]["name"] for n in certify] == ["canary-0", "canary-1"]
    assert [(x.name, x.why) for x in left] == [("main-0", nodes.NOT_SELECTED), ("main-1", nodes.NOT_SELECTED)]
    assert "pool=canary" in left[0].reason  # cpu-0 does not look like a GPU node: not listed
    # exclude is applied after the selector and is said as such
    certify, left = nodes.select_nodes(cluster, [], "nvidia", "pool=canary", "kubernetes.io/hostname=canary-1")
    assert [n["metadata"]["name"] for n in certify] == ["canary-0"]
    assert {x.name: x.why for x in left} == {"canary-1": nodes.EXCLUDED, "main-0": nodes.NOT_SELECTED,
                                            "main-1": nodes.NOT_SELECTED}
    # empty selector: today's rule, any vendor GPU-node label or GPU resource
    certify, left = nodes.select_nodes(cluster, [], "nvidia", "", "")
    assert len(certify) == 4 and left == []


def test_a_selected_node_that_runs_no_container_plugin_is_still_not_applicable():
    vm = copy.deepcopy(BY_NAME["gpu-vmpt-0"])
    vm["metadata"]["labels"]["pool"] = "canary"
    certify, left = nodes.select_nodes([vm, pool_node("canary-0", "canary")], [], "nvidia", "pool=canary", "")
    assert [n["metadata"]["name"] for n in certify] == ["canary-0"]
    assert [(x.name, x.why, x.path) for x in left] == [("gpu-vmpt-0", nodes.NOT_APPLICABLE, nodemode.NONE)]


def test_the_header_lists_the_left_out_nodes_grouped_by_why_and_stays_small():
    from gpuconform.pytest_plugin.summary import left_out_tally

    left = [nodes.LeftOut(f"main-{i}", nodes.NOT_SELECTED, "does not match nodes.selector 'pool=canary'")
            for i in range(120)] + [nodes.LeftOut("gpu-vmpt-0", nodes.NOT_APPLICABLE, "GPUs reserved for VMs",
                                                  nodemode.NONE, "label nvidia.com/gpu.workload.config=vm-passthrough")]
    assert left_out_tally(left) == ("121: not matched by nodes.selector (120), not applicable here (no container "
                                    "device plugin) (1)")
    page = auditpage.left_out_html({x.name: x.to_dict() for x in left}, nodes.LEFT_OUT_TITLES)
    assert page.index("not matched by nodes.selector: 120 nodes") < page.index("not applicable here")
    assert "... and 70 more" in page and "gpu-vmpt-0" in page and "none: label nvidia.com/gpu.workload.config" in page
    assert page.count("<tr>") == 1 + auditpage.LEFT_OUT_SHOWN + 1 + 1  # header, 50 drawn, "more", the vm node
    assert left_out_tally([]) == "none"


# ---------------------------------------------------------------- discovery: one LIST of ResourceSlices, optional

class Page(SimpleNamespace):
    pass


def pages(items: list, size: int, rv: str = "7"):
    """A paginated LIST stand-in: fn(limit=, _continue=, ...) answers `size` items a page, as the client does:
    raw (urllib3's response, body unread) for `_preload_content=False`, else as a model list."""
    calls: list[dict] = []

    def fn(limit=None, _continue=None, _request_timeout=None, _preload_content=True, **kw):
        calls.append({"continue": _continue, **kw})
        start = int(_continue or 0)
        nxt = start + size
        cont = str(nxt) if nxt < len(items) else None
        if not _preload_content:
            body = {"metadata": {"resourceVersion": rv, **({"continue": cont} if cont else {})},
                    "items": items[start:nxt]}
            return urllib3.HTTPResponse(body=io.BytesIO(json.dumps(body).encode()), status=200,
                                        preload_content=False)
        return Page(items=items[start:nxt], metadata=SimpleNamespace(_continue=cont, resource_version=rv))
    fn.calls = calls
    return fn


class Forbidden(Exception):
    status = 403


class NotFound(Exception):
    status = 404


def inventory(monkeypatch, slices_fn, classes_fn=None):
    import kubernetes.client as k8s

    from gpuconform.pytest_plugin import inventory as inv_mod
    from gpuconform import kube

    class NoWatch:
        def __init__(self, *a, **k):
            self.initial: list[dict] = []

        def start(self, initial=None, *a, **k):
            self.initial = initial or []
            return self

        def items(self):
            return self.initial

        healthy = True

    monkeypatch.setattr(kube, "Watch", NoWatch)
    monkeypatch.setattr(inv_mod.k8s, "ResourceV1Api", lambda api: SimpleNamespace(
        list_resource_slice=slices_fn, list_device_class=classes_fn or pages([], 100),
        list_device_taint_rule=pages([], 100), list_resource_claim_for_all_namespaces=pages([], 100)))
    monkeypatch.setattr(inv_mod, "log", lambda *a: None)
    all_nodes = NO_PLUGIN["nodes"] + OPERATOR["nodes"]
    core = SimpleNamespace(list_node=pages(all_nodes, 3), list_pod_for_all_namespaces=pages(OPERATOR["pods"], 100))
    cluster = SimpleNamespace(api=k8s.ApiClient(), core=core, request_timeout=1.0)
    return inv_mod.Inventory(load(None, environ={}), cluster)  # type: ignore[arg-type]


def test_discovery_reads_every_slice_with_one_paginated_list_and_puts_dra_nodes_on_their_path(monkeypatch):
    fn = pages(NO_PLUGIN["resourceslices"], 2)
    inv = inventory(monkeypatch, fn)
    found = inv.discover()
    got = [g.name for g in found]
    assert got == CERTIFIED
    assert [c["continue"] for c in fn.calls] == [None, "2"]  # one LIST in two pages, no request per node
    assert {x.name for x in inv.left_out} >= {"gpu-vmpt-0"}
    dra = {g.name: g for g in found if g.path == nodemode.DRA}
    assert set(dra) == {"gpu-dra-0", "gpu-dra-slices-0"}
    assert dra["gpu-dra-slices-0"].dra_driver == dra["gpu-dra-slices-0"].device_class == "gpu.nvidia.com"
    assert inv.dra.startswith("4 ResourceSlice(s) of compute-domain.nvidia.com, gpu.nvidia.com")
    assert set(inv.node_objs) == set(got)


@pytest.mark.parametrize("error,why", [(Forbidden(), "not granted"), (NotFound(), "does not serve resource.k8s.io/v1")])
def test_without_slices_discovery_goes_on_with_the_labels_and_says_why(monkeypatch, error, why):
    def refuse(**kw):
        raise error

    inv = inventory(monkeypatch, refuse)
    got = [g.name for g in inv.discover()]
    assert inv.dra.startswith("DRA not detected: ") and why in inv.dra
    assert inv.paths["gpu-dra-0"] == nodemode.DRA and "gpu-dra-0" in got  # its label still says so
    assert inv.paths["gpu-dra-slices-0"] == nodemode.DEVICE_PLUGIN  # only its slices said so: a labelled GPU node


def test_slices_of_a_driver_that_is_not_a_gpu_driver_never_take_a_gpu_node_out():
    """A NIC's or a tenant's DRA driver publishing slices for a GPU node whose plugin never registered: the node
    stays certified (so its F01 is reported), and the reason names the foreign driver."""
    labels = {"nvidia.com/gpu.present": "true"}
    nic = [{"spec": {"driver": "dra.net.example.com", "nodeName": "n"}}]
    mode = nodemode.allocation_path(labels, {}, {}, nic, "nvidia")
    assert mode.path == nodemode.DEVICE_PLUGIN and "dra.net.example.com" in mode.reason
    gpu = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "n"}}]
    assert nodemode.allocation_path(labels, {}, {}, gpu, "nvidia").path == nodemode.DRA
    assert nodemode.allocation_path(labels, {}, {}, gpu, "amd").path == nodemode.DEVICE_PLUGIN



# NVIDIA's DRA driver chart's DeviceClass on a resource.k8s.io/v1 cluster: its CEL selector, and the extended resource
# name that lets pods requesting nvidia.com/gpu be served by DRA (KEP-5004; kubernetes
# staging/src/k8s.io/api/resource/v1/types.go DeviceClassSpec.ExtendedResourceName, v1.37.2; docs/vendors.md).
GPU_CLASS = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {
    "extendedResourceName": "nvidia.com/gpu",
    "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                         "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
MIG_CLASS = {"metadata": {"name": "mig.nvidia.com"}, "spec": {
    "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                         "device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}}


def test_a_device_class_puts_the_gpu_dra_driver_behind_the_extended_resource_name():
    assert nodemode.extended_classes([GPU_CLASS, MIG_CLASS], "nvidia") == {
        "gpu.nvidia.com": ("gpu.nvidia.com", "nvidia.com/gpu")}
    other = {"metadata": {"name": "x"}, "spec": {"extendedResourceName": "example.com/probe-gpu", "selectors": [
        {"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}  # not a GPU resource of the vendor
    nic = {"metadata": {"name": "y"}, "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": [
        {"cel": {"expression": "device.driver == 'dra.net.example.com'"}}]}}  # not a GPU driver
    assert nodemode.extended_classes([other, nic], "nvidia") == {}
    labels = {"nvidia.com/gpu.present": "true"}
    gpu = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "n"}}]
    mode = nodemode.allocation_path(labels, {}, {}, gpu, "nvidia", nodemode.extended_classes([GPU_CLASS], "nvidia"))
    assert mode.path == nodemode.DRA_EXTENDED and "DeviceClass gpu.nvidia.com" in mode.evidence
    # a device plugin advertising the resource takes precedence (KEP-5004: the scheduler prefers it there)
    plugin = nodemode.allocation_path(labels, {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"}, gpu, "nvidia",
                                      nodemode.extended_classes([GPU_CLASS], "nvidia"))
    assert plugin.path == nodemode.DEVICE_PLUGIN


def test_discovery_reads_the_device_classes_once_where_slices_exist(monkeypatch):
    classes = pages([GPU_CLASS, MIG_CLASS], 100)
    inv = inventory(monkeypatch, pages(NO_PLUGIN["resourceslices"], 2), classes)
    inv.discover()
    assert inv.paths["gpu-dra-slices-0"] == nodemode.DRA_EXTENDED  # certified, on the DRA path
    assert "gpu-dra-slices-0" not in {x.name for x in inv.left_out}
    g = inv.node("gpu-dra-slices-0")
    assert (g.dra_driver, g.device_class, g.extended_resource) == ("gpu.nvidia.com", "gpu.nvidia.com", "nvidia.com/gpu")
    assert len(classes.calls) == 1 and "gpu.nvidia.com->nvidia.com/gpu" in inv.dra


def test_the_operators_dra_node_behind_the_extended_resource_name_is_dra_extended_resource():
    labels = {"nvidia.com/gpu.present": "true", nodemode.DEPLOY_DRA_DRIVER: "true", nodemode.DEPLOY_DEVICE_PLUGIN: "false"}
    gpu = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "n"}}]
    mode = nodemode.allocation_path(labels, {}, {}, gpu, "nvidia", nodemode.extended_classes([GPU_CLASS], "nvidia"))
    assert mode.path == nodemode.DRA_EXTENDED and mode.certified_here
    assert f"label {nodemode.DEPLOY_DRA_DRIVER}=true" in mode.evidence and "extendedResourceName" in mode.evidence
    assert nodemode.allocation_path(labels, {}, {}, gpu, "nvidia", {}).path == nodemode.DRA


def test_a_dra_driver_beside_the_operators_device_plugin_switched_off_is_dra_not_none():
    labels = {"nvidia.com/gpu.present": "true", nodemode.DEPLOY_DEVICE_PLUGIN: "false"}
    gpu = [{"spec": {"driver": "gpu.nvidia.com", "nodeName": "n"}}]
    assert nodemode.allocation_path(labels, {}, {}, gpu, "nvidia").path == nodemode.DRA
    assert nodemode.allocation_path(labels, {}, {}, [], "nvidia").path == nodemode.NONE  # no driver: switched off
    other = [{"spec": {"driver": "dra.net.example.com", "nodeName": "n"}}]
    assert nodemode.allocation_path(labels, {}, {}, other, "nvidia").path == nodemode.NONE


def test_without_device_classes_dra_nodes_are_plain_dra_and_the_report_says_why(monkeypatch):
    def refuse(**kw):
        raise Forbidden()

    inv = inventory(monkeypatch, pages(NO_PLUGIN["resourceslices"], 2), refuse)
    inv.discover()
    assert inv.paths["gpu-dra-slices-0"] == nodemode.DRA
    assert "DeviceClasses not read" in inv.dra and "not granted" in inv.dra



def test_the_header_counts_each_allocation_path():
    from gpuconform.nodes import NOT_APPLICABLE, NOT_SELECTED, LeftOut, path_tally

    left = [LeftOut("b", NOT_APPLICABLE, "r", nodemode.DRA_EXTENDED), LeftOut("e", NOT_APPLICABLE, "r", nodemode.NONE),
            LeftOut("d", NOT_SELECTED, "r")]
    certified = [nodemode.DEVICE_PLUGIN] * 3 + [nodemode.DRA] * 2
    assert path_tally(certified, left) == ("device-plugin 3 (certified here), dra 2 (certified here), "
                                           "dra-extended-resource 1, none 1")
    assert path_tally([], []) == "device-plugin 0 (certified here)"


def test_dra_checks_read_their_nodes_slices_from_the_watch_started_by_discovery(monkeypatch):
    fn = pages(NO_PLUGIN["resourceslices"], 2)
    inv = inventory(monkeypatch, fn)
    inv.discover()
    assert inv.slice_watch is not None  # a DRA node is certified: one watch, from discovery's LIST
    calls = len(fn.calls)
    mine = [s for s in NO_PLUGIN["resourceslices"] if s["spec"].get("nodeName") == "gpu-dra-slices-0"]
    inv.slice_watch.healthy, inv.slice_watch.items = True, lambda: NO_PLUGIN["resourceslices"]
    assert inv.resource_slices("gpu-dra-slices-0") == mine and mine
    assert len(fn.calls) == calls  # no request per node
