"""Per-node expectations against labels written by NVIDIA's own GPU Feature Discovery, not by our reading of it.

testing/unit/data/gfd/*.labels were produced by the real GFD (k8s-device-plugin v0.19.3, built from the Go module)
run once per hardware shape over our mock NVML (localcluster/mocknvml; run_gfd.sh there regenerates them; each
file's header names the hardware config, the command line and the date). The labels are GFD's, verbatim. The
capacity of each Node is what the device plugin of the same tag advertises for that shape, stated here with its
upstream reason (the plugin itself was not run against these shapes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuconform import config as gconfig
from gpuconform.counts import expectation, may_count_one_model
from gpuconform.verdicts.counts import check_counts
from gpuconform.verdicts import with_pci_count

DATA = Path(__file__).parent / "data" / "gfd"
pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"no recorded GFD output in {DATA}")


def read_labels(path: Path) -> dict[str, str]:
    """A GFD output file (key=value a line); lines starting with # are our provenance header."""
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k] = v
    return out


def recorded(prefix: str) -> list[Path]:
    """The recorded outputs of one shape: one file, or one per distinct output where GFD's output varied."""
    return sorted(p for p in DATA.glob(f"{prefix}*.labels") if p.name == f"{prefix}.labels"
                  or p.name.startswith(f"{prefix}."))


def node(labels: dict[str, str], capacity: dict[str, str], name: str = "gpu-node") -> dict:
    base = {"cpu": "32", "memory": "263921616Ki", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"capacity": {**base, **capacity}, "allocatable": {**base, **capacity}}}


def cfg() -> dict:
    return gconfig.load(None, {"preset": "nvidia"}, environ={}).data


# shape -> (capacity the v0.19.3 plugin advertises and why, expected (unit, per_device, mig_strategy, resource,
# physical, replicas))
SHAPES = {
    # strategy none: one nvidia.com/gpu device per GPU (internal/rm/device_map.go buildGPUDeviceMap)
    "a-a100x4-none": ({"nvidia.com/gpu": "4"}, ("gpu", 1, "none", "nvidia.com/gpu", 4, 1)),
    # single/mixed with no GPU in MIG mode: buildGPUDeviceMap keeps every GPU (it skips only MIG-enabled ones), and
    # buildMigDeviceMap finds no MIG device, so the whole GPUs stay nvidia.com/gpu
    "b-a100x4-single": ({"nvidia.com/gpu": "4"}, ("gpu", 1, "none", "nvidia.com/gpu", 4, 1)),
    "b2-a100x4-mixed": ({"nvidia.com/gpu": "4"}, ("gpu", 1, "none", "nvidia.com/gpu", 4, 1)),
    # single, every GPU in MIG mode: the 28 MIG devices are nvidia.com/gpu (buildMigDeviceMap with the default
    # single-strategy resource), and time-slicing nvidia.com/gpu x2 lists each twice (updateDeviceMapWithReplicas)
    "c-a100x4-mig1g5gb-single-ts2": ({"nvidia.com/gpu": "56"}, ("mig", 2, "single", "nvidia.com/gpu", 28, 2)),
    # mixed: GPU 0's seven MIG devices as nvidia.com/mig-1g.10gb (no time-slicing configured for it); GPU 1, not in
    # MIG mode, stays nvidia.com/gpu and is time-sliced x4
    "d-a100-80x2-mig-mixed-ts4": ({"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "7"},
                                  ("mig", 1, "mixed", "nvidia.com/gpu", 2, 4)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_recorded_gfd_shape(shape):
    files = recorded(shape)
    assert len(files) == 1, f"{shape}: expected one recorded output, found {[p.name for p in files]}"
    capacity, (unit, per_device, mig, resource, physical, replicas) = SHAPES[shape]
    n = node(read_labels(files[0]), capacity)
    exp = expectation(n, cfg())
    assert (exp.unit, exp.per_device, exp.mig_strategy) == (unit, per_device, mig), exp.basis
    assert (exp.resource, exp.physical, exp.replicas) == (resource, physical, replicas), exp.basis
    assert check_counts(n, exp) == []


def test_mixed_profiles_from_recorded_labels():
    """MIG mixed: the profile and its count come from GFD's own nvidia.com/mig-<profile>.count."""
    labels = read_labels(recorded("d-a100-80x2-mig-mixed-ts4")[0])
    exp = expectation(node(labels, SHAPES["d-a100-80x2-mig-mixed-ts4"][0]), cfg())
    assert exp.mig_profiles == {"nvidia.com/mig-1g.10gb": 7}
    assert exp.whole_gpus_too and exp.workload_resource == "nvidia.com/mig-1g.10gb"


def test_gfd_writes_mig_strategy_on_a_node_without_mig():
    """What issue 15 said, measured: with strategy single or mixed GFD writes nvidia.com/mig.strategy on a node whose
    GPUs are all whole, and the product names no MIG profile; with none it writes no strategy label at all."""
    for shape, want in (("a-a100x4-none", None), ("b-a100x4-single", "single"), ("b2-a100x4-mixed", "mixed")):
        labels = read_labels(recorded(shape)[0])
        assert labels.get("nvidia.com/mig.strategy") == want, shape
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB", shape
        assert labels["nvidia.com/gpu.count"] == "4", shape
        assert not any(k.startswith("nvidia.com/mig-") for k in labels), shape


@pytest.mark.parametrize("path", recorded("e-a100pcie2-t4-none"), ids=lambda p: p.name)
def test_two_models_on_one_node_are_counted_on_the_pci_bus(path):
    """GFD v0.19.3 labels one model only, picked by Go map iteration order (internal/lm/mig-strategy.go
    newGPULabelers; the recorded runs gave Tesla-T4 count=1 or NVIDIA-A100-PCIE-40GB count=2), while the plugin
    advertises all 3 GPUs (strategy none: the default resource pattern "*" matches both names). From the labels
    alone the node looks over-advertised, and the finding says why the label may be short; the count check then
    asks the PCI bus (the node probe), which counts both models, and the node passes."""
    n = node(read_labels(path), {"nvidia.com/gpu": "3"})
    exp = expectation(n, cfg())
    assert (exp.unit, exp.per_device, exp.mig_strategy) == ("gpu", 1, "none")
    findings = check_counts(n, exp)
    assert [f.code for f in findings] == ["FAIL-F04-OVERADVERTISED"]
    assert "covers one GPU model" in findings[0].message and may_count_one_model(n, exp)
    bus = [{"address": f"0000:{a}:00.0", "vendor": "0x10de", "device": d, "class": "0x030200", "numa": 0,
            "virtfn": False, "driver": "nvidia"} for a, d in (("17", "0x20f1"), ("65", "0x20f1"), ("ca", "0x1eb8"))]
    assert check_counts(n, with_pci_count(exp, {"pci": {"root": "/sys", "error": None, "functions": bus}})) == []
