"""Allocation counts: what a node advertises matches its hardware (sharing- and MIG-aware)."""

import pytest

from gpuconform import counts, verdicts
from gpuconform.reasons import REASONS


def test_advertised_gpus_match_the_hardware(check):
    """MUST: capacity = allocatable = physical GPUs x sharing replicas (or the MIG profile counts), as the node's
    own labels describe its pool; no device is Unhealthy, none is over- or under-advertised, and no stale GPU
    resource key remains. Where the node advertises more than GFD's one-model count allows, the PCI bus (the
    optional node probe) counts its GPUs of every model. On a DRA node: no device is tainted out of service by its
    driver (NoSchedule/NoExecute), and the driver publishes as many whole GPUs as the labels (or the config)
    count."""
    node = check.node_object()
    exp = check.expectation(node)
    if check.dra:
        found, ev = verdicts.dra.count_findings(check.node, check.gpu.dra_driver, check.resource_slices(), exp,
                                                check.taint_rules())
        check.note("published devices", ev)
        for k, v in (("expected", ev["expected"]), ("published", len(ev["GPUs published (whole or as MIG devices)"])),
                     ("tainted_out_of_service", len(ev["tainted out of service"]))):
            check.record(k, v)
        check.hand_over(found)
        return
    if counts.may_count_one_model(node, exp) and not check.probe_off() and check.gpu.usable:
        exp = verdicts.with_pci_count(exp, check.probe("count", required=False))
    check.note("expectation", {"pool": exp.describe(), **exp.__dict__})
    logs = None
    if verdicts.unhealthy_ids_needed(node, exp):  # the plugin log names the Unhealthy devices
        logs = [check.run.spaces.pod_log(p["metadata"]["namespace"], p["metadata"]["name"], tail=500)
                for p in check.plugin().pods]
    cap, alloc = counts.advertised(node, exp.resource)
    for k, v in (("expected", exp.advertised), ("capacity", cap), ("allocatable", alloc)):
        check.record(k, v)
    check.hand_over(verdicts.count_findings(node, exp, logs))


@pytest.mark.node_probe
def test_advertised_gpus_match_the_pci_hardware(check):
    """MUST: the vendor's GPU PCI functions on the node (an independent count, read from sysfs by the optional
    node probe: physical functions of class VGA or 3D controller; MIG devices and SR-IOV virtual functions are not
    extra GPUs) equal the GPU count label and, times the sharing replicas, what the node advertises; the kubelet's
    own allocatable device list (PodResources) agrees with node allocatable, and the NUMA nodes the plugin reports
    are those the GPUs sit on. On a DRA node: the devices its GPU DRA driver publishes equal its PCI GPUs."""
    check.needs_usable_node()
    report = check.probe("hw")
    if check.dra:  # the devices the node's DRA driver publishes against the PCI bus
        found, ev = verdicts.dra.devices_hardware_findings(check.node, check.gpu.dra_driver, check.resource_slices(),
                                                           report, check.cfg.get("vendor"))
        check.note("PCI hardware and published devices", ev)
        check.record("pci_gpus", len(ev.get("pci GPUs", [])))
        check.hand_over(found)
        return
    exp = check.expectation(check.node_object())
    # the node object trails the kubelet's live list by up to one node-status period (a plugin that has just
    # re-registered): judge it once it has caught up, or after that period
    node, waited = check.node_status_caught_up(lambda n: verdicts.allocatable_agrees(exp, n, report))
    hw, hw_ev = verdicts.hardware_findings(check.node, exp, node, report)
    al, al_ev = verdicts.allocatable_findings(check.node, exp, node, report)
    if waited:
        al_ev["waited for the node status"] = f"{waited:.1f}s"
    check.note("PCI hardware", {**hw_ev, "GPUs per NUMA node": verdicts.numa_counts(report)})
    check.note("kubelet allocatable list", al_ev)
    check.record("pci_gpus", len(hw_ev.get("pci GPUs", [])))
    found = hw + al + verdicts.reported_numa_findings(check.node, exp, report)
    check.hand_over(verdicts.folded([f for f in found if REASONS[f.code].outcome == "fail"] or found))
