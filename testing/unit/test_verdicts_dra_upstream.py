"""The DRA verdicts judged against upstream's own objects (testing/unit/data/dra/: each shape recorded from its
source, with the verdict a correct suite gives), and the verdicts that only exist beside them."""

from __future__ import annotations

from test_dradevices import FOUR, D, slice_

from gpuconform import verdicts


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
