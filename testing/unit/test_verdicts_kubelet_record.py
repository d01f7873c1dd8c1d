"""Verdicts on the node probe's report: the kubelet's PodResources record and the PCI hardware
(gpuconform/verdicts/kubelet_record.py). Reports are constructed in gpuconform/nodeprobe.py's output format; the
device IDs follow the NVIDIA plugin's (UUIDs, "<uuid>::<n>" replicas, MIG UUIDs)."""

from __future__ import annotations

import json

import pytest

from gpuconform import verdicts
from gpuconform.counts import Expectation

UUIDS = [f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4)]


def pci(n=4, numa=0, extra=()):
    """n A100s (3D controller) plus an NVSwitch bridge and an SR-IOV VF of GPU 0 (neither is a GPU)."""
    fns = [{"address": f"0000:{0x07 + 8 * i:02x}:00.0", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200",
            "numa": numa, "virtfn": False} for i in range(n)]
    fns += [{"address": "0000:80:00.0", "vendor": "0x10de", "device": "0x1af1", "class": "0x068000", "numa": numa,
             "virtfn": False},
            {"address": "0000:07:00.4", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200", "numa": numa,
             "virtfn": True}, *extra]
    return {"error": None, "root": "/host/sys", "functions": fns}


def report(n_pci=4, numa=0, told_numa=0, alloc_ids=UUIDS, pods=(), entries=(), **errors):
    r = {"version": 1,
         "podResources": {"error": None, "pods": list(pods)},
         "allocatable": {"error": None, "devices": [{"resource": "nvidia.com/gpu", "ids": [i], "numa": [told_numa]}
                                                    for i in alloc_ids]},
         "checkpoint": {"error": None, "registered": {"nvidia.com/gpu": list(alloc_ids)}, "entries": list(entries)},
         "pci": pci(n_pci, numa)}
    for part, err in errors.items():
        r[part] = {"error": err}
    return r


def node(count_label="4", cap="4", alloc="4", resource="nvidia.com/gpu", **labels):
    lab = {"nvidia.com/gpu.count": count_label, **labels} if count_label is not None else dict(labels)
    return {"metadata": {"name": "gpu-a", "labels": lab},
            "status": {"capacity": {resource: cap}, "allocatable": {resource: alloc}}}


PLAIN = Expectation("nvidia.com/gpu", 4, 1, "nvidia.com/gpu.count=4")


def holder(ns, name, ids, ctr="probe", resource="nvidia.com/gpu"):
    return {"namespace": ns, "name": name,
            "containers": [{"name": ctr, "devices": [{"resource": resource, "ids": list(ids), "numa": [0]}]}]}


def codes(findings):
    return [f.code for f in findings]


# ------------------------------------------------------------------ the report itself

def test_the_report_is_the_last_json_line_of_the_probe_log():
    r = report()
    got, problems = verdicts.probe_report("a warning\n" + json.dumps(r) + "\n")
    assert got == r and problems == []


def test_a_probe_that_printed_no_report_is_not_checked_with_what_it_printed():
    got, problems = verdicts.probe_report("/usr/bin/python3: No module named gpuconform.nodeprobe\n")
    assert got is None and codes(problems) == ["NOTCHECKED-OPTIONAL"]
    assert "No module named gpuconform.nodeprobe" in problems[0].message and "images.nodeProbe" in problems[0].message


# ------------------------------------------------------------------ PCI hardware

def test_a_healthy_node_matches_its_pci_hardware_not_counting_bridges_and_virtual_functions():
    found, ev = verdicts.hardware_findings("gpu-a", PLAIN, node(), report())
    assert found == [] and len(ev["pci GPUs"]) == 4


def test_a_gpu_gone_from_the_bus_while_labels_still_say_4_has_its_own_code():
    found, _ = verdicts.hardware_findings("gpu-a", PLAIN, node(), report(n_pci=3))
    assert codes(found) == ["FAIL-F04-LABEL-HARDWARE-MISMATCH", "FAIL-F04-OVERADVERTISED"]
    assert "nvidia.com/gpu.count" in found[0].message and "says 4" in found[0].message and "shows 3" in found[0].message
    assert "capacity nvidia.com/gpu=4" in found[1].message


def test_labels_that_agree_with_the_hardware_leave_the_advertised_count_to_the_label_check():
    assert verdicts.hardware_findings("gpu-a", PLAIN, node(cap="2", alloc="2"), report())[0] == []


def test_without_a_count_label_the_advertised_count_is_judged_against_the_pci_bus():
    found, _ = verdicts.hardware_findings("gpu-a", PLAIN, node(count_label=None, cap="2", alloc="2"), report())
    assert codes(found) == ["FAIL-F04-UNDERADVERTISED"] and "PCI bus shows 4" in found[0].message
    found, _ = verdicts.hardware_findings("gpu-a", PLAIN, node(count_label=None, cap="0", alloc="0"), report())
    assert codes(found) == ["FAIL-F02-CAPACITY-ZERO"]


def test_time_slicing_multiplies_the_pci_count_by_the_replicas():
    ts = Expectation("nvidia.com/gpu", 4, 4, "config nodes.expectedGpus=4")
    assert verdicts.hardware_findings("gpu-a", ts, node(count_label=None, cap="16", alloc="16"), report())[0] == []
    assert codes(verdicts.hardware_findings("gpu-a", ts, node(count_label=None, cap="20", alloc="20"),
                                            report())[0]) == ["FAIL-F04-OVERADVERTISED"]


def test_mig_single_counts_mig_devices_in_its_label_so_only_mixed_compares_the_label():
    single = Expectation("nvidia.com/gpu", 28, 1, "nvidia.com/gpu.count=28", mig_strategy="single")
    assert verdicts.hardware_findings("gpu-a", single, node(count_label="28", cap="28", alloc="28"), report())[0] == []
    mixed = Expectation("nvidia.com/gpu", 4, 1, "l", mig_strategy="mixed", mig_profiles={"nvidia.com/mig-1g.5gb": 28})
    found, _ = verdicts.hardware_findings("gpu-a", mixed, node(), report(n_pci=3))
    assert codes(found) == ["FAIL-F04-LABEL-HARDWARE-MISMATCH"]


def test_gpus_bound_to_vfio_for_vms_are_not_counted_for_containers():
    vfio = [{"address": f"0000:{0x47 + i:02x}:00.0", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200",
             "numa": 1, "virtfn": False, "driver": drv} for i, drv in enumerate(("vfio-pci", "nvgrace_gpu_vfio_pci"))]
    r = report()
    r["pci"]["functions"] += vfio
    found, ev = verdicts.hardware_findings("gpu-a", PLAIN, node(), r)
    assert found == [] and len(ev["pci GPUs"]) == 4
    assert ev["set aside for VMs (VFIO), not counted"] == ["0000:47:00.0 vfio-pci", "0000:48:00.0 nvgrace_gpu_vfio_pci"]
    # the plugin reporting NUMA 1, where only the VMs' GPUs sit, is still a misreport
    r["allocatable"]["devices"][0]["numa"] = [1]
    assert codes(verdicts.reported_numa_findings("gpu-a", PLAIN, r)) == ["FAIL-NUMA-MISREPORTED"]


def test_every_gpu_gone_while_the_vendors_bridges_remain_is_a_mismatch_not_a_skip():
    found, _ = verdicts.hardware_findings("gpu-a", PLAIN, node(), report(n_pci=0))
    assert codes(found)[0] == "FAIL-F04-LABEL-HARDWARE-MISMATCH" and "shows 0 (none" in found[0].message


def test_no_function_of_the_vendor_on_the_bus_is_not_checked_as_an_integrated_gpu_or_a_wrong_sysfs_path():
    r = report()
    r["pci"]["functions"] = []
    found, _ = verdicts.hardware_findings("gpu-a", PLAIN, node(count_label="1", cap="1", alloc="1"), r)
    assert codes(found) == ["NOTCHECKED-OPTIONAL"]
    assert "integrated GPU" in found[0].message and "nodeProbe.sysfsPath" in found[0].message


def test_an_unread_pci_tree_or_another_vendor_is_not_checked():
    found, _ = verdicts.hardware_findings("gpu-a", PLAIN, node(), report(pci="no PCI tree at /host/sys/bus/pci/devices"))
    assert codes(found) == ["NOTCHECKED-OPTIONAL"] and "no PCI tree" in found[0].message
    amd = Expectation("amd.com/gpu", 8, 1, "l", vendor="amd")
    assert codes(verdicts.hardware_findings("gpu-a", amd, node(), report())[0]) == ["NOTCHECKED-OPTIONAL"]


# ------------------------------------------------------------------ NUMA: what the plugin reports vs the hardware

def test_the_plugin_reporting_another_numa_node_than_the_hardware_is_misreported():
    found = verdicts.reported_numa_findings("gpu-a", PLAIN, report(numa=1, told_numa=0))
    assert codes(found) == ["FAIL-NUMA-MISREPORTED"] and "NUMA [0]" in found[0].message and "NUMA [1]" in found[0].message
    assert verdicts.reported_numa_findings("gpu-a", PLAIN, report(numa=0, told_numa=0)) == []


def test_no_numa_affinity_in_the_hardware_leaves_nothing_to_compare():
    assert verdicts.reported_numa_findings("gpu-a", PLAIN, report(numa=None, told_numa=0)) == []


# ------------------------------------------------------------------ the kubelet's allocatable list

def test_the_kubelets_allocatable_list_agrees_with_the_node():
    found, ev = verdicts.allocatable_findings("gpu-a", PLAIN, node(), report())
    assert found == [] and ev["nvidia.com/gpu"]["kubelet allocatable list"] == 4


def test_an_allocatable_list_that_differs_from_node_allocatable_is_a_record_mismatch():
    found, _ = verdicts.allocatable_findings("gpu-a", PLAIN, node(cap="4", alloc="4"), report(alloc_ids=UUIDS[:3]))
    assert codes(found) == ["FAIL-KUBELET-RECORD-MISMATCH", "FAIL-F03-UNHEALTHY-DEVICES"]


def test_unhealthy_devices_are_counted_from_the_kubelets_list_and_named_where_a_pod_holds_one():
    entries = [{"podUID": "u1", "container": "main", "resource": "nvidia.com/gpu", "ids": [UUIDS[3]]}]
    found, _ = verdicts.allocatable_findings("gpu-a", PLAIN, node(cap="4", alloc="3"),
                                             report(alloc_ids=UUIDS[:3], entries=entries))
    assert codes(found) == ["FAIL-F03-UNHEALTHY-DEVICES"]
    assert "1 Unhealthy" in found[0].message and UUIDS[3] in found[0].message
    found, _ = verdicts.allocatable_findings("gpu-a", PLAIN, node(cap="4", alloc="3"), report(alloc_ids=UUIDS[:3]))
    assert "names none" in found[0].message


def test_allocatable_agrees_only_when_the_node_object_has_caught_up_with_the_kubelets_list():
    # just after the plugin re-registers with a restarted kubelet: the kubelet lists 4, the node still says 0
    assert not verdicts.allocatable_agrees(PLAIN, node(cap="0", alloc="0"), report())
    assert verdicts.allocatable_agrees(PLAIN, node(), report())
    assert verdicts.allocatable_agrees(PLAIN, node(cap="0", alloc="0"), report(allocatable="UNIMPLEMENTED: x"))


@pytest.mark.parametrize("cfg, seconds", [
    (None, 10.0), ({}, 10.0), ({"nodeStatusUpdateFrequency": "5s"}, 5.0),
    ({"nodeStatusUpdateFrequency": "1m0s"}, 60.0), ({"nodeStatusUpdateFrequency": "1m30s"}, 90.0),
    ({"nodeStatusUpdateFrequency": "500ms"}, 0.5), ({"nodeStatusUpdateFrequency": "soon"}, 10.0),
    ({"nodeStatusUpdateFrequency": "5sx"}, 10.0),
])
def test_the_node_status_period_is_read_from_the_kubelets_configz_or_defaults_to_10s(cfg, seconds):
    assert verdicts.status_update_s(cfg) == pytest.approx(seconds)


def test_a_kubelet_without_get_allocatable_resources_leaves_the_part_unchecked():
    found, ev = verdicts.allocatable_findings("gpu-a", PLAIN, node(), report(allocatable="UNIMPLEMENTED: x"))
    assert found == [] and "UNIMPLEMENTED" in ev["allocatable list"]


# ------------------------------------------------------------------ assignments (List)

def test_a_device_assigned_to_two_containers_of_any_pods_is_a_double_allocation():
    pods = [holder("team-a", "train", [UUIDS[0]], ctr="main"), holder("gpuconform-r1", "record-gpu-a", [UUIDS[0]])]
    found = verdicts.double_assignment_findings("gpu-a", report(pods=pods))
    assert codes(found) == ["FAIL-DOUBLE-ALLOCATION"]
    assert "team-a/train/main" in found[0].message and "gpuconform-r1/record-gpu-a/probe" in found[0].message


def test_a_finished_pod_that_a_kubelet_before_1_34_still_lists_is_not_a_second_holder():
    pods = [holder("team-a", "job-x", [UUIDS[0]], ctr="main"), holder("gpuconform-r1", "record-gpu-a", [UUIDS[0]])]
    assert verdicts.double_assignment_findings("gpu-a", report(pods=pods), active={"gpuconform-r1/record-gpu-a"}) == []
    both = {"gpuconform-r1/record-gpu-a", "team-a/job-x"}
    assert codes(verdicts.double_assignment_findings("gpu-a", report(pods=pods), active=both)) == \
        ["FAIL-DOUBLE-ALLOCATION"]


def test_distinct_replicas_of_one_gpu_are_not_a_double_allocation():
    pods = [holder("a", "p1", [UUIDS[0] + "::0"]), holder("b", "p2", [UUIDS[0] + "::1"])]
    assert verdicts.double_assignment_findings("gpu-a", report(pods=pods)) == []


def test_an_unread_list_is_not_checked():
    assert codes(verdicts.double_assignment_findings("gpu-a", report(podResources="UNAVAILABLE: no socket"))) == \
        ["NOTCHECKED-OPTIONAL"]


def dp_assignment(r: dict, seen: list[str]):
    """The kubelet-record check as a device-plugin node's path makes it."""
    return verdicts.assignment_findings("gpu-a", "ns/record-gpu-a/probe",
                                        verdicts.kubelet_assigned(r, "ns", "record-gpu-a", "probe", "nvidia.com/gpu"),
                                        seen, "FAIL-KUBELET-RECORD-MISMATCH")


def test_a_container_the_kubelet_assigned_nothing_is_a_record_mismatch():
    r = report(pods=[holder("ns", "record-gpu-a", [])])
    found, _ = dp_assignment(r, [UUIDS[0]])
    assert codes(found) == ["FAIL-KUBELET-RECORD-MISMATCH"] and "assigns no device" in found[0].message


@pytest.mark.parametrize("ids,seen", [([UUIDS[1]], [UUIDS[1]]),  # a whole GPU
                                      ([UUIDS[2] + "::3"], [UUIDS[2]]),  # a time-sliced replica: its GPU
                                      (["MIG-11111111-2222-3333-4444-555555555555"],
                                       ["MIG-11111111-2222-3333-4444-555555555555"])])
def test_what_the_kubelet_assigned_is_what_the_container_sees(ids, seen):
    r = report(pods=[holder("ns", "record-gpu-a", ids)])
    found, ev = dp_assignment(r, seen)
    assert found == [] and ev["the kubelet's PodResources List (nvidia.com/gpu) records"] == ids


def test_a_container_that_sees_another_device_than_the_kubelet_assigned_is_a_record_mismatch():
    r = report(pods=[holder("ns", "record-gpu-a", [UUIDS[2]])])
    found, _ = dp_assignment(r, [UUIDS[0]])
    assert codes(found) == ["FAIL-KUBELET-RECORD-MISMATCH"]
    assert UUIDS[2] in found[0].message and UUIDS[0] in found[0].message


def test_a_suite_pod_missing_from_the_kubelets_record_is_a_record_mismatch():
    found, _ = dp_assignment(report(), [UUIDS[0]])
    assert codes(found) == ["FAIL-KUBELET-RECORD-MISMATCH"] and "no entry for ns/record-gpu-a/probe" in found[0].message


def test_index_device_ids_cannot_be_matched_and_are_not_checked():
    r = report(pods=[holder("ns", "record-gpu-a", ["1"])])
    found, _ = dp_assignment(r, [UUIDS[1]])
    assert codes(found) == ["NOTCHECKED-OPTIONAL"] and "deviceIDStrategy=index" in found[0].message
