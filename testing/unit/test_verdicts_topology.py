"""verdicts.topology from recorded inputs: the kubelet's policies (the local bed's kubelet config), a pod the kubelet
rejected with TopologyAffinityError, and NUMA alignment from probe logs assembled from recorded outputs."""

from __future__ import annotations

import pytest
from recorded import obj, probe_log, text

from gpuconform import verdicts
from gpuconform.probes import parse_pci_numa
from gpuconform.verdicts.topology import KUBELET_DEFAULTS

WANT = verdicts.expected_policies({"policy": "single-numa-node", "scope": "any", "cpuManagerPolicy": "static"})


def codes(findings) -> list[str]:
    return [f.code for f in findings]


# ------------------------------------------------------------------ the kubelet's policies

def test_bed_kubelet_policies_are_as_expected():
    got = verdicts.kubelet_policies(obj("kubelet_config_local_bed.yaml"))
    assert got == {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container",
                   "cpuManagerPolicy": "static"}
    assert verdicts.policy_findings("n", got, WANT) == []


def test_kubelet_at_its_defaults_differs_from_the_expected_policies():
    got = verdicts.kubelet_policies({})  # a kubeletconfig without the fields: the kubelet runs their defaults
    assert got == verdicts.kubelet_policies(None) == KUBELET_DEFAULTS
    f = verdicts.policy_findings("gpu-a", got, WANT)
    assert codes(f) == ["FAIL-TOPOLOGY-POLICY"]
    assert f[0].message == ("gpu-a: kubelet topologyManagerPolicy='none' (expected 'single-numa-node'), "
                            "cpuManagerPolicy='none' (expected 'static')")  # scope "any": not compared


def test_one_policy_off_on_the_bed():
    bed = obj("kubelet_config_local_bed.yaml")
    bed["topologyManagerPolicy"] = "none"  # what the bed's topology-policy-none fault sets
    f = verdicts.policy_findings("n", verdicts.kubelet_policies(bed), WANT)
    assert codes(f) == ["FAIL-TOPOLOGY-POLICY"] and "cpuManagerPolicy" not in f[0].message


# ------------------------------------------------------------------ admission under single-numa-node

REJECTED = obj("pod_pytorch_ci_infra_696_topology_affinity_error.yaml")


def test_rejection_on_a_node_with_gpus_in_use_is_fragmentation():
    # the case: a p5.48xlarge with GPUs in use on both NUMA nodes; 4 of 8 free in aggregate
    f = verdicts.admission_findings("ip-10-8-98-255", REJECTED, 4, 8, "single-numa-node")
    assert codes(f) == ["SKIP-F06-FRAGMENTED"]
    assert "4 of 8 GPUs in use" in f[0].message and "Resources cannot be allocated with Topology locality" in f[0].message


def test_rejection_on_an_idle_node_is_a_topology_failure():
    f = verdicts.admission_findings("ip-10-8-98-255", REJECTED, 8, 8, "single-numa-node")
    assert codes(f) == ["FAIL-F06-TOPOLOGY-AFFINITY"] and "under policy single-numa-node" in f[0].message


def test_admitted_pod_is_no_admission_finding():
    admitted = obj("pod_pytorch_ci_infra_696_topology_affinity_error.yaml")
    admitted["status"] = {"phase": "Succeeded"}
    assert verdicts.admission_findings("n", admitted, 8, 8, "single-numa-node") == []


# ------------------------------------------------------------------ NUMA alignment from the probe's log

PCI = text("pci_numa_aws_8x_l4_dra_driver_1165.txt").splitlines()  # GPUs 0-3 on NUMA 0, 4-7 on NUMA 1
CPUS = text("proc_status_allowed_lists.txt")  # Cpus_allowed_list 4-7
# the node's NUMA cpulists as the 5-GPU host of topo_5gpu_spaces_gpu_numa_id.txt reports them (its CPU Affinity)
NODES = {"numa_0": "0-7,16-23", "numa_1": "8-15,24-31"}


def test_pci_numa_section_parses_node_numbers_and_no_affinity():
    assert parse_pci_numa("\n".join(PCI[:2] + ["00000000:3B:00.0 -1"])) == {
        "0000:9f:00.0": 0, "0000:a1:00.0": 0, "00000000:3B:00.0": None}


def test_cpus_and_gpu_on_one_numa_node():
    al = verdicts.alignment_from_log(probe_log(pci_numa=PCI[0], cpus=CPUS, **NODES))
    assert al.aligned and verdicts.numa_findings("n", al) == []
    assert al.detail == "CPUs 4-7 on NUMA [0], GPUs 0000:9f:00.0@NUMA0"


def test_cpus_and_gpu_on_different_numa_nodes():
    al = verdicts.alignment_from_log(probe_log(pci_numa=PCI[4], cpus=CPUS, **NODES))
    f = verdicts.numa_findings("gpu-a", al)
    assert codes(f) == ["FAIL-NUMA-MISALIGNED"] and f[0].message == "gpu-a: CPUs 4-7 on NUMA [0], GPUs 0000:ae:00.0@NUMA1"


def test_topo_numa_affinity_when_sysfs_gave_nothing():
    al = verdicts.alignment_from_log(probe_log(topo=text("topo_5gpu_spaces_gpu_numa_id.txt"), cpus=CPUS, **NODES))
    assert codes(verdicts.numa_findings("n", al)) == ["FAIL-NUMA-MISALIGNED"]  # GPU0 sits on NUMA 1


@pytest.mark.parametrize("sections", [
    {"topo": text("topo_1gpu_p4_numa_na.txt")},  # NUMA Affinity N/A (a VM)
    {"pci_numa": "00000000:00:1E.0 -1"},  # sysfs numa_node -1 (unknown to the firmware)
    {},  # no GPU NUMA information at all
])
def test_gpu_without_numa_affinity_is_not_applicable(sections):
    f = verdicts.numa_findings("n", verdicts.alignment_from_log(probe_log(cpus=CPUS, **NODES, **sections)))
    assert codes(f) == ["SKIP-NUMA-NA"]


def test_topology_admission_errors_during_the_run_are_evidence_with_their_baseline():
    from gpuconform.verdicts import admission_errors_delta

    def m(v):
        return [("kubelet_topology_manager_admission_errors_total", (), v)]

    assert admission_errors_delta(m(2), m(5)) == {"topology manager admission errors during the run": 3,
                                                  "counted since": "the run started"}
    assert admission_errors_delta(m(9), m(1))["counted since"] == "the kubelet (re)started"
    assert "not read" in admission_errors_delta(None, None)["topology manager admission errors during the run"]
