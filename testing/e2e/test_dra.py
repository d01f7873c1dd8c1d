"""The DRA path end to end: the bed's DRA node (localcluster/dranode.py: containerd 2.x with CDI, a second kubelet,
the simulated DRA GPU driver, by default in the GPU operator v26.7.0's DRA stack) beside the device-plugin node,
certified in one zero-config run, in each of the bed's DRA shapes. The module brings
the DRA node up and removes it at its end; the DRA fault rows are in the fault matrix (test_fault_matrix.py
DRA_MATRIX). Needs `make cluster-up`."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
from bedtools import KUBECONFIG, bed, kubectl, run_suite

from gpuconform import catalog

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)"),
              pytest.mark.usefixtures("dra_node")]  # conftest.py: the DRA node up for this module

DRA_NODE = "gpu-node-dra"
# the checks made on the DRA path (gpuconform/catalog.py dra=True); the others say NOTCHECKED-DRA-PATH there. The
# rollout rehearsal is made there too, but only with rollout.mode (test_fault_matrix.py's healthy rehearsal)
MADE_ON_DRA = {c.name for c in catalog.CHECKS if c.dra} - {"test_plugin_rollout_keeps_running_gpu_pods_and_admits_new_ones"}
DRA_ONLY = catalog.DRA_ONLY


def test_one_run_certifies_the_device_plugin_node_and_the_dra_node_as_the_gpu_operator_renders_it(tmp_path):
    """The GPU operator v26.7.0's DRA stack (the bed's default shape `operator`): its DeviceClass gpu.nvidia.com
    without extendedResourceName, so the node is plain dra, and its two admin-access operands running there
    (nvidia-dra-validator with one GPU, nvidia-dcgm-exporter-dra with all of them), whose claims do not take a GPU
    from tenants: every check made on the DRA path passes, vector-add through a ResourceClaim of gpu.nvidia.com."""
    bed("dra", "shape", "operator")
    operands = operator_operands()
    assert set(operands) == {"nvidia-dra-validator", "nvidia-dcgm-exporter-dra"}, operands
    junit = tmp_path / "junit.xml"
    certified(tmp_path, "dra", "--junitxml", str(junit))
    through = [p.get("value", "") for p in ElementTree.parse(junit).iter("property") if p.get("name") == "allocated_through"]
    assert through and through[0].startswith("ResourceClaim ") and through[0].endswith("of DeviceClass gpu.nvidia.com"), \
        through
    assert operator_operands() == operands  # still running, on the same claims


def test_the_drivers_chart_with_the_gpu_resource_override_is_certified_behind_the_extended_resource(tmp_path):
    """The driver's own chart rendered with gpuResourcesEnabledOverride=true (shape chart-override): its DeviceClass
    puts gpu.nvidia.com behind extendedResourceName nvidia.com/gpu on resource.k8s.io/v1, so the node is
    dra-extended-resource, and vector-add requests nvidia.com/gpu there."""
    bed("dra", "shape", "chart-override")
    junit = tmp_path / "junit.xml"
    try:
        certified(tmp_path, "dra-extended-resource", "--junitxml", str(junit))
    finally:
        bed("dra", "shape", "operator")
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
    MIG devices only, so no GPU is left for gpu.nvidia.com and the node's checks claim mig.nvidia.com devices;
    isolation counts MIG devices (a claim for two may get two of one GPU). No MIG device is published beside its
    GPU, so the MIG-and-parent check has no pair to try. The operator's two admin-access operands ask
    gpu.nvidia.com and stay Pending (no node): they are no finding on the node."""
    junit = tmp_path / "junit.xml"
    bed("dra", "shape", "static-mig")
    try:
        certified(tmp_path, "dra", "--junitxml", str(junit),
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


def operator_operands() -> dict[str, tuple[str, str]]:
    """The GPU operator's admin-access operands Running on the DRA node: DaemonSet -> (pod, claim), each claim
    allocated with adminAccess on every result (the dcgm-exporter's: all the node's GPUs)."""
    pods = json.loads(kubectl("get", "pods", "-n", "gpu-operator", "-o", "json",
                              "--field-selector", f"spec.nodeName={DRA_NODE}"))["items"]
    claims = {c["metadata"]["name"]: c for c in json.loads(kubectl("get", "resourceclaims", "-n", "gpu-operator",
                                                                  "-o", "json"))["items"]}
    out = {}
    for p in pods:
        owner = (p["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
        if owner not in ("nvidia-dra-validator", "nvidia-dcgm-exporter-dra"):
            continue
        assert p["status"].get("phase") == "Running", (p["metadata"]["name"], p["status"])
        (st,) = p["status"].get("resourceClaimStatuses") or [{}]
        results = claims[st["resourceClaimName"]]["status"]["allocation"]["devices"]["results"]
        assert results and all(r.get("adminAccess") for r in results), results
        assert len(results) == (1 if owner == "nvidia-dra-validator" else 3), results
        out[owner] = (p["metadata"]["name"], st["resourceClaimName"])
    return out


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
    # dra_support is in the AI Conformance checklists of 1.33-1.35 only (KAR-0051: upstream DRA conformance from 1.36)
    assert all("dra_support" not in r["ai_conformance"] for c, r in on_dra.items() if c in MADE_ON_DRA)
    # a DRA-only check is not made (deselected) on the device-plugin node
    assert not [r for r in s["results"] if r["node"] == "gpu-node-0" and r["check"] in DRA_ONLY]
    lat = {x["node"]: x for x in s["latency"]}
    assert lat[DRA_NODE]["path"] == path and lat[DRA_NODE]["allocate"]["step"] == "kubelet NodePrepareResources"
    return s
