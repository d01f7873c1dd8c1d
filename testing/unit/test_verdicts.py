"""verdicts: registration and allocation verdicts from recorded pods, nodes and probe output (one per code)."""

from __future__ import annotations

import pytest

from gpuconform.counts import Expectation
from gpuconform.probes import parse_nvidia_smi_l
from gpuconform.verdicts import (Seen, burst_findings, capacity_findings, isolation_findings, plugin_pod_findings,
                                 socket_findings)

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
    assert [x.code for x in f] == ["GPU-F08-PLUGIN-CRASHLOOP"] and "failed to initialize NVML" in f[0].message
    assert "nvidia-device-plugin/nvidia-device-plugin-abcde" in f[0].message
    assert [x.code for x in plugin_pod_findings("n", [plugin_pod("False")], 0)] == ["GPU-F08-PLUGIN-NOT-READY"]
    assert plugin_pod_findings("n", [plugin_pod(restarts=1)], 1) == []


def node(capacity: dict, allocatable: dict | None = None) -> dict:
    return {"metadata": {"name": "n"}, "status": {"capacity": capacity, "allocatable": allocatable or capacity}}


MIXED = Expectation("nvidia.com/gpu", 4, 1, "labels", "mixed", {"nvidia.com/mig-1g.5gb": 8, "nvidia.com/mig-3g.20gb": 4})


def test_capacity_of_each_resource_of_a_mig_node():
    ok = node({"nvidia.com/mig-1g.5gb": "8", "nvidia.com/mig-3g.20gb": "4"})
    assert capacity_findings(ok, MIXED) == []
    missing = capacity_findings(node({"nvidia.com/mig-1g.5gb": "8"}), MIXED)
    assert [f.code for f in missing] == ["GPU-F01-NOT-REGISTERED"] and "nvidia.com/mig-3g.20gb" in missing[0].message
    zero = capacity_findings(node({"nvidia.com/mig-1g.5gb": "8", "nvidia.com/mig-3g.20gb": "4"},
                                  {"nvidia.com/mig-1g.5gb": "0", "nvidia.com/mig-3g.20gb": "4"}), MIXED)
    assert [f.code for f in zero] == ["GPU-F02-CAPACITY-ZERO"]
    # a MIG-only node is not judged by nvidia.com/gpu (the false GPU-F01 of a one-resource config)
    assert "nvidia.com/gpu" not in MIXED.resources


LS = "total 0\nsrwxr-xr-x 1 root root 0 Dec  3 06:00 kubelet.sock\nsrwxr-xr-x 1 root root 0 Dec  3 06:00 {}\n"


def test_sockets_one_per_resource():
    assert socket_findings("n", LS.format("nvidia-gpu.sock"), ["nvidia-gpu.sock"]) == []
    f = socket_findings("n", LS.format("nvidia-mig-1g.5gb.sock"), MIXED.sockets())
    assert [x.code for x in f] == ["GPU-F01-NOT-REGISTERED"] and "nvidia-mig-3g.20gb.sock" in f[0].message


def test_isolation_whole_gpus():
    zero = Seen("iso0", 0, [], [])
    assert isolation_findings("n", zero, Seen("iso2", 2, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, []))),
                              "gpu") == []
    f = isolation_findings("n", zero, Seen("iso2", 2, ["/dev/nvidia0"], smi((G0, []))), "gpu")
    assert [x.code for x in f] == ["GPU-F12-DEVICE-NOT-INJECTED"]
    f = isolation_findings("n", Seen("iso0", 0, ["/dev/nvidia0"], smi((G0, []))),
                           Seen("iso2", 2, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, []))), "gpu")
    assert [x.code for x in f] == ["GPU-ISOLATION"] and "requested no GPU" in f[0].message
    f = isolation_findings("n", zero, Seen("iso1", 1, ["/dev/nvidia0", "/dev/nvidia1"], smi((G0, []), (G1, []))), "gpu")
    assert [x.code for x in f] == ["GPU-ISOLATION"]


def test_isolation_mig_counts_mig_devices_not_the_shared_parent():
    zero = Seen("iso0", 0, [], [])
    two = Seen("iso2", 2, ["/dev/nvidia0"], smi((G0, [M0, M1])))  # one parent device node, two MIG devices
    assert isolation_findings("n", zero, two, "mig") == []
    assert [x.code for x in isolation_findings("n", zero, Seen("iso2", 2, [], smi((G0, [M0, M1]))), "mig")] == \
        ["GPU-F12-DEVICE-NOT-INJECTED"]
    assert [x.code for x in isolation_findings("n", zero, Seen("iso1", 1, ["/dev/nvidia0"], smi((G0, [M0, M1]))),
                                               "mig")] == ["GPU-ISOLATION"]


def test_isolation_time_slicing_replicas_may_share_one_gpu():
    zero = Seen("iso0", 0, [], [])
    assert isolation_findings("n", zero, Seen("iso2", 2, ["/dev/nvidia0"], smi((G0, []))), "replica") == []
    assert [x.code for x in isolation_findings("n", zero, Seen("iso1", 1, [], []), "replica")] == \
        ["GPU-F12-DEVICE-NOT-INJECTED"]


def burst(*visible: list) -> list[Seen]:
    return [Seen(f"burst{i}", 1, ["/dev/nvidia0"] if gpus else [], gpus) for i, gpus in enumerate(visible)]


def test_burst_whole_gpus_each_once():
    found, owners = burst_findings("n", burst(smi((G0, [])), smi((G1, []))), 1)
    assert found == [] and owners == {G0: ["burst0"], G1: ["burst1"]}
    found, _ = burst_findings("n", burst(smi((G0, [])), smi((G0, []))), 1)
    assert [f.code for f in found] == ["GPU-DOUBLE-ALLOCATION"] and "burst0, burst1" in found[0].message


def test_burst_time_slicing_up_to_the_replica_count_per_gpu():
    four = burst(*[smi((G0, []))] * 4, *[smi((G1, []))] * 4)
    assert burst_findings("n", four, 4)[0] == []  # healthy: 4 replicas of each GPU, UUIDs shared
    five = burst(*[smi((G0, []))] * 5)
    found, _ = burst_findings("n", five, 4)
    assert [f.code for f in found] == ["GPU-DOUBLE-ALLOCATION"] and "may be held by 4 pods" in found[0].message


def test_burst_mig_devices_are_told_apart_by_mig_uuid():
    ok = burst(smi((G0, [M0])), smi((G0, [M1])))  # same parent GPU, different MIG devices
    assert burst_findings("n", ok, 1)[0] == []
    found, _ = burst_findings("n", burst(smi((G0, [M0])), smi((G0, [M0]))), 1)
    assert [f.code for f in found] == ["GPU-DOUBLE-ALLOCATION"] and M0 in found[0].message


@pytest.mark.parametrize("seen,code", [
    (burst([]), "GPU-F12-DEVICE-NOT-INJECTED"),
    (burst(smi((G0, []), (G1, []))), "GPU-ISOLATION"),
])
def test_burst_pod_that_sees_none_or_too_many(seen, code):
    assert [f.code for f in burst_findings("n", seen, 1)[0]] == [code]


def test_isolation_time_sliced_mig_replicas_may_share_one_mig_device():
    zero = Seen("iso0", 0, [], [])
    assert isolation_findings("n", zero, Seen("iso1", 1, ["/dev/nvidia0"], smi((G0, [M0]))), "mig", 2) == []
    assert burst_findings("n", burst(smi((G0, [M0])), smi((G0, [M0]))), 2)[0] == []
