"""The DRA path end to end: the bed's DRA node (localcluster/dranode.py: containerd 2.x with CDI, a second kubelet,
the simulated DRA GPU driver) beside the device-plugin node, certified in one zero-config run. The module brings
the DRA node up and removes it at its end; the DRA fault rows are in the fault matrix (test_fault_matrix.py
DRA_MATRIX). Needs `make cluster-up`."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
from bedtools import KUBECONFIG, bed, run_suite

from gpuconform import catalog

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)"),
              pytest.mark.usefixtures("dra_node")]  # conftest.py: the DRA node up for this module

DRA_NODE = "gpu-node-dra"
# the checks made on the DRA path (gpuconform/catalog.py dra=True); the others say NOTCHECKED-DRA-PATH there
MADE_ON_DRA = {c.name for c in catalog.CHECKS if c.dra}
DRA_ONLY = catalog.DRA_ONLY


def test_one_run_certifies_the_device_plugin_node_and_the_dra_node_behind_the_extended_resource(tmp_path):
    """The operator's DRA stack with the chart's DeviceClass (extendedResourceName nvidia.com/gpu on
    resource.k8s.io/v1): the node is dra-extended-resource, and vector-add requests nvidia.com/gpu there."""
    junit = tmp_path / "junit.xml"
    certified(tmp_path, "dra-extended-resource", "--junitxml", str(junit))
    through = [p.get("value", "") for p in ElementTree.parse(junit).iter("property") if p.get("name") == "allocated_through"]
    assert through and through[0].startswith("nvidia.com/gpu (extended resource, KEP-5004): ResourceClaim vectoradd-"), through


def test_a_dra_driver_without_the_extended_resource_beside_the_operators_plugin_switched_off_is_certified(tmp_path):
    """The driver's own chart on a node whose operator device plugin is switched off by label, its DeviceClass
    without extendedResourceName: the node is plain dra (once left out as `none` by the label)."""
    bed("dra", "shape", "helm-plain")
    try:
        certified(tmp_path, "dra")
    finally:
        bed("dra", "shape", "operator")


def test_a_dra_node_whose_gpus_are_in_mig_mode_is_certified_through_claims_of_mig_devices(tmp_path):
    """The operator's DRA stack on GPUs in MIG mode (static MIG: 3g.20gb + 2 x 1g.5gb each): the driver publishes
    MIG devices only, so nothing is left behind nvidia.com/gpu and the node's checks claim mig.nvidia.com devices;
    isolation counts MIG devices (a claim for two may get two of one GPU). No MIG device is published beside its
    GPU, so the MIG-and-parent check has no pair to try."""
    junit = tmp_path / "junit.xml"
    bed("dra", "shape", "static-mig")
    try:
        certified(tmp_path, "dra-extended-resource", "--junitxml", str(junit),
                  not_made={"test_a_mig_device_and_its_parent_gpu_are_never_both_allocated": "NOTCHECKED-DRA-NO-MIG"})
    finally:
        bed("dra", "shape", "operator")
    through = [p.get("value", "") for p in ElementTree.parse(junit).iter("property") if p.get("name") == "allocated_through"]
    assert any(t.endswith("of DeviceClass mig.nvidia.com") for t in through), through


def test_on_gpus_in_mig_mode_a_mig_device_injected_into_two_claims_containers_is_caught(tmp_path):
    """The same checks fail in MIG mode: with double-inject the driver injects GPU 0's first MIG device for every
    claim, so the burst's pods (a claim each) see one MIG UUID."""
    bed("dra", "shape", "static-mig")
    try:
        bed("dra", "fault", "double-inject")
        rc, s = run_suite(tmp_path, "-k", "dra and burst")
    finally:
        bed("dra", "shape", "operator")
    got = {r["check"]: r for r in s["results"] if r["node"] == DRA_NODE}
    burst = got["test_burst_allocates_every_free_gpu_once_and_one_more_waits"]
    assert rc == 1 and burst["reason"] == "FAIL-DRA-DOUBLE-INJECTION", burst
    assert "device MIG-" in burst["message"] and "each with its own ResourceClaim" in burst["message"], burst["message"]


def certified(tmp_path, path: str, *args: str, not_made: dict[str, str] | None = None) -> dict:
    """One zero-config run certifies gpu-node-0 (device plugin) and the DRA node on `path`; every check made on
    the DRA path passes there (but those in `not_made`, which say their code) and the others say
    NOTCHECKED-DRA-PATH."""
    not_made = not_made or {}
    rc, s = run_suite(tmp_path, *args)
    assert rc == 0 and s["exit_status"] == 0, json.dumps([r for r in s["results"] if r["outcome"] != "passed"])
    assert DRA_NODE in s["certified_nodes"] and "gpu-node-0" in s["certified_nodes"]
    paths = s["environment"]["allocation paths (GPU nodes)"]
    assert paths.startswith(f"device-plugin 1 (certified here), {path} 1 (certified here)"), paths
    on_dra = {r["check"]: r for r in s["results"] if r["node"] == DRA_NODE}
    assert {c: r["reason"] for c, r in on_dra.items() if c in not_made} == not_made
    assert {c for c, r in on_dra.items() if r["outcome"] == "passed"} == MADE_ON_DRA - set(not_made)
    assert all(r["reason"] == "NOTCHECKED-DRA-PATH" for c, r in on_dra.items() if c not in MADE_ON_DRA)
    assert all("dra_support" in r["ai_conformance"] for c, r in on_dra.items() if c in MADE_ON_DRA)
    # a DRA-only check is not made (deselected) on the device-plugin node
    assert not [r for r in s["results"] if r["node"] == "gpu-node-0" and r["check"] in DRA_ONLY]
    lat = {x["node"]: x for x in s["latency"]}
    assert lat[DRA_NODE]["path"] == path and lat[DRA_NODE]["allocate"]["step"] == "kubelet NodePrepareResources"
    return s
