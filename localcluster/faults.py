"""Makes the device-plugin node's named faults (`cluster.py fault NAME`): the rows of faulttable.py for that node
(DEVICE_PLUGIN_FAULTS), each of which breaks the cluster as one failure mode does (Fn: the number in the Fnn reason
codes, docs/reason-codes.md; F16: ERROR-OPERATOR-NOT-READY) and says what the suite must report.

Faults act only through real interfaces: the simulated plugin's ConfigMap (what a misbehaving plugin does),
the kubelet's config file and restarts, node labels/taints (what GFD or an operator would set), the simulated
hardware (hardware.json, the PCI tree), the nvidia runtime's settings (runtime.json, as the toolkit's config.toml),
the RuntimeClass, and containerd's image store. `fault-clear` restores the healthy state; applying a fault clears
the previous one. A row's steps (faulttable.py) are applied in the order apply() lists them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import bed
import dranode
import gpunode
import nvidia
import shapes
import sharedfault
from faulttable import (DEVICE_PLUGIN_FAULTS as FAULTS, CompanionCrash, CutAccess, DeleteRuntimeClass, DoubleAssign,
                        ForeignNamespaces, Hardware, HogGpus, KubeletReset, NodeLabels, NodeTaint, NvidiaRuntime,
                        NvmlEvents, OperatorFailing, RemoveImage, RestartKubeletDuringRun, RollPluginDuringRun,
                        RuntimeHandler, SimPlugin, SpoofPluginPod, TopologyPolicy)


# The foreign-namespace fault's namespaces: the suite's part-of label (gpuconform/pods.py PART_OF) on namespaces
# that are not a run's. gpuconform-tools is a renamed copy of a run's namespace (run label, heartbeat long stale);
# team-a-prod is another team's, which their own tooling stamps `ended`. Before issue 18 `make cleanup` selected
# by the part-of label alone and deleted both.
_OLD = "2025-01-01T00:00:00Z"
FOREIGN_NAMESPACES: dict[str, dict] = {
    "gpuconform-tools": {"labels": {"app.kubernetes.io/part-of": "gpuconform",
                                    "gpuconform.dev/run": "20250101-000000-0a0a0a"},
                         "annotations": {"gpuconform.dev/heartbeat": _OLD}},
    "team-a-prod": {"labels": {"app.kubernetes.io/part-of": "gpuconform", "gpuconform.dev/run": "team-a"},
                    "annotations": {"gpuconform.dev/heartbeat": _OLD, "gpuconform.dev/ended": _OLD}},
}


def _foreign_objects() -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, **meta}}
            for n, meta in FOREIGN_NAMESPACES.items()]


def list_faults() -> int:
    print(f"{'NAME':24} {'ROW':9} {'PLUGIN':7} WHAT IT DOES")
    for name, f in FAULTS.items():
        print(f"{name:24} {f.row:9} {f.stack or 'bed':7} {f.breaks}")
    print(f"\napply: make fault NAME=<name>   restore: make fault-clear   current: {bed.read_state().get('fault') or 'none'}")
    return 0


def _ctx() -> tuple[bed.Bins, bed.Kubectl, str]:
    if not bed.pid_of("kube-apiserver") or not bed.pid_of("kubelet"):
        raise bed.BedError("the local cluster is not running; run `make cluster-up` first")
    bins = bed.build(quiet=True)
    return bins, bed.Kubectl(bins), bed.node_ip()


def _plugin_config(knobs: SimPlugin) -> dict:
    cfg = shapes.plugin_config(shapes.current()[0])
    cfg.update(knobs.top)
    if knobs.faults:
        cfg["faults"] = dict(knobs.faults)
    return cfg


def _restart_plugin(kubectl: bed.Kubectl, knobs: SimPlugin | None) -> None:
    """The plugin restarted healthy (None), with the row's knobs, or with its device-plugins directory elsewhere."""
    gpunode.restart_plugin(kubectl, _plugin_config(knobs) if knobs and (knobs.faults or knobs.top) else None,
                           knobs.host_dir if knobs and knobs.host_dir else bed.DEVICE_PLUGIN_DIR)


def _restart_kubelet(bins: bed.Bins, kubectl: bed.Kubectl, ip: str, policy: str, wipe_checkpoint: bool) -> None:
    bed.stop("kubelet")
    if wipe_checkpoint:
        (bed.KUBELET_ROOT / "device-plugins" / "kubelet_internal_checkpoint").unlink(missing_ok=True)
    gpunode.start_kubelet(bins, ip, kubectl, policy)


HOG_NS = "team-training"


def _hog_objects(gpus: int) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOG_NS}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-hog", "namespace": HOG_NS},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": bed.NODE_NAME}, "terminationGracePeriodSeconds": 0,
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                      "containers": [{"name": "train", "image": bed.IMAGES["probe"], "imagePullPolicy": "IfNotPresent",
                                      "command": ["sleep", "86400"],
                                      "resources": {"limits": {bed.RESOURCE: str(gpus)}}}]}}]


SPOOF_NS = "tenant-spoof"
# What the spoof writes as its termination message: terminal escapes (clear screen, window title), NUL, BEL and CI
# workflow commands (GitHub Actions reads `::cmd::` at a line start, the Azure agent `##vso[` anywhere in a line).
SPOOF_MESSAGE = r"\033[2J\033]0;pwned\007\000\n::error::certification revoked\n##vso[task.complete result=Failed]done"


def _spoof_objects(labels: dict[str, str]) -> list[dict]:
    """A tenant's bare pod (no owner, no hostPath: what Pod Security restricted allows) with the plugin's labels,
    on the GPU node, exiting 1 at once with SPOOF_MESSAGE as its termination message: CrashLoopBackOff."""
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SPOOF_NS}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "my-job", "namespace": SPOOF_NS, "labels": labels},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": bed.NODE_NAME}, "terminationGracePeriodSeconds": 0,
                      "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                          "seccompProfile": {"type": "RuntimeDefault"}},
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                      "containers": [{"name": "nvidia-device-plugin-ctr", "image": bed.IMAGES["probe"],
                                      "imagePullPolicy": "IfNotPresent", "securityContext": restricted,
                                      "command": ["sh", "-c", f"printf '{SPOOF_MESSAGE}' > /dev/termination-log; exit 1"]}]}}]




def restart_kubelet(after: float = 0, during_run: bool = False) -> int:
    """Restarts the kubelet (after a delay), keeping its device checkpoint, and waits for the plugin to
    re-register: what a node agent upgrade or a kubelet crash does under a running workload. With
    `during_run`, the delay counts from the first pod of a suite run on the GPU node (so the restart lands
    inside the run however fast the suite is, not before it starts or after it ends)."""
    bins, kubectl, ip = _ctx()
    if during_run:
        bed.wait_for_suite_pod(kubectl, bed.NODE_NAME, 300)
    time.sleep(after)
    _restart_kubelet(bins, kubectl, ip, bed.read_state().get("topology_policy", "single-numa-node"), wipe_checkpoint=False)
    gpunode.wait_plugin_registered(kubectl)
    bed.say(f"kubelet restarted (after {after:g}s) and the plugin re-registered")
    return 0


def nvml_event_during_run(after: float, lines: list[str]) -> int:
    """Appends NVML event lines for NVIDIA's plugin `after` seconds after the suite's first pod on the GPU node: a
    GPU that fails while the suite runs (fault xid-during-run)."""
    _, kubectl, _ = _ctx()
    bed.wait_for_suite_pod(kubectl, bed.NODE_NAME)
    time.sleep(after)
    for line in lines:
        nvidia.add_event(line)
    bed.say(f"NVML events {lines} sent {after:g}s into the run")
    return 0


# The check label of the suite's run-long pod (gpuconform/pods.py CHECK_LABEL; the lost-access check's pods).
CHECK_LABEL = "gpuconform.dev/check"  # gpuconform/pods.py CHECK_LABEL
CGROUP_DEVICES = Path("/sys/fs/cgroup/devices")


ROLL_CHANGES = {
    # an init container that sleeps: the new plugin pod registers 20 s after the old one stopped
    "slow-start": [{"op": "add", "path": "/spec/template/spec/initContainers", "value": [
        {"name": "slow-start", "image": bed.IMAGES["probe"], "imagePullPolicy": "IfNotPresent",
         "command": ["sleep", "20"]}]}],
    # a flag NVIDIA's plugin does not know (urfave/cli exits with "flag provided but not defined")
    "crashloop": [{"op": "add", "path": "/spec/template/spec/containers/0/args", "value": ["--no-such-flag"]}],
    # the upgrade turns on time-slicing (the chart's config.map with sharing.timeSlicing, ROLL_CONFIG): the new
    # plugin registers every GPU again as replicas "<uuid>::<n>" (NVIDIA/k8s-device-plugin api/config/v1
    # replicas.go), under IDs the kubelet's record of the running pods does not name. (deviceIDStrategy=index does
    # not do this: it changes only what the container is told; the plugin still registers UUIDs.)
    "time-slicing": [
        {"op": "add", "path": "/spec/template/spec/containers/0/env/-",
         "value": {"name": "CONFIG_FILE", "value": "/config/config.yaml"}},
        {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-",
         "value": {"name": "config", "mountPath": "/config", "readOnly": True}},
        {"op": "add", "path": "/spec/template/spec/volumes/-",
         "value": {"name": "config", "configMap": {"name": bed.PLUGIN_CM}}}],
    # a co-rollout: the plugin's template changes and, with it, something restarts the kubelet (a toolkit or
    # driver change rolled out together; NVIDIA/gpu-operator#596)
    "kubelet-restart": [{"op": "add", "path": "/spec/template/metadata/annotations",
                         "value": {"gpuconform.dev/bed-co-rollout": "kubelet-restart"}}],
}


def wait_until_held(kubectl: bed.Kubectl, node: str) -> None:
    """Until the suite's rollout rehearsal holds `node`: its held pods (check label `rollout`) all Running, none
    ending (call after bed.wait_for_suite_pod: the run has begun)."""
    def held() -> bool:
        pods = kubectl.json("get", "pods", "-A", "-l", f"{CHECK_LABEL}=rollout", "--field-selector",
                            f"spec.nodeName={node}").get("items", [])
        return bool(pods) and all(p.get("status", {}).get("phase") == "Running"
                                  and not p["metadata"].get("deletionTimestamp") for p in pods)

    bed.wait_for(f"the suite's held pods on {node}", held, 300)


def upgrade_during_run(version: str, after: float = 3) -> int:
    """The user's upgrade that `make rehearse` (observe mode) rehearses: once the suite's rehearsal holds the GPU
    node (and the DRA node, when it is up), rolls NVIDIA's plugin to release `version` as a `helm upgrade` does
    (gpunode.plugin_version) and restarts the DRA driver's DaemonSet (kubectl rollout restart)."""
    _, kubectl, _ = _ctx()
    dra = dranode.is_up(kubectl)
    bed.wait_for_suite_pod(kubectl, bed.NODE_NAME)
    for node in [bed.NODE_NAME] + ([bed.DRA_NODE] if dra else []):
        wait_until_held(kubectl, node)
    time.sleep(after)
    if dra:
        inst = dranode.install()
        kubectl("rollout", "restart", "daemonset", "-n", inst.namespace, inst.daemonset)
        bed.say(f"restarted the DRA driver's DaemonSet {inst.namespace}/{inst.daemonset}")
    gpunode.plugin_version(version)
    return 0


def roll_plugin_during_run(after: float, change: str) -> int:
    """Changes the plugin DaemonSet's pod template `after` seconds after a new suite run's rehearsal holds the GPU
    node (its held pods Running; ROLL_CHANGES[change]): the DaemonSet controller rolls it as after a `helm upgrade`
    (fault rows rollout-*; the suite's rehearsal in rollout.mode=observe waits for this)."""
    bins, kubectl, ip = _ctx()
    lay = shapes.LAYOUT_OBJECTS[shapes.current()[1]]
    bed.wait_for_suite_pod(kubectl, bed.NODE_NAME)
    wait_until_held(kubectl, bed.NODE_NAME)
    time.sleep(after)
    if change == "time-slicing":
        kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": bed.PLUGIN_CM, "namespace": lay.namespace, "labels": shapes.BED_LABEL},
            "data": {"config.yaml": json.dumps(shapes.nvidia_config("time-slicing"), indent=1)}})
    kubectl("patch", "daemonset", "-n", lay.namespace, lay.daemonset, "--type=json", "-p",
            json.dumps(ROLL_CHANGES[change]))
    bed.say(f"rolled the plugin DaemonSet {lay.namespace}/{lay.daemonset} ({change}) {after:g}s into the run")
    if change == "kubelet-restart":
        _restart_kubelet(bins, kubectl, ip, bed.read_state().get("topology_policy", "single-numa-node"),
                         wipe_checkpoint=False)
        bed.say("restarted the kubelet with the plugin's rollout (a co-rollout)")
    return 0


def cut_access(after: float, check: str = "access") -> int:
    """Waits for the suite's run-long pod to run on the GPU node and, `after` seconds later, takes its GPUs out of
    its container's devices cgroup (cgroup v1 devices.deny, one exact rule per GPU node the container was
    allowed: the kernel removes only exceptions that match exactly, security/device_cgroup.c dev_exception_rm).
    That is what a systemd daemon-reload does to containers whose device rules systemd re-applies without the
    GPUs (NVIDIA/nvidia-container-toolkit issue #48): the device node stays, opening it fails with EPERM, and
    nvidia-smi says "Failed to initialize NVML: Unknown Error". The kubelet here uses the cgroupfs driver, so the
    container's cgroup is kubepods[/<qos>]/pod<uid>/<container id>."""
    _, kubectl, _ = _ctx()
    selector = f"{CHECK_LABEL}={check}"

    def running() -> dict | None:
        pods = kubectl.json("get", "pods", "-A", "-l", selector, "--field-selector",
                            f"spec.nodeName={bed.NODE_NAME},status.phase=Running").get("items", [])
        return pods[0] if pods else None

    bed.wait_for(f"the suite's run-long pod ({selector}) on {bed.NODE_NAME}", lambda: running() is not None, 600)
    time.sleep(after)
    p = running()
    if p is None:
        raise bed.BedError("the suite's run-long pod ended before its access could be cut")
    qos = p["status"]["qosClass"].lower()
    cid = p["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    d = CGROUP_DEVICES / "kubepods" / ("" if qos == "guaranteed" else qos) / f"pod{p['metadata']['uid']}" / cid
    rules = [r for r in (d / "devices.list").read_text().splitlines() if r.startswith(f"c {bed.NVIDIA_MAJOR}:")]
    for r in rules:
        (d / "devices.deny").write_text(r.rsplit(" ", 1)[0] + " rwm")
    bed.say(f"cut {p['metadata']['name']}'s access to its GPU(s): denied {rules} in {d}")
    return 0


def restore_runtime_class(kubectl: bed.Kubectl) -> None:
    """The RuntimeClass nvidia as `cluster.py up` applies it: a bed restarted under runtime-class-missing keeps it
    missing, one restarted under runtime-handler-missing keeps the handler containerd lacks."""
    f = FAULTS.get(bed.read_state().get("fault") or "")
    if f and f.step(DeleteRuntimeClass):
        return
    handler = f.step(RuntimeHandler) if f else None
    kubectl.apply(gpunode.runtime_class(handler.handler if handler else bed.NVIDIA_RUNTIME))


def clear(quiet: bool = False, target: tuple[str, str, str] | None = None) -> int:
    """Restores the healthy state in the shape the bed was started in, or in `target` (profile, layout, stack):
    the next fault's shape, so that a fault after a fault switches the bed once, not twice."""
    bins, kubectl, ip = _ctx()
    st = bed.read_state()
    prev = FAULTS.get(st.get("fault") or "")

    def had(kind: type) -> bool:
        return prev is not None and prev.step(kind) is not None

    if had(RestartKubeletDuringRun):  # a restart still waiting for a run must not hit the next one
        subprocess.run(["pkill", "-f", "cluster.py restart-kubelet"], check=False)
    kubectl("taint", "node", bed.NODE_NAME, "gpuconform.dev/maintenance-", check=False)
    if had(RemoveImage):
        gpunode.import_images(gpunode.build_images(bins))
    if had(Hardware):
        gpunode.write_hardware()
    nvidia.clear_events()  # the plugin restart below forgets what it received
    (bed.GPU_SIM / "runtime.json").unlink(missing_ok=True)  # the nvidia runtime's healthy defaults
    if had(RuntimeHandler):  # a RuntimeClass's handler cannot be changed: recreate it
        kubectl("delete", "runtimeclass", bed.NVIDIA_RUNTIME, "--ignore-not-found", "--wait=true")
    kubectl.apply(gpunode.runtime_class())  # idempotent; recreates it after runtime-class-missing
    if had(HogGpus):
        kubectl("delete", "namespace", HOG_NS, "--wait=true", "--timeout=60s", check=False)
    if had(DoubleAssign):
        bed.say(sharedfault.clear(kubectl))
    if had(ForeignNamespaces):
        kubectl("delete", "namespace", *FOREIGN_NAMESPACES, "--ignore-not-found", "--wait=true", "--timeout=60s",
                check=False)
    if had(SpoofPluginPod):
        kubectl("delete", "namespace", SPOOF_NS, "--wait=true", "--timeout=60s", check=False)
    if had(CutAccess):  # a cut still waiting for a run must not hit the next one
        subprocess.run(["pkill", "-f", "cluster.py cut-access"], check=False)
    if had(RollPluginDuringRun):  # a roll still waiting for a run must not hit the next one; the changed
        # template goes with the DaemonSet (an apply would keep fields a patch added), deployed anew below
        subprocess.run(["pkill", "-f", "cluster.py roll-plugin"], check=False)
        lay = shapes.LAYOUT_OBJECTS[shapes.current()[1]]
        kubectl("delete", "daemonset", "-n", lay.namespace, lay.daemonset, "--ignore-not-found", "--wait=true")
        if shapes.nvidia_config(shapes.current()[0]) is None:  # the time-slicing roll's config, where none belongs
            kubectl("delete", "configmap", "-n", lay.namespace, bed.PLUGIN_CM, "--ignore-not-found")
    if had(NvmlEvents):  # an event still waiting for a run must not hit the next one
        subprocess.run(["pkill", "-f", "cluster.py nvml-event"], check=False)
    if had(OperatorFailing) or gpunode.validator_state(kubectl) != "ready":
        gpunode.deploy_operator(kubectl)
    if st.get("topology_policy", "single-numa-node") != "single-numa-node":
        _restart_kubelet(bins, kubectl, ip, "single-numa-node", wipe_checkpoint=False)
    bed.write_state(fault=None, topology_policy="single-numa-node")
    base = (st.get("base_profile") or "plain", st.get("base_layout") or "helm")
    base_stack = shapes.stack_for(base[0])  # the stack the bed was started with (shapes.wanted_stack)
    if target:
        base, base_stack = target[:2], shapes.stack_for(target[0], target[2])
    if shapes.current() != base or shapes.current_stack() != base_stack:
        gpunode.switch(*base, base_stack)
    else:
        gpunode.deploy_plugin(kubectl)  # node labels and companions of the shape
        _restart_plugin(kubectl, None)
        gpunode.wait_plugin_registered(kubectl)
    if not quiet:
        bed.say(f"healthy state restored (profile {base[0]}, layout {base[1]}, {base_stack} plugin)")
    return 0


def apply(name: str) -> int:
    f = FAULTS.get(name)
    if f is None:
        raise bed.BedError(f"unknown fault {name!r}; `make faults` lists them: {', '.join(FAULTS)}")
    stack = f.stack or None  # None: the stack the bed was started with (shapes.stack_for)
    if bed.read_state().get("fault"):
        clear(quiet=True, target=(f.profile, f.layout or shapes.current()[1], stack))
    bins, kubectl, ip = _ctx()
    profile, layout = shapes.current()
    if (f.profile, f.layout or layout, shapes.stack_for(f.profile, stack)) != (profile, layout, shapes.current_stack()):
        gpunode.switch(f.profile, f.layout or layout, stack)
    bed.write_state(fault=name)
    if f.step(CompanionCrash):
        kubectl.apply(*shapes.companion_objects(shapes.current()[1], crashing=True))
        bed.wait_for("the GPU Feature Discovery pod to crash-loop", lambda: any(
            cs.get("restartCount", 0) > 0 for p in shapes.companion_pods(kubectl, shapes.current()[1])
            for cs in p.get("status", {}).get("containerStatuses", [])), 90, "kubelet")
    if f.step(SpoofPluginPod):
        kubectl.apply(*_spoof_objects(shapes.LAYOUT_OBJECTS[shapes.current()[1]].labels))
        bed.wait_for("the spoofed plugin pod to crash-loop", lambda: any(
            cs.get("restartCount", 0) > 0 for cs in kubectl.json("get", "pod", "-n", SPOOF_NS, "my-job").get(
                "status", {}).get("containerStatuses", [])), 90, "kubelet")
    if hw := f.step(Hardware):
        gpunode.write_hardware(numa=hw.numa, off_bus=hw.off_bus)
    if events := f.step(NvmlEvents):  # the plugin's health check waits on them (NVIDIA's stack): no restart
        nvidia.wait_health_check(kubectl)
        time.sleep(1)  # the log line comes before the event set has registered every GPU
        if events.after_s is not None:  # during the run: the node stays healthy until then
            log = (bed.STATE / "logs" / "nvml-event.log").open("a")
            subprocess.Popen([sys.executable, str(bed.HERE / "cluster.py"), "nvml-event", str(events.after_s),
                              *events.lines], stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        else:
            for line in events.lines:
                nvidia.add_event(line)
    if runtime := f.step(NvidiaRuntime):  # read by the runtime at each container create: no restart needed
        (bed.GPU_SIM / "runtime.json").write_text(json.dumps(runtime.settings) + "\n")
    handler = f.step(RuntimeHandler)
    if f.step(DeleteRuntimeClass) or handler:
        kubectl("delete", "runtimeclass", bed.NVIDIA_RUNTIME, "--ignore-not-found", "--wait=true")
    if handler:
        kubectl.apply(gpunode.runtime_class(handler.handler))
    if operator := f.step(OperatorFailing):
        gpunode.deploy_operator(kubectl, failing=operator.message)
    if hog := f.step(HogGpus):
        kubectl.apply(*_hog_objects(hog.gpus))
        bed.wait_for(f"the GPU hog pod to hold {hog.gpus} GPUs", lambda: kubectl.json(
            "get", "pod", "-n", HOG_NS, "gpu-hog").get("status", {}).get("phase") == "Running", 60, "kubelet")
    if f.step(DoubleAssign):
        bed.say(sharedfault.apply(bins, kubectl))
    if f.step(ForeignNamespaces):
        kubectl.apply(*_foreign_objects())
    if knobs := f.step(SimPlugin):
        _restart_plugin(kubectl, knobs)
    if reset := f.step(KubeletReset):
        _restart_kubelet(bins, kubectl, ip, "single-numa-node", wipe_checkpoint=True)
        # The kubelet zeroes extended resources on re-registration only in some restart paths, and keeps the
        # last node status otherwise; write the state a lost registration leaves behind (0, or gone) directly.
        # No registered plugin means the kubelet never rewrites it.
        key = next(iter(gpunode.healthy_counts())).replace("/", "~1")
        patch = [{"op": "remove", "path": f"/status/{k}/{key}"} if reset.drop_resource else
                 {"op": "replace", "path": f"/status/{k}/{key}", "value": "0"} for k in ("capacity", "allocatable")]
        kubectl("patch", "node", bed.NODE_NAME, "--subresource=status", "--type=json", "-p", json.dumps(patch))
    if labels := f.step(NodeLabels):
        kubectl("label", "node", bed.NODE_NAME, "--overwrite", *(f"{k}={v}" for k, v in labels.labels.items()))
    if taint := f.step(NodeTaint):
        kubectl("taint", "node", bed.NODE_NAME, taint.taint, "--overwrite")
    if policy := f.step(TopologyPolicy):
        bed.write_state(topology_policy=policy.policy)
        _restart_kubelet(bins, kubectl, ip, policy.policy, wipe_checkpoint=False)
        gpunode.wait_plugin_registered(kubectl)
    if image := f.step(RemoveImage):
        gpunode.ctr("images", "rm", image.image)
    if restart := f.step(RestartKubeletDuringRun):
        log = (bed.STATE / "logs" / "kubelet-restart.log").open("a")
        subprocess.Popen([sys.executable, str(bed.HERE / "cluster.py"), "restart-kubelet", str(restart.after_s),
                          "--during-run"],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    if roll := f.step(RollPluginDuringRun):
        log = (bed.STATE / "logs" / "roll-plugin.log").open("a")
        subprocess.Popen([sys.executable, str(bed.HERE / "cluster.py"), "roll-plugin", str(roll.after_s), roll.change],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    if cut := f.step(CutAccess):
        log = (bed.STATE / "logs" / "cut-access.log").open("a")
        subprocess.Popen([sys.executable, str(bed.HERE / "cluster.py"), "cut-access", str(cut.after_s), cut.check],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    want = f.counts if f.counts is not None else next(iter(gpunode.healthy_counts().values()))
    if want and not reset:
        # The kubelet publishes the plugin's new device list with its next status update: wait for it, so the
        # suite sees the fault and not the restart's transient.
        bed.wait_for(f"{bed.NODE_NAME} to advertise capacity/allocatable {want[0]}/{want[1]}",
                     lambda: gpunode.allocatable(kubectl, bed.NODE_NAME) == want, 90, "kubelet")
    bed.say(f"fault {name} ({f.row}) applied: {f.breaks}")
    return 0
