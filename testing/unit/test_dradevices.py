"""A DRA node's free devices, as the scheduler counts them (gpuconform/dradevices.py): from the claims' allocations,
admin access and other drivers left out, counters honoured, DeviceTaintRules applied."""

from __future__ import annotations

from gpuconform import dradevices

D = "gpu.nvidia.com"


def gpu(i: int, **extra) -> dict:
    return {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i:08d}"}}, **extra}


def mig(i: int, profile: str = "1g5gb", start: int = 0, uuid: bool = False) -> dict:
    attrs = {"type": {"string": "mig"}, "parentUUID": {"string": f"GPU-{i:08d}"}, "profile": {"string": profile}}
    if uuid:
        attrs["uuid"] = {"string": f"MIG-{i:08d}-{start}"}
    return {"name": f"gpu-{i}-mig-{profile}-19-{start}", "attributes": attrs}


def slice_(devices: list[dict], pool: str = "node-a", gen: int = 1, count: int = 1, counters: list | None = None,
           driver: str = D) -> dict:
    spec = {"driver": driver, "nodeName": "node-a", "pool": {"name": pool, "generation": gen,
                                                             "resourceSliceCount": count}, "devices": devices}
    if counters is not None:
        spec["sharedCounters"] = counters
    return {"metadata": {"name": f"{pool}-{gen}-{len(devices)}"}, "spec": spec}


def claim(name: str, *devices: str, ns: str = "t", admin: bool = False, driver: str = D,
          reserved: list[str] = ()) -> dict:
    results = [{"request": "gpu", "driver": driver, "pool": "node-a", "device": d, **({"adminAccess": True} if admin
                                                                                      else {})} for d in devices]
    return {"metadata": {"name": name, "namespace": ns},
            "status": {"allocation": {"devices": {"results": results}},
                       "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved]}}


FOUR = [slice_([gpu(i) for i in range(4)])]


def test_admin_access_results_are_not_allocations():
    """The GPU operator v26.7 DRA stack: nvidia-dra-validator (ExactCount 1) and nvidia-dcgm-exporter (All) hold
    admin-access claims on every GPU node; the scheduler does not count them (allocateddevices.go:55-58)."""
    validator = claim("validator", "gpu-0", ns="gpu-operator", admin=True)
    dcgm = claim("dcgm", "gpu-0", "gpu-1", "gpu-2", "gpu-3", ns="gpu-operator", admin=True)
    assert len(dradevices.free_devices(D, FOUR, [validator, dcgm])) == 4


def test_a_claim_for_several_gpus_holds_each_and_a_shared_claim_holds_its_device_once():
    two = claim("two", "gpu-0", "gpu-1", reserved=["p1"])
    shared = claim("shared", "gpu-2", reserved=["p2", "p3"])  # one claim named by two pods
    assert dradevices.free_devices(D, FOUR, [two, shared]) == ["node-a/gpu-3"]


def test_another_drivers_claims_take_nothing():
    nic = claim("nic", "eth0", driver="dra.net.example.com")
    channel = claim("channel", "channel-0", driver="compute-domain.nvidia.com")
    assert len(dradevices.free_devices(D, FOUR, [nic, channel])) == 4


def test_a_mig_device_held_blocks_its_parent_gpu_through_their_counter_set():
    """DynamicMIG on Hopper (1.35+ layout): a counters-only slice, then one slice per GPU with the GPU whole and its
    abstract MIG devices, all consuming the GPU's counter set."""
    counters = [{"name": f"gpu-{i}-counter-set", "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}}
                for i in range(2)]

    def whole(i):
        return gpu(i, consumesCounters=[{"counterSet": f"gpu-{i}-counter-set",
                                         "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}}])

    def part(i, start):
        return dict(mig(i, start=start), consumesCounters=[{"counterSet": f"gpu-{i}-counter-set",
                                                            "counters": {"memory": {"value": "10Gi"},
                                                                         "slices": {"value": "1"}}}])
    slices = [slice_([], count=3, counters=counters)] + [
        slice_([whole(i)] + [part(i, s) for s in range(7)], count=3) for i in range(2)]
    assert len(dradevices.free_devices(D, slices, [])) == 2
    held = claim("mig", "gpu-0-mig-1g5gb-19-0")
    assert dradevices.free_devices(D, slices, [held]) == ["node-a/gpu-1"]
    # MIG devices: 7 per GPU fit at once, less the one held
    assert len(dradevices.free_devices(D, slices, [held], mig=True)) == 13
    assert dradevices.physical_gpus(D, slices) == ["GPU-00000000", "GPU-00000001"]


def test_abstract_mig_devices_beyond_what_counters_allow_are_not_free():
    """DynamicMIG on Ampere: a GPU in MIG mode published as every placement of every profile (tens of devices), of
    which the counters let 7 1g devices exist at once."""
    counters = [{"name": "gpu-0-counter-set", "counters": {"slices": {"value": "7"}}}]
    devs = [dict(mig(0, "1g5gb", s), consumesCounters=[{"counterSet": "gpu-0-counter-set",
                                                         "counters": {"slices": {"value": "1"}}}]) for s in range(7)]
    devs += [dict(mig(0, "2g10gb", s), consumesCounters=[{"counterSet": "gpu-0-counter-set",
                                                           "counters": {"slices": {"value": "2"}}}]) for s in range(3)]
    slices = [slice_(devs, counters=counters)]
    assert len(dradevices.free_devices(D, slices, [], mig=True)) == 7
    assert dradevices.usable_count(D, slices, mig=True) == 7


def test_passthrough_twins_are_not_more_gpus():
    vfio = [{"name": f"gpu-vfio-{i}", "attributes": {"type": {"string": "vfio"}, "uuid": {"string": f"sha{i}"}}}
            for i in range(4)]
    slices = [slice_([gpu(i) for i in range(4)] + vfio)]
    assert len(dradevices.gpu_devices(D, slices)) == 4 and len(dradevices.physical_gpus(D, slices)) == 4
    assert len(dradevices.free_devices(D, slices, [])) == 4


def test_a_device_taint_rule_withholds_the_devices_it_selects_like_a_slice_taint():
    rule = {"metadata": {"name": "maintenance"}, "spec": {
        "deviceSelector": {"driver": D, "pool": "node-a", "device": "gpu-3"},
        "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}
    info = {"metadata": {"name": "note"}, "spec": {"deviceSelector": {"driver": D, "device": "gpu-1"},
                                                    "taint": {"key": "example.com/note", "effect": "None"}}}
    other = {"metadata": {"name": "other"}, "spec": {"deviceSelector": {"driver": "gpu.amd.com"},
                                                     "taint": {"key": "x", "effect": "NoExecute"}}}
    out = dradevices.withheld(D, FOUR, [rule, info, other])
    assert out == {"node-a/gpu-3": ["example.com/maintenance:NoSchedule (DeviceTaintRule maintenance)"]}
    assert dradevices.informational(D, FOUR, [rule, info]) == {
        "node-a/gpu-1": ["example.com/note:None (DeviceTaintRule note)"]}
    assert len(dradevices.free_devices(D, FOUR, [], [rule, info, other])) == 3


def test_slice_taints_withhold_by_effect():
    tainted = [slice_([gpu(0, taints=[{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]),
                       gpu(1, taints=[{"key": "gpu.nvidia.com/unmonitored", "effect": "None"}]), gpu(2)])]
    assert dradevices.withheld(D, tainted) == {"node-a/gpu-0": ["gpu.nvidia.com/xid=79:NoSchedule"]}
    assert dradevices.free_devices(D, tainted, []) == ["node-a/gpu-1", "node-a/gpu-2"]


def test_an_incomplete_pool_offers_nothing_and_claims_skipped_count_as_free():
    half = [slice_([gpu(0), gpu(1)], count=2)]
    assert dradevices.free_devices(D, half, []) == []
    held = claim("run-long", "gpu-0", ns="gpuconform-x", reserved=["rl"])
    assert len(dradevices.free_devices(D, FOUR, [held])) == 3
    assert len(dradevices.free_devices(D, FOUR, [held], skip=[("gpuconform-x", "run-long")])) == 4



def test_the_claim_watch_decodes_a_claim_event():
    """The client's V1ResourceClaimList holds ResourceV1ResourceClaim, so its watch cannot derive the item type from
    the LIST's (it looks for V1ResourceClaim); the inventory names it (inventory.py claim_watch)."""
    import json

    from kubernetes import watch as kwatch

    w = kwatch.Watch(return_type="ResourceV1ResourceClaim")
    raw = {"type": "MODIFIED", "object": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                          "metadata": {"name": "c", "namespace": "t", "resourceVersion": "7"},
                                          "spec": {"devices": {"requests": []}},
                                          **claim("c", "gpu-0", reserved=["p"])}}
    ev = w.unmarshal_event(json.dumps(raw), "ResourceV1ResourceClaim")
    assert ev["object"].metadata.namespace == "t" and ev["object"].status.allocation.devices.results[0].device == "gpu-0"


def test_a_claim_no_live_pod_holds_counts_free_on_the_node():
    """Devices of claims being released (their pods are being deleted, or no pod is left in reservedFor) are free
    for the next pod: the resourceclaim controller deallocates them within a moment (seen in CI's extra-device row:
    the burst counted 1 free while two ended checks' claims were being released, and its extra pod then ran)."""
    from gpuconform import nodes
    from gpuconform.pytest_plugin.inventory import Inventory

    inv = Inventory.__new__(Inventory)
    g = nodes.GpuNode("node-a", True, True, 4, 4, (), D, path="dra", dra_driver=D, device_class=D)
    held = claim("held", "gpu-0", reserved=["live"])
    ending = claim("ending", "gpu-1", reserved=["deleted"])
    released = claim("released", "gpu-2")
    released["status"]["reservedFor"] = []
    inv.node, inv.claims, inv.taint_rules = (lambda n: g), (lambda: [held, ending, released]), (lambda: [])
    inv.resource_slices = lambda n: FOUR
    live = {"metadata": {"uid": "uid-live"}}
    deleted = {"metadata": {"uid": "uid-deleted", "deletionTimestamp": "2026-12-06T18:00:00Z"}}
    assert inv.free_among("node-a", [live, deleted], None) == 3
    assert inv.free_among("node-a", [live, deleted], None, ignore=[live]) == 4  # beside the run-long pod
