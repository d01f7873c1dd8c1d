"""verdicts.registration and verdicts.common from recorded inputs: plugin pods, node status, the device-plugins
listing, the kubelet's /metrics, the GPU operator's validator; each with a healthy input that yields nothing."""

from __future__ import annotations

import json
from pathlib import Path

from recorded import obj, text

from gpuconform import metrics, verdicts
from gpuconform.counts import Expectation
from gpuconform.discovery import Found
from gpuconform.nodes import GpuNode, describe_nodes

LAYOUTS = Path(__file__).parent / "data" / "layouts"


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def layout(name: str) -> dict:
    """Healthy nodes and pods of a real install layout (testing/unit/data/layouts: built from the upstream templates,
    each file's "source" says which)."""
    return json.loads((LAYOUTS / name).read_text())


def on_node(data: dict, node: str, prefix: str) -> list[dict]:
    return [p for p in data["pods"] if p["spec"].get("nodeName") == node and p["metadata"]["name"].startswith(prefix)]


# ------------------------------------------------------------------ the plugin pod

CRASHING, RUNNING = obj("pods_gpu_operator_35_plugin_crashloop_and_running.yaml")
INIT = obj("pod_gpu_operator_131_plugin_init.yaml")


def test_running_plugin_pods_are_healthy():
    assert verdicts.plugin_pod_findings("n", [RUNNING], 0) == []
    operator = layout("nvidia-operator.json")
    found = Found(on_node(operator, "gpu-plain-0", "nvidia-device-plugin-daemonset-"), "nvidia-operator", "labels")
    assert len(found.pods) == 1 and verdicts.plugin_findings("gpu-plain-0", found, 0) == []


def test_crash_looping_plugin_pod():
    f = verdicts.plugin_findings("n", Found([CRASHING, RUNNING], "nvidia-operator", "labels"), 0)
    assert codes(f) == ["FAIL-F08-PLUGIN-CRASHLOOP"]
    assert "gpu-operator-resources/nvidia-device-plugin-daemonset-5crlk" in f[0].message
    assert "restarted 12 times (allowed 0), state CrashLoopBackOff" in f[0].message
    assert "(no termination message)" in f[0].message  # `get pods` shows none: the finding says so
    # restarts within plugin.maxRestarts are no crash loop, but a pod waiting in CrashLoopBackOff is one anyway
    assert codes(verdicts.plugin_pod_findings("n", [CRASHING], 12)) == ["FAIL-F08-PLUGIN-CRASHLOOP"]


def _restarted(count: int, reason: str, exit_code: int) -> dict:
    import copy
    pod = copy.deepcopy(RUNNING)
    cs = pod["status"]["containerStatuses"][0]
    cs["restartCount"] = count
    cs["lastState"] = {"terminated": {"exitCode": exit_code, "reason": reason}}
    return pod


def test_a_restart_the_node_caused_is_not_the_plugins():
    # seen on the bed after a restart of its machine: every pod's container restarted once, the kubelet's record
    # ContainerStatusUnknown (137); after a reboot containerd reloads the container as exit 255, reason Unknown
    assert verdicts.plugin_pod_findings("n", [_restarted(1, "ContainerStatusUnknown", 137)], 0) == []
    assert verdicts.plugin_pod_findings("n", [_restarted(1, "Unknown", 255)], 0) == []
    # a crash of its own, or more restarts than the one the node explains, still count
    assert codes(verdicts.plugin_pod_findings("n", [_restarted(1, "Error", 1)], 0)) == ["FAIL-F08-PLUGIN-CRASHLOOP"]
    f = verdicts.plugin_pod_findings("n", [_restarted(3, "ContainerStatusUnknown", 137)], 1)
    assert codes(f) == ["FAIL-F08-PLUGIN-CRASHLOOP"] and "restarted 3 times (allowed 1)" in f[0].message


def test_plugin_pod_stuck_initializing_is_not_ready():
    f = verdicts.plugin_pod_findings("n", [INIT], 0)
    assert codes(f) == ["FAIL-F08-PLUGIN-NOT-READY"] and "is not Ready (phase Pending)" in f[0].message


def test_no_plugin_pod_on_the_node_names_the_companions_set_aside():
    found = Found([], "generic", "no DaemonSet pod mounting /var/lib/kubelet/device-plugins",
                  ["gpu-operator/gpu-feature-discovery-k2zf9"])
    f = verdicts.plugin_findings("gpu-mig-0", found, 0)
    assert codes(f) == ["FAIL-F08-PLUGIN-NOT-READY"]
    assert "no device-plugin pod runs on this GPU node" in f[0].message
    assert "companions seen: gpu-operator/gpu-feature-discovery-k2zf9" in f[0].message


# ------------------------------------------------------------------ capacity

def test_capacity_with_allocatable_dropped_to_zero_is_every_device_unhealthy():
    """The maintainer's answer in that issue: "Capacity: Total number of GPUs; Allocatable: Number of GPUs in a
    'Healthy' state" (NVIDIA/k8s-device-plugin#58, RenaudWasTaken, 2018-06-26)."""
    node = obj("node_k8s_device_plugin_58_allocatable_zero.yaml")
    f = verdicts.capacity_findings(node, Expectation("nvidia.com/gpu", 16, 1, "config nodes.expectedGpus=16"))
    assert codes(f) == ["FAIL-F03-UNHEALTHY-DEVICES"] and "capacity=16, allocatable=0" in f[0].message


def test_capacity_and_allocatable_zero():
    node = obj("node_k8s_device_plugin_1228_capacity_zero.yaml")
    f = verdicts.capacity_findings(node, Expectation("nvidia.com/gpu", None, 1, "no GFD label nvidia.com/gpu.count"))
    assert codes(f) == ["FAIL-F02-CAPACITY-ZERO"] and "expected > 0" in f[0].message


def test_gpu_resource_absent_from_capacity():
    node = obj("node_k8s_device_plugin_834_no_gpu_resource.yaml")
    f = verdicts.capacity_findings(node, Expectation("nvidia.com/gpu", 1, 1, "config nodes.expectedGpus=1"))
    assert codes(f) == ["FAIL-F01-NOT-REGISTERED"]
    assert "nvidia.com/gpu is absent from node capacity" in f[0].message and "present: none" in f[0].message


def test_mig_mixed_without_profiles_has_no_resource_to_look_for():
    node = obj("node_k8s_device_plugin_834_no_gpu_resource.yaml")
    f = verdicts.capacity_findings(node, Expectation("nvidia.com/gpu", 1, 1, "labels", "mixed"))
    assert codes(f) == ["FAIL-F09-MIG-MISMATCH"]


def test_capacity_of_a_healthy_mig_node_and_one_profile_missing():
    node = next(n for n in layout("nvidia-operator.json")["nodes"] if n["metadata"]["name"] == "gpu-mig-0")
    exp = Expectation("nvidia.com/gpu", 2, 1, "labels", "mixed",
                      {"nvidia.com/mig-1g.10gb": 3, "nvidia.com/mig-4g.40gb": 1}, whole_gpus_too=True)
    assert verdicts.capacity_findings(node, exp) == []
    for key in ("capacity", "allocatable"):  # what a plugin that never registered the 4g.40gb profile leaves
        del node["status"][key]["nvidia.com/mig-4g.40gb"]
    f = verdicts.capacity_findings(node, exp)
    assert codes(f) == ["FAIL-F01-NOT-REGISTERED"] and "nvidia.com/mig-4g.40gb is absent" in f[0].message


# ------------------------------------------------------------------ the plugin socket

LISTING = text("ls_device_plugins_okd_615.txt")


def test_socket_present_among_other_plugins_sockets():
    assert verdicts.socket_findings("worker01", LISTING, ["nvidia-gpu.sock"]) == []


def test_socket_missing_for_a_resource():
    f = verdicts.socket_findings("worker01", LISTING, ["nvidia-mig-1g.10gb.sock", "nvidia-gpu.sock"])
    assert codes(f) == ["FAIL-F01-NOT-REGISTERED"]
    assert "nvidia-mig-1g.10gb.sock not found" in f[0].message and "kubevirt-kvm.sock" in f[0].message


def test_socket_probe_that_failed_gives_no_verdict():
    out = "ls: /device-plugins/: No such file or directory\n"  # what BusyBox ls prints for a missing directory
    f = verdicts.socket_findings("worker01", out, ["nvidia-gpu.sock"], exit_code=1)
    assert codes(f) == ["ERROR-API"] and "socket probe exited 1" in f[0].message


# ------------------------------------------------------------------ the kubelet's registration counter

START = metrics.parse(text("kubelet_metrics_at_start.txt"))
END = metrics.parse(text("kubelet_metrics_at_end_fast.txt"))


def registration(end_text: str, resources=("nvidia.com/gpu",)) -> list:
    now = verdicts.registration_counts(metrics.parse(end_text), list(resources))
    before = verdicts.registration_counts(START, list(resources))
    return verdicts.registration_findings("n", now, before, verdicts.kubelet_started(metrics.parse(end_text)),
                                          verdicts.kubelet_started(START))


def test_registration_counter_unchanged_over_the_run():
    assert verdicts.registration_counts(END, ["nvidia.com/gpu"]) == {"nvidia.com/gpu": 1.0}
    assert verdicts.kubelet_started(END) == verdicts.kubelet_started(START) == 1.76474160012e9
    assert registration(text("kubelet_metrics_at_end_fast.txt")) == []


def test_registration_counter_absent_for_a_resource():
    f = registration(text("kubelet_metrics_at_end_fast.txt"), ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"))
    assert codes(f) == ["FAIL-F01-NOT-REGISTERED"] and 'resource_name="nvidia.com/mig-1g.10gb"' in f[0].message


def test_kubelet_restarted_during_the_run():
    # a restarted kubelet: a later process start time, and its counter counts the plugin's re-registration anew
    end = text("kubelet_metrics_at_end_fast.txt").replace("process_start_time_seconds 1764741600.12",
                                                           "process_start_time_seconds 1764741725.04")
    f = registration(end)
    assert codes(f) == ["FAIL-F11-REGISTRATION-UNSTABLE"] and "the kubelet restarted during the run" in f[0].message


def test_kubelet_restart_is_named_before_the_counter_it_reset():
    # read right after a restart, before the plugin re-registered: the counter is absent, the restart is the cause
    end = text("kubelet_metrics_at_end_fast.txt").replace("process_start_time_seconds 1764741600.12",
                                                           "process_start_time_seconds 1764741725.04")
    end = "\n".join(ln for ln in end.splitlines() if not ln.startswith("kubelet_device_plugin_registration_total{"))
    f = registration(end)
    assert codes(f)[0] == "FAIL-F11-REGISTRATION-UNSTABLE" and "FAIL-F01-NOT-REGISTERED" in codes(f)


def test_plugin_re_registered_during_the_run():
    end = text("kubelet_metrics_at_end_fast.txt").replace(
        'kubelet_device_plugin_registration_total{resource_name="nvidia.com/gpu"} 1',
        'kubelet_device_plugin_registration_total{resource_name="nvidia.com/gpu"} 2')
    f = registration(end)
    assert codes(f) == ["FAIL-F11-REGISTRATION-UNSTABLE"] and "went 1 -> 2 during the run" in f[0].message


# ------------------------------------------------------------------ the GPU operator's validator

VALIDATOR = obj("pod_gpu_operator_1848_validator_init.yaml")


def test_validator_ready():
    operator = layout("nvidia-operator.json")
    mine = on_node(operator, "gpu-plain-0", "nvidia-operator-validator-")
    assert len(mine) == 1 and verdicts.operator_findings("gpu-plain-0", mine, "app=nvidia-operator-validator",
                                                         "gpu-operator") == []


def test_validator_held_in_its_init_containers():
    f = verdicts.operator_findings("n", [VALIDATOR], "app=nvidia-operator-validator", "nvidia-gpu-operator")
    assert codes(f) == ["ERROR-OPERATOR-NOT-READY"]
    assert "nvidia-operator-validator-99l6b is not Ready (phase Pending)" in f[0].message
    assert "plugin-validation: PodInitializing" in f[0].message and "driver-validation" not in f[0].message


def test_no_validator_on_the_node():
    f = verdicts.operator_findings("n", [], "app=nvidia-operator-validator", "gpu-operator")
    assert codes(f) == ["ERROR-OPERATOR-NOT-READY"] and "operator not deployed here?" in f[0].message


# ------------------------------------------------------------------ may the check run here (common)

def gpu_node(**status) -> GpuNode:
    """The GpuNode discovery makes of the recorded healthy static-layout node, with `status` changes applied."""
    node = next(n for n in layout("nvidia-static.json")["nodes"] if n["metadata"]["name"] == "gpu-node-0")
    node.setdefault("spec", {}).update(status.pop("spec", {}))
    for c in node["status"]["conditions"]:
        if c["type"] == "Ready" and "ready" in status:
            c["status"] = status.pop("ready")
    exp = Expectation("nvidia.com/gpu", 4, 1, "labels")
    return describe_nodes([node], status.pop("pods", []), {"gpu-node-0": exp})[0]


def test_usable_node_with_free_gpus_can_take_the_check():
    g = gpu_node()
    assert (g.ready, g.schedulable, g.free) == (True, True, 4)
    assert verdicts.unusable(g, 1) == [] and verdicts.busy(g, 4, 1) == []


def test_not_ready_or_cordoned_node():
    assert codes(verdicts.unusable(gpu_node(ready="False"), 1)) == ["SKIP-NODE-NOT-READY"]
    f = verdicts.unusable(gpu_node(spec={"unschedulable": True}), 0)  # what `kubectl cordon` sets
    assert codes(f) == ["SKIP-NODE-NOT-READY"] and "cordoned" in f[0].message


def test_node_without_enough_free_gpus_is_busy():
    f = verdicts.busy(gpu_node(), 0, 1)
    assert codes(f) == ["SKIP-F07-BUSY"] and "has 0 free nvidia.com/gpu now, the check needs 1" in f[0].message
    holder = {"metadata": {"name": "train-0"}, "spec": {"nodeName": "gpu-node-0", "containers": [
        {"name": "t", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}, "status": {"phase": "Running"}}
    assert codes(verdicts.unusable(gpu_node(pods=[holder]), 1)) == ["SKIP-F07-BUSY"]  # as discovery saw it


def test_optional_permission_or_probe_off_and_other_vendors():
    assert verdicts.not_checked(True, "x") == []
    assert codes(verdicts.not_checked(False, "nodes/proxy not granted: kubelet metrics not checked")) == \
        ["NOTCHECKED-OPTIONAL"]
    assert verdicts.nvidia_tooling("nvidia", "x") == []
    f = verdicts.nvidia_tooling("amd", "the CUDA vector-add sample")
    assert codes(f) == ["NOTCHECKED-OPTIONAL"] and f[0].message.startswith("vendor amd: the CUDA vector-add sample")


def test_folded_keeps_the_first_code_and_lists_the_others():
    f = [verdicts.Finding("FAIL-F04-OVERADVERTISED", "a"), verdicts.Finding("FAIL-F04-STALE-RESOURCE", "b")]
    assert verdicts.folded([]) == []
    assert verdicts.folded(f) == [verdicts.Finding("FAIL-F04-OVERADVERTISED", "a\n  also [FAIL-F04-STALE-RESOURCE] b")]
