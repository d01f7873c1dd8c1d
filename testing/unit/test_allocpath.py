"""One AllocationPath per node (gpuconform/allocpath.py): the facts the checks' one body asks of its node's path,
and the steps picked for it (gpuconform/pytest_plugin/paths.py); no check body branches on the path's name."""

from __future__ import annotations

import re
from pathlib import Path

from gpuconform import nodes
from gpuconform.allocpath import AllocationPath
from gpuconform.pytest_plugin import paths

TESTS = Path(__file__).resolve().parents[2] / "tests"


def node(path: str = "device-plugin", **kw) -> nodes.GpuNode:
    return nodes.GpuNode("n", True, True, 2, 2, (), kw.pop("resource", "nvidia.com/gpu"), path=path, **kw)


def test_a_device_plugin_node_asks_by_resource_and_a_dra_node_by_claim():
    dp = node().allocation
    assert (dp.by_claim, dp.resource, dp.registry_dir) == (False, "nvidia.com/gpu", "device-plugins")
    assert dp.allocate_metric == ("kubelet_device_plugin_alloc_duration_seconds", {"resource_name": "nvidia.com/gpu"})
    plain = node("dra", resource="gpu.nvidia.com", dra_driver="gpu.nvidia.com", device_class="gpu.nvidia.com").allocation
    assert (plain.by_claim, plain.resource, plain.registry_dir, plain.mig) == (True, "", "plugins_registry", False)
    assert plain.allocate_step == "kubelet NodePrepareResources"
    behind = node("dra-extended-resource", dra_driver="gpu.nvidia.com", device_class="gpu.nvidia.com",
                  extended_resource="nvidia.com/gpu").allocation
    assert behind.resource == "nvidia.com/gpu" and behind.by_claim
    mig = node("dra", dra_driver="gpu.nvidia.com", device_class="mig.nvidia.com").allocation
    assert mig.mig


def test_which_checks_are_made_is_the_paths_answer():
    dra = AllocationPath("dra", "", "gpu.nvidia.com", "gpu.nvidia.com")
    assert "topology manager takes no hints" in dra.not_made("test_kubelet_topology_and_cpu_manager_policies_are_as_expected")
    assert dra.not_made("test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node") == ""
    assert dra.not_made("test_burst_allocates_every_free_gpu_once_and_one_more_waits") == ""
    assert AllocationPath().not_made("test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node") == ""
    assert AllocationPath().made_only_elsewhere("test_a_shared_claim_gives_its_pods_one_device_and_is_released_after_them")
    assert not dra.made_only_elsewhere("test_a_shared_claim_gives_its_pods_one_device_and_is_released_after_them")


def test_the_steps_are_picked_by_the_node_and_no_check_body_reads_the_path():
    class Check:
        gpu = node("dra", dra_driver="gpu.nvidia.com", device_class="gpu.nvidia.com")

    assert isinstance(paths.for_check(Check()), paths.DraPath)
    Check.gpu = node()
    assert type(paths.for_check(Check())) is paths.DevicePluginPath
    body = "\n".join(p.read_text() for p in TESTS.rglob("test_*.py"))
    assert not re.search(r"check\.dra\b|is_dra\(|\.path ==|nodemode\.DRA", body)
