"""Topology: under single-numa-node, Guaranteed GPU pods get CPUs and GPUs on one NUMA node."""

import pytest

from gpuconform import verdicts


def test_kubelet_topology_and_cpu_manager_policies_are_as_expected(check):
    """MUST: the kubelet's topologyManagerPolicy (and scope) and cpuManagerPolicy, read from its configz,
    equal the expected ones."""
    check.needs(check.granted("nodes/proxy"), "nodes/proxy not granted: kubelet configz not checked")
    got = verdicts.kubelet_policies(check.kubelet_config())
    check.note("configz", got)
    check.hand_over(verdicts.policy_findings(check.node, got, verdicts.expected_policies(check.cfg.get("topology"))))


@pytest.mark.gpus("all")  # one GPU, but a rejection is only a verdict on a node whose GPUs are otherwise idle
def test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node(check):
    """MUST: a Guaranteed pod with 1 exclusive CPU and 1 GPU is admitted, and its CPUs and GPU sit on one NUMA
    node (in-pod evidence: Cpus_allowed_list, node cpulists, the GPU's numa_node). numa_node -1 is N/A."""
    check.needs_nvidia_tooling("finding the GPU's PCI NUMA node with nvidia-smi")
    free = check.needs_free_gpus(1, beside_run_long=True)  # a run-long pod's device is not fragmentation
    name, state = check.run_to_completion(check.probe_pod("numa", "numa", 1, guaranteed_cpus=1),
                                          allow=("FAIL-F06-TOPOLOGY-AFFINITY",))
    check.hand_over(verdicts.admission_findings(check.node, state, free, check.gpu.advertised or 0,
                                                check.cfg.get("topology.policy")))
    al = verdicts.alignment_from_log(check.log(name))
    check.note("alignment", al.detail)
    check.hand_over(verdicts.numa_findings(check.node, al))
