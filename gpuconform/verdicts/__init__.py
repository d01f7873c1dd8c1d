"""Every check's verdict as a pure function of what the check read.

Each function takes recorded objects and returns findings (`Finding`: a reason code and a message naming the node
and what was seen); an empty list means conformant. The checks in tests/ act and hand findings over
(`check.hand_over`). One module per check area (registration, allocation, counts, pods, topology, latency,
kubelet_record); common holds `Finding` and the skips every area shares.
"""

from .common import Finding
from . import dra
from .allocation import (Seen, access_findings, burst_findings, burst_size, count_findings, extra_pod_findings,
                         isolation_findings, isolation_request, unhealthy_ids_needed, vector_add_findings)
from .common import busy, folded, not_checked, nvidia_tooling, unusable
from .kubelet_record import (Assigned, allocatable_agrees, allocatable_findings, assignment_findings, double_assignment_findings,
                             hardware_findings, held_and_offered, kubelet_assigned, node_offer, numa_counts, probe_report, reported_numa_findings,
                             status_update_s, with_pci_count)
from .counts import offer_findings, went_out_of_service
from .pods import classify, creation_refused, injection_failure
from .latency import allocate_delta, latency_findings, latency_properties, latency_summary
from .registration import (capacity_findings, dra_registrations, kubelet_started, operator_findings, plugin_findings,
                           plugin_pod_findings, registration_counts, registration_findings, socket_findings)
from .topology import (admission_errors_delta, admission_findings, alignment_from_log, expected_policies,
                       kubelet_policies, numa_findings, parse_configz, policy_findings)

__all__ = [
    "Finding", "dra",
    # common: may the check run here?
    "busy", "folded", "not_checked", "nvidia_tooling", "unusable",
    # registration
    "capacity_findings", "dra_registrations", "kubelet_started", "operator_findings", "plugin_findings", "plugin_pod_findings",
    "registration_counts", "registration_findings", "socket_findings",
    # allocation
    "Seen", "access_findings", "burst_findings", "burst_size", "count_findings", "extra_pod_findings",
    "isolation_findings", "isolation_request", "offer_findings", "went_out_of_service", "unhealthy_ids_needed", "vector_add_findings",
    # topology
    "admission_errors_delta", "admission_findings", "alignment_from_log", "expected_policies", "kubelet_policies",
    "numa_findings", "parse_configz", "policy_findings",
    # the node probe: the kubelet's record and the PCI hardware
    "Assigned", "allocatable_agrees", "allocatable_findings", "assignment_findings", "double_assignment_findings",
    "hardware_findings", "held_and_offered", "kubelet_assigned", "node_offer", "numa_counts", "probe_report", "reported_numa_findings", "status_update_s", "with_pci_count",
    # pods: why a suite pod did not do what was asked
    "classify", "creation_refused", "injection_failure",
    # latency
    "allocate_delta", "latency_findings", "latency_properties", "latency_summary",
]
