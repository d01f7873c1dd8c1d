"""verdicts.allocation (and the registration verdicts it began with): what probe pods see, bursts, the CUDA
workload, the counts and the pod that must wait; from recorded probe output, pods and nodes (testing/unit/samples)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from recorded import obj, probe_log, text

from gpuconform import config as gconfig
from gpuconform.allocpath import AllocationPath
from gpuconform.counts import Expectation
from gpuconform.pods import probe_pod
from gpuconform.probes import parse_nvidia_smi_l
from gpuconform.verdicts import (Seen, burst_findings, burst_size, capacity_findings, count_findings,
                                 extra_pod_findings, isolation_findings, isolation_request, plugin_pod_findings,
                                 socket_findings, unhealthy_ids_needed, vector_add_findings)

DEFAULT_CFG = copy.deepcopy(gconfig.DEFAULTS)

G0, G1 = "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23"
M0, M1 = "MIG-5c1a2b3d-4e5f-5a6b-9c7d-8e9f0a1b2c3d", "MIG-6d2b3c4e-5f60-5b7c-8d9e-0f1a2b3c4d5e"


def smi(*gpus: tuple[str, list[str]]) -> list:
    lines = []
    for i, (g, migs) in enumerate(gpus):
        lines.append(f"GPU {i}: NVIDIA A100-SXM4-40GB (UUID: {g})")
        lines += [f"  MIG 1g.5gb      Device  {j}: (UUID: {m})" for j, m in enumerate(migs)]
    return parse_nvidia_smi_l("\n".join(lines))


def plugin_pod(ready="True", restarts=0, waiting=None, last=None) -> dict:
    cs = {"name": "nvidia-device-plugin-ctr", "restartCount": restarts, "state": {"running": {}}}
    if waiting:
        cs["state"] = {"waiting": {"reason": waiting}}
    if last:
        cs["lastState"] = {"terminated": last}
    return {"metadata": {"name": "nvidia-device-plugin-abcde", "namespace": "nvidia-device-plugin"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}],
                       "containerStatuses": [cs]}}


def test_plugin_pod_healthy_crashlooping_or_not_ready():
    assert plugin_pod_findings("n", [plugin_pod()], 0) == []
    f = plugin_pod_findings("n", [plugin_pod("False", 3, "CrashLoopBackOff",
                                             {"exitCode": 1, "reason": "Error", "message": "failed to initialize NVML"})], 0)
    assert [x.code for x in f] == ["FAIL-F08-PLUGIN-CRASHLOOP"] and "failed to initialize NVML" in f[0].message
    assert "nvidia-device-plugin/nvidia-device-plugin-abcde" in f[0].message
    assert [x.code for x in plugin_pod_findings("n", [plugin_pod("False")], 0)] == ["FAIL-F08-PLUGIN-NOT-READY"]
    assert plugin_pod_findings("n", [plugin_pod(restarts=1)], 1) == []


def node(capacity: dict, allocatable: dict | None = None) -> dict:
    return {"metadata": {"name": "n"}, "status": {"capacity": capacity, "allocatable": allocatable or capacity}}


MIXED = Expectation("nvidia.com/gpu", 4, 1, "labels", "mixed", {"nvidia.com/mig-1g.5gb": 8, "nvidia.com/mig-3g.20gb": 4})


def test_capacity_of_each_resource_of_a_mig_node():
    ok = node({"nvidia.com/mig-1g.5gb": "8", "nvidia.com/mig-3g.20gb": "4"})
    assert capacity_findings(ok, MIXED) == []
    missing = capacity_findings(node({"nvidia.com/mig-1g.5gb": "8"}), MIXED)
    assert [f.code for f in missing] == ["FAIL-F01-NOT-REGISTERED"] and "nvidia.com/mig-3g.20gb" in missing[0].message
    zero = capacity_findings(node({"nvidia.com/mig-1g.5gb": "8", "nvidia.com/mig-3g.20gb": "4"},
                                  {"nvidia.com/mig-1g.5gb": "0", "nvidia.com/mig-3g.20gb": "4"}), MIXED)
    assert [f.code for f in zero] == ["FAIL-F03-UNHEALTHY-DEVICES"]  # registered (capacity 8), none healthy
    # a MIG-only node is not judged by nvidia.com/gpu (the false F01 of a one-resource config)
    assert "nvidia.com/gpu" not in MIXED.resources


LS = "total 0\nsrwxr-xr-x 1 root root 0 Dec  3 06:00 kubelet.sock\nsrwxr-xr-x 1 root root 0 Dec  3 06:00 {}\n"


def test_sockets_one_per_resource():
    assert socket_findings("n", LS.format("nvidia-gpu.sock"), ["nvidia-gpu.sock"]) == []
    f = socket_findings("n", LS.format("nvidia-mig-1g.5gb.sock"), MIXED.sockets())
    assert [x.code for x in f] == ["FAIL-F01-NOT-REGISTERED"] and "nvidia-mig-3g.20gb.sock" in f[0].message


def test_isolation_whole_gpus():
    zero = Seen("iso0", 0, [], [])
    assert isolation_findings("n", zero, Seen("iso2", 2, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, []))),
                              "gpu") == []
    f = isolation_findings("n", zero, Seen("iso2", 2, ["/dev/nvidia0"], smi((G0, []))), "gpu")
    assert [x.code for x in f] == ["FAIL-F12-DEVICE-NOT-INJECTED"]
    f = isolation_findings("n", Seen("iso0", 0, ["/dev/nvidia0"], smi((G0, []))),
                           Seen("iso2", 2, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, []))), "gpu")
    assert [x.code for x in f] == ["FAIL-ISOLATION"] and "requested no GPU" in f[0].message
    f = isolation_findings("n", zero, Seen("iso1", 1, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, []))), "gpu")
    assert [x.code for x in f] == ["FAIL-ISOLATION"]


def test_a_container_asking_for_no_gpu_beside_one_that_did_sees_none():
    """The AI Conformance MultiContainerIsolationTest: devices injected into every container of the pod fail."""
    zero, two = Seen("iso0", 0, [], []), Seen("iso2", 2, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, [])))
    assert isolation_findings("n", zero, two, "gpu", sidecar=Seen("iso2/sidecar", 0, [], [])) == []
    leaky = Seen("iso2/sidecar", 0, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, [])))
    f = isolation_findings("n", zero, two, "gpu", sidecar=leaky)
    assert [x.code for x in f] == ["FAIL-ISOLATION"] and "container iso2/sidecar, which asks for no GPU" in f[0].message
    assert "every container of the pod" in f[0].message


def test_isolation_mig_counts_mig_devices_not_the_shared_parent():
    zero = Seen("iso0", 0, [], [])
    two = Seen("iso2", 2, ["/dev/nvidia0"], smi((G0, [M0, M1])))  # one parent device node, two MIG devices
    assert isolation_findings("n", zero, two, "mig") == []
    assert [x.code for x in isolation_findings("n", zero, Seen("iso2", 2, [], smi((G0, [M0, M1]))), "mig")] == \
        ["FAIL-F12-DEVICE-NOT-INJECTED"]
    assert [x.code for x in isolation_findings("n", zero, Seen("iso1", 1, ["/dev/nvidia0"], smi((G0, [M0, M1]))),
                                               "mig")] == ["FAIL-ISOLATION"]


def test_isolation_time_slicing_replicas_may_share_one_gpu():
    zero = Seen("iso0", 0, [], [])
    assert isolation_findings("n", zero, Seen("iso2", 2, ["/dev/nvidia0"], smi((G0, []))), "replica") == []
    assert [x.code for x in isolation_findings("n", zero, Seen("iso1", 1, [], []), "replica")] == \
        ["FAIL-F12-DEVICE-NOT-INJECTED"]


def burst(*visible: list) -> list[Seen]:
    return [Seen(f"burst{i}", 1, ["/dev/nvidia0"] if gpus else [], gpus) for i, gpus in enumerate(visible)]


def test_burst_whole_gpus_each_once():
    found, owners = burst_findings("n", burst(smi((G0, [])), smi((G1, []))), 1)
    assert found == [] and owners == {G0: ["burst0"], G1: ["burst1"]}
    found, _ = burst_findings("n", burst(smi((G0, [])), smi((G0, []))), 1)
    assert [f.code for f in found] == ["FAIL-DOUBLE-ALLOCATION"] and "burst0, burst1" in found[0].message


def test_burst_on_the_dra_path_names_a_device_injected_into_two_claims_containers():
    found, _ = burst_findings("n", burst(smi((G0, [])), smi((G0, []))), 1, twice=AllocationPath(driver="gpu.nvidia.com").seen_twice)
    assert [f.code for f in found] == ["FAIL-DRA-DOUBLE-INJECTION"]
    assert "burst0, burst1), each with its own ResourceClaim" in found[0].message
    assert burst_findings("n", burst(smi((G0, [])), smi((G1, []))), 1, twice=AllocationPath(driver="gpu.nvidia.com").seen_twice)[0] == []


def test_burst_time_slicing_up_to_the_replica_count_per_gpu():
    four = burst(*[smi((G0, []))] * 4, *[smi((G1, []))] * 4)
    assert burst_findings("n", four, 4)[0] == []  # healthy: 4 replicas of each GPU, UUIDs shared
    five = burst(*[smi((G0, []))] * 5)
    found, _ = burst_findings("n", five, 4)
    assert [f.code for f in found] == ["FAIL-DOUBLE-ALLOCATION"] and "may be held by 4 pods" in found[0].message


def test_burst_mig_devices_are_told_apart_by_mig_uuid():
    ok = burst(smi((G0, [M0])), smi((G0, [M1])))  # same parent GPU, different MIG devices
    assert burst_findings("n", ok, 1)[0] == []
    found, _ = burst_findings("n", burst(smi((G0, [M0])), smi((G0, [M0]))), 1)
    assert [f.code for f in found] == ["FAIL-DOUBLE-ALLOCATION"] and M0 in found[0].message


@pytest.mark.parametrize("seen,code", [
    (burst([]), "FAIL-F12-DEVICE-NOT-INJECTED"),
    (burst(smi((G0, []), (G1, []))), "FAIL-ISOLATION"),
])
def test_burst_pod_that_sees_none_or_too_many(seen, code):
    assert [f.code for f in burst_findings("n", seen, 1)[0]] == [code]


def test_isolation_time_sliced_mig_replicas_may_share_one_mig_device():
    zero = Seen("iso0", 0, [], [])
    assert isolation_findings("n", zero, Seen("iso1", 1, ["/dev/nvidia0"], smi((G0, [M0]))), "mig", 2) == []
    assert burst_findings("n", burst(smi((G0, [M0])), smi((G0, [M0]))), 2)[0] == []


# ------------------------------------------------------------------ from recorded inputs (testing/unit/samples)

QUADRO = text("smi_l_plain_quadro.txt")  # 2x Quadro RTX 4000
A100_MIG = text("smi_l_a100_mig_mixed.txt")  # GPU 0 in MIG mode with four 1g.20gb devices, GPUs 1-3 whole
VGPU = text("vectoradd_passed_then_smi_l_vgpu.txt").splitlines()[-1]  # nvidia-smi -L of one vGPU
NO_GPU = "No devices were found"  # what nvidia-smi -L prints in a container given no GPU


def seen(pod: str, requested: int, smi_l: str, dev: int, env: str = "NVIDIA_VISIBLE_DEVICES=<unset>") -> Seen:
    """A probe pod's view from its log, the recorded nvidia-smi -L in the probe's section layout."""
    log = probe_log(env=env, dev="\n".join(f"/dev/nvidia{i}" for i in range(dev)), nvidia_smi_L=smi_l)
    return Seen.from_log(pod, requested, log)


def test_seen_from_a_probe_log():
    s = seen("iso2", 2, QUADRO, 2, "NVIDIA_VISIBLE_DEVICES=GPU-c7b57be0,GPU-d6de6afc")
    assert s.dev == ["/dev/nvidia0", "/dev/nvidia1"] and [g.name for g in s.gpus] == ["Quadro RTX 4000"] * 2
    assert s.evidence()["nvidia-smi"] == ["GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43",
                                          "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc"]
    assert s.env == "NVIDIA_VISIBLE_DEVICES=GPU-c7b57be0,GPU-d6de6afc"


def test_isolation_from_recorded_outputs():
    zero = seen("iso0", 0, NO_GPU, 0)
    assert zero.gpus == [] and isolation_findings("n", zero, seen("iso2", 2, QUADRO, 2), "gpu") == []
    assert [f.code for f in isolation_findings("n", zero, seen("iso2", 2, NO_GPU, 0), "gpu")] == \
        ["FAIL-F12-DEVICE-NOT-INJECTED"]
    f = isolation_findings("n", seen("iso0", 0, QUADRO, 2, "NVIDIA_VISIBLE_DEVICES=all"), seen("iso2", 2, QUADRO, 2),
                           "gpu")
    assert [x.code for x in f] == ["FAIL-ISOLATION"] and "NVIDIA_VISIBLE_DEVICES=all" in f[0].message
    # a MIG pod given one 1g.20gb device that sees the whole node
    f = isolation_findings("n", zero, seen("iso1", 1, A100_MIG, 4), "mig")
    assert [x.code for x in f] == ["FAIL-ISOLATION"] and "sees 4" in f[0].message


def test_burst_from_recorded_outputs():
    gpu0, gpu1 = QUADRO.splitlines()
    found, owners = burst_findings("n", [seen("burst0", 1, gpu0, 1), seen("burst1", 1, gpu1, 1)], 1)
    assert found == [] and len(owners) == 2
    found, _ = burst_findings("n", [seen("burst0", 1, VGPU, 1), seen("burst1", 1, VGPU, 1)], 1)
    assert [f.code for f in found] == ["FAIL-DOUBLE-ALLOCATION"] and "GPU-b40d5aa3-6b30-11ef-a128-9bcddb13a8d2" in \
        found[0].message
    found, _ = burst_findings("n", [seen("burst0", 1, NO_GPU, 0)], 1)
    assert [f.code for f in found] == ["FAIL-F12-DEVICE-NOT-INJECTED"]


@pytest.mark.parametrize("sample,code", [
    ("vectoradd_passed_then_smi_l_vgpu.txt", None),
    ("vectoradd_no_device.txt", "FAIL-F12-DEVICE-NOT-INJECTED"),
    ("vectoradd_forward_compat.txt", "FAIL-F13-CUDA-FAILURE"),
    ("vectoradd_busy_new_wording.txt", "FAIL-F13-CUDA-FAILURE"),
])
def test_vector_add_from_recorded_logs(sample, code):
    log = text(sample)
    f = vector_add_findings("gpu-a", "vectoradd-gpu-a", "nvidia.com/gpu", log, 0 if code is None else 1)
    assert [x.code for x in f] == ([code] if code else [])
    if code:
        assert "vector-add pod vectoradd-gpu-a (nvidia.com/gpu) exited 1" in f[0].message


def test_vector_add_passed_text_with_a_failing_exit_is_a_failure():
    f = vector_add_findings("gpu-a", "v", "nvidia.com/gpu", text("vectoradd_passed_then_smi_l_vgpu.txt"), 1)
    assert [x.code for x in f] == ["FAIL-F13-CUDA-FAILURE"]


def test_isolation_request_is_one_replica_on_shared_nodes():
    assert isolation_request(Expectation("nvidia.com/gpu", 4, 1, "labels"), 4, 8) == 2
    assert isolation_request(Expectation("nvidia.com/gpu", 4, 1, "labels"), 1, 8) == 1
    assert isolation_request(Expectation("nvidia.com/gpu.shared", 2, 4, "labels", "none"), 8, 8) == 1


def test_burst_size_is_every_free_device_up_to_the_limits():
    assert burst_size(4, 8) == 4  # the burst check: every free device
    assert burst_size(12, 8) == 8  # limits.maxGpusPerNode
    assert burst_size(4, 8, wanted=2) == 2  # the latency check's burst.size
    assert burst_size(1, 8, wanted=3) == 1  # never more than is free
    assert burst_size(0, 8) == 0


def test_extra_burst_pod_waits_or_is_over_advertised():
    pending = obj("pod_k8s_device_plugin_165_insufficient_gpu.yaml")
    assert extra_pod_findings("gpu-node-0", pending, "nvidia.com/gpu", 4) == []
    running = probe_pod("burst-extra-gpu-node-0", "gpuconform-r1", "r1", "burst", "gpu-node-0", DEFAULT_CFG, 1,
                        resource="nvidia.com/gpu")  # the suite's own pod, as the API returns it once Running
    running["status"] = {"phase": "Running"}
    f = extra_pod_findings("gpu-node-0", running, "nvidia.com/gpu", 4)
    assert [x.code for x in f] == ["FAIL-F04-OVERADVERTISED"] and "(nvidia.com/gpu #5) reached Running" in f[0].message
    # review R2: a tenant's pod ended during the burst and freed a device, which pod N+1 took: churn, not the plugin
    # (before: FAIL-F04-OVERADVERTISED)
    assert extra_pod_findings("gpu-node-0", running, "nvidia.com/gpu", 4, freed=1) == []


# ------------------------------------------------------------------ the count check (counts.check_counts folded)

def layout_node(file: str, name: str) -> dict:
    data = json.loads((Path(__file__).parent / "data" / "layouts" / file).read_text())
    return next(n for n in data["nodes"] if n["metadata"]["name"] == name)


def advertise(node: dict, resources: dict[str, str]) -> dict:
    """The node's status as a plugin advertising `resources` leaves it (capacity = allocatable); None removes one."""
    for key in ("capacity", "allocatable"):
        for res, v in resources.items():
            if v is None:
                node["status"][key].pop(res, None)
            else:
                node["status"][key][res] = v
    return node


STATIC = Expectation("nvidia.com/gpu", 4, 1, "GFD label nvidia.com/gpu.count=4")


def test_counts_of_a_healthy_recorded_node():
    assert count_findings(layout_node("nvidia-static.json", "gpu-node-0"), STATIC) == []


def test_unhealthy_device_named_from_the_plugin_log():
    node = obj("node_k8s_device_plugin_75_one_unhealthy.yaml")
    exp = Expectation("nvidia.com/gpu", 3, 1, "config nodes.expectedGpus=3")
    assert unhealthy_ids_needed(node, exp) and not unhealthy_ids_needed(layout_node("nvidia-static.json",
                                                                                    "gpu-node-0"), STATIC)
    f = count_findings(node, exp, [text("plugin_log_k8s_device_plugin_189_xid_unhealthy.txt")])
    assert [x.code for x in f] == ["FAIL-F03-UNHEALTHY-DEVICES"]
    assert "1 of 3" in f[0].message and "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8" in f[0].message


@pytest.mark.parametrize("change,code", [
    ({"nvidia.com/gpu": "6"}, "FAIL-F04-OVERADVERTISED"),  # the bed's over-advertised fault: 2 phantom devices
    ({"nvidia.com/gpu": "3"}, "FAIL-F04-UNDERADVERTISED"),
    ({"nvidia.com/mig-1g.10gb": "3"}, "FAIL-F04-STALE-RESOURCE"),  # left behind by an earlier MIG config
    ({"nvidia.com/gpu": None}, "FAIL-F01-NOT-REGISTERED"),
    ({"nvidia.com/gpu": "0"}, "FAIL-F02-CAPACITY-ZERO"),
])
def test_counts_of_the_recorded_static_node_advertising_otherwise(change, code):
    f = count_findings(advertise(layout_node("nvidia-static.json", "gpu-node-0"), change), STATIC)
    assert [x.code for x in f] == [code]


def test_sharing_not_applied_on_the_recorded_mps_node():
    exp = Expectation("nvidia.com/gpu", 1, 2, "GFD labels nvidia.com/gpu.count=1, replicas=2")
    node = layout_node("nvidia-helm.json", "gpu-mps-0")
    assert count_findings(node, exp) == []
    f = count_findings(advertise(node, {"nvidia.com/gpu": "1"}), exp)
    assert [x.code for x in f] == ["FAIL-F10-SHARING-MISMATCH"]


def test_mig_profile_count_differs_on_the_recorded_mig_node():
    exp = Expectation("nvidia.com/gpu", 2, 1, "labels", "mixed", {"nvidia.com/mig-1g.10gb": 3, "nvidia.com/mig-4g.40gb": 1},
                      whole_gpus_too=True)
    node = layout_node("nvidia-operator.json", "gpu-mig-0")
    assert count_findings(node, exp) == []
    f = count_findings(advertise(node, {"nvidia.com/mig-1g.10gb": "2"}), exp)
    assert [x.code for x in f] == ["FAIL-F09-MIG-MISMATCH"]


def test_several_count_findings_fold_into_one():
    node = advertise(layout_node("nvidia-static.json", "gpu-node-0"),
                     {"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "3"})
    f = count_findings(node, STATIC)
    assert [x.code for x in f] == ["FAIL-F04-OVERADVERTISED"] and "also [FAIL-F04-STALE-RESOURCE]" in f[0].message


# ---------------------------------------------------------------- access held through the run (spans_run)

def _round(i: int, smi_l: str, dev: int) -> str:
    return f"== round ==\n{i}\n" + probe_log(env="NVIDIA_VISIBLE_DEVICES=GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43",
                                             dev="\n".join(f"/dev/nvidia{d}" for d in range(dev)), nvidia_smi_L=smi_l)


ONE_QUADRO = QUADRO.splitlines()[0]


def test_a_repeating_probes_log_splits_into_its_complete_rounds():
    from gpuconform.probes import rounds

    log = _round(1, ONE_QUADRO, 1) + _round(2, ONE_QUADRO, 1) + "== round ==\n3\n== env ==\nNVIDIA_VIS"
    assert [n for n, _ in rounds(log)] == [1, 2]
    tail = log[log.index("== dev =="):]  # a tail of the log that starts inside round 1
    assert [n for n, _ in rounds(tail)] == [2]


def test_access_held_through_the_run_passes_when_the_last_check_sees_what_the_first_saw():
    from gpuconform.verdicts import access_findings

    first = Seen.from_log("access-n1", 1, _round(1, ONE_QUADRO, 1))
    assert access_findings("n1", "access-n1", first, Seen.from_log("access-n1", 1, _round(9, ONE_QUADRO, 1)), 9) == []


def test_access_lost_during_the_run_is_its_own_failure_naming_both_checks():
    from gpuconform.verdicts import access_findings

    first = Seen.from_log("access-n1", 1, _round(1, ONE_QUADRO, 1))
    last = Seen.from_log("access-n1", 1, _round(9, "No devices were found", 0))
    f = access_findings("n1", "access-n1", first, last, 9)
    assert [x.code for x in f] == ["FAIL-F12-ACCESS-LOST"]
    assert "GPU-c7b57be0" in f[0].message and "no GPU" in f[0].message and "round 9" in f[0].message


def test_access_check_without_a_device_from_the_start_or_without_a_last_round():
    from gpuconform.verdicts import access_findings

    none = Seen.from_log("access-n1", 1, _round(1, "No devices were found", 0))
    assert [x.code for x in access_findings("n1", "access-n1", none, none, 5)] == ["FAIL-F12-DEVICE-NOT-INJECTED"]
    first = Seen.from_log("access-n1", 1, _round(1, ONE_QUADRO, 1))
    assert [x.code for x in access_findings("n1", "access-n1", first, None, 1)] == ["ERROR-TIMEOUT"]
    assert [x.code for x in access_findings("n1", "access-n1", None, None, 0)] == ["ERROR-TIMEOUT"]


def test_a_device_that_goes_out_of_service_during_the_run_costs_the_certification():
    from gpuconform.counts import Offered
    from gpuconform.verdicts import went_out_of_service
    start = Offered("capacity nvidia.com/gpu", 4, out_of_service=0)
    assert went_out_of_service("n", start, start) == []
    found = went_out_of_service("n", start, Offered("capacity nvidia.com/gpu", 4, out_of_service=1))
    assert [f.code for f in found] == ["FAIL-F03-UNHEALTHY-DEVICES"]
    assert "0 out of service when they started, 1 when they had ended" in found[0].message
    # out of service from the start (the count check's) and still: nothing new
    assert went_out_of_service("n", Offered("x", 4, out_of_service=1), Offered("x", 4, out_of_service=1)) == []
    # a DRA device tainted mid-run is named; a GPU gone from capacity is a loss too
    dra = went_out_of_service("n", Offered("GPUs d publishes", 3),
                              Offered("GPUs d publishes", 3, out_of_service=1, out_named=["p/gpu-2 (xid=79)"]))
    assert "p/gpu-2 (xid=79)" in dra[0].message
    gone = went_out_of_service("n", Offered("capacity nvidia.com/gpu", 4), Offered("capacity nvidia.com/gpu", 3))
    assert [f.code for f in gone] == ["FAIL-F03-UNHEALTHY-DEVICES"] and "fell from 4 to 3" in gone[0].message


def test_what_a_node_offers_is_read_from_the_kubelets_list_where_the_probe_read_it():
    from gpuconform.counts import Expectation
    from gpuconform.verdicts import node_offer
    exp = Expectation("nvidia.com/gpu", 4, 1, "label")
    node = {"status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"}}}
    assert node_offer(exp, node).out_of_service == 0  # the node object has not caught up yet
    listed = {"allocatable": {"devices": [{"resource": "nvidia.com/gpu", "ids": [G0, G1, "GPU-c"]}]}}
    o = node_offer(exp, node, listed)
    assert (o.count, o.out_of_service) == (4, 1) and "not in the kubelet's allocatable list" in o.out_how
    assert node_offer(exp, node, {"allocatable": {"error": "no socket"}}).out_of_service == 0  # falls back
    assert o.out_named == []  # no checkpoint read: the one left out is not known by name
    # the kubelet's checkpoint (v1.37: its healthy devices, and every allocation): an Unhealthy device a pod holds
    # is named (the Xid row: the vector-add pod held it), one nobody holds only counted
    cp = {"registered": {"nvidia.com/gpu": [G0, G1, "GPU-c"]},
          "entries": [{"resource": "nvidia.com/gpu", "ids": ["GPU-d"]}, {"resource": "other", "ids": ["x"]}]}
    assert node_offer(exp, node, {**listed, "checkpoint": cp}).out_named == ["GPU-d"]
