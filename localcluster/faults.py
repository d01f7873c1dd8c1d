"""Named faults for the local test bed: each breaks the cluster as one failure mode does (Fn: the number in the
Fnn reason codes, docs/reason-codes.md; F16: ERROR-OPERATOR-NOT-READY).

Faults act only through real interfaces: the simulated plugin's ConfigMap (what a misbehaving plugin does),
the kubelet's config file and restarts, node labels/taints (what GFD or an operator would set), the simulated
hardware (hardware.json, the PCI tree), the nvidia runtime's settings (runtime.json, as the toolkit's config.toml),
the RuntimeClass, and containerd's image store. `fault-clear` restores the healthy state; applying a fault clears
the previous one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import cluster as c
import shapes
import sharedfault


@dataclass(frozen=True)
class Fault:
    row: str  # the failure mode (Fn) or contract line it reproduces
    summary: str
    plugin: dict = field(default_factory=dict)  # plugin config "faults" (and top-level keys under "_top")
    kubelet_reset: bool = False  # restart the kubelet with its device checkpoint removed
    drop_resource: bool = False  # remove the resource from node status after the reset
    labels: dict = field(default_factory=dict)
    taint: str = ""
    policy: str = ""  # kubelet topologyManagerPolicy
    remove_image: str = ""
    hog_gpus: int = 0  # another team's pod holds this many GPUs on the node
    plugin_host_dir: str = ""  # mount this host directory as the plugin's device-plugins directory
    operator_failing: str = ""  # the GPU operator's driver validation fails with this message
    restart_kubelet_after: float = 0  # restart the kubelet this many seconds after the suite's first pod on the node
    hardware_numa: int | None = None  # rewrite the simulated hardware: the NUMA node the GPUs physically sit on
    off_bus: tuple = ()  # rewrite the simulated hardware: these GPU indexes are missing from its PCI tree (sysfs) only
    runtime: dict = field(default_factory=dict)  # <GPU_SIM>/runtime.json for the nvidia runtime (runtime_sim.py)
    delete_runtime_class: bool = False  # delete the RuntimeClass nvidia (cluster.runtime_class)
    runtime_handler: str = ""  # recreate the RuntimeClass nvidia with this handler, which containerd lacks
    # node (capacity, allocatable) to wait for before the fault counts as applied; None = healthy counts,
    # () = don't wait (the fault itself makes the counts unpredictable, e.g. a crash-looping plugin)
    counts: tuple | None = None
    profile: str = "plain"  # the bed profile the fault is shown on (shapes.py); the bed switches to it first
    layout: str = ""  # the plugin install layout it needs ("" = whichever the bed runs)
    companion_crash: bool = False  # the layout's GPU Feature Discovery DaemonSet crash-loops
    double_assign: bool = False  # two tenant pods; a stale kubelet device checkpoint gives tenant-b tenant-a's GPU
    cut_access_after: float = 0  # the suite's run-long pod loses its GPU access this many seconds after it runs
    foreign_namespaces: bool = False  # other teams' namespaces labelled like the suite's (FOREIGN_NAMESPACES)
    spoof_plugin: bool = False  # a tenant's crash-looping pod labelled like the plugin runs on the GPU node
    # The plugin stack the fault is shown on (shapes.STACKS): "nvidia" for NVIDIA's own plugin reacting to what the
    # mock NVML reports; "sim" where the fault needs the simulated plugin's knobs or the bed's own labels (see
    # on_stack); "" = the stack the bed was started with (the kubelet, the hardware, the runtime, other tenants).
    stack: str = ""
    nvml_events: tuple = ()  # lines for the mock NVML's event file (nvidia.add_event): `xid <gpu> <code>`, `lost <gpu>`


    @property
    def on_stack(self) -> str:
        """The stack to show the fault on ("" = the bed's own). The simulated plugin's knobs, its stand-in
        companions and labels the bed writes (GFD would put its own back) need the simulated stack."""
        if self.stack:
            return self.stack
        return "sim" if (self.plugin or self.plugin_host_dir or self.companion_crash or self.labels) else ""


ALL_NUMA1 = {str(i): 1 for i in range(c.GPUS)}

FAULTS: dict[str, Fault] = {
    "not-registered": Fault("F1", "plugin pod Running but never registers (failOnInitError=false style); "
                            "the resource is absent from node capacity",
                            plugin={"neverRegister": True}, kubelet_reset=True, drop_resource=True),
    "wrong-socket-dir": Fault("F1", "the plugin DaemonSet mounts the wrong host directory as device-plugins: its "
                              "socket is not where the kubelet looks, it never finds kubelet.sock, the pod stays "
                              "Running and the resource disappears after the kubelet restarts",
                              plugin_host_dir=str(c.WRONG_PLUGIN_DIR), kubelet_reset=True,
                              drop_resource=True),
    "shared-device": Fault("isolation", "Allocate ignores the requested IDs and injects GPU 0 into every "
                           "container: concurrent pods share one device", plugin={"injectOnlyIndex": 0}),
    "capacity-zero": Fault("F2", "kubelet restarted and the plugin did not re-register: capacity/allocatable 0 "
                           "while the plugin pod is Running", plugin={"neverRegister": True}, kubelet_reset=True),
    "gpus-busy": Fault("F7", "another workload holds every GPU on the node: GPU checks skip as busy (with "
                       "evidence) and the run certifies nothing", hog_gpus=c.GPUS),
    "unhealthy-device": Fault("F3", "GPU 1 reported Unhealthy (like an XID error): capacity 4, allocatable 3",
                              plugin={"unhealthyDevices": [1]}, counts=(str(c.GPUS), str(c.GPUS - 1))),
    "over-advertised": Fault("F4", "plugin advertises 2 phantom devices: 6 advertised, 4 physical",
                             plugin={"extraDevices": 2}, counts=(str(c.GPUS + 2), str(c.GPUS + 2))),
    "admission-error": Fault("F5", "Allocate fails, so the kubelet rejects GPU pods with UnexpectedAdmissionError",
                             plugin={"allocateError": "simulated: device allocation failed (driver busy)"}),
    "wrong-numa": Fault("F6", "every GPU reported on NUMA node 1, which this host lacks: single-numa-node "
                        "rejects Guaranteed GPU pods with TopologyAffinityError", plugin={"numaOverride": ALL_NUMA1}),
    "crashloop": Fault("F8", "plugin exits at start: CrashLoopBackOff with a termination message",
                       plugin={"crashAtStart": True}, counts=()),
    "sharing-not-applied": Fault("F10", "GFD labels say time-slicing with 4 replicas but the plugin advertises "
                                 "1 per GPU", labels={"nvidia.com/gpu.replicas": "4",
                                                      "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                                      "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"}),
    "not-injected": Fault("F12", "Allocate grants devices but injects none (stale checkpoint style): the pod "
                          "sees no GPU", plugin={"skipInjection": True}),
    "old-driver": Fault("F13", "host driver 470 is too old for the CUDA 12 workload",
                        plugin={"_top": {"driverVersion": "470.82.01"}}),
    "image-missing": Fault("F14", "the vector-add image is missing and cannot be pulled (air-gapped)",
                           remove_image=c.IMAGES["vectoradd"]),
    "untolerated-taint": Fault("F15", "the GPU node carries a taint the suite does not tolerate",
                               taint="gpuconform.dev/maintenance=true:NoSchedule"),
    "slow-allocate": Fault("latency", "Allocate sleeps 2.5 s, so pod start latency exceeds thresholds",
                           plugin={"allocateDelayMs": 2500}),
    "kubelet-restart": Fault("F11", "the kubelet restarts 2 s after the suite's first pod lands on the GPU node "
                             "(start the suite within 5 min): the plugin must re-register while the suite runs",
                             restart_kubelet_after=2),
    "ts-shared-device": Fault("isolation", "time-slicing node (4 replicas per GPU): Allocate injects GPU 0 into "
                              "every container, so more pods share GPU 0 than it has replicas",
                              plugin={"injectOnlyIndex": 0}, profile="time-slicing"),
    "mig-not-injected": Fault("F12", "MIG mixed node: Allocate grants the MIG device but injects no device node; the "
                              "pod sees no GPU", plugin={"skipInjection": True}, profile="mig-mixed"),
    "companion-crashloop": Fault("F8 (negative)", "Helm layout: the chart's GPU Feature Discovery DaemonSet (same "
                                 "app.kubernetes.io/name label as the plugin) crash-loops; the plugin is healthy and "
                                 "no check may fail", layout="helm", companion_crash=True),
    "operator-not-ready": Fault("F16", "the GPU operator's driver validation fails on the GPU node: its validator "
                                "pod is stuck in Init:CrashLoopBackOff",
                                operator_failing="driver validation failed: NVIDIA kernel module not loaded"),
    "numa-misreported": Fault("NUMA", "the GPUs sit on NUMA node 1 but the plugin reports NUMA 0 to the kubelet: "
                              "single-numa-node admits a Guaranteed GPU pod with CPUs on NUMA 0, GPU on NUMA 1",
                              plugin={"numaOverride": {str(i): 0 for i in range(c.GPUS)}}, hardware_numa=1),
    "gpu-off-bus": Fault("hardware", "a GPU fell off the bus: GPU 3 is gone from the PCI tree while GPU Feature "
                         "Discovery's labels and the plugin still say 4", off_bus=(c.GPUS - 1,)),
    "env-exposure": Fault("isolation", "the nvidia runtime honours NVIDIA_VISIBLE_DEVICES from unprivileged "
                          "containers: a pod with NVIDIA_VISIBLE_DEVICES=all sees every GPU, with or without a "
                          "GPU request", runtime={"acceptEnvvarUnprivileged": True}),
    "runtime-class-missing": Fault("F12", "the RuntimeClass nvidia is deleted: the API server rejects pods that name "
                                   "it (403, RuntimeClass \"nvidia\" not found)", delete_runtime_class=True),
    "runtime-handler-missing": Fault("F12", "the RuntimeClass nvidia names handler nvidia-cdi, which this node's "
                                     "containerd lacks (the toolkit did not configure it): pods naming the class are "
                                     "created, and their sandboxes fail ('no runtime for \"nvidia-cdi\" is "
                                     "configured')", runtime_handler="nvidia-cdi"),
    "double-assigned": Fault("isolation", "the kubelet's own record (PodResources List) assigns one GPU to two "
                             "running containers: a stale device checkpoint loaded at a kubelet restart gave "
                             f"{sharedfault.NS}/tenant-b the GPU of tenant-a", double_assign=True),
    "access-lost": Fault("isolation", "the suite's run-long pod loses access to its GPU 3 s after it starts, as "
                         "when a systemd daemon-reload resets the container's device cgroup rules",
                         cut_access_after=3),
    "foreign-namespace": Fault("cleanup", "other teams' namespaces labelled like the suite's (part-of label; one a "
                               "renamed copy of a run's namespace with its run label and a stale heartbeat, one "
                               "stamped ended): `make cleanup`, FORCE=1 too, must leave them alone",
                               foreign_namespaces=True),
    "spoofed-plugin-pod": Fault("F8 (negative)", "Helm layout, healthy plugin: a tenant's pod in its own namespace "
                                "carries the chart's labels (no DaemonSet owner, no device-plugins mount) and "
                                "crash-loops with a hostile termination message; it is set aside, no check may fail",
                                layout="helm", spoof_plugin=True),
    # NVIDIA's own plugin (v0.19.3 internal/rm/health.go checkHealth) reacting to what NVML reports:
    "xid-unhealthy": Fault("F3", "NVIDIA's plugin: NVML reports Xid 48 (double-bit ECC error) on GPU 1; the plugin's "
                           "health check marks it unhealthy: capacity 4, allocatable 3", stack="nvidia",
                           nvml_events=("xid 1 48",), counts=(str(c.GPUS), str(c.GPUS - 1))),
    "gpu-lost": Fault("F3", "NVIDIA's plugin: GPU 2 is lost (NVML returns GPU_IS_LOST); the plugin's health check, on "
                      "that error from its event wait, marks every device unhealthy: capacity 4, allocatable 0",
                      stack="nvidia", nvml_events=("lost 2",), counts=(str(c.GPUS), "0")),
    "gpu-fell-off-bus": Fault("hardware", "NVIDIA's plugin: GPU 3 fell off the bus (Xid 79) and is gone from the PCI "
                              "tree; the plugin marks it unhealthy while GFD's label still counts 4",
                              stack="nvidia", nvml_events=("xid 3 79",), off_bus=(c.GPUS - 1,),
                              counts=(str(c.GPUS), str(c.GPUS - 1))),
    "topology-policy-none": Fault("topology", "kubelet topologyManagerPolicy is none instead of single-numa-node",
                                  policy="none"),
}


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
        print(f"{name:24} {f.row:9} {f.on_stack or 'bed':7} {f.summary}")
    print(f"\napply: make fault NAME=<name>   restore: make fault-clear   current: {c.read_state().get('fault') or 'none'}")
    return 0


def _ctx() -> tuple[c.Bins, c.Kubectl, str]:
    if not c.pid_of("kube-apiserver") or not c.pid_of("kubelet"):
        raise c.BedError("the local cluster is not running; run `make cluster-up` first")
    bins = c.build(quiet=True)
    return bins, c.Kubectl(bins), c.node_ip()


def _plugin_config(f: Fault | None) -> dict:
    cfg = shapes.plugin_config(shapes.current()[0])
    if f and f.plugin:
        knobs = dict(f.plugin)
        cfg.update(knobs.pop("_top", {}))
        if knobs:
            cfg["faults"] = knobs
    return cfg


def _restart_plugin(kubectl: c.Kubectl, f: Fault | None) -> None:
    shapes.restart_plugin(kubectl, _plugin_config(f) if f and f.plugin else None,
                          f.plugin_host_dir if f and f.plugin_host_dir else c.DEVICE_PLUGIN_DIR)


def _restart_kubelet(bins: c.Bins, kubectl: c.Kubectl, ip: str, policy: str, wipe_checkpoint: bool) -> None:
    c.stop("kubelet")
    if wipe_checkpoint:
        (c.KUBELET_ROOT / "device-plugins" / "kubelet_internal_checkpoint").unlink(missing_ok=True)
    c.start_kubelet(bins, ip, kubectl, policy)


HOG_NS = "team-training"


def _hog_objects(gpus: int) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOG_NS}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-hog", "namespace": HOG_NS},
             "spec": {"nodeSelector": {"kubernetes.io/hostname": c.NODE_NAME}, "terminationGracePeriodSeconds": 0,
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                      "containers": [{"name": "train", "image": c.IMAGES["probe"], "imagePullPolicy": "IfNotPresent",
                                      "command": ["sleep", "86400"],
                                      "resources": {"limits": {c.RESOURCE: str(gpus)}}}]}}]


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
             "spec": {"nodeSelector": {"kubernetes.io/hostname": c.NODE_NAME}, "terminationGracePeriodSeconds": 0,
                      "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                          "seccompProfile": {"type": "RuntimeDefault"}},
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                      "containers": [{"name": "nvidia-device-plugin-ctr", "image": c.IMAGES["probe"],
                                      "imagePullPolicy": "IfNotPresent", "securityContext": restricted,
                                      "command": ["sh", "-c", f"printf '{SPOOF_MESSAGE}' > /dev/termination-log; exit 1"]}]}}]


# The label every suite pod carries (gpuconform/pods.py RUN_LABEL): the bed watches for it, nothing more.
SUITE_POD_LABEL = "gpuconform.dev/run"


def restart_kubelet(after: float = 0, during_run: bool = False) -> int:
    """Restarts the kubelet (after a delay), keeping its device checkpoint, and waits for the plugin to
    re-register: what a node agent upgrade or a kubelet crash does under a running workload. With
    `during_run`, the delay counts from the first pod of a suite run on the GPU node (so the restart lands
    inside the run however fast the suite is, not before it starts or after it ends)."""
    bins, kubectl, ip = _ctx()
    if during_run:
        c.wait_for(f"a suite pod ({SUITE_POD_LABEL}) on {c.NODE_NAME}", lambda: bool(kubectl(
            "get", "pods", "-A", "-l", SUITE_POD_LABEL, "--field-selector", f"spec.nodeName={c.NODE_NAME}",
            "-o", "name").strip()), 300)
    time.sleep(after)
    _restart_kubelet(bins, kubectl, ip, c.read_state().get("topology_policy", "single-numa-node"), wipe_checkpoint=False)
    c.wait_plugin_registered(kubectl)
    c.say(f"kubelet restarted (after {after:g}s) and the plugin re-registered")
    return 0


# The check label of the suite's run-long pod (gpuconform/pods.py CHECK_LABEL; the lost-access check's pods).
ACCESS_POD = "gpuconform.dev/check=access"
CGROUP_DEVICES = Path("/sys/fs/cgroup/devices")


def cut_access(after: float) -> int:
    """Waits for the suite's run-long pod to run on the GPU node and, `after` seconds later, takes its GPUs out of
    its container's devices cgroup (cgroup v1 devices.deny, one exact rule per GPU node the container was
    allowed: the kernel removes only exceptions that match exactly, security/device_cgroup.c dev_exception_rm).
    That is what a systemd daemon-reload does to containers whose device rules systemd re-applies without the
    GPUs (NVIDIA/nvidia-container-toolkit issue #48): the device node stays, opening it fails with EPERM, and
    nvidia-smi says "Failed to initialize NVML: Unknown Error". The kubelet here uses the cgroupfs driver, so the
    container's cgroup is kubepods[/<qos>]/pod<uid>/<container id>."""
    _, kubectl, _ = _ctx()

    def running() -> dict | None:
        pods = kubectl.json("get", "pods", "-A", "-l", ACCESS_POD, "--field-selector",
                            f"spec.nodeName={c.NODE_NAME},status.phase=Running").get("items", [])
        return pods[0] if pods else None

    c.wait_for(f"the suite's run-long pod ({ACCESS_POD}) on {c.NODE_NAME}", lambda: running() is not None, 600)
    time.sleep(after)
    p = running()
    if p is None:
        raise c.BedError("the suite's run-long pod ended before its access could be cut")
    qos = p["status"]["qosClass"].lower()
    cid = p["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    d = CGROUP_DEVICES / "kubepods" / ("" if qos == "guaranteed" else qos) / f"pod{p['metadata']['uid']}" / cid
    rules = [r for r in (d / "devices.list").read_text().splitlines() if r.startswith(f"c {c.NVIDIA_MAJOR}:")]
    for r in rules:
        (d / "devices.deny").write_text(r.rsplit(" ", 1)[0] + " rwm")
    c.say(f"cut {p['metadata']['name']}'s access to its GPU(s): denied {rules} in {d}")
    return 0


def clear(quiet: bool = False, target: tuple[str, str, str] | None = None) -> int:
    """Restores the healthy state in the shape the bed was started in, or in `target` (profile, layout, stack):
    the next fault's shape, so that a fault after a fault switches the bed once, not twice."""
    bins, kubectl, ip = _ctx()
    st = c.read_state()
    prev = FAULTS.get(st.get("fault") or "")
    if prev and prev.restart_kubelet_after:  # a restart still waiting for a run must not hit the next one
        subprocess.run(["pkill", "-f", "cluster.py restart-kubelet"], check=False)
    kubectl("taint", "node", c.NODE_NAME, "gpuconform.dev/maintenance-", check=False)
    if prev and prev.remove_image:
        c.import_images(c.build_images(bins))
    if prev and (prev.hardware_numa is not None or prev.off_bus):
        c.write_hardware()
    import nvidia

    nvidia.clear_events()  # the plugin restart below forgets what it received
    (c.GPU_SIM / "runtime.json").unlink(missing_ok=True)  # the nvidia runtime's healthy defaults
    if prev and prev.runtime_handler:  # a RuntimeClass's handler cannot be changed: recreate it
        kubectl("delete", "runtimeclass", c.NVIDIA_RUNTIME, "--ignore-not-found", "--wait=true")
    kubectl.apply(c.runtime_class())  # idempotent; recreates it after runtime-class-missing
    if prev and prev.hog_gpus:
        kubectl("delete", "namespace", HOG_NS, "--wait=true", "--timeout=60s", check=False)
    if prev and prev.double_assign:
        c.say(sharedfault.clear(kubectl))
    if prev and prev.foreign_namespaces:
        kubectl("delete", "namespace", *FOREIGN_NAMESPACES, "--ignore-not-found", "--wait=true", "--timeout=60s",
                check=False)
    if prev and prev.spoof_plugin:
        kubectl("delete", "namespace", SPOOF_NS, "--wait=true", "--timeout=60s", check=False)
    if prev and prev.cut_access_after:  # a cut still waiting for a run must not hit the next one
        subprocess.run(["pkill", "-f", "cluster.py cut-access"], check=False)
    if prev and prev.operator_failing or c.validator_state(kubectl) != "ready":
        c.deploy_operator(kubectl)
    if st.get("topology_policy", "single-numa-node") != "single-numa-node":
        _restart_kubelet(bins, kubectl, ip, "single-numa-node", wipe_checkpoint=False)
    c.write_state(fault=None, topology_policy="single-numa-node")
    base = (st.get("base_profile") or "plain", st.get("base_layout") or "helm")
    base_stack = shapes.stack_for(base[0])  # the stack the bed was started with (shapes.wanted_stack)
    if target:
        base, base_stack = target[:2], shapes.stack_for(target[0], target[2])
    if shapes.current() != base or shapes.current_stack() != base_stack:
        shapes.switch(*base, base_stack)
    else:
        c.deploy_plugin(kubectl)  # node labels and companions of the shape
        _restart_plugin(kubectl, None)
        c.wait_plugin_registered(kubectl)
    if not quiet:
        c.say(f"healthy state restored (profile {base[0]}, layout {base[1]}, {base_stack} plugin)")
    return 0


def apply(name: str) -> int:
    f = FAULTS.get(name)
    if f is None:
        raise c.BedError(f"unknown fault {name!r}; `make faults` lists them: {', '.join(FAULTS)}")
    stack = f.on_stack or None  # None: the stack the bed was started with (shapes.stack_for)
    if c.read_state().get("fault"):
        clear(quiet=True, target=(f.profile, f.layout or shapes.current()[1], stack))
    bins, kubectl, ip = _ctx()
    profile, layout = shapes.current()
    if (f.profile, f.layout or layout, shapes.stack_for(f.profile, stack)) != (profile, layout, shapes.current_stack()):
        shapes.switch(f.profile, f.layout or layout, stack)
    c.write_state(fault=name)
    if f.companion_crash:
        kubectl.apply(*shapes.companion_objects(shapes.current()[1], crashing=True))
        c.wait_for("the GPU Feature Discovery pod to crash-loop", lambda: any(
            cs.get("restartCount", 0) > 0 for p in shapes.companion_pods(kubectl, shapes.current()[1])
            for cs in p.get("status", {}).get("containerStatuses", [])), 90, "kubelet")
    if f.spoof_plugin:
        kubectl.apply(*_spoof_objects(shapes.LAYOUT_OBJECTS[shapes.current()[1]].labels))
        c.wait_for("the spoofed plugin pod to crash-loop", lambda: any(
            cs.get("restartCount", 0) > 0 for cs in kubectl.json("get", "pod", "-n", SPOOF_NS, "my-job").get(
                "status", {}).get("containerStatuses", [])), 90, "kubelet")
    if f.hardware_numa is not None or f.off_bus:
        c.write_hardware(numa=f.hardware_numa or 0, off_bus=f.off_bus)
    if f.nvml_events:  # the plugin's health check waits on them (NVIDIA's stack): no restart
        import nvidia

        nvidia.wait_health_check(kubectl)
        time.sleep(1)  # the log line comes before the event set has registered every GPU
        for line in f.nvml_events:
            nvidia.add_event(line)
    if f.runtime:  # read by the runtime at each container create: no restart needed
        (c.GPU_SIM / "runtime.json").write_text(json.dumps(f.runtime) + "\n")
    if f.delete_runtime_class or f.runtime_handler:
        kubectl("delete", "runtimeclass", c.NVIDIA_RUNTIME, "--ignore-not-found", "--wait=true")
    if f.runtime_handler:
        kubectl.apply(c.runtime_class(f.runtime_handler))
    if f.operator_failing:
        c.deploy_operator(kubectl, failing=f.operator_failing)
    if f.hog_gpus:
        kubectl.apply(*_hog_objects(f.hog_gpus))
        c.wait_for(f"the GPU hog pod to hold {f.hog_gpus} GPUs", lambda: kubectl.json(
            "get", "pod", "-n", HOG_NS, "gpu-hog").get("status", {}).get("phase") == "Running", 60, "kubelet")
    if f.double_assign:
        c.say(sharedfault.apply(bins, kubectl))
    if f.foreign_namespaces:
        kubectl.apply(*_foreign_objects())
    if f.plugin or f.plugin_host_dir:
        _restart_plugin(kubectl, f)
    if f.kubelet_reset:
        _restart_kubelet(bins, kubectl, ip, "single-numa-node", wipe_checkpoint=True)
        # The kubelet zeroes extended resources on re-registration only in some restart paths, and keeps the
        # last node status otherwise; write the state a lost registration leaves behind (0, or gone) directly.
        # No registered plugin means the kubelet never rewrites it.
        key = next(iter(c.healthy_counts())).replace("/", "~1")
        patch = [{"op": "remove", "path": f"/status/{k}/{key}"} if f.drop_resource else
                 {"op": "replace", "path": f"/status/{k}/{key}", "value": "0"} for k in ("capacity", "allocatable")]
        kubectl("patch", "node", c.NODE_NAME, "--subresource=status", "--type=json", "-p", json.dumps(patch))
    if f.labels:
        kubectl("label", "node", c.NODE_NAME, "--overwrite", *(f"{k}={v}" for k, v in f.labels.items()))
    if f.taint:
        kubectl("taint", "node", c.NODE_NAME, f.taint, "--overwrite")
    if f.policy:
        c.write_state(topology_policy=f.policy)
        _restart_kubelet(bins, kubectl, ip, f.policy, wipe_checkpoint=False)
        c.wait_plugin_registered(kubectl)
    if f.remove_image:
        c.ctr("images", "rm", f.remove_image)
    if f.restart_kubelet_after:
        log = (c.STATE / "logs" / "kubelet-restart.log").open("a")
        subprocess.Popen([sys.executable, str(c.HERE / "cluster.py"), "restart-kubelet", str(f.restart_kubelet_after),
                          "--during-run"],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    if f.cut_access_after:
        log = (c.STATE / "logs" / "cut-access.log").open("a")
        subprocess.Popen([sys.executable, str(c.HERE / "cluster.py"), "cut-access", str(f.cut_access_after)],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    want = f.counts if f.counts is not None else next(iter(c.healthy_counts().values()))
    if want and not f.kubelet_reset:
        # The kubelet publishes the plugin's new device list with its next status update: wait for it, so the
        # suite sees the fault and not the restart's transient.
        c.wait_for(f"{c.NODE_NAME} to advertise capacity/allocatable {want[0]}/{want[1]}",
                   lambda: c.allocatable(kubectl, c.NODE_NAME) == want, 90, "kubelet")
    c.say(f"fault {name} ({f.row}) applied: {f.summary}")
    return 0
