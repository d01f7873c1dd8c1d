"""The bed's DRA node: a second real kubelet (`gpu-node-dra`) whose GPUs a DRA driver serves, beside the device-plugin
node, so one run certifies both allocation paths (issue 17, docs/dra.md).

It is a second host as far as Kubernetes can tell: its own containerd (2.x, built from its Go module: the kubelet
passes DRA devices to the runtime only as CRI CDIDevices, which Debian's containerd 1.6 ignores), its own kubelet
(port 10260, cgroup root /gpuconform-dra, no CPU manager) and its own mount namespace, in which the host paths a
node's pods and drivers use are this node's: /var/lib/kubelet, /var/log/pods, /var/lib/gpu-sim (its simulated GPUs:
hardware.json, device nodes, PCI tree) and /var/run/cdi are bind mounts of DRA_DIRS. Its GPUs are served by the
simulated DRA driver (images/cmd/gpu-dra-driver, a DaemonSet as NVIDIA's DRA driver chart installs it), published
under gpu.nvidia.com with NVIDIA's DeviceClass; its labels are the GPU operator's for a node on its DRA stack.

Opt-in at start-up with GPUCONFORM_BED_DRA=1 (cluster.py up).
"""
from __future__ import annotations

import json
import os
import shlex
import ssl
import urllib.request
from pathlib import Path

import cluster
from cluster import IMAGES, LOGS, PKI, STATE, BedError, Bins, Kubectl, say, sh

NODE = "gpu-node-dra"
GPUS = 3
BASE = Path("/var/lib/gpuconform-dra")
# host path in the node's mount namespace -> where its content lives on the host
DRA_DIRS = {"/var/lib/kubelet": BASE / "kubelet", "/var/log/pods": BASE / "pods-logs",
            str(cluster.GPU_SIM): BASE / "gpu-sim", "/run/cdi": BASE / "cdi"}
CTRD_ROOT, CTRD_STATE = BASE / "containerd", Path("/run/gpuconform/containerd-dra")
CTRD_SOCK = CTRD_STATE / "containerd.sock"
KUBELET_PORT, HEALTHZ_PORT = 10260, 10258
CGROUP_ROOT = "/gpuconform-dra"
DRIVER_NS, DRIVER = "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin"
IMAGES_DRA = {"driver": "localhost/gpuconform/gpu-dra-driver:sim"}
# The GPU operator's labels for a node on its DRA stack (NVIDIA/gpu-operator: the deploy labels its state manager
# sets; docs/vendors.md), plus NFD's PCI label and GFD's presence label.
LABELS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true",
          "nvidia.com/gpu.deploy.dra-driver": "true", "nvidia.com/gpu.deploy.device-plugin": "false"}
# How the driver is installed (`dra shape NAME`; state key dra_shape):
# - operator (default): the GPU operator's DRA stack (LABELS; its DaemonSet selects nvidia.com/gpu.deploy.dra-driver)
#   with the chart's DeviceClass, which on resource.k8s.io/v1 puts gpu.nvidia.com behind nvidia.com/gpu
#   (NVIDIA/k8s-dra-driver-gpu deployments/helm/nvidia-dra-driver-gpu/templates/deviceclass-gpu.yaml, read at
#   jgehrcke/k8s-dra-driver-gpu d7b7d1ec: `extendedResourceName: nvidia.com/gpu` when the API version is v1): the
#   suite names the node dra-extended-resource;
# - helm-plain: the driver's own chart on a node whose operator device plugin is switched off by label (its
#   kubeletPlugin.nodeSelector naming the node), and a DeviceClass without extendedResourceName (as the chart
#   renders it for resource.k8s.io/v1beta1 and v1beta2, and as drivers without the bridge publish): plain dra;
# - static-mig: the operator's stack on a node whose GPUs are in MIG mode with their MIG devices made (what the MIG
#   manager leaves; the mig-mixed hardware: 3g.20gb + 2 x 1g.5gb per GPU): the driver publishes the MIG devices
#   only, no GPU is left for gpu.nvidia.com or nvidia.com/gpu, and the suite's checks claim mig.nvidia.com.
SHAPES = ("operator", "helm-plain", "static-mig")
OPERATOR_SHAPES = ("operator", "static-mig")
HELM_LABELS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true",
               "nvidia.com/gpu.deploy.device-plugin": "false"}


def shape() -> str:
    return cluster.read_state().get("dra_shape") or SHAPES[0]


def node_labels() -> dict[str, str]:
    """The DRA node's labels in its shape; the ones of the other shape are removed (`key-`)."""
    return LABELS if shape() in OPERATOR_SHAPES else HELM_LABELS


def wanted() -> bool:
    return os.environ.get("GPUCONFORM_BED_DRA", "") == "1" or bool(cluster.read_state().get("dra"))


def ctr(*args: str, check: bool = True):
    return sh("ctr", "--address", str(CTRD_SOCK), "--namespace", "k8s.io", *args, check=check)


def containerd_config(bins: Bins) -> Path:
    """containerd 2.x config (version 3): CRI with CDI from /var/run/cdi (the node's own, see DRA_DIRS), runc and
    the `nvidia` handler (plain runc: on a DRA node the toolkit injects through CDI), the bed's CNI network."""
    d = STATE / "containerd-dra"
    d.mkdir(parents=True, exist_ok=True)
    cfg = d / "config.toml"
    runc = cluster.runc_binary()
    cfg.write_text(f"""# containerd 2.x for the gpuconform bed's DRA node; see localcluster/dranode.py
version = 3
root = "{CTRD_ROOT}"
state = "{CTRD_STATE}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs",
                    "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]
[grpc]
  address = "{CTRD_SOCK}"
[debug]
  address = "{CTRD_STATE}/debug.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{IMAGES['pause']}"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        {runc}
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.{cluster.NVIDIA_RUNTIME}]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.{cluster.NVIDIA_RUNTIME}.options]
        SystemdCgroup = false
        {runc}
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{STATE / 'containerd' / 'net.d'}"
""")
    return cfg


def namespace_script(bins: Bins, cfg: Path) -> str:
    """sh run by `unshare --mount`: this node's directories over the host paths, then containerd 2.x (whose shim
    must be found first on PATH)."""
    lines = ["set -e", "mount --make-rprivate /"]
    for target, source in DRA_DIRS.items():
        lines += [f"mkdir -p {shlex.quote(str(source))} {shlex.quote(target)}",
                  f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}"]
    lines.append(f"export PATH={shlex.quote(str(bins.containerd2))}:$PATH")
    lines.append(f"exec {shlex.quote(str(bins.containerd2 / 'containerd'))} --config {shlex.quote(str(cfg))}")
    return "\n".join(lines)


def kubelet_config(ip: str) -> Path:
    """The DRA node's kubelet. syncFrequency 5s (default 1m): when a pod's claims cannot be prepared the kubelet
    emits FailedPrepareDynamicResources and returns from SyncPod without an error (kubernetes v1.37.2
    pkg/kubelet/kuberuntime/kuberuntime_manager.go:1720-1728), so it tries again only at the next periodic sync.
    On this 2-core bed the node authorizer often does not know a just-scheduled pod and its claim yet when the
    kubelet first fetches the claim ("no relationship found between node"), and the pod then started 60-80 s late
    (the latency check failed a healthy run with startP99 79 s). On a real cluster the same race costs the same
    minute, and the latency check reports it; docs/dra.md says so."""
    cfg = cluster.kubelet_config(ip, "none")
    cfg.update({"syncFrequency": "5s", "containerRuntimeEndpoint": f"unix://{CTRD_SOCK}", "port": KUBELET_PORT, "healthzPort": HEALTHZ_PORT,
                "cgroupRoot": CGROUP_ROOT, "cpuManagerPolicy": "none", "tlsCertFile": str(PKI / "kubelet-dra-serving.crt"),
                "tlsPrivateKeyFile": str(PKI / "kubelet-dra-serving.key")})
    cfg.pop("reservedSystemCPUs", None)
    path = STATE / "kubelet-dra.yaml"
    path.write_text(json.dumps(cfg, indent=1))
    return path


def driver_objects() -> list[dict]:
    """NVIDIA's DRA driver as its chart installs the kubelet plugin (a DaemonSet on the operator's DRA-stack
    nodes, privileged, with the kubelet's plugin directories and the CDI directory from the host), its RBAC, and
    the DeviceClass gpu.nvidia.com (NVIDIA/k8s-dra-driver-gpu deployments/helm templates; docs/vendors.md)."""
    labels = {"app.kubernetes.io/name": "nvidia-dra-driver-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
    host = {"plugins-registry": "/var/lib/kubelet/plugins_registry",
            "plugins": "/var/lib/kubelet/plugins", "cdi": "/var/run/cdi", "gpu-sim": str(cluster.GPU_SIM)}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DRIVER_NS, "labels": {
            "pod-security.kubernetes.io/enforce": "privileged"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DRIVER, "namespace": DRIVER_NS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": DRIVER},
         "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                   {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": DRIVER},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DRIVER},
         "subjects": [{"kind": "ServiceAccount", "name": DRIVER, "namespace": DRIVER_NS}]},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression":
                  "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
                  **({"extendedResourceName": "nvidia.com/gpu"} if shape() in OPERATOR_SHAPES else {})}},
        # MIG devices are asked for by their own class (the chart's mig.nvidia.com; the driver's type attribute)
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression":
                  "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": DRIVER, "namespace": DRIVER_NS,
                                                                    "labels": labels},
         "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
             "serviceAccountName": DRIVER, "priorityClassName": "system-node-critical",
             "nodeSelector": ({"nvidia.com/gpu.deploy.dra-driver": "true"} if shape() in OPERATOR_SHAPES
                              else {"kubernetes.io/hostname": NODE}),
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
             "terminationGracePeriodSeconds": 5,
             "containers": [{"name": "gpus", "image": IMAGES_DRA["driver"], "imagePullPolicy": "IfNotPresent",
                             "command": ["/usr/bin/gpu-dra-driver"],
                             "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                     {"name": "GPU_SIM_DRA_FAULTS", "value": cluster.read_state().get("dra_faults", "")}],
                             "securityContext": {"privileged": True},
                             "volumeMounts": [{"name": n, "mountPath": p} for n, p in host.items()]}],
             "volumes": [{"name": n, "hostPath": {"path": p, "type": "DirectoryOrCreate"}} for n, p in host.items()],
         }}}},
    ]


def images(bins: Bins) -> list[Path]:
    import imagebuild

    img = imagebuild.Image(IMAGES_DRA["driver"], ["/usr/bin/gpu-dra-driver"],
                           files=[("usr/bin/gpu-dra-driver", bins.images / "gpu-dra-driver")], labels=cluster.IMAGE_LABEL)
    return [imagebuild.write_archive(img, STATE / "images" / "gpu-dra-driver_sim.tar")]


def cgroup_root() -> None:
    """The kubelet's cgroupRoot must exist in every hierarchy (cgroup v1 here); a new cpuset cgroup starts with no
    CPUs or memory nodes, so it gets the root's."""
    base = Path("/sys/fs/cgroup")
    for hier in base.iterdir():
        if hier.is_symlink() or not hier.is_dir():
            continue
        d = hier / CGROUP_ROOT.strip("/")
        d.mkdir(exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):
            if (hier / f).exists() and not (d / f).read_text().strip():
                (d / f).write_text((hier / f).read_text())


def write_hardware() -> None:
    """The DRA node's simulated GPUs: whole, or in MIG mode with their MIG devices made (shape static-mig)."""
    cluster.write_hardware(root=DRA_DIRS[str(cluster.GPU_SIM)], node=NODE, count=GPUS,
                           profile="mig-mixed" if shape() == "static-mig" else "plain")


def start(bins: Bins, ip: str, kubectl: Kubectl, archives: list[Path]) -> None:
    for source in DRA_DIRS.values():
        source.mkdir(parents=True, exist_ok=True)
    cgroup_root()
    write_hardware()
    if not (PKI / "kubelet-dra.crt").exists():
        cluster.issue_cert("kubelet-dra-serving", f"/CN={NODE}", f"DNS:{NODE},DNS:localhost,IP:127.0.0.1,IP:{ip}")
        cluster.issue_cert("kubelet-dra", f"/O=system:nodes/CN=system:node:{NODE}", None)
        cluster.write_kubeconfig(PKI / "kubelet-dra.kubeconfig", "kubelet-dra",
                                 f"https://{ip}:{cluster.PORTS['kube-apiserver']}")
    cfg = containerd_config(bins)
    cluster.start("containerd-dra", ["unshare", "--mount", "sh", "-c", namespace_script(bins, cfg)])
    cluster.wait_for("containerd-dra socket", lambda: ctr("version", check=False).returncode == 0, 30,
                     "containerd-dra")
    for a in archives + images(bins):
        ctr("images", "import", str(a))
    pid = cluster.pid_of("containerd-dra")
    cluster.start("kubelet-dra", ["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", bins["kubelet"],
                                  f"--config={kubelet_config(ip)}", f"--kubeconfig={PKI / 'kubelet-dra.kubeconfig'}",
                                  f"--hostname-override={NODE}", f"--node-ip={ip}", "--v=1"])
    cluster.wait_for(f"node {NODE} Ready", lambda: cluster.node_ready(kubectl, NODE), 120, "kubelet-dra")
    label_node(kubectl)
    kubectl.apply(*driver_objects())
    cluster.wait_for(f"the DRA driver's ResourceSlice for {NODE}", lambda: slice_devices(kubectl) > 0, 90,
                     "kubelet-dra")
    say(f"DRA node {NODE} up: {slice_devices(kubectl)} GPU(s) published under gpu.nvidia.com")


# Faults of the DRA driver (images/internal/dra Faults; GPU_SIM_DRA_FAULTS), and `driver-gone`: the driver's
# DaemonSet and its slices removed (the node keeps the operator's DRA label).
# `claim-controller-off`: the driver healthy, kube-controller-manager restarted without its resourceclaim
# controller (--controllers), so nothing removes an ended pod from a claim's reservedFor or deallocates it.
CONTROLLER_FAULTS = {"claim-controller-off": ("resourceclaim-controller",)}
# `admin-access-label`: the driver healthy, and a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA and on
# by default since Kubernetes 1.36) that labels every namespace made from now on
# resource.kubernetes.io/admin-access=true, as a careless namespace template would: any tenant's claim may then ask
# admin access (kubernetes v1.37.2 pkg/registry/resource/utils.go AuthorizedForAdmin reads only that label).
ADMIN_POLICY = "gpuconform-bed-admin-access-everywhere"
POLICY_FAULTS = ("admin-access-label",)
# `device-tainted`: the driver publishes its last GPU tainted NoSchedule (gpu.nvidia.com/xid=79), as a driver that saw
# the GPU fall off the bus. `taint-ignored`: the same, and kube-scheduler restarted without device taints
# (DRADeviceTaints, GA but not locked in 1.37, pkg/features/kube_features.go:1481; DRADeviceTaintRules depends on
# it), so it allocates the tainted device like any other.
# `unhealthy-untainted`: the driver reports its last GPU Unhealthy to the kubelet (DRAResourceHealth) but leaves it in
# service, untainted.
DRIVER_FAULT_OF = {"device-tainted": "taint-unhealthy", "taint-ignored": "taint-unhealthy",
                   "unhealthy-untainted": "report-unhealthy"}
SCHEDULER_FAULTS = {"taint-ignored": "DRADeviceTaints=false,DRADeviceTaintRules=false"}
FAULTS = ("omit-last-device", "extra-device", "no-register", "prepare-fails", "wrong-device", "double-inject",
          "pool-incomplete", "mig-no-counters", "driver-gone", *DRIVER_FAULT_OF, *CONTROLLER_FAULTS, *POLICY_FAULTS)


def admin_policy_objects() -> list[dict]:
    """The admin-access-label fault's MutatingAdmissionPolicy and its binding."""
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
         "metadata": {"name": ADMIN_POLICY},
         "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CREATE"], "resources": ["namespaces"]}]},
                  "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": (
                      'Object{metadata: Object.metadata{labels: {"resource.kubernetes.io/admin-access": "true"}}}')}}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
         "metadata": {"name": ADMIN_POLICY}, "spec": {"policyName": ADMIN_POLICY}},
    ]


def set_admin_policy(kubectl: Kubectl, on: bool) -> None:
    """The admin-access-label fault's policy in place (on) or gone; on: waits until a new namespace gets the label
    (a policy's binding takes effect within about a second)."""
    if not on:
        for obj in reversed(admin_policy_objects()):
            kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False)
        return
    kubectl.apply(*admin_policy_objects())

    def labels_new_namespaces() -> bool:
        probe = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuconform-bed-admin-probe"}}
        out = json.loads(kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe)))
        return ((out.get("metadata") or {}).get("labels") or {}).get("resource.kubernetes.io/admin-access") == "true"

    cluster.wait_for("the admin-access-label policy to label new namespaces", labels_new_namespaces, 30,
                     "kube-apiserver")


def set_controllers(bins: Bins, off: tuple[str, ...]) -> None:
    """kube-controller-manager with the controllers in `off` disabled (restarted only when that changes)."""
    if tuple(cluster.read_state().get("kcm_off") or ()) == off:
        return
    cluster.stop("kube-controller-manager")
    cluster.start_controller_manager(bins, off)
    cluster.write_state(kcm_off=list(off))
    cluster.wait_for("kube-controller-manager /healthz", lambda: _healthy("kube-controller-manager"), 60,
                     "kube-controller-manager")


def set_scheduler_gates(bins: Bins, gates: str) -> None:
    """kube-scheduler with the feature gates `gates` ("" = its defaults; restarted only when that changes)."""
    if (cluster.read_state().get("sched_gates") or "") == gates:
        return
    cluster.stop("kube-scheduler")
    cluster.start_scheduler(bins, gates)
    cluster.write_state(sched_gates=gates)
    cluster.wait_for("kube-scheduler /healthz", lambda: _healthy("kube-scheduler"), 60, "kube-scheduler")


def _healthy(component: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # its serving cert is self-signed
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{cluster.PORTS[component]}/healthz",
                                    context=ctx, timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def set_fault(bins: Bins, kubectl: Kubectl, fault: str) -> None:
    """Restarts the DRA driver with `fault` ("" = healthy) and waits until its slice shows it."""
    if fault and fault not in FAULTS:
        raise BedError(f"unknown DRA fault {fault!r} (known: {', '.join(FAULTS)})")
    set_controllers(bins, CONTROLLER_FAULTS.get(fault, ()))
    set_scheduler_gates(bins, SCHEDULER_FAULTS.get(fault, ""))
    set_admin_policy(kubectl, fault == "admin-access-label")
    if fault in SCHEDULER_FAULTS:
        say(f"DRA fault {fault}: kube-scheduler runs with --feature-gates={SCHEDULER_FAULTS[fault]}")
    if fault in DRIVER_FAULT_OF:
        say(f"DRA fault {fault}: the driver reports its last GPU Unhealthy"
            + (" and leaves it in service" if DRIVER_FAULT_OF[fault] == "report-unhealthy" else
               " and publishes it tainted out of service"))
        fault = DRIVER_FAULT_OF[fault]
    if fault in CONTROLLER_FAULTS:
        say(f"DRA fault {fault}: kube-controller-manager runs without {', '.join(CONTROLLER_FAULTS[fault])}")
        fault = ""
    if fault in POLICY_FAULTS:
        say(f"DRA fault {fault}: every namespace made from now on is labelled resource.kubernetes.io/admin-access=true "
            f"(MutatingAdmissionPolicy {ADMIN_POLICY})")
        fault = ""
    cluster.write_state(dra_faults="" if fault == "driver-gone" else fault)
    kubectl("delete", "daemonset", "-n", DRIVER_NS, DRIVER, "--ignore-not-found", "--wait=true")
    kubectl("delete", "resourceslices", "--field-selector", f"spec.nodeName={NODE}", "--ignore-not-found")
    cluster.wait_for("the DRA driver's pods to be gone", lambda: not kubectl.json(
        "get", "pods", "-n", DRIVER_NS)["items"], 60, "kubelet-dra")
    if fault == "driver-gone":
        say(f"DRA fault driver-gone: no driver and no ResourceSlice on {NODE}")
        return
    kubectl.apply(*driver_objects())
    want = GPUS - 1 if fault == "omit-last-device" else GPUS + 1 if fault == "extra-device" else GPUS
    cluster.wait_for(f"the DRA driver's slice with {want} device(s)", lambda: slice_devices(kubectl) == want, 90,
                     "kubelet-dra")
    say(f"DRA driver on {NODE} {'with fault ' + fault if fault else 'healthy'}")
    if cluster.read_state().get("kcm_off"):
        say(f"(kube-controller-manager without {', '.join(cluster.read_state()['kcm_off'])})")
    if cluster.read_state().get("sched_gates"):
        say(f"(kube-scheduler with --feature-gates={cluster.read_state()['sched_gates']})")


def label_node(kubectl: Kubectl) -> None:
    own = node_labels()
    gone = [f"{k}-" for k in {**LABELS, **HELM_LABELS} if k not in own]
    kubectl("label", "node", NODE, "--overwrite", *(f"{k}={v}" for k, v in own.items()), *gone)


def set_shape(bins: Bins, kubectl: Kubectl, name: str) -> None:
    """Re-installs the driver in shape `name` (SHAPES; "" = the default): the node's labels, the DeviceClass and
    the DaemonSet's selector, then the healthy driver (set_fault "")."""
    name = name or SHAPES[0]
    if name not in SHAPES:
        raise BedError(f"unknown DRA shape {name!r} (known: {', '.join(SHAPES)})")
    cluster.write_state(dra_shape=name)
    write_hardware()  # the driver reads it when set_fault restarts it
    label_node(kubectl)
    kubectl("delete", "deviceclass", "gpu.nvidia.com", "--ignore-not-found")  # apply would keep a dropped field
    set_fault(bins, kubectl, "")
    say(f"DRA node {NODE} in shape {name}")


def is_up(kubectl: Kubectl) -> bool:
    """The DRA node runs (its kubelet and containerd) and its driver publishes: `up` leaves it as it is."""
    return bool(cluster.read_state().get("dra") and cluster.pid_of("kubelet-dra") and cluster.pid_of("containerd-dra")
                and slice_devices(kubectl))


def up(bins: Bins, kubectl: Kubectl) -> None:
    if is_up(kubectl):
        say(f"DRA node {NODE} already up")
        return
    cluster.write_state(dra=True)
    start(bins, cluster.node_ip(), kubectl, cluster.build_images(bins))


def down(bins: Bins, kubectl: Kubectl) -> None:
    """Removes the DRA node: its driver's objects, the Node, then its kubelet and containerd and their state (and
    the faults outside the driver)."""
    set_controllers(bins, ())
    set_scheduler_gates(bins, "")
    set_admin_policy(kubectl, False)
    for obj in reversed(driver_objects()):
        if obj["kind"] != "Namespace":
            kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], *(
                ["-n", obj["metadata"]["namespace"]] if obj["metadata"].get("namespace") else []),
                "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "resourceslices", "--field-selector", f"spec.nodeName={NODE}", "--ignore-not-found", check=False)
    stopped = stop_all()
    kubectl("delete", "node", NODE, "--ignore-not-found", check=False)
    cleaned = clean_host_state()
    cluster.write_state(dra=False, dra_faults="", dra_shape="")
    say(f"DRA node {NODE} removed (stopped {', '.join(stopped) or 'nothing'}; {', '.join(cleaned) or 'no state'})")


def slice_devices(kubectl: Kubectl) -> int:
    """The physical GPUs the driver publishes for the node: whole GPUs (uuid) and GPUs in MIG mode (their MIG
    devices' parentUUID)."""
    out = kubectl.json("get", "resourceslices", "--field-selector", f"spec.nodeName={NODE}")
    attrs = [{k: (v or {}).get("string") for k, v in (d.get("attributes") or {}).items()}
             for s in out.get("items", []) for d in (s.get("spec") or {}).get("devices") or []]
    return len({a.get("parentUUID") if a.get("type") == "mig" else a.get("uuid") for a in attrs})


def clean_host_state() -> list[str]:
    cleaned = []
    for pid in sh("pgrep", "-f", f"containerd-shim.*{CTRD_SOCK}", check=False).stdout.split():
        os.kill(int(pid), 9)
        cleaned.append(f"containerd-dra shim pid {pid}")
    removed = cluster.remove_cgroups(CGROUP_ROOT.strip("/"))
    if removed:
        cleaned.append(f"{removed} DRA-node cgroups")
    for d in (BASE, CTRD_STATE):
        if d.exists():
            sh("rm", "-rf", "--one-file-system", str(d), check=False)
            cleaned.append(str(d))
    return cleaned


def stop_all() -> list[str]:
    return [c for c in ("kubelet-dra", "containerd-dra") if cluster.stop(c)]


def log_hint() -> str:
    return f"{LOGS / 'kubelet-dra.log'}, {LOGS / 'containerd-dra.log'}"


__all__ = ["NODE", "wanted", "start", "clean_host_state", "stop_all", "BedError"]
