"""Topology: under single-numa-node, Guaranteed GPU pods get CPUs and GPUs on one NUMA node."""

import pytest

from fixtures.checks import raise_for, require_nvidia_tooling
from gpuconform import pods, probes
from gpuconform.reasons import skip_reason


def test_kubelet_topology_and_cpu_manager_policies_are_as_expected(run, cfg, gpu_node, evidence):
    """MUST: the kubelet's topologyManagerPolicy (and scope) and cpuManagerPolicy, read from its configz,
    equal the expected ones."""

    if not run.optional.get("nodes/proxy"):
        pytest.skip(skip_reason("ENV-NOT-CHECKED", "nodes/proxy not granted: kubelet configz not checked"))
    kc = run.kubelet_config(gpu_node) or {}
    got = {"topologyManagerPolicy": kc.get("topologyManagerPolicy", "none"),
           "topologyManagerScope": kc.get("topologyManagerScope", "container"),
           "cpuManagerPolicy": kc.get("cpuManagerPolicy", "none")}
    evidence.note("configz", got)
    want = {"topologyManagerPolicy": cfg["topology"]["policy"], "topologyManagerScope": cfg["topology"]["scope"],
            "cpuManagerPolicy": cfg["topology"]["cpuManagerPolicy"]}
    wrong = [f"{k}={got[k]!r} (expected {v!r})" for k, v in want.items() if v != "any" and got[k] != v]
    if wrong:
        raise_for("GPU-TOPOLOGY-POLICY", f"{gpu_node}: kubelet " + ", ".join(wrong))


@pytest.mark.gpus("all")  # one GPU, but a rejection is only a verdict on a node whose GPUs are otherwise idle
def test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a Guaranteed pod with 1 exclusive CPU and 1 GPU is admitted, and its CPUs and GPU sit on one NUMA
    node (in-pod evidence: Cpus_allowed_list, node cpulists, the GPU's numa_node). numa_node -1 is N/A."""
    require_nvidia_tooling(cfg, "finding the GPU's PCI NUMA node with nvidia-smi")
    if (why := run.node(gpu_node).skip_reason(1)):
        pytest.skip(skip_reason(*why))
    free = run.free_gpus(gpu_node)
    if free < 1:
        pytest.skip(skip_reason("GPU-F07-BUSY", f"{gpu_node} has no free GPU now"))
    ns = run.ensure_namespace()
    name = pod_runner.create(pods.probe_pod(f"numa-{gpu_node}"[:63], ns, run.run_id, "numa", gpu_node, cfg, 1,
                                            guaranteed_cpus=1, deadline=run.cfg.seconds("timeouts.podComplete"),
                                            resource=run.node(gpu_node).resource))
    advertised = run.node(gpu_node).advertised or 0
    state = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node,
                            allow=("GPU-F06-TOPOLOGY-AFFINITY",))[name]
    if state["status"].get("reason") == "TopologyAffinityError":
        msg = state["status"].get("message", "")
        if free < advertised:
            raise_for("GPU-F06-FRAGMENTED", f"{gpu_node}: TopologyAffinityError with {advertised - free} of "
                      f"{advertised} GPUs in use: free GPUs may be split across NUMA nodes ({msg})")
        raise_for("GPU-F06-TOPOLOGY-AFFINITY", f"{gpu_node}: the kubelet rejected a Guaranteed 1 CPU + 1 GPU pod "
                  f"on an idle node under policy {cfg['topology']['policy']}: {msg}. No NUMA node offers both a "
                  f"free CPU and a GPU, so the plugin's device topology or the CPU reservation is wrong")
    s = probes.sections(run.pod_log(ns, name))
    cpus = probes.cpus_allowed(s.get("cpus", ""))
    node_cpus = {int(k.split()[1]): probes.parse_cpulist(v) for k, v in s.items() if k.startswith("numa ")}
    gpu_numa: dict[str, int | None] = {}
    for line in s.get("pci numa", "").splitlines():
        bus, _, val = line.rpartition(" ")
        gpu_numa[bus] = int(val) if val.lstrip("-").isdigit() and int(val) >= 0 else None
    if not gpu_numa:
        gpu_numa = probes.parse_topo_numa(s.get("topo", ""))
    al = probes.alignment(cpus, node_cpus, gpu_numa)
    evidence.note("alignment", al.detail)
    if al.aligned is None:
        pytest.skip(skip_reason("GPU-NUMA-NA", f"{gpu_node}: {al.detail}"))
    if not al.aligned:
        raise_for("GPU-NUMA-MISALIGNED", f"{gpu_node}: {al.detail}")
