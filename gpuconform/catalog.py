"""The suite's checks, one row each: what the scheduler and the tools need to know about a check without running
it. Each name is a test function in tests/, run once per GPU node; how it shares its node's GPUs is its `gpus`
marker (gpuconform/pytest_plugin/scheduler.py). testing/unit/test_catalog.py holds the table to tests/.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str  # the test function
    must: str  # what it requires, in one line (its docstring's MUST says it in full)
    start_counters: bool = False  # the kubelet's counters are read on its node before any check starts
    # Its pods' gpuconform.dev/check label when it holds every GPU of its node at some point (`gpus("all")`, or
    # `then="all"`): no two such checks overlap on a node, nor does one overlap any device held for it.
    exclusive: str | None = None
    # The CNCF Kubernetes AI Conformance requirements it gives evidence for (AI_CONFORMANCE ids)
    ai_conformance: tuple[str, ...] = ()
    # Made on DRA nodes too (through ResourceClaims; docs/dra.md); elsewhere NOTCHECKED-DRA-PATH there
    dra: bool = False
    # Made on DRA nodes only (what only a DRA driver has: shared claims, claim release); deselected elsewhere
    dra_only: bool = False
    # Why it is not made on DRA nodes (NOTCHECKED-DRA-PATH's message there), where that is known
    not_on_dra: str = ""


# The requirement ids of the CNCF Kubernetes AI Conformance checklist ("Accelerators" and "Security"): an auditor
# files a check's result as evidence for these. `dra_support` is in the 1.33 (SHOULD), 1.34 and 1.35 (MUST)
# checklists only (kubernetes-sigs/ai-conformance conformance-versions/KubernetesAIConformance-1.3{3,4,5}.yaml); from
# 1.36 upstream Kubernetes conformance covers it (KAR-0051) and cncf/k8s-ai-conformance docs/AIConformance-1.37.yaml
# keeps driver_runtime_management, gpu_sharing and secure_accelerator_access: a result on a DRA node is evidence for
# it on clusters of those minors only (ai_conformance).
DRIVER_RUNTIME, SHARING, SECURE_ACCESS, DRA = ("driver_runtime_management", "gpu_sharing",
                                               "secure_accelerator_access", "dra_support")
AI_CONFORMANCE = (DRIVER_RUNTIME, SHARING, SECURE_ACCESS, DRA)
DRA_SUPPORT_MINORS = range(33, 36)  # the Kubernetes 1.x minors whose checklist has dra_support


# Why the kubelet's topology policies are not checked on DRA nodes
NO_DRA_HINTS = ("the kubelet's topology manager takes no hints from DRA drivers (its hint providers are the device, "
                "CPU and memory managers: kubernetes v1.37.2 pkg/kubelet/cm/container_manager_linux.go:315-359), so "
                "its policy does not place a claim's GPU; on DRA, alignment comes from the claim (matchAttribute on "
                "the topology the driver publishes, checked by the NUMA check)")

CHECKS = (
    Check("test_plugin_pod_is_ready_and_not_crash_looping", "every GPU node runs a Ready device-plugin pod that is "
          "not crash-looping (restarts within plugin.maxRestarts).",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_gpu_resource_is_in_node_capacity", "a GPU node's capacity and allocatable list each of its GPU "
          "resources with a non-zero count.",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_kubelet_counts_the_plugin_registration", "the kubelet's kubelet_device_plugin_registration_total "
          "for each of the node's GPU resources is at least 1 (on a DRA node: the kubelet's plugin manager holds the "
          "driver as registered).", start_counters=True,
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_plugin_socket_exists_in_device_plugins_dir", "the plugin serves one socket per resource in "
          "/var/lib/kubelet/device-plugins.",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_gpu_operator_validation_passed_on_the_node", "the GPU operator's validator pod on the node is Ready.",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_advertised_gpus_match_the_hardware", "the node advertises count x max(replicas, 1) of its resource, "
          "as its labels say, and no device is unhealthy.",
          ai_conformance=(DRIVER_RUNTIME, SHARING, DRA), dra=True),
    Check("test_advertised_gpus_match_the_pci_hardware", "the GPUs on the node's PCI bus match its labels and what "
          "it advertises, and the kubelet's allocatable list agrees.",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_no_gpu_goes_out_of_service_during_the_run", "no device of the node goes out of service while its "
          "checks run (read from the kubelet's own record at the end).",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_vector_add_succeeds_through_the_plugin", "a CUDA vector-add pod requesting one GPU runs to Test "
          "PASSED.",
          ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_pods_see_exactly_the_gpus_they_request", "a pod sees exactly the GPUs it requested, no more.",
          ai_conformance=(SECURE_ACCESS, DRA), dra=True),
    Check("test_kubelet_assigned_devices_match_what_the_pod_sees", "the devices the kubelet assigned to a container "
          "are those it sees, and none is assigned twice.",
          ai_conformance=(SECURE_ACCESS, DRA), dra=True),
    Check("test_gpu_access_held_through_the_run_survives_to_its_end", "a pod holding one GPU through the run still "
          "sees it at the end.", start_counters=True,
          ai_conformance=(SECURE_ACCESS, DRA), dra=True),
    Check("test_plugin_rollout_keeps_running_gpu_pods_and_admits_new_ones", "while the node's plugin or DRA driver "
          "rolls out, running GPU pods keep their devices, new ones are admitted, the rollout completes on the node "
          "(rollout.mode).", exclusive="rollout", ai_conformance=(DRIVER_RUNTIME, DRA), dra=True),
    Check("test_burst_allocates_every_free_gpu_once_and_one_more_waits", "a burst of pods gets every free device "
          "exactly once and one more pod stays Pending.", exclusive="burst",
          ai_conformance=(SECURE_ACCESS, SHARING, DRA), dra=True),
    Check("test_a_shared_claim_gives_its_pods_one_device_and_is_released_after_them", "pods naming one "
          "ResourceClaim see the device it was allocated, and the claim is released once they end (DRA nodes).",
          ai_conformance=(SHARING, DRA), dra=True, dra_only=True),
    Check("test_a_mig_device_and_its_parent_gpu_are_never_both_allocated", "while a claim holds a MIG device, a "
          "claim for its parent GPU is not allocated (DRA nodes).", exclusive="mig-parent",
          ai_conformance=(SECURE_ACCESS, SHARING, DRA), dra=True, dra_only=True),
    Check("test_an_admin_access_claim_is_refused_in_a_namespace_without_the_label", "a ResourceClaim asking admin "
          "access is refused in a namespace without the resource.kubernetes.io/admin-access label (DRA nodes).",
          ai_conformance=(SECURE_ACCESS, DRA), dra=True, dra_only=True),
    Check("test_kubelet_topology_and_cpu_manager_policies_are_as_expected", "the kubelet runs the expected topology "
          "and CPU manager policies.", not_on_dra=NO_DRA_HINTS),
    Check("test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node", "a Guaranteed GPU pod gets its CPUs and GPUs "
          "on one NUMA node (on DRA nodes: the driver publishes its devices' NUMA node and PCIe root as the PCI tree "
          "has them, so a claim can align them).", exclusive="numa", ai_conformance=(DRA,), dra=True),
    Check("test_gpu_pod_start_latency_is_under_thresholds", "GPU pod scheduling and start latencies stay under the "
          "configured thresholds.", exclusive="latency",
          ai_conformance=(DRA,), dra=True),
)

NAMES = tuple(c.name for c in CHECKS)
BY_NAME = {c.name: c for c in CHECKS}
START_COUNTERS = frozenset(c.name for c in CHECKS if c.start_counters)
# the pod labels of the checks holding every GPU of their node at some point (gpuconform/schedule.py)
EXCLUSIVE = tuple(c.exclusive for c in CHECKS if c.exclusive)
DRA_ONLY = frozenset(c.name for c in CHECKS if c.dra_only)


def ai_conformance(check: str, dra_node: bool = False, minor: int | None = None) -> list[str]:
    """The AI Conformance requirement ids a check's result (its test function's name) gives evidence for: on a
    DRA node (`dra_node`) of a cluster whose Kubernetes minor (`minor`) has dra_support in its checklist, that too."""
    c = BY_NAME.get(check)
    if c is None:
        return []
    dra = dra_node and minor in DRA_SUPPORT_MINORS
    return [r for r in c.ai_conformance if r != DRA or dra]


def minor_of(version: str) -> int | None:
    """The minor of a Kubernetes version string ("v1.37.2", "v1.35.0-gke.1"); None when it is not one."""
    parts = version.lstrip("v").split(".")
    try:
        return int(parts[1]) if len(parts) > 1 and parts[0] == "1" else None
    except ValueError:
        return None
