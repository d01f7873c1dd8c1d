"""Verdicts on the DRA path (gpuconform/verdicts/dra.py). The slices are in resource.k8s.io/v1's shape as the bed's
DRA driver publishes them (`kubectl get resourceslices -o json` on the bed, trimmed to the fields judged); the PCI
report is gpuconform/nodeprobe.py's format (test_verdicts_kubelet_record.pci)."""

from __future__ import annotations

import pytest
from test_verdicts_kubelet_record import pci

from gpuconform import dradevices, metrics, verdicts
from gpuconform.counts import Expectation
from gpuconform.allocpath import AllocationPath

DRIVER = "gpu.nvidia.com"


def slice_(devices=2, gen=1, count=1, pool="gpu-node-dra", driver=DRIVER, first=0):
    return {"spec": {"driver": driver, "nodeName": "gpu-node-dra",
                     "pool": {"generation": gen, "name": pool, "resourceSliceCount": count},
                     "devices": [{"name": f"gpu-{i}"} for i in range(first, first + devices)]}}


def codes(found):
    return [f.code for f in found]


def test_a_complete_pool_with_devices_passes():
    found, ev = verdicts.dra.slice_findings("n", DRIVER, [slice_()])
    assert found == [] and ev["pools"]["gpu-node-dra"]["devices"] == ["gpu-0", "gpu-1"]


def test_no_slice_of_the_gpu_driver_is_its_own_failure_naming_what_else_is_there():
    found, ev = verdicts.dra.slice_findings("n", DRIVER, [slice_(driver="net.example.com")])
    assert codes(found) == ["FAIL-DRA-NO-SLICES"] and ev["other drivers"] == ["net.example.com"]
    assert codes(verdicts.dra.slice_findings("n", DRIVER, [slice_(devices=0)])[0]) == ["FAIL-DRA-NO-SLICES"]


def test_a_pool_missing_a_slice_of_its_newest_generation_is_incomplete():
    found, _ = verdicts.dra.slice_findings("n", DRIVER, [slice_(count=2)])
    assert codes(found) == ["FAIL-DRA-POOL-INCOMPLETE"] and "1 of 2 slice(s) at generation 1" in found[0].message
    # an older generation's slice left beside the new one is being replaced: only the newest counts
    ok, ev = verdicts.dra.slice_findings("n", DRIVER, [slice_(gen=1, count=1), slice_(gen=2, count=1, first=2)])
    assert ok == [] and ev["pools"]["gpu-node-dra"]["devices"] == ["gpu-2", "gpu-3"]


def dra_hardware(slices, report, vendor="nvidia"):
    """The PCI check's count as a DRA node's path makes it: the GPUs the driver publishes against the bus (a node
    without count labels)."""
    exp = Expectation(resource="nvidia.com/gpu", physical=None, replicas=1, source="no label", vendor=vendor)
    return verdicts.hardware_findings("n", exp, {"metadata": {"name": "n", "labels": {}}}, report,
                                      dradevices.published(DRIVER, slices))


def test_published_devices_must_equal_the_pci_gpus():
    report = {"pci": pci(2)}
    assert dra_hardware([slice_(devices=2)], report)[0] == []
    fewer, ev = dra_hardware([slice_(devices=1)], report)
    assert codes(fewer) == ["FAIL-F04-UNDERADVERTISED"] and "GPUs gpu.nvidia.com publishes=1, but the PCI bus " \
        "shows 2 GPU(s) = 2" in fewer[0].message
    more, _ = dra_hardware([slice_(devices=3)], report)
    assert codes(more) == ["FAIL-F04-OVERADVERTISED"]
    unread, _ = dra_hardware([slice_()], {"pci": {"error": "no sysfs"}})
    assert codes(unread) == ["NOTCHECKED-OPTIONAL"]
    # no pool of the driver: nothing offered to count (the capacity check says FAIL-DRA-NO-SLICES)
    assert dra_hardware([], report)[0] == []


def topo_slice(*told):
    """A slice whose devices publish pciBusID and the given (numaNode, pcieRoot) - None leaves one out; numaNode as
    a list is the DRAListTypeAttributes form."""
    s = slice_(devices=len(told))
    for i, (numa, root) in enumerate(told):
        a = {"resource.kubernetes.io/pciBusID": {"string": f"0000:0{7 + i}:00.0"}}
        if numa is not None:
            a["resource.kubernetes.io/numaNode"] = {"ints": numa} if isinstance(numa, list) else {"int": numa}
        if root is not None:
            a["resource.kubernetes.io/pcieRoot"] = {"string": root}
        s["spec"]["devices"][i]["attributes"] = a
    return s


def bus(*where):
    """The probe's pci part: GPUs at 0000:07:00.0, 0000:08:00.0, ... with (numa, pcieRoot)."""
    return {"pci": {"functions": [{"address": f"0000:0{7 + i}:00.0", "vendor": "0x10de", "class": "0x030200",
                                   "numa": n, "pcieRoot": r, "driver": "nvidia"} for i, (n, r) in enumerate(where)]}}


def test_the_topology_a_driver_publishes_must_be_the_pci_trees():
    report = bus((0, "pci0000:00"), (1, "pci0000:80"))
    ok, ev = verdicts.dra.published_topology_findings("n", DRIVER, [topo_slice((0, "pci0000:00"), ([1, 0], None))],
                                                     report)
    assert ok == [] and ev["published (pciBusID: numaNode, pcieRoot)"]["0000:08:00.0"] == (1, None)
    numa, _ = verdicts.dra.published_topology_findings("n", DRIVER, [topo_slice((1, None), (1, None))], report)
    assert codes(numa) == ["FAIL-NUMA-MISREPORTED"] and "gpu-node-dra/gpu-0 (0000:07:00.0) numaNode 1, sysfs " \
        "numa_node 0" in numa[0].message
    root, _ = verdicts.dra.published_topology_findings("n", DRIVER, [topo_slice((None, "pci0000:00"),
                                                                               (None, "pci0000:00"))], report)
    assert codes(root) == ["FAIL-NUMA-MISREPORTED"] and "pcieRoot pci0000:00, PCI tree pci0000:80" in root[0].message


def test_a_driver_publishing_no_topology_leaves_the_numa_check_not_made():
    found, _ = verdicts.dra.published_topology_findings("n", DRIVER, [topo_slice((None, None))], bus((0, "pci0000:00")))
    assert codes(found) == ["NOTCHECKED-OPTIONAL"] and "neither resource.kubernetes.io/numaNode" in found[0].message
    none, _ = verdicts.dra.published_topology_findings("n", DRIVER, [], bus((0, "pci0000:00")))
    assert codes(none) == ["NOTCHECKED-OPTIONAL"] and "no device with a PCI bus ID" in none[0].message
    unread, _ = verdicts.dra.published_topology_findings("n", DRIVER, [topo_slice((0, None))], {"pci": {"error": "x"}})
    assert codes(unread) == ["NOTCHECKED-OPTIONAL"]
    # GPUs without NUMA affinity (numa_node -1: None in the report) leave nothing to compare
    assert verdicts.dra.published_topology_findings("n", DRIVER, [topo_slice((0, None))], bus((None, None)))[0] == []


LISTING = """total 0
drwxr-xr-x 2 0 0 80 Dec  5 07:02 .
drwxr-xr-x 9 0 0 180 Dec  5 07:02 ..
srwxr-xr-x 1 0 0 0 Dec  5 07:02 {sock}
"""


UID = "0f8c2d4e-1111-2222-3333-444455556666"  # a driver pod's UID
PATH_ = AllocationPath(name="dra", driver=DRIVER, device_class=DRIVER)


def dra_socket(listing: str, exit_code: int | None = 0):
    """The socket check as a DRA node's path makes it: one of the driver's registration socket names."""
    return verdicts.socket_findings("n", listing, [PATH_.registrar_sockets([UID])], exit_code, PATH_.registry_dir,
                                    PATH_.not_registered)


def test_the_driver_registration_socket_is_found_under_each_naming_upstream_uses():
    # k8s.io/dynamic-resource-allocation v0.37.2 RollingUpdateRegistrarSocketFile's three forms for pod UID, the
    # hashed ones computed with its Go code (sha256 + base64.RawURLEncoding) on this machine
    for sock in ("gpu.nvidia.com-reg.sock", f"gpu.nvidia.com-{UID}-reg.sock", "gpu.nvidia.com-ARFyXgzgPbM-reg.sock",
                 "dra-CallsBzNmeLSszLrLzuIbA-reg.sock"):
        assert dra_socket(LISTING.format(sock=sock)) == [], sock
    missing = dra_socket(LISTING.format(sock="other.example.com-reg.sock"))
    assert codes(missing) == ["FAIL-DRA-NOT-REGISTERED"] and "other.example.com-reg.sock" in missing[0].message
    assert "plugins_registry" in missing[0].message
    assert codes(dra_socket("ls: not found", exit_code=1)) == ["ERROR-API"]


def test_another_drivers_hashed_registration_socket_is_not_the_gpu_drivers():
    # compute-domain.nvidia.com's third-form socket for another pod: the old pattern dra-<anything>-reg.sock took it
    # for the GPU driver's (dra-facts-2026-12 2.11)
    other = AllocationPath(driver="compute-domain.nvidia.com").registrar_sockets(["9a9a9a9a-0000-0000-0000-000000000000"])
    assert codes(dra_socket(LISTING.format(sock=other[-1]))) == ["FAIL-DRA-NOT-REGISTERED"]


def uuid_slice(*uuids):
    """A slice whose devices carry NVIDIA's uuid attribute, as the bed's driver publishes them."""
    return {"spec": {"driver": DRIVER, "nodeName": "gpu-node-dra",
                     "pool": {"generation": 1, "name": "gpu-node-dra", "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"uuid": {"string": u}, "index": {"int": i}}}
                                 for i, u in enumerate(uuids)]}}


def claim(*devices, name="gpuconform-record-gpu-node-dra-gpu-q8vx2"):
    """A pod's claim as the API returns it once the scheduler allocated it (resource.k8s.io/v1)."""
    return {"metadata": {"name": name}, "status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "gpu-node-dra", "device": d} for d in devices]}}}}


def claim_record(claims, slices, seen):
    """The kubelet-record check's claim record as a DRA node's path makes it."""
    return verdicts.assignment_findings("n", "ns/p/probe", dradevices.claims_assigned(claims, DRIVER, slices), seen,
                                        PATH_.record_mismatch)


def test_the_allocated_device_is_the_one_the_container_sees():
    found, ev = claim_record([claim("gpu-1")], [uuid_slice("GPU-a", "GPU-b")], ["GPU-b"])
    assert found == [] and ev["as GPU UUIDs"] == ["GPU-b"]
    assert ev["the allocation of its claim(s) gpuconform-record-gpu-node-dra-gpu-q8vx2 records"] == [
        "gpu-node-dra/gpu-1"]


def test_another_device_injected_or_none_is_a_wrong_device():
    slices = [uuid_slice("GPU-a", "GPU-b")]
    wrong, _ = claim_record([claim("gpu-0")], slices, ["GPU-b"])
    assert codes(wrong) == ["FAIL-DRA-WRONG-DEVICE"] and "gives ns/p/probe gpu-node-dra/gpu-0 (GPU-a), but the " \
        "container sees GPU-b" in wrong[0].message
    none, _ = claim_record([claim("gpu-0")], slices, [])
    assert codes(none) == ["FAIL-DRA-WRONG-DEVICE"] and "sees no GPU: nothing" in none[0].message
    unallocated, _ = claim_record([{"metadata": {"name": "c"}}], slices, [])
    assert codes(unallocated) == ["FAIL-DRA-WRONG-DEVICE"] and "assigns no device to ns/p/probe" in \
        unallocated[0].message


def test_a_driver_without_uuid_attributes_leaves_the_match_unchecked():
    found, _ = claim_record([claim("gpu-0")], [slice_()], ["GPU-a"])
    assert codes(found) == ["NOTCHECKED-OPTIONAL"] and "no uuid attribute" in found[0].message


def test_pods_sharing_a_claim_each_see_its_device():
    slices, c = [uuid_slice("GPU-a", "GPU-b")], claim("gpu-1", name="shared-n")
    found, ev = verdicts.dra.shared_claim_findings("n", c, DRIVER, slices, {"shared0": ["GPU-b"], "shared1": ["GPU-b"]})
    assert found == [] and ev["shared0"] == ["GPU-b"] and ev["allocated"] == ["gpu-node-dra/gpu-1"]
    assert ev["as GPU UUIDs"] == ["GPU-b"]
    found, _ = verdicts.dra.shared_claim_findings("n", c, DRIVER, slices, {"shared0": ["GPU-b"], "shared1": ["GPU-a"]})
    assert codes(found) == ["FAIL-DRA-WRONG-DEVICE"] and "pod shared1" in found[0].message
    assert "the claim shared-n is shared by shared0, shared1" in found[0].message


def test_a_claim_is_released_once_its_pods_ended_or_it_is_gone():
    """The resourceclaim controller's work (kubernetes v1.37.2 pkg/controller/resourceclaim/controller.go): an
    ended pod leaves status.reservedFor, and the allocation is cleared when no consumer is left."""
    released = {"metadata": {"name": "c"}, "status": {}}
    assert verdicts.dra.release_findings("n", "c", released, 0.4)[0] == []
    assert verdicts.dra.release_findings("n", "c", None, 0.4)[0] == []
    held = claim("gpu-0", name="c")
    held["status"]["reservedFor"] = [{"resource": "pods", "name": "shared0", "uid": "u0"}]
    found, ev = verdicts.dra.release_findings("n", "c", held, 30.2)
    assert codes(found) == ["FAIL-DRA-CLAIM-NOT-DEALLOCATED"] and "still reserved for pods/shared0 30s" in \
        found[0].message and ev["allocated"] is True
    found, _ = verdicts.dra.release_findings("n", "c", claim("gpu-0", name="c"), 30.0)
    assert codes(found) == ["FAIL-DRA-CLAIM-NOT-DEALLOCATED"] and "no longer reserved but still allocated" in \
        found[0].message


# The API server's answer to the suite's dry-run admin-access claim, as the bed's v1.37.2 server gave it (namespace
# without the label), and the claim as it would be stored where admission let it through.
REFUSED = {"status": 422, "claim": None, "message": 'ResourceClaim.resource.k8s.io "gpuconform-admin-access-r1" is '
           "invalid: spec.devices.requests[0].adminAccess: Forbidden: admin access to devices requires the "
           "`resource.kubernetes.io/admin-access: true` label on the containing namespace"}


def admitted(admin=True):
    exactly = {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}
    if admin is not None:
        exactly["adminAccess"] = admin
    return {"status": 201, "message": "", "claim": {"spec": {"devices": {"requests": [{"name": "gpu",
                                                                                      "exactly": exactly}]}}}}


def test_admin_access_refused_without_the_namespace_label_passes():
    found, ev = verdicts.dra.admin_access_findings("n", "gpuconform-r1", {}, DRIVER, REFUSED)
    assert found == [] and ev["verdict"] == "refused" and "Forbidden" in ev["message"]


def test_admin_access_refused_by_an_admission_policy_passes():
    trial = {"status": 403, "claim": None, "message": "admission webhook \"policy.example.com\" denied the request"}
    assert verdicts.dra.admin_access_findings("n", "ns", {}, DRIVER, trial)[0] == []


def test_admin_access_granted_in_a_namespace_something_labelled_names_that():
    labels = {"gpuconform.dev/run": "r1", verdicts.dra.ADMIN_LABEL: "true"}
    found, ev = verdicts.dra.admin_access_findings("n", "gpuconform-r1", labels, DRIVER, admitted())
    assert codes(found) == ["FAIL-DRA-ADMIN-ACCESS-GRANTED"]
    assert "carries resource.kubernetes.io/admin-access=true all the same" in found[0].message
    assert "gpuconform-r1" in found[0].message and ev["verdict"] == "admitted with adminAccess"


def test_admin_access_granted_without_the_label_says_the_server_does_not_enforce_it():
    found, _ = verdicts.dra.admin_access_findings("n", "gpuconform-r1", {}, DRIVER, admitted())
    assert codes(found) == ["FAIL-DRA-ADMIN-ACCESS-GRANTED"] and "does not enforce it" in found[0].message


def test_admin_access_dropped_by_a_server_without_the_feature_passes():
    for admin in (None, False):
        found, ev = verdicts.dra.admin_access_findings("n", "ns", {}, DRIVER, admitted(admin))
        assert found == [] and "dropped" in ev["verdict"]


def test_another_refusal_of_the_admin_claim_proves_nothing_and_is_an_error():
    trial = {"status": 422, "claim": None, "message": 'ResourceClaim "x" is invalid: metadata.name: Invalid value'}
    found, _ = verdicts.dra.admin_access_findings("n", "ns", {}, DRIVER, trial)
    assert codes(found) == ["ERROR-API"] and "another reason (HTTP 422)" in found[0].message


def pr_report(*devices, container="probe", pod="record-gpu-node-dra", claims_key=True):
    c = {"name": container, "devices": []}
    if claims_key:
        c["claims"] = [{"claim": "gpuconform-r1/record-gpu-node-dra-gpus-x7k2q", "devices": [
            {"driver": DRIVER, "pool": "gpu-node-dra", "device": d, "cdi": []} for d in devices]}]
    return {"podResources": {"pods": [{"namespace": "gpuconform-r1", "name": pod, "containers": [c]}]}}


ALLOCATED = [{"metadata": {"name": "record-gpu-node-dra-gpus-x7k2q"}, "status": {"allocation": {"devices": {
    "results": [{"request": "gpu", "driver": DRIVER, "pool": "gpu-node-dra", "device": "gpu-1"}]}}}}]


def kubelet_claim(report):
    """The kubelet's record as a DRA node's path judges it: against what the container sees (gpu-1's GPU-b)."""
    rec = dradevices.kubelet_claims_assigned(report, "gpuconform-r1", "record-gpu-node-dra", "probe", DRIVER,
                                             [uuid_slice("GPU-a", "GPU-b")])
    return verdicts.assignment_findings("n", "gpuconform-r1/record-gpu-node-dra/probe", rec, ["GPU-b"],
                                        PATH_.record_mismatch)


def test_the_kubelets_record_of_the_claim_matching_its_allocation_passes():
    found, ev = kubelet_claim(pr_report("gpu-1"))
    assert found == [] and ev["the kubelet's PodResources List (dynamic_resources) records"] == ["gpu-node-dra/gpu-1"]


def test_the_kubelet_recording_another_device_than_allocated_is_a_wrong_device():
    found, _ = kubelet_claim(pr_report("gpu-0"))
    assert codes(found) == ["FAIL-DRA-WRONG-DEVICE"] and "gpu-node-dra/gpu-0 (GPU-a), but the container sees GPU-b" \
        in found[0].message
    found, _ = kubelet_claim(pr_report(pod="someone-else"))
    assert codes(found) == ["FAIL-DRA-WRONG-DEVICE"] and "has no entry for" in found[0].message


def test_a_kubelet_without_dynamic_resources_in_podresources_is_not_checked():
    found, _ = kubelet_claim(pr_report(claims_key=False))
    assert codes(found) == ["NOTCHECKED-OPTIONAL"] and "KubeletPodResourcesDynamicResources" in found[0].message
    found, _ = kubelet_claim({"podResources": {"error": "connection refused"}})
    assert codes(found) == ["NOTCHECKED-OPTIONAL"]


XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def tainted_slice(*taints_of_gpu1, devices=2, count=1):
    s = slice_(devices=devices, count=count)
    if taints_of_gpu1:
        s["spec"]["devices"][1]["taints"] = list(taints_of_gpu1)
    return s


def exp(physical=None, mig="none"):
    return Expectation(resource=DRIVER, physical=physical, replicas=1, source="nvidia.com/gpu.count=2",
                       mig_strategy=mig)


def dra_count(slices, expect, rules=()):
    """The count check as a DRA node's path makes it: the device plugin's verdict on what the driver offers."""
    offer = dradevices.published(DRIVER, slices, rules)
    return verdicts.offer_findings("n", expect, offer), offer


def test_a_device_tainted_out_of_service_is_an_unhealthy_device_named_with_its_taint():
    found, offer = dra_count([tainted_slice(XID)], exp())
    assert codes(found) == ["FAIL-F03-UNHEALTHY-DEVICES"]
    assert "n: 1 device(s) of gpu.nvidia.com are tainted out of service, so no claim gets them: gpu-node-dra/gpu-1 " \
        "(gpu.nvidia.com/xid=79:NoSchedule)" == found[0].message
    assert offer.out_named == ["gpu-node-dra/gpu-1 (gpu.nvidia.com/xid=79:NoSchedule)"]
    evict = dict(XID, effect="NoExecute")
    assert codes(dra_count([tainted_slice(evict)], exp())[0]) == ["FAIL-F03-UNHEALTHY-DEVICES"]


def test_an_informational_taint_keeps_the_device_in_service_and_is_shown():
    # NVIDIA's DRA driver's health taints are proposed with effect None (NVIDIA/k8s-dra-driver-gpu issue 905)
    assert dra_count([tainted_slice(dict(XID, effect="None"))], exp(2))[0] == []
    assert dradevices.informational(DRIVER, [tainted_slice(dict(XID, effect="None"))]) == {
        "gpu-node-dra/gpu-1": ["gpu.nvidia.com/xid=79:None"]}
    assert dradevices.usable_count(DRIVER, [tainted_slice(dict(XID, effect="None"))]) == 2


def test_published_gpus_must_match_the_labels_count_but_not_under_the_single_mig_strategy():
    assert dra_count([slice_(devices=2)], exp(2))[0] == []
    more, _ = dra_count([slice_(devices=3)], exp(2))
    assert codes(more) == ["FAIL-F04-OVERADVERTISED"] and more[0].message == (
        "n: GPUs gpu.nvidia.com publishes=3, the hardware supports 2 (2 GPUs; nvidia.com/gpu.count=2)")
    assert codes(dra_count([slice_(devices=1)], exp(2))[0]) == ["FAIL-F04-UNDERADVERTISED"]
    # GFD's count under the single MIG strategy counts MIG devices; a node without the label is not compared
    assert dra_count([slice_(devices=3)], exp(2, mig="single"))[0] == []
    assert dra_count([slice_(devices=3)], exp())[0] == []
    # under mixed the label counts GPUs: compared
    assert codes(dra_count([slice_(devices=3)], exp(2, mig="mixed"))[0]) == ["FAIL-F04-OVERADVERTISED"]


def test_mig_devices_are_not_counted_as_gpus():
    s = slice_(devices=3)
    s["spec"]["devices"][2]["attributes"] = {"type": {"string": "mig"}}
    assert dradevices.gpu_devices(DRIVER, [s]) == ["gpu-node-dra/gpu-0", "gpu-node-dra/gpu-1"]
    assert dradevices.usable_count(DRIVER, [s]) == 2
    # beside its parent GPU (dynamic MIG) a MIG device is no extra GPU ...
    parented = mig_slice(mig_of=("GPU-a",))
    assert dradevices.physical_gpus(DRIVER, [parented]) == ["GPU-a", "GPU-b"]
    assert dra_hardware([parented], {"pci": pci(2)})[0] == []
    # ... and a GPU in MIG mode, published as its MIG devices only (static MIG), is still one GPU
    static = mig_slice(whole=("GPU-a",), mig_of=("GPU-b", "GPU-b"))
    assert dradevices.physical_gpus(DRIVER, [static]) == ["GPU-a", "GPU-b"]
    assert dra_hardware([static], {"pci": pci(2)})[0] == []
    assert dra_count([static], exp(2))[0] == []


def mig_slice(whole=("GPU-a", "GPU-b"), mig_of=()):
    """Whole GPUs and MIG devices as NVIDIA's driver names them (gpu-<minor>, gpu-<minor>-mig-<profile>-<start>-<size>;
    type, uuid, parentUUID: cmd/gpu-kubelet-plugin/deviceinfo.go)."""
    devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": u}}}
               for i, u in enumerate(whole)]
    devices += [{"name": f"gpu-{whole.index(u) if u in whole else 'x'}-mig-19-{i}-1", "attributes": {"type": {"string": "mig"},
                                                                "uuid": {"string": f"MIG-{i}"},
                                                                "parentUUID": {"string": u}}}
                for i, u in enumerate(mig_of)]
    return {"spec": {"driver": DRIVER, "nodeName": "gpu-node-dra",
                     "pool": {"generation": 1, "name": "gpu-node-dra", "resourceSliceCount": 1}, "devices": devices}}


def test_gpus_published_beside_their_mig_devices_are_found_and_asked_for_by_checked_uuids():
    assert dradevices.mig_parents(DRIVER, [mig_slice(mig_of=("GPU-b",))]) == {"GPU-b": "gpu-node-dra/gpu-1"}
    assert dradevices.mig_parents(DRIVER, [mig_slice(mig_of=("GPU-a", "GPU-b"))]) == {
        "GPU-a": "gpu-node-dra/gpu-0", "GPU-b": "gpu-node-dra/gpu-1"}
    assert dradevices.mig_parents(DRIVER, [mig_slice()]) == {}  # no MIG device
    assert dradevices.mig_parents(DRIVER, [mig_slice(whole=("GPU-a",), mig_of=("GPU-b",))]) == {}  # static MIG
    # a uuid that is not a plain identifier never reaches a CEL expression
    hostile = 'GPU-a" || true || "'
    assert dradevices.mig_parents(DRIVER, [mig_slice(whole=(hostile,), mig_of=(hostile,))]) == {}
    assert verdicts.dra.parent_selector(DRIVER, ["GPU-b"], mig=False) == \
        'device.attributes["gpu.nvidia.com"].uuid == "GPU-b"'
    assert verdicts.dra.parent_selector(DRIVER, ["GPU-a", "GPU-b"], mig=True) == \
        'device.attributes["gpu.nvidia.com"].parentUUID in ["GPU-a", "GPU-b"]'
    with pytest.raises(ValueError):
        verdicts.dra.parent_selector(DRIVER, [hostile], mig=False)
    # which GPU the MIG claim's device belongs to
    slices = [mig_slice(mig_of=("GPU-b",))]
    assert verdicts.dra.allocated_parent(DRIVER, claim("gpu-1-mig-19-0-1"), slices) == "GPU-b"
    assert verdicts.dra.allocated_parent(DRIVER, claim("gpu-1"), slices) is None  # a whole GPU is no MIG device
    assert verdicts.dra.allocated_parent(DRIVER, {"metadata": {"name": "c"}, "status": {}}, slices) is None


def test_a_mig_device_allocated_beside_its_allocated_parent_fails():
    slices = [mig_slice(mig_of=("GPU-b",))]
    mig = claim("gpu-1-mig-19-0-1", name="mig-child")
    ok, ev = verdicts.dra.mig_parent_findings("n", DRIVER, "gpu-node-dra/gpu-1", "GPU-b", mig,
                                              {"metadata": {"name": "mig-parent"}, "status": {}}, slices)
    assert ok == [] and ev["parent claim allocated"] == "nothing (stays pending)"
    bad, _ = verdicts.dra.mig_parent_findings("n", DRIVER, "gpu-node-dra/gpu-1", "GPU-b", mig,
                                              claim("gpu-1", name="mig-parent"), slices)
    assert codes(bad) == ["FAIL-DRA-MIG-AND-PARENT-ALLOCATED"]
    assert ("GPU gpu-node-dra/gpu-1 (GPU-b) was allocated to claim mig-parent while its MIG device "
            "gpu-node-dra/gpu-1-mig-19-0-1 was allocated to claim mig-child") in bad[0].message


def test_usable_devices_leave_out_incomplete_pools_and_tainted_devices():
    assert dradevices.usable_count(DRIVER, [slice_()]) == 2
    assert dradevices.usable_count(DRIVER, [tainted_slice(XID)]) == 1
    assert dradevices.usable_count(DRIVER, [slice_(count=2)]) == 0  # the scheduler allocates from no such pool


def test_a_node_whose_gpus_are_in_mig_mode_offers_its_mig_devices():
    """Static MIG: no whole GPU is published, so the node's checks claim MIG devices (the MIG class)."""
    static = mig_slice(whole=(), mig_of=("GPU-a", "GPU-a", "GPU-b"))
    assert dradevices.usable_count(DRIVER, [static]) == 0
    assert dradevices.usable_count(DRIVER, [static], mig=True) == 3
    assert dradevices.mig_devices(DRIVER, [static]) == [
        "gpu-node-dra/gpu-x-mig-19-0-1", "gpu-node-dra/gpu-x-mig-19-1-1", "gpu-node-dra/gpu-x-mig-19-2-1"]
    static["spec"]["devices"][0]["taints"] = [XID]  # one MIG device tainted out of service
    assert dradevices.usable_count(DRIVER, [static], mig=True) == 2
    static["spec"]["pool"]["resourceSliceCount"] = 2
    assert dradevices.usable_count(DRIVER, [static], mig=True) == 0


def test_a_claim_allocated_a_tainted_device_fails_and_others_pass():
    out_of_service = dradevices.withheld(DRIVER, [tainted_slice(XID)])
    ok, ev = verdicts.dra.tainted_allocation_findings("n", DRIVER, {"burst0": [claim("gpu-0")]}, out_of_service)
    assert ok == [] and ev["allocated"] == {"burst0": ["gpu-node-dra/gpu-0"]}
    bad, _ = verdicts.dra.tainted_allocation_findings(
        "n", DRIVER, {"burst0": [claim("gpu-0")], "burst-extra": [claim("gpu-1", name="extra-claim")]},
        out_of_service)
    assert codes(bad) == ["FAIL-DRA-TAINTED-DEVICE-ALLOCATED"]
    assert "pod burst-extra's claim extra-claim was allocated gpu-node-dra/gpu-1" in bad[0].message
    assert "gpu.nvidia.com/xid=79:NoSchedule" in bad[0].message


# The plugin manager's series on the bed's DRA kubelet (v1.37.2), recorded 2026-12-06 with
# `kubectl get --raw /api/v1/nodes/gpu-node-dra/proxy/metrics`
PLUGIN_MANAGER_METRICS = """# HELP plugin_manager_total_plugins [ALPHA] Number of plugins in Plugin Manager
# TYPE plugin_manager_total_plugins gauge
plugin_manager_total_plugins{socket_path="/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock",state="actual_state_of_world"} 1
plugin_manager_total_plugins{socket_path="/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock",state="desired_state_of_world"} 1
process_start_time_seconds 1.76498e+09
"""


def dra_registration(samples, started=None, started_before=None):
    now, absent, ev = verdicts.dra_registrations(samples, DRIVER, PATH_.registrar_sockets([UID]))
    return verdicts.registration_findings("n", now, {}, started, started_before, absent, PATH_.not_registered), ev


def test_the_kubelets_plugin_manager_holding_the_driver_registered_passes():
    samples = metrics.parse(PLUGIN_MANAGER_METRICS)
    ok, ev = dra_registration(samples, 1.76498e9, 1.76498e9)
    assert ok == [] and ev["registered (actual state)"] == [
        "/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock"]
    # found but not registered, or not known at all
    found_only = [s for s in samples if ("state", "actual_state_of_world") not in s[1]]
    bad, _ = dra_registration(found_only)
    assert codes(bad) == ["FAIL-DRA-NOT-REGISTERED"] and "registration did not complete" in bad[0].message
    none, _ = dra_registration(metrics.parse("process_start_time_seconds 1\n"))
    assert codes(none) == ["FAIL-DRA-NOT-REGISTERED"] and "no socket of it" in none[0].message
    # another driver's socket is not this driver's registration
    other = metrics.parse(PLUGIN_MANAGER_METRICS.replace("gpu.nvidia.com-reg", "net.example.com-reg"))
    assert codes(dra_registration(other)[0]) == ["FAIL-DRA-NOT-REGISTERED"]


def test_a_kubelet_restart_during_the_run_is_an_unstable_registration_on_dra_too():
    found, _ = dra_registration(metrics.parse(PLUGIN_MANAGER_METRICS), 1.76498e9 + 60, 1.76498e9)
    assert codes(found) == ["FAIL-F11-REGISTRATION-UNSTABLE"]


def health_pod(*resources, container="probe", name="claim:gpu"):
    """A burst pod's status as the kubelet reports device health (core/v1 ContainerStatus.allocatedResourcesStatus).
    Recorded on the bed (v1.37.2): the kubelet names the device by its CDI device ID,
    {'name': 'claim:g', 'resources': [{'health': 'Healthy', 'resourceID': 'k8s.gpu.nvidia.com/claim=<uid>-gpu-0'}]}."""
    return {"status": {"containerStatuses": [{"name": container, "allocatedResourcesStatus": [
        {"name": name, "resources": [dict(zip(("resourceID", "health", "message"), r)) for r in resources]}]}]}}


CDI_ID = "k8s.gpu.nvidia.com/claim=c55f698f-94c2-4a67-ba65-d36df4124109-gpu-{}"


def test_a_device_reported_unhealthy_but_left_in_service_fails():
    pods = {"burst0": health_pod((CDI_ID.format(1), "Healthy")),
            "burst1": health_pod((CDI_ID.format(2), "Unhealthy", "XID 79: GPU has fallen off the bus"))}
    entries = verdicts.dra.health_entries(pods)
    assert [e["health"] for e in entries] == ["Healthy", "Unhealthy"] and entries[1]["pod"] == "burst1"
    claims = {"burst1": [claim("gpu-2", name="burst1-gpu-xyz")]}
    bad, ev = verdicts.dra.health_findings("n", DRIVER, entries, claims, {})
    assert codes(bad) == ["FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE"]
    assert ("the kubelet reports claim:gpu of pod burst1 Unhealthy: XID 79: GPU has fallen off the bus, yet "
            "gpu.nvidia.com keeps gpu-node-dra/gpu-2 in service") in bad[0].message
    assert ev["summary"] == "1 Healthy, 1 Unhealthy"
    # tainted out of service as well: the taint verdicts judge it, not this one
    tainted = {"gpu-node-dra/gpu-2": ["gpu.nvidia.com/xid=79:NoSchedule"]}
    assert verdicts.dra.health_findings("n", DRIVER, entries, claims, tainted)[0] == []
    # a kubelet naming the device <driver>/<pool>/<device> (no CDI ID): only that device of a two-device claim
    two = {"burst1": [claim("gpu-1", "gpu-2")]}
    named = verdicts.dra.health_entries({"burst1": health_pod(("gpu.nvidia.com/gpu-node-dra/gpu-2", "Unhealthy"))})
    found, ev = verdicts.dra.health_findings("n", DRIVER, named, two, {})
    assert codes(found) == ["FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE"] and ev["unhealthy"]["burst1"]["devices"] == [
        "gpu-node-dra/gpu-2"]


def test_healthy_unknown_or_unreported_devices_pass():
    pods = {"burst0": health_pod((CDI_ID.format(1), "Unknown")), "burst1": health_pod((CDI_ID.format(2), "Healthy")),
            "gone": None}
    ok, ev = verdicts.dra.health_findings("n", DRIVER, verdicts.dra.health_entries(pods), {}, {})
    assert ok == [] and ev["summary"] == "1 Healthy, 1 Unknown"
    none, ev = verdicts.dra.health_findings("n", DRIVER, verdicts.dra.health_entries({"p": {}}), {}, {})
    assert none == [] and ev["summary"].startswith("none reported")
    # NVIDIA's driver serves no DRAResourceHealth: every entry Unknown, and the evidence says it proves nothing
    unknown = {"burst0": health_pod((CDI_ID.format(1), "Unknown")), "burst1": health_pod((CDI_ID.format(2), "Unknown"))}
    ok, ev = verdicts.dra.health_findings("n", DRIVER, verdicts.dra.health_entries(unknown), {}, {})
    assert ok == [] and ev["summary"].startswith("2 Unknown: gpu.nvidia.com reports no device health")


def test_the_slice_evidence_names_who_wrote_each_of_the_drivers_slices():
    from gpuconform.verdicts.dra import slice_findings

    sl = {"metadata": {"name": "n-gpu.nvidia.com-x", "managedFields": [
              {"manager": "gpu-kubelet-plugin", "operation": "Update"}, {"manager": "kubectl", "operation": "Apply"}]},
          "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1,
                                                                         "resourceSliceCount": 1},
                   "devices": [{"name": "gpu-0"}]}}
    other = {"metadata": {"name": "nic"}, "spec": {"driver": "nic.example.com", "nodeName": "n",
                                                   "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1}}}
    _, ev = slice_findings("n", "gpu.nvidia.com", [sl, other])
    assert ev["written by (managedFields manager)"] == {"n-gpu.nvidia.com-x": ["gpu-kubelet-plugin", "kubectl"]}
