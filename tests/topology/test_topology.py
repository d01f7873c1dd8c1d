"""Topology: under single-numa-node, Guaranteed GPU pods get CPUs and GPUs on one NUMA node."""

import pytest

from gpuconform import verdicts


def test_kubelet_topology_and_cpu_manager_policies_are_as_expected(check):
    """MUST: the kubelet's topologyManagerPolicy (and scope) and cpuManagerPolicy, read from its configz,
    equal the expected ones."""
    got = verdicts.kubelet_policies(check.kubelet_config(required=True))
    check.note("configz", got)
    check.hand_over(verdicts.policy_findings(check.node, got, verdicts.expected_policies(check.cfg.get("topology"))))


@pytest.mark.gpus("all")  # one GPU, but a rejection is only a verdict on a node whose GPUs are otherwise idle
def test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node(check):
    """MUST: a Guaranteed pod with 1 exclusive CPU and 1 GPU is admitted, and its CPUs and GPU sit on one NUMA
    node (in-pod evidence: Cpus_allowed_list, node cpulists, the GPU's numa_node). numa_node -1 is N/A. On a DRA
    node, where a claim aligns its devices by their published topology: the driver's resource.kubernetes.io/
    numaNode and pcieRoot are where the PCI tree has its devices (NOTCHECKED where it publishes neither)."""
    check.path.numa()
