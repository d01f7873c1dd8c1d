"""The DRA verdicts judged against upstream's own objects (testing/unit/data/dra/: each shape recorded from its
source, with the verdict a correct suite gives), and the verdicts that only exist beside them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_dradevices import FOUR, D, slice_

from gpuconform import discovery, dradevices, nodemode, verdicts
from gpuconform.counts import Expectation


def test_a_device_plugin_node_whose_gpus_a_dra_driver_also_publishes_is_offered_twice():
    node = {"metadata": {"name": "node-a"}, "status": {"capacity": {"nvidia.com/gpu": "4"}}}
    found, ev = verdicts.dra.offered_twice_findings(node, ["nvidia.com/gpu"], D, FOUR)
    assert [f.code for f in found] == ["FAIL-GPU-OFFERED-TWICE"]
    assert "nvidia.com/gpu=4" in found[0].message and "4 GPU(s)" in found[0].message
    assert verdicts.dra.offered_twice_findings(node, ["nvidia.com/gpu"], D, [])[0] == []
    nic = [slice_([{"name": "eth0"}], driver="dra.net.example.com")]
    assert verdicts.dra.offered_twice_findings(node, ["nvidia.com/gpu"], D, nic)[0] == []
    gone = {"metadata": {"name": "node-a"}, "status": {"capacity": {"nvidia.com/gpu": "0"}}}
    assert verdicts.dra.offered_twice_findings(gone, ["nvidia.com/gpu"], D, FOUR)[0] == []


# ---------------------------------------------------------------- upstream's shapes (testing/unit/data/dra/)

SHAPES = Path(__file__).parent / "data" / "dra"
NAMES = sorted(p.stem for p in SHAPES.glob("*.yaml"))
# read mid-republish: one read sees the pool incomplete (no device offered); the capacity check reads again
TRANSIENT = {"pool-mid-republish"}


def shape(name: str) -> dict:
    return yaml.safe_load((SHAPES / f"{name}.yaml").read_text())


def judged(s: dict) -> dict:
    """What the suite concludes of a recorded shape: its path, driver, class, physical GPUs, free devices,
    withheld devices and driver pods."""
    vendor, node, slices = s["vendor"], s["node"], s.get("resourceSlices") or []
    classes, claims, rules = s.get("deviceClasses") or [], s.get("resourceClaims") or [], s.get("deviceTaintRules") or []
    extended = nodemode.extended_classes(classes, vendor)
    path = nodemode.of_node(node, slices, vendor, extended).path
    names = {(c.get("metadata") or {}).get("name") for c in classes}
    o = dradevices.offer(nodemode.GPU_DRA_DRIVERS[vendor], slices, extended if path == nodemode.DRA_EXTENDED else None,
                         nodemode.MIG_DEVICE_CLASSES, names.__contains__, claims, rules)
    found = discovery.find_plugin_pods(s.get("pods") or [], vendor, dra=True)
    return {"path": path, "driver": o.driver, "deviceClass": o.device_class, "free": o.free,
            "physicalGpus": len(dradevices.physical_gpus(o.driver, slices)),
            "withheld": sorted(dradevices.withheld(o.driver, slices, rules)),
            "driverPods": sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in found.pods)}


def test_every_shape_names_its_source_and_its_verdict():
    assert len(NAMES) >= 16
    for name in NAMES:
        s = shape(name)
        assert s["source"] and s["expect"]["path"] in (*nodemode.DRA_PATHS, nodemode.DEVICE_PLUGIN), name


@pytest.mark.parametrize("name", NAMES)
def test_upstreams_shape_gets_its_expected_verdict(name):
    s = shape(name)
    want, got = s["expect"], judged(s)
    assert got["path"] == want["path"]
    assert (got["driver"], got["deviceClass"]) == (want["driver"], want["deviceClass"])
    if name not in TRANSIENT:  # mid-republish, one GPU's slice is still of the old generation
        assert got["physicalGpus"] == want["physicalGpus"]
    assert got["withheld"] == sorted(want["withheld"])
    assert got["driverPods"] == sorted(want["driverPods"])
    if got["path"] == nodemode.DEVICE_PLUGIN:
        return
    assert got["free"] == (0 if name in TRANSIENT else want["freeForClass"]), want.get("notes")


def test_the_operators_admin_access_pods_hold_no_device_and_counting_pod_claims_would_say_two():
    """The false FAIL-F04-OVERADVERTISED this replaces: one GPU off per claim reference of the node's pods."""
    from gpuconform.counts import free_by_claims

    s = shape("operator-v26.7")
    assert judged(s)["free"] == 4
    assert free_by_claims(4, s["pods"]) < 4


def test_a_pool_read_mid_republish_fails_once_and_the_settled_pool_passes():
    s = shape("pool-mid-republish")
    found, _ = verdicts.dra.slice_findings("node-a", D, s["resourceSlices"])
    assert [f.code for f in found] == ["FAIL-DRA-POOL-INCOMPLETE"]


def test_a_device_plugin_node_with_the_same_gpus_in_dra_slices_is_offered_twice():
    s = shape("device-plugin-and-dra")
    found, _ = verdicts.dra.offered_twice_findings(s["node"], ["nvidia.com/gpu"], D, s["resourceSlices"])
    assert [f.code for f in found] == ["FAIL-GPU-OFFERED-TWICE"]


def test_a_device_taint_rule_withholds_its_device_in_the_count_check():
    s = shape("device-taint-rule")
    exp = Expectation("nvidia.com/gpu", 2, 1, "label")
    found = verdicts.offer_findings("node-a", exp, dradevices.published(D, s["resourceSlices"], s["deviceTaintRules"]))
    assert [f.code for f in found] == ["FAIL-F03-UNHEALTHY-DEVICES"] and "DeviceTaintRule" in found[0].message
    ok = verdicts.offer_findings("node-a", exp, dradevices.published(D, s["resourceSlices"]))
    assert ok == []  # the slice alone says nothing: what the suite saw before it read the rules


def test_intel_and_amd_dra_nodes_are_not_counted_against_nvidias_pci_functions():
    for name, driver in (("intel-vfs", "gpu.intel.com"), ("amd-partitions", "gpu.amd.com")):
        s = shape(name)
        exp = Expectation(resource=driver, physical=None, replicas=1, source="no label", vendor=s["vendor"])
        found, _ = verdicts.hardware_findings("node-a", exp, {"metadata": {"labels": {}}}, {},
                                              dradevices.published(driver, s["resourceSlices"]))
        assert [f.code for f in found] == ["NOTCHECKED-OPTIONAL"], name
