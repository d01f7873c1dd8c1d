"""Truth per node: each node is judged by what it advertises and what its hardware is, never by a cluster-wide
setting. The recorded nodes (testing/unit/data/layouts/nvidia-shapes.json, each with the upstream source of its
shape in its `gpuconform.test/why` annotation) are healthy clusters of the shapes issue 16 names, which the suite
failed before this change; each shape also has a broken twin that must still fail with its code."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuconform import config as gconfig
from gpuconform.counts import expectation, may_count_one_model
from gpuconform.verdicts.counts import check_counts, stale_resources
from gpuconform.probes import Gpu, Mig
from gpuconform.verdicts import (Seen, burst_findings, capacity_findings, count_findings, hardware_findings,
                                 isolation_findings, with_pci_count)

DATA = json.loads((Path(__file__).parent / "data" / "layouts" / "nvidia-shapes.json").read_text())
CFG = gconfig.load(None, {"preset": "nvidia"}, environ={}).data  # zero config: every setting `auto`
U = ["GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f90" + str(i) for i in range(4)]
M = ["MIG-6c4e1f0a-2b3d-5e7f-8a9b-0c1d2e3f4a5" + str(i) for i in range(4)]


def node(name: str, **capacity: str) -> dict:
    n = copy.deepcopy(next(n for n in DATA["nodes"] if n["metadata"]["name"] == name))
    for k, v in capacity.items():
        key = "nvidia.com/" + k.replace("_", "-").replace("-dot-", ".")
        n["status"]["capacity"][key] = n["status"]["allocatable"][key] = v
    return n


def probe(name: str, functions: list[dict] | None = None) -> dict:
    return {"pci": {"root": "/sys", "error": None, "functions": DATA["pci"].get(name, []) if functions is None
                    else functions}}


def pci_gpus(n: int, device: str = "0x20b0") -> list[dict]:
    return [{"address": f"0000:{0x17 + i:02x}:00.0", "vendor": "0x10de", "device": device, "class": "0x030200",
             "numa": 0, "virtfn": False, "driver": "nvidia"} for i in range(n)]


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def healthy(n: dict) -> list:
    exp = expectation(n, CFG)
    return check_counts(n, exp) + stale_resources(n, exp) + capacity_findings(n, exp)


@pytest.mark.parametrize("name", [n["metadata"]["name"] for n in DATA["nodes"]])
def test_every_recorded_healthy_shape_passes_the_count_and_capacity_checks(name):
    n = node(name)
    exp = expectation(n, CFG)
    if may_count_one_model(n, exp):  # the count check then asks the PCI bus (two models on one node)
        exp = with_pci_count(exp, probe(name))
    assert check_counts(n, exp) + stale_resources(n, exp) + capacity_findings(n, exp) == [], exp
    assert exp.workload_resource in n["status"]["allocatable"] and set(exp.basis) == {"resource", "physical",
                                                                                      "replicas", "mig"}


# ------------------------------------------------------------ 1. the MIG strategy label on plain nodes

@pytest.mark.parametrize("name", ["single-plain-0", "single-t4-0"])
def test_mig_strategy_label_of_a_default_operator_install_does_not_make_a_plain_node_mig(name):
    """Before: unit "mig" -> the isolation pod seeing one whole GPU was FAIL-F12-DEVICE-NOT-INJECTED, and the PCI
    check ignored the count label."""
    n = node(name)
    exp = expectation(n, CFG)
    assert (exp.mig_strategy, exp.unit, exp.per_device) == ("none", "gpu", 1)
    assert "mig.strategy=single" in exp.basis["mig"] and "names no MIG profile" in exp.basis["mig"]
    zero, one = Seen("p0", 0, [], []), Seen("p1", 1, ["/dev/nvidia0"], [Gpu(0, "A100", U[0])])
    assert isolation_findings(name, zero, one, exp.unit, exp.per_device) == []
    gpus = int(n["metadata"]["labels"]["nvidia.com/gpu.count"])
    assert hardware_findings(name, exp, n, probe(name, pci_gpus(gpus)))[0] == []
    # the label is judged against the bus again: a GPU off the bus is found
    assert codes(hardware_findings(name, exp, n, probe(name, pci_gpus(gpus - 1)))[0]) == [
        "FAIL-F04-LABEL-HARDWARE-MISMATCH", "FAIL-F04-OVERADVERTISED"]


def test_a_configured_mig_strategy_is_still_taken_as_stated():
    pinned = copy.deepcopy(CFG)
    pinned["mig"]["strategy"] = "single"
    assert expectation(node("single-plain-0"), pinned).unit == "mig"


# ------------------------------------------------------------ 2. MIG single with time-slicing

def test_mig_single_with_time_slicing_lets_replicas_share_a_mig_device():
    """Before: per_device 1 -> the isolation pod was F12 and two burst pods on one MIG device were
    FAIL-DOUBLE-ALLOCATION."""
    n = node("single-ts-0")
    exp = expectation(n, CFG)
    assert (exp.mig_strategy, exp.unit, exp.replicas, exp.per_device, exp.advertised) == ("single", "mig", 2, 2, 56)
    gpu = Gpu(0, "A100", U[0], (Mig(0, "1g.5gb", M[0]),))
    one = Seen("p1", 1, ["/dev/nvidia0"], [gpu])
    assert isolation_findings("single-ts-0", Seen("p0", 0, [], []), one, exp.unit, exp.per_device) == []
    assert burst_findings("single-ts-0", [Seen("b0", 1, ["/dev/nvidia0"], [gpu]),
                                          Seen("b1", 1, ["/dev/nvidia0"], [gpu])], exp.per_device)[0] == []
    three = [Seen(f"b{i}", 1, ["/dev/nvidia0"], [gpu]) for i in range(3)]
    assert codes(burst_findings("single-ts-0", three, exp.per_device)[0]) == ["FAIL-DOUBLE-ALLOCATION"]
    assert codes(check_counts(node("single-ts-0", gpu="57"), exp)) == ["FAIL-F04-OVERADVERTISED"]


# ------------------------------------------------------------ 3. MIG mixed with time-sliced whole GPUs

def test_mig_mixed_whole_gpus_are_counted_with_their_replicas():
    """Before: 4 time-sliced replicas of the one whole GPU were FAIL-F04-OVERADVERTISED (> 2 GPUs - 1)."""
    assert healthy(node("mixed-ts-0")) == []
    over = node("mixed-ts-0", gpu="8")
    f = check_counts(over, expectation(over, CFG))
    assert codes(f) == ["FAIL-F04-OVERADVERTISED"] and "at most 1 x 4 replicas = 4" in f[0].message


# ------------------------------------------------------------ 4. two GPU models on one node

def test_two_models_on_one_node_are_counted_on_the_pci_bus():
    """Before: GFD's gpu.count=1 (the T4) against 3 advertised was FAIL-F04-OVERADVERTISED in the count check and
    FAIL-F04-LABEL-HARDWARE-MISMATCH in the PCI check."""
    n = node("two-models-0")
    exp = expectation(n, CFG)
    label_only = check_counts(n, exp)
    assert codes(label_only) == ["FAIL-F04-OVERADVERTISED"] and "one GPU model" in label_only[0].message
    assert may_count_one_model(n, exp)
    counted = with_pci_count(exp, probe("two-models-0"))
    assert counted.physical == 3 and "0x20f1" in counted.basis["physical"]
    assert check_counts(n, counted) == []
    assert hardware_findings("two-models-0", exp, n, probe("two-models-0"))[0] == []


def test_two_models_over_advertised_still_fails_on_both_checks():
    n = node("two-models-0", gpu="5")
    exp = expectation(n, CFG)
    assert codes(check_counts(n, with_pci_count(exp, probe("two-models-0")))) == ["FAIL-F04-OVERADVERTISED"]
    assert codes(hardware_findings("two-models-0", exp, n, probe("two-models-0"))[0]) == ["FAIL-F04-OVERADVERTISED"]
    # a count that matches neither a model nor the bus is still a label/hardware mismatch
    wrong = node("two-models-0")
    wrong["metadata"]["labels"]["nvidia.com/gpu.count"] = "4"
    assert codes(hardware_findings("two-models-0", exp, wrong, probe("two-models-0"))[0]) == [
        "FAIL-F04-LABEL-HARDWARE-MISMATCH"]


def test_a_single_model_node_never_asks_the_bus():
    n = node("single-plain-0")
    assert not may_count_one_model(n, expectation(n, CFG))


# ------------------------------------------------------------ 5. MIG names on plugins before v0.20.0

def test_mig_devices_with_attributes_under_their_base_name_pass_on_an_old_plugin():
    """Before: FAIL-F09-MIG-MISMATCH (mig-1g.10gb.me and mig-1c.3g.40gb absent) and F04-STALE-RESOURCE (mig-3g.40gb)."""
    old = expectation(node("old-plugin-mig-0"), CFG)
    assert old.mig_profiles == {"nvidia.com/mig-1g.10gb": 3, "nvidia.com/mig-3g.40gb": 2}
    assert "before v0.20.0" in old.basis["mig"]
    new = expectation(node("new-plugin-mig-0"), CFG)
    assert new.mig_profiles == {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-1g.10gb.me": 1}


def test_a_missing_mig_device_is_still_found_on_either_plugin_version():
    old = node("old-plugin-mig-0", **{"mig_1g_dot_10gb": "2"})  # the +me device missing, 1c.3g under 3g
    assert "FAIL-F09-MIG-MISMATCH" in codes(healthy(old))
    new = node("new-plugin-mig-0")
    del new["status"]["capacity"]["nvidia.com/mig-1g.10gb.me"], new["status"]["allocatable"]["nvidia.com/mig-1g.10gb.me"]
    assert codes(check_counts(new, expectation(new, CFG))) == ["FAIL-F09-MIG-MISMATCH"]


# ------------------------------------------------------------ 6. Jetson / Tegra root ports

def test_tegra_root_ports_alone_leave_the_pci_count_not_checked():
    """Before: NVIDIA-vendor bridges made the function list non-empty with 0 GPUs: FAIL-F04-LABEL-HARDWARE-MISMATCH."""
    n = node("jetson-0")
    found, _ = hardware_findings("jetson-0", expectation(n, CFG), n, probe("jetson-0"))
    assert codes(found) == ["NOTCHECKED-OPTIONAL"] and "only PCI bridges: 0001:00:00.0, 0004:00:00.0" in found[0].message


def test_a_vendor_function_that_is_not_a_bridge_keeps_the_pci_count_checked():
    n = node("jetson-0")
    audio = {"address": "0000:17:00.1", "vendor": "0x10de", "device": "0x10f0", "class": "0x040300", "numa": 0,
             "virtfn": False, "driver": None}
    found, _ = hardware_findings("jetson-0", expectation(n, CFG), n,
                                 probe("jetson-0", DATA["pci"]["jetson-0"] + [audio]))
    assert codes(found) == ["FAIL-F04-LABEL-HARDWARE-MISMATCH", "FAIL-F04-OVERADVERTISED"]


# ------------------------------------------------------------ a count that cannot be known never passes

def test_a_node_without_a_gpu_count_is_not_checked_rather_than_passed():
    """Before: no nvidia.com/gpu.count label (GFD not running) let the count check pass with nothing compared."""
    n = node("single-plain-0")
    del n["metadata"]["labels"]["nvidia.com/gpu.count"]
    f = count_findings(n, expectation(n, CFG))
    assert codes(f) == ["NOTCHECKED-OPTIONAL"] and "count is unknown" in f[0].message and "4 nvidia.com/gpu" in f[0].message
    n["status"]["capacity"]["nvidia.com/mig-1g.5gb"] = "7"  # a real finding still comes first
    assert codes(count_findings(n, expectation(n, CFG)))[0] == "FAIL-F04-STALE-RESOURCE"
