"""Allocation counts: what a node advertises matches its hardware (sharing- and MIG-aware)."""

import pytest


def test_advertised_gpus_match_the_hardware(check):
    """MUST: capacity = allocatable = physical GPUs x sharing replicas (or the MIG profile counts), as the node's
    own labels describe its pool; no device is Unhealthy, none is over- or under-advertised, and no stale GPU
    resource key remains. Where the node advertises more than GFD's one-model count allows, the PCI bus (the
    optional node probe) counts its GPUs of every model. On a DRA node: no device is tainted out of service by its
    driver (NoSchedule/NoExecute), and the driver publishes as many whole GPUs as the labels (or the config)
    count."""
    check.path.counts()


@pytest.mark.node_probe
def test_advertised_gpus_match_the_pci_hardware(check):
    """MUST: the vendor's GPU PCI functions on the node (an independent count, read from sysfs by the optional
    node probe: physical functions of class VGA or 3D controller; MIG devices and SR-IOV virtual functions are not
    extra GPUs) equal the GPU count label and, times the sharing replicas, what the node advertises; the kubelet's
    own allocatable device list (PodResources) agrees with node allocatable, and the NUMA nodes the plugin reports
    are those the GPUs sit on. On a DRA node: the devices its GPU DRA driver publishes equal its PCI GPUs."""
    check.needs_usable_node()
    check.path.pci(check.probe("hw"))


@pytest.mark.spans_run
def test_no_gpu_goes_out_of_service_during_the_run(check):
    """MUST: no device of the node goes out of service while its checks run: what the node offers is read when
    they start and again once they have all ended, from the kubelet's own record (its allocatable list through
    the node probe, read at once; else the node object after one node-status period, when the kubelet has posted
    a change). A GPU that fails in the last seconds of a run costs the node its certification. On a DRA node: no
    device of its driver is tainted out of service (slice or DeviceTaintRule) at the end that was not at the
    start."""
    check.path.health_through_run()
