"""pods (manifests, classification of pods that did not run), nodes (selectors, GPU node state), reasons."""

from __future__ import annotations

import copy

import pytest

from gpuconform import config as gconfig, nodes, pods
from gpuconform import verdicts
from gpuconform.counts import Expectation
from gpuconform.reasons import (REASONS, EnvironmentProblem, Verdict, Violation, code_of, skip_reason)


def cfg(**over) -> dict:
    d = copy.deepcopy(gconfig.DEFAULTS)
    d.update(over)
    return d


def recorded(phase="Pending", reason=None, message=None, conditions=None, container_statuses=None,
             name="gpuconform-alloc-1", node="gpu-a") -> dict:
    """A pod as the API returns it (camelCase), built from the suite's own manifest."""
    p = pods.probe_pod(name, "gpuconform-r1", "r1", "allocation", node, cfg(), gpus=1, resource="nvidia.com/gpu")
    p["metadata"].update({"uid": "0b5f2e0c-5f5e-4d55-8d0e-6a2b0d7c9f11", "creationTimestamp": "2024-05-01T10:00:00Z"})
    st: dict = {"phase": phase, "qosClass": "Burstable"}
    if reason:
        st["reason"] = reason
    if message:
        st["message"] = message
    if conditions:
        st["conditions"] = conditions
    if container_statuses:
        st["containerStatuses"] = container_statuses
    p["status"] = st
    return p


def test_unexpected_admission():
    p = recorded("Failed", "UnexpectedAdmissionError",
                 "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
                 "Requested: 1, Available: 0, which is unexpected")
    prob = verdicts.classify(p, [])
    assert prob.code == "FAIL-F05-UNEXPECTED-ADMISSION"
    assert "gpuconform-alloc-1" in prob.message and "gpu-a" in prob.message and "Requested: 1" in prob.message


def test_topology_affinity():
    p = recorded("Failed", "TopologyAffinityError", "Resources cannot be allocated with Topology locality")
    prob = verdicts.classify(p, [])
    assert prob.code == "FAIL-F06-TOPOLOGY-AFFINITY" and "Topology locality" in prob.message


def test_image_pull():
    cs = [{"name": "probe", "image": "busybox:1.36", "ready": False, "restartCount": 0,
           "state": {"waiting": {"reason": "ErrImagePull",
                                 "message": 'failed to pull and unpack image "docker.io/library/busybox:1.36": '
                                            "dial tcp: lookup registry-1.docker.io: no such host"}}}]
    prob = verdicts.classify(recorded(container_statuses=cs), [])
    assert prob.code == "ERROR-F14-IMAGE-PULL"
    assert "busybox:1.36" in prob.message and "ErrImagePull" in prob.message and "no such host" in prob.message


def test_create_container_error_device():
    cs = [{"name": "probe", "image": "busybox:1.36",
           "state": {"waiting": {"reason": "CreateContainerError",
                                 "message": "failed to generate spec: device /dev/nvidia3 not found"}}}]
    assert verdicts.classify(recorded(container_statuses=cs), []).code == "FAIL-F12-INJECTION-FAILED"
    cs[0]["state"]["waiting"]["message"] = "secret not found"
    assert verdicts.classify(recorded(container_statuses=cs), []).code == "ERROR-API"


# Constructed from the runtimes' error formats (containerd's CDI injection error, the NVIDIA hook's failure as
# runc reports a prestart hook, a runtime binary that is not installed): each is an injection failure, named
# with the runtime's own message, never a CUDA failure.
INJECTION_ERRORS = [
    ("waiting", "CreateContainerError", "failed to create containerd container: CDI device injection failed: "
                                        "unresolvable CDI devices nvidia.com/gpu=GPU-0b0d5bc4"),
    ("terminated", "StartError", "failed to create containerd task: failed to create shim task: OCI runtime "
                                 "create failed: runc create failed: unable to start container process: error "
                                 "during container init: error running hook #0: error running hook: exit status 1, "
                                 "stdout: , stderr: nvidia-container-cli: initialization error: load library "
                                 "failed: libnvidia-ml.so.1: cannot open shared object file"),
    ("waiting", "RunContainerError", 'failed to create shim task: OCI runtime create failed: exec: '
                                     '"nvidia-container-runtime": executable file not found in $PATH'),
]


@pytest.mark.parametrize("state,reason,message", INJECTION_ERRORS)
def test_runtime_injection_errors_are_injection_failures_with_the_runtimes_message(state, reason, message):
    cs = [{"name": "vectoradd", "image": "cuda-sample", "state": {state: {"reason": reason, "message": message,
                                                                          **({"exitCode": 128} if state == "terminated"
                                                                             else {})}}}]
    prob = verdicts.classify(recorded(phase="Failed" if state == "terminated" else "Pending", container_statuses=cs), [])
    assert prob.code == "FAIL-F12-INJECTION-FAILED"
    assert reason in prob.message and message[-60:] in prob.message


def test_a_start_error_that_is_not_about_devices_is_an_environment_problem():
    cs = [{"name": "probe", "state": {"terminated": {"reason": "StartError", "exitCode": 128,
                                                     "message": 'exec: "sh": executable file not found in $PATH'}}}]
    assert verdicts.classify(recorded(phase="Failed", container_statuses=cs), []).code == "ERROR-API"


def test_a_pod_refused_for_a_missing_runtime_class_is_an_injection_failure():
    msg = 'pods "vectoradd-n1" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
    prob = verdicts.creation_refused("vectoradd-n1", "n1", msg)
    assert prob.code == "FAIL-F12-INJECTION-FAILED" and msg in prob.message and "runtimeClassName" in prob.message
    assert verdicts.creation_refused("p", "n1", 'pods "p" is forbidden: violates PodSecurity "restricted"') is None


def test_a_host_reader_the_policy_refuses_for_want_of_recursive_read_only_is_not_checked():
    msg = ("pods \"nodeprobe-hw-n1\" is forbidden: ValidatingAdmissionPolicy 'gpuconform-writes' with binding "
           "'gpuconform-writes' denied request: gpuconform mounts host paths read-only with recursiveReadOnly "
           "Enabled (IfPossible only where the policy parameter recursiveReadOnly says so) and no mount propagation")
    c = cfg()
    c["images"]["nodeProbe"] = "mirror/suite:1"
    p = pods.node_probe_pod("nodeprobe-hw-n1", "ns", "r1", "n1", c, 60, recursive=pods.RRO_IF_POSSIBLE)
    prob = verdicts.creation_refused("nodeprobe-hw-n1", "n1", msg, pods.mounts_if_possible(p))
    assert prob.code == "NOTCHECKED-OPTIONAL" and "recursiveReadOnlyMounts" in prob.message
    # a reader that asked for Enabled and was refused is the policy's business, not this node's runtime's
    assert not pods.mounts_if_possible(pods.node_probe_pod("np", "ns", "r1", "n1", c, 60))
    assert verdicts.creation_refused("nodeprobe-hw-n1", "n1", msg, False) is None


def test_a_node_probe_the_policy_refuses_for_its_image_is_not_checked():
    msg = ("pods \"nodeprobe-hw-n1\" is forbidden: ValidatingAdmissionPolicy 'gpuconform-writes' with binding "
           "'gpuconform-writes' denied request: gpuconform runs a pod that reads host paths as uid 0 (the node probe) "
           "only with an image named by digest in the policy parameter rootImages (ConfigMap gpuconform-policy: "
           "images.nodeProbe of the suite config as <repo>@sha256:<digest>); refused: localhost/gpuconform/suite:dev")
    prob = verdicts.creation_refused("nodeprobe-hw-n1", "n1", msg)
    assert prob.code == "NOTCHECKED-OPTIONAL" and "rootImages" in prob.message and "by digest" in prob.message


CREATING = [{"name": "probe", "state": {"waiting": {"reason": "ContainerCreating"}}}]
SCHEDULED = [{"type": "PodScheduled", "status": "True"}]


def sandbox_event(message: str) -> dict:
    return {"reason": "FailedCreatePodSandBox", "type": "Warning", "message": f"Failed to create pod sandbox: {message}"}


# The runtimes' words for a RuntimeClass handler they do not have (containerd, CRI-O), in the kubelet's event.
@pytest.mark.parametrize("message", [
    'rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nvidia" is configured',
    "rpc error: code = Unknown desc = failed to find runtime handler nvidia from runtime list map[crun:0xc0 runc:0xc0]",
])
def test_a_runtime_without_the_runtime_class_handler_is_an_injection_failure(message):
    p = recorded(conditions=SCHEDULED, container_statuses=CREATING)
    p["spec"].update({"nodeName": "gpu-a", "runtimeClassName": "nvidia"})
    assert pods.creating(p) and not pods.needs_events(p)
    prob = verdicts.classify(p, [sandbox_event(message)])
    assert prob.code == "FAIL-F12-INJECTION-FAILED" and message in prob.message and "'nvidia'" in prob.message


def test_a_dra_driver_that_cannot_prepare_the_claims_fails_the_pod_with_its_error():
    """The kubelet's event (kubernetes v1.37.2 pkg/kubelet/kuberuntime/kuberuntime_manager.go:1726), as the bed's
    driver with its prepare-fails fault makes it; the pod itself stays ContainerCreating, its status silent."""
    p = recorded(container_statuses=[{"name": "probe", "state": {"waiting": {"reason": "ContainerCreating"}}}])
    p["spec"]["nodeName"] = "gpu-a"
    ev = {"reason": "FailedPrepareDynamicResources", "type": "Warning",
          "message": "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for "
                     "ResourceClaim gpuconform-alloc-1-gpu-x7k2p: simulated failure preparing gpuconform-r1/"
                     "gpuconform-alloc-1-gpu-x7k2p: failed to initialize NVML: Unknown Error"}
    prob = verdicts.classify(p, [ev])
    assert prob.code == "FAIL-DRA-PREPARE-FAILED" and "failed to initialize NVML" in prob.message
    assert verdicts.classify(p, []) is None
    unregistered = dict(ev, message="Failed to prepare dynamic resources: prepare dynamic resources: DRA driver "
                                    "gpu.nvidia.com is not registered")
    assert verdicts.classify(p, [unregistered]).code == "FAIL-DRA-PREPARE-FAILED"


def test_the_kubelets_own_passing_prepare_errors_are_left_to_the_wait():
    """Seen on the bed: the node authorizer does not know a just-made claim yet; the kubelet retries and the pod
    starts. Not the driver's failure."""
    p = recorded(container_statuses=[{"name": "probe", "state": {"waiting": {"reason": "ContainerCreating"}}}])
    p["spec"]["nodeName"] = "gpu-node-dra"
    ev = {"reason": "FailedPrepareDynamicResources", "type": "Warning",
          "message": 'Failed to prepare dynamic resources: prepare dynamic resources: fetch ResourceClaim burst0-gpu-'
                     'node-dra-gpus-xdvbr: resourceclaims.resource.k8s.io "burst0-gpu-node-dra-gpus-xdvbr" is '
                     'forbidden: User "system:node:gpu-node-dra" cannot get resource "resourceclaims" in API group '
                     '"resource.k8s.io" in the namespace "gpuconform-20261205-113530-46926d": node: no relationship '
                     "found between node 'gpu-node-dra' and this object"}
    assert verdicts.classify(p, [ev]) is None


def test_no_device_left_for_a_claim_is_busy_unless_devices_looked_free():
    """The scheduler's DRA plugin: 'cannot allocate all claims' (kubernetes v1.37.2
    pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:1095) is the DRA path's Insufficient."""
    msg = ("0/5 nodes are available: 1 cannot allocate all claims, 4 node(s) didn't match Pod's node "
           "affinity/selector. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.")
    p = recorded(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}])
    assert verdicts.classify(p, []).code == "SKIP-F07-BUSY"
    assert verdicts.classify(p, [], free_on_node=2).code == "FAIL-F07-NOT-SCHEDULABLE"


def test_other_sandbox_failures_and_started_pods_are_left_to_the_wait():
    p = recorded(conditions=SCHEDULED, container_statuses=CREATING)
    p["spec"]["nodeName"] = "gpu-a"
    cni = sandbox_event('plugin type="bridge" failed (add): failed to allocate for range 0: no IP addresses available')
    assert verdicts.classify(p, [cni]) is None
    assert pods.creating(recorded(conditions=SCHEDULED)) is False  # not bound to a node yet
    running = recorded(phase="Running", container_statuses=[{"name": "probe", "state": {"running": {}}}])
    running["spec"]["nodeName"] = "gpu-a"
    assert not pods.creating(running)


def test_runtime_class_and_env_go_on_workload_pods_but_not_on_host_readers():
    c = cfg(runtimeClassName="nvidia")
    c["images"] = {**c["images"], "nodeProbe": "mirror/suite:1"}
    m = pods.probe_pod("iso", "ns", "r1", "isolation", "n1", c, 0, env={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert m["spec"]["runtimeClassName"] == "nvidia"
    assert m["spec"]["containers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert "runtimeClassName" not in pods.probe_pod("iso", "ns", "r1", "isolation", "n1", cfg(), 0)["spec"]
    for m in (pods.socket_probe_pod("s", "ns", "r1", "n1", c, 60), pods.node_probe_pod("np", "ns", "r1", "n1", c, 60)):
        assert "runtimeClassName" not in m["spec"]
        assert all(v["hostPath"]["path"].startswith(("/var/lib/kubelet/", "/sys")) for v in m["spec"]["volumes"])
        assert all(vm["readOnly"] for vm in m["spec"]["containers"][0]["volumeMounts"])


def test_node_probe_reads_the_configured_kubelet_dir_and_pci_tree_as_root_without_capabilities():
    c = cfg()
    c["nodeProbe"].update(kubeletDir="/var/snap/microk8s/common/var/lib/kubelet/", sysfsPath="/var/lib/gpu-sim/sys")
    c["images"]["nodeProbe"] = "mirror/suite:1"
    m = pods.node_probe_pod("np", "ns", "r1", "n1", c, 60)
    paths = {v["name"]: v["hostPath"]["path"] for v in m["spec"]["volumes"]}
    assert paths == {"pod-resources": "/var/snap/microk8s/common/var/lib/kubelet/pod-resources",
                     "checkpoint": "/var/snap/microk8s/common/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
                     "sys": "/var/lib/gpu-sim/sys"}  # uid 0: the checkpoint file alone, never device-plugins/
    ctr = m["spec"]["containers"][0]
    assert ctr["image"] == "mirror/suite:1" and ctr["command"][:3] == ["python3", "-m", "gpuconform.nodeprobe"]
    assert m["spec"]["securityContext"]["runAsUser"] == 0
    assert ctr["securityContext"]["capabilities"] == {"drop": ["ALL"]} and "resources" in ctr
    assert not any("nvidia.com" in k for k in ctr["resources"].get("limits", {}))


def test_a_repeating_node_probe_stops_before_its_deadline():
    c = cfg()
    c["images"]["nodeProbe"] = "mirror/suite:1"
    m = pods.node_probe_pod("np", "ns", "r1", "n1", c, 3600, every_s=0.5)
    assert m["spec"]["containers"][0]["command"][-4:] == ["--every", "0.5", "--for", "3540"]
    assert m["spec"]["activeDeadlineSeconds"] == 3600
    assert "--every" not in pods.node_probe_pod("np", "ns", "r1", "n1", c, 60)["spec"]["containers"][0]["command"]


TAINT_MSG = "0/4 nodes are available: 1 node(s) had untolerated taint {gpuconform.dev/maintenance: true}"


def unschedulable(msg: str) -> list[dict]:
    return [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
             "lastTransitionTime": "2024-05-01T10:00:00Z"}]


def test_untolerated_taint():
    prob = verdicts.classify(recorded(conditions=unschedulable(TAINT_MSG)), [])
    assert prob.code == "ERROR-F15-UNTOLERATED-TAINT"
    assert "gpuconform.dev/maintenance" in prob.message and "gpu-a" in prob.message


INSUFFICIENT = ("0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node "
                "affinity/selector. preemption: 0/4 nodes are available: 1 No preemption victims found for "
                "incoming pod, 3 Preemption is not helpful for scheduling.")


def test_insufficient_gpu_busy():
    prob = verdicts.classify(recorded(conditions=unschedulable(INSUFFICIENT)), [], free_on_node=0)
    assert prob.code == "SKIP-F07-BUSY" and "no free GPU" in prob.message


def test_insufficient_gpu_with_free_gpus_is_not_schedulable():
    prob = verdicts.classify(recorded(conditions=unschedulable(INSUFFICIENT)), [], free_on_node=2)
    assert prob.code == "FAIL-F07-NOT-SCHEDULABLE" and "2 GPU(s) looked free" in prob.message


def test_failed_scheduling_event_used_without_condition():
    ev = {"reason": "FailedScheduling", "type": "Warning", "message": INSUFFICIENT,
          "involvedObject": {"kind": "Pod", "name": "gpuconform-alloc-1"}}
    assert verdicts.classify(recorded(), [ev], free_on_node=0).code == "SKIP-F07-BUSY"
    ev_v1 = {"reason": "FailedScheduling", "note": TAINT_MSG}
    assert verdicts.classify(recorded(), [ev_v1]).code == "ERROR-F15-UNTOLERATED-TAINT"


def test_other_unschedulable_reason():
    msg = "0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity/selector."
    assert verdicts.classify(recorded(conditions=unschedulable(msg)), []).code == "FAIL-F07-NOT-SCHEDULABLE"


def test_taint_on_other_node_does_not_hide_busy_gpu():
    msg = ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
           "{node-role.kubernetes.io/control-plane: }, 1 node(s) didn't match Pod's node affinity/selector. "
           "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
           "2 Preemption is not helpful for scheduling.")
    assert verdicts.classify(recorded(conditions=unschedulable(msg)), [], free_on_node=0).code == "SKIP-F07-BUSY"


def test_nothing_wrong():
    assert verdicts.classify(recorded("Pending"), []) is None
    assert verdicts.classify(recorded("Running"), []) is None
    assert verdicts.classify(recorded("Succeeded"), []) is None


def test_other_failure_is_env_api():
    prob = verdicts.classify(recorded("Failed", "DeadlineExceeded", "Pod was active on the node longer than the "
                                  "specified deadline"), [])
    assert prob.code == "ERROR-API" and "DeadlineExceeded" in prob.message


def test_exit_code_and_phase_helpers():
    cs = [{"name": "probe", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]
    p = recorded("Failed", container_statuses=cs)
    assert pods.exit_code(p) == 3 and pods.is_terminal(p) and pods.is_running_or_terminal(p)
    assert pods.exit_code(recorded("Pending")) is None
    assert not pods.is_terminal(recorded("Running")) and pods.is_running_or_terminal(recorded("Running"))
    assert not pods.is_running_or_terminal(recorded("Pending"))


# ---------------------------------------------------------------- manifests

def test_pod_manifest():
    c = cfg(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}])
    c["images"] = {**c["images"], "pullSecrets": ["regcred"], "pullPolicy": "Always"}
    m = pods.probe_pod("gpuconform-p1", "gpuconform-r1", "r1", "count", "gpu-a", c, gpus=2, deadline=123.7, resource="nvidia.com/gpu")
    spec = m["spec"]
    assert m["kind"] == "Pod" and m["metadata"]["namespace"] == "gpuconform-r1"
    assert m["metadata"]["labels"] == {"app.kubernetes.io/part-of": "gpuconform", "gpuconform.dev/run": "r1",
                                       "gpuconform.dev/check": "count", "gpuconform.dev/devices": "2"}
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 123
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "gpu-a"}
    assert spec["tolerations"] == c["tolerations"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["automountServiceAccountToken"] is False
    sc = spec["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    ctr = spec["containers"][0]
    assert ctr["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert ctr["image"] == gconfig.BUSYBOX and ctr["imagePullPolicy"] == "Always"
    assert ctr["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert ctr["command"][:2] == ["sh", "-c"] and "== nvidia-smi -L ==" in ctr["command"][2]


def test_pod_manifest_guaranteed_and_no_gpu():
    c = cfg()
    g = pods.pod("p", "ns", "r1", "numa", "gpu-a", c, image="busybox:1.36", gpus=1, resource="nvidia.com/gpu",
                 guaranteed_cpus=2)
    res = g["spec"]["containers"][0]["resources"]
    assert res["limits"] == res["requests"] == {"nvidia.com/gpu": "1", "cpu": "2", "memory": "64Mi"}
    n = pods.pod("p", "ns", "r1", "x", "gpu-a", c, image="busybox:1.36", gpus=0)
    assert "limits" not in n["spec"]["containers"][0]["resources"]
    assert "imagePullSecrets" not in n["spec"]
    assert "command" not in n["spec"]["containers"][0]


def test_vector_add_pod_uses_image_default_command():
    m = pods.vector_add_pod("va", "ns", "r1", "gpu-a", cfg(), 60, "nvidia.com/gpu")
    ctr = m["spec"]["containers"][0]
    assert ctr["name"] == "vectoradd" and "command" not in ctr
    assert ctr["image"] == gconfig.DEFAULTS["images"]["vectorAdd"]
    assert m["metadata"]["labels"]["gpuconform.dev/check"] == "vector-add"


def test_socket_probe_pod_does_not_leak_into_restricted_defaults():
    m = pods.socket_probe_pod("sp", "ns", "r1", "gpu-a", cfg(), 60)
    assert m["spec"]["volumes"][0]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"
    assert m["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True
    assert pods.RESTRICTED_CTR == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert pods.RESTRICTED_POD["runAsNonRoot"] is True
    m2 = pods.probe_pod("p", "ns", "r1", "c", "gpu-a", cfg(), gpus=1, resource="nvidia.com/gpu")
    assert m2["spec"]["securityContext"] == pods.RESTRICTED_POD


# ---------------------------------------------------------------- nodes

def test_parse_selector():
    assert nodes.parse_selector("a=b, c!=d,e,!f,g==h") == [
        ("a", "=", "b"), ("c", "!=", "d"), ("e", "exists", None), ("f", "!exists", None), ("g", "=", "h")]
    assert nodes.parse_selector("") == []


def test_matches():
    labels = {"nvidia.com/gpu.present": "true", "pool": "a100"}
    assert nodes.matches(labels, "nvidia.com/gpu.present=true")
    assert nodes.matches(labels, "pool!=l4,nvidia.com/gpu.present")
    assert nodes.matches(labels, "!type")
    assert nodes.matches(labels, "")
    assert not nodes.matches(labels, "pool=l4")
    assert not nodes.matches(labels, "pool!=a100")
    assert not nodes.matches(labels, "type")
    assert not nodes.matches(labels, "!pool")
    assert nodes.matches({}, "type!=kwok")  # != matches nodes without the label, as in Kubernetes


def node(name, labels=None, gpus=None, ready="True", unschedulable=False, taints=None):
    res = {"cpu": "8"}
    if gpus is not None:
        res["nvidia.com/gpu"] = str(gpus)
    n = {"metadata": {"name": name, "labels": labels or {}},
         "spec": {"unschedulable": True} if unschedulable else {},
         "status": {"capacity": dict(res), "allocatable": dict(res),
                    "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]}}
    if taints:
        n["spec"]["taints"] = taints
    return n


def test_is_gpu_node():
    sel, exc = "nvidia.com/gpu.present=true", "type=kwok"
    assert nodes.is_gpu_node(node("a", {"nvidia.com/gpu.present": "true"}), "nvidia", sel, exc)
    assert not nodes.is_gpu_node(node("b", {}, gpus=2), "nvidia", sel, exc)  # a selector selects (issue 16 class 11)
    assert not nodes.is_gpu_node(node("c", {}), "nvidia", sel, exc)
    assert not nodes.is_gpu_node(node("d", {"type": "kwok"}, gpus=8), "nvidia", sel, exc)


def test_is_gpu_node_without_a_selector_uses_the_vendor_labels_and_resources():
    # standalone installs: NFD's PCI label, no nvidia.com/gpu.present (set by the GPU operator only)
    assert nodes.is_gpu_node(node("nfd", {"feature.node.kubernetes.io/pci-10de.present": "true"}), "nvidia", "", "")
    assert nodes.is_gpu_node(node("op", {"nvidia.com/gpu.present": "true"}), "nvidia", "", "")
    mig = node("mig", {})
    mig["status"]["capacity"]["nvidia.com/mig-1g.10gb"] = "7"
    assert nodes.is_gpu_node(mig, "nvidia", "", "")  # a MIG-only node is a GPU node
    assert not nodes.is_gpu_node(node("cpu", {"feature.node.kubernetes.io/pci-8086.present": "true"}), "nvidia", "", "")
    intel = node("i", {"intel.feature.node.kubernetes.io/gpu": "true"})
    assert nodes.is_gpu_node(intel, "intel", "", "") and not nodes.is_gpu_node(intel, "nvidia", "", "")


def test_describe_nodes_and_skip_reason():
    ns = [node("z-busy", gpus=1), node("a-ok", gpus=4, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
          node("m-down", gpus=4, ready="False"), node("n-cordon", gpus=4, unschedulable=True)]
    pod = {"metadata": {"name": "x"}, "spec": {"nodeName": "z-busy", "containers": [
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}}
    exps = {n["metadata"]["name"]: Expectation("nvidia.com/gpu", 4, 1, "test") for n in ns}
    got = {g.name: g for g in nodes.describe_nodes(ns, [pod], exps)}
    assert [g.name for g in nodes.describe_nodes(ns, [pod], exps)] == sorted(got)
    assert got["a-ok"].taints == ("k=v:NoSchedule",) and got["a-ok"].usable and got["a-ok"].skip_reason(1) is None
    assert got["m-down"].skip_reason(1) == ("SKIP-NODE-NOT-READY", "m-down is NotReady")
    assert got["n-cordon"].skip_reason(1)[0] == "SKIP-NODE-NOT-READY" and not got["n-cordon"].usable
    code, msg = got["z-busy"].skip_reason(1)
    assert code == "SKIP-F07-BUSY" and "0 free GPU(s) of 1" in msg and "needs 1" in msg
    assert got["z-busy"].skip_reason(0) is None


# ---------------------------------------------------------------- reasons

def test_violation_is_assertion_error():
    v = Violation("FAIL-F03-UNHEALTHY-DEVICES", "gpu-a: 1 of 4 devices are Unhealthy")
    assert isinstance(v, AssertionError) and isinstance(v, Verdict)
    assert v.outcome == "fail" and v.reason is REASONS["FAIL-F03-UNHEALTHY-DEVICES"]
    text = v.render()
    assert text.startswith("[FAIL-F03-UNHEALTHY-DEVICES] gpu-a: 1 of 4 devices are Unhealthy")
    assert "fix: " + REASONS["FAIL-F03-UNHEALTHY-DEVICES"].hint in text
    assert str(v) == text
    assert code_of(text) == "FAIL-F03-UNHEALTHY-DEVICES"


def test_environment_problem_is_not_assertion_error():
    e = EnvironmentProblem("ERROR-API", "list nodes: 503")
    assert not isinstance(e, AssertionError) and e.outcome == "error" and e.evidence == {}


def test_unknown_code_raises():
    with pytest.raises(ValueError, match="unknown reason code GPU-F99"):
        Violation("GPU-F99", "x")
    with pytest.raises(ValueError):
        skip_reason("NOPE", "x")


def test_skip_reason_and_code_of():
    assert skip_reason("SKIP-F07-BUSY", "gpu-a has 0 free") == "[SKIP-F07-BUSY] gpu-a has 0 free"
    assert code_of("[SKIP-F07-BUSY] gpu-a has 0 free") == "SKIP-F07-BUSY"
    assert code_of("[NOT-A-CODE] x") is None and code_of("plain text") is None


def test_reason_table_is_consistent():
    assert all(r.outcome in ("fail", "error", "skip") for r in REASONS.values())
    assert all(r.hint and r.title for r in REASONS.values())
    assert len(REASONS) == len({r.code for r in REASONS.values()})


def test_certification_ignores_only_not_checked_skips():
    from gpuconform.reasons import certified

    assert certified([("passed", None), ("skipped", "NOTCHECKED-OPTIONAL")])
    assert not certified([("passed", None), ("skipped", "SKIP-F07-BUSY")])
    assert not certified([("passed", None), ("failed", "FAIL-F04-OVERADVERTISED")])
    assert not certified([("skipped", "NOTCHECKED-OPTIONAL")]), "nothing passed: nothing certified"
    assert not certified([])


def test_condition_reads_a_pods_or_nodes_condition_status():
    obj = {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}}
    assert nodes.condition(obj, "Ready") == "False"
    assert nodes.condition(obj, "Initialized") is None
    assert nodes.condition({"status": {}}, "Ready") is None


def test_a_node_out_of_cpu_is_busy_not_a_gpu_scheduling_failure():
    """A Guaranteed probe on a node whose CPUs other pods have requested: the scheduler's message names cpu only
    (kube-scheduler noderesources fit: "Insufficient cpu"), so the node is busy, whatever its free GPUs."""
    msg = ("0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector. "
           "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod")
    prob = verdicts.classify(recorded(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                               "message": msg}]), [], free_on_node=3)
    assert prob.code == "SKIP-F07-BUSY" and "node's cpu" in prob.message
    gpu = msg.replace("Insufficient cpu", "Insufficient nvidia.com/gpu")
    prob = verdicts.classify(recorded(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                               "message": gpu}]), [], free_on_node=3)
    assert prob.code == "FAIL-F07-NOT-SCHEDULABLE"


def test_a_dra_pod_gets_its_gpus_from_its_own_claim_not_an_extended_resource():
    cfg = gconfig.load(None, environ={})
    p = pods.vector_add_pod("va", "gpuconform-r1", "r1", "n1", cfg, 60, "gpu.nvidia.com",
                            pods.claim_template_name("gpu.nvidia.com", 1))
    ctr = p["spec"]["containers"][0]
    assert p["spec"]["resourceClaims"] == [{"name": pods.CLAIM, "resourceClaimTemplateName": "gpuconform-1x-gpu-nvidia-com"}]
    assert ctr["resources"]["claims"] == [{"name": pods.CLAIM}] and "limits" not in ctr["resources"]
    assert p["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}  # the scheduler allocates the claim
    t = pods.claim_template("gpuconform-1x-gpu-nvidia-com", "gpuconform-r1", "r1", "gpu.nvidia.com", 1)
    (req,) = t["spec"]["spec"]["devices"]["requests"]
    assert req["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    assert t["metadata"]["labels"][pods.RUN_LABEL] == "r1"
    plain = pods.vector_add_pod("va", "gpuconform-r1", "r1", "n1", cfg, 60, "nvidia.com/gpu")
    assert "resourceClaims" not in plain["spec"] and plain["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "1"}


def test_only_the_admin_access_trial_claim_asks_admin_access():
    (req,) = pods.claim("c", "ns", "r1", "gpu.nvidia.com", 1, admin_access=True)["spec"]["devices"]["requests"]
    assert req["exactly"]["adminAccess"] is True
    (req,) = pods.claim("c", "ns", "r1", "gpu.nvidia.com", 1)["spec"]["devices"]["requests"]
    assert "adminAccess" not in req["exactly"]


def test_free_devices_on_a_dra_node_are_the_published_less_one_per_claim_of_a_live_pod():
    from gpuconform.counts import free_by_claims

    live = {"spec": {"resourceClaims": [{"name": "gpus"}]}, "status": {"phase": "Running"}}
    done = {"spec": {"resourceClaims": [{"name": "gpus"}]}, "status": {"phase": "Succeeded"}}
    assert free_by_claims(2, [live, done, {"spec": {}}]) == 1
    assert free_by_claims(1, [live, live]) == 0


def test_free_devices_behind_an_extended_resource_name_count_the_pods_requesting_it():
    from gpuconform.counts import free_by_claims

    legacy = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}}
    claim = {"spec": {"resourceClaims": [{"name": "gpus"}]}, "status": {"phase": "Running"}}
    assert free_by_claims(4, [legacy, claim], "nvidia.com/gpu") == 2
    assert free_by_claims(4, [legacy, claim]) == 3  # a plain DRA node: no extended resource is served there


def test_vector_add_on_a_dra_extended_resource_node_requests_the_extended_name(monkeypatch):
    from gpuconform import nodes
    from gpuconform.pytest_plugin import nodecheck

    cfg = gconfig.load(None, environ={})
    gpu = nodes.GpuNode("n1", True, True, 2, 2, (), resource="gpu.nvidia.com", path="dra-extended-resource",
                        dra_driver="gpu.nvidia.com", device_class="gpu.nvidia.com", extended_resource="nvidia.com/gpu")

    class Run:
        def __init__(self):
            self.cfg, self.run_id = cfg, "r1"
            self.inventory = type("I", (), {"node": lambda _self, name: gpu})()
            self.spaces = type("S", (), {"ensure": lambda _self, privileged=False: "gpuconform-r1"})()

    check = nodecheck.NodeCheck.__new__(nodecheck.NodeCheck)
    check.run, check.node, check.cfg, check.run_id, check.timeouts = Run(), "n1", cfg, "r1", cfg.timeouts
    p = check.vector_add_pod()
    assert p["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "resourceClaims" not in p["spec"] and check.facts.by_claim


def test_the_probes_sidecar_asks_for_no_gpu_on_either_path():
    """Its second container runs the same probe with CPU and memory only: no GPU limit, no claim in its
    resources.claims (the kubelet injects a claim's devices only into containers naming it)."""
    for kw in ({"resource": "nvidia.com/gpu"}, {"claim_template": "gpu-1"}):
        m = pods.probe_pod("iso2", "ns", "r1", "isolation", "n1", cfg(), 2, sidecar=True, **kw)
        first, side = m["spec"]["containers"]
        assert side["name"] == pods.SIDECAR and side["command"] == first["command"]
        assert "claims" not in side["resources"] and "nvidia.com/gpu" not in side["resources"].get("limits", {})
        assert side["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}
