"""Topology: under single-numa-node, Guaranteed GPU pods get CPUs and GPUs on one NUMA node."""

import pytest

from gpuconform.pytest_plugin.checks import hand_over, require_free_gpus, require_nvidia_tooling
from gpuconform import pods, verdicts


def test_kubelet_topology_and_cpu_manager_policies_are_as_expected(run, cfg, gpu_node, evidence):
    """MUST: the kubelet's topologyManagerPolicy (and scope) and cpuManagerPolicy, read from its configz,
    equal the expected ones."""
    hand_over(verdicts.not_checked(run.optional.get("nodes/proxy", False),
                                   "nodes/proxy not granted: kubelet configz not checked"))
    got = verdicts.kubelet_policies(run.kubelet_config(gpu_node))
    evidence.note("configz", got)
    hand_over(verdicts.policy_findings(gpu_node, got, verdicts.expected_policies(cfg.get("topology"))))


@pytest.mark.gpus("all")  # one GPU, but a rejection is only a verdict on a node whose GPUs are otherwise idle
def test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a Guaranteed pod with 1 exclusive CPU and 1 GPU is admitted, and its CPUs and GPU sit on one NUMA
    node (in-pod evidence: Cpus_allowed_list, node cpulists, the GPU's numa_node). numa_node -1 is N/A."""
    require_nvidia_tooling(cfg, "finding the GPU's PCI NUMA node with nvidia-smi")
    free = require_free_gpus(run, gpu_node, 1)
    ns = run.ensure_namespace()
    name = pod_runner.create(pods.probe_pod(pods.pod_name("numa", gpu_node), ns, run.run_id, "numa", gpu_node, cfg, 1,
                                            guaranteed_cpus=1, deadline=cfg.seconds("timeouts.podComplete"),
                                            resource=run.node(gpu_node).resource))
    state = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node,
                            allow=("GPU-F06-TOPOLOGY-AFFINITY",))[name]
    # the suite's own run-long pod (spans_run) holds a device but no exclusive CPU: it fragments nothing
    hand_over(verdicts.admission_findings(gpu_node, state, free + run.held_for_run.get(gpu_node, 0),
                                          run.node(gpu_node).advertised or 0, cfg.get("topology.policy")))
    al = verdicts.alignment_from_log(run.pod_log(ns, name))
    evidence.note("alignment", al.detail)
    hand_over(verdicts.numa_findings(gpu_node, al))
