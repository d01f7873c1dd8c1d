"""The bed's simulated PCI tree (localcluster/gpunode.py write_pci_tree) as the node probe reads it: laid out as a
real A100 host's /sys (relative symlinks, driver links), it must give the verdict a real host would get."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuconform import verdicts
from gpuconform.counts import Expectation
from gpuconform.nodeprobe import gpu_functions, scan_pci

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "localcluster"))
import gpunode  # noqa: E402

GPUS = [{"index": i, "pciBusId": f"00000000:{0x07 + i * 8:02X}:00.0", "numaNode": i // 2} for i in range(4)]
PLAIN = Expectation("nvidia.com/gpu", 4, 1, "nvidia.com/gpu.count=4")
NODE = {"metadata": {"labels": {"nvidia.com/gpu.count": "4"}},
        "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}}


def probe(sys_root: Path) -> dict:
    return {"pci": scan_pci(str(sys_root), "0x10de"), "podResources": {}, "allocatable": {}, "checkpoint": {}}


def test_the_bed_tree_reads_as_four_gpus_for_containers_one_for_a_vm_and_no_bridge_or_vf(tmp_path):
    gpunode.write_pci_tree(tmp_path, GPUS)
    part = scan_pci(str(tmp_path), "0x10de")
    assert part["error"] is None
    drivers = {f["address"]: f["driver"] for f in part["functions"]}
    assert drivers == {"0000:07:00.0": "nvidia", "0000:07:00.4": None, "0000:0f:00.0": "nvidia",
                       "0000:17:00.0": "nvidia", "0000:1f:00.0": "nvidia", gpunode.VM_GPU_BDF: "vfio-pci",
                       "0000:c1:00.0": "nvidia-nvswitch"}
    assert len(gpu_functions(part["functions"])) == 5  # the VM's GPU is a GPU; the VF and the NVSwitch are not
    found, ev = verdicts.hardware_findings("gpu-node-0", PLAIN, NODE, probe(tmp_path))
    assert found == [] and len(ev["pci GPUs"]) == 4
    assert ev["set aside for VMs (VFIO), not counted"] == [f"{gpunode.VM_GPU_BDF} vfio-pci"]


def test_a_gpu_off_the_bus_in_the_bed_tree_is_a_label_hardware_mismatch(tmp_path):
    gpunode.write_pci_tree(tmp_path, GPUS, off_bus=(2,))
    found, _ = verdicts.hardware_findings("gpu-node-0", PLAIN, NODE, probe(tmp_path))
    assert [f.code for f in found] == ["FAIL-F04-LABEL-HARDWARE-MISMATCH", "FAIL-F04-OVERADVERTISED"]
