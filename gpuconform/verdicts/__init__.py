"""Every check's verdict as a pure function of what the check read.

Each function takes recorded objects (pods and nodes as the API returns them, probe and plugin logs, the
kubelet's /metrics and configz) and returns findings (counts.Finding: a reason code and a message naming the
node and the observed and expected values); an empty list means conformant, or that the check can run. The
checks in tests/ only act (create, wait, read) and hand the findings over (gpuconform.pytest_plugin.checks.hand_over), so every
decision is unit-tested with recorded inputs (testing/unit/test_verdicts*.py, one test per reason code).

One module per check area, as tests/ is laid out: registration, allocation, topology, latency; kubelet_record
judges the node probe's report (the kubelet's PodResources record and the PCI hardware); common holds the
skips every area shares (node unusable or busy, optional permission not granted, not an NVIDIA node).
"""

from ..counts import Finding
from .allocation import (Seen, access_findings, burst_findings, burst_size, count_findings, extra_pod_findings,
                         isolation_findings, isolation_request, unhealthy_ids_needed, vector_add_findings)
from .common import busy, folded, not_checked, nvidia_tooling, unusable
from .kubelet_record import (allocatable_agrees, allocatable_findings, assignment_findings, double_assignment_findings,
                             hardware_findings, numa_counts, probe_report, reported_numa_findings,
                             status_update_s, with_pci_count)
from .latency import allocate_delta, latency_findings, latency_properties, latency_summary
from .registration import (capacity_findings, kubelet_started, operator_findings, plugin_findings,
                           plugin_pod_findings, registration_counts, registration_findings, socket_findings)
from .topology import (admission_errors_delta, admission_findings, alignment_from_log, expected_policies,
                       kubelet_policies, numa_findings, parse_configz, policy_findings)

__all__ = [
    "Finding",
    # common: may the check run here?
    "busy", "folded", "not_checked", "nvidia_tooling", "unusable",
    # registration
    "capacity_findings", "kubelet_started", "operator_findings", "plugin_findings", "plugin_pod_findings",
    "registration_counts", "registration_findings", "socket_findings",
    # allocation
    "Seen", "access_findings", "burst_findings", "burst_size", "count_findings", "extra_pod_findings",
    "isolation_findings", "isolation_request", "unhealthy_ids_needed", "vector_add_findings",
    # topology
    "admission_errors_delta", "admission_findings", "alignment_from_log", "expected_policies", "kubelet_policies",
    "numa_findings", "parse_configz", "policy_findings",
    # the node probe: the kubelet's record and the PCI hardware
    "allocatable_agrees", "allocatable_findings", "assignment_findings", "double_assignment_findings",
    "hardware_findings", "numa_counts", "probe_report", "reported_numa_findings", "status_update_s", "with_pci_count",
    # latency
    "allocate_delta", "latency_findings", "latency_properties", "latency_summary",
]
