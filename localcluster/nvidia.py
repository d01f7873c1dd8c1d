"""NVIDIA's own GPU stack on the bed's real node: the k8s-device-plugin and GPU Feature Discovery built from their Go
module at TAG, over our mock NVML (mocknvml/), with node-feature-discovery's master applying GFD's labels.

Deployed as the plugin's Helm chart at TAG deploys them (deployments/helm/nvidia-device-plugin/templates/
daemonset-device-plugin.yml and daemonset-gfd.yml; NFD v0.17.3's deployment/base for its master), with these chart
values, each what a platform team sets for such a node (docs/vendors.md):
  nvidiaDriverRoot=/var/lib/gpu-sim (the "driver root": the mock's libnvidia-ml.so.1 under usr/lib/x86_64-linux-gnu,
  the device nodes under dev/), runtimeClassName=nvidia (containerd's default runtime here is runc),
  deviceListStrategy=volume-mounts and compatWithCPUManager=true (the kubelet runs the static CPU manager),
  gfd.enabled=true, and for the operator layout migStrategy=single (the GPU operator's default).
Left out: the chart's config-manager sidecar (it only picks one of several configs by node label: the plugin reads
the one config file directly) and NFD's worker (the host has no NVIDIA PCI function for it to find: the bed writes
its pci-10de label, as before).

The plugin DaemonSet can run the previous release, PREV_TAG, for rollout rehearsals (`cluster.py plugin-version`,
gpunode.plugin_version): its binary is built only when asked (`build.sh nvidia-prev`), and the release the bed runs
is kept in the state (`plugin_version`), so every later apply of the plugin keeps it, as a Helm release keeps its
chart version. GFD stays at TAG.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import bed
import imagebuild
import shapes

TAG = "v0.19.3"  # the newest k8s-device-plugin tag the Go module proxy serves that builds (docs/vendors.md)
NFD_TAG = "v0.17.3"  # the node-feature-discovery chart the plugin's chart depends on at TAG (Chart.yaml)
PREV_TAG = "v0.18.2"  # the release before TAG (the proxy serves it and it builds), for `cluster.py plugin-version`
PLUGIN_TAGS = (PREV_TAG, TAG)
IMAGE = f"nvcr.io/nvidia/k8s-device-plugin:{TAG}"
NFD_IMAGE = f"registry.k8s.io/nfd/node-feature-discovery:{NFD_TAG}"
DRIVER_ROOT = bed.GPU_SIM
LIB_DIR = DRIVER_ROOT / "usr" / "lib" / "x86_64-linux-gnu"
NVML_LIB = LIB_DIR / "libnvidia-ml.so.1"
NVML_CONFIG = LIB_DIR / "mocknvml.conf"  # the mock reads the file next to itself (mocknvml/README.md)
NVML_EVENTS = LIB_DIR / "mocknvml.conf.events"  # XIDs and lost GPUs, appended while the plugin runs
NFD_NS = "node-feature-discovery"
PCI_DEVICE_ID = "0x20b010de"  # A100-SXM4-40GB device 0x20b0, vendor 0x10de, as NVML's pciDeviceId packs them


def mock_config(hardware: dict) -> str:
    """The mock NVML's hardware description (mocknvml/README.md, Config format) from the bed's hardware.json, so
    NVML enumerates exactly the GPUs (UUIDs, minors, bus IDs) the device nodes, the PCI tree and the runtime have."""
    lines = [f"# written by localcluster/nvidia.py from {bed.GPU_SIM}/hardware.json",
             f"driver {hardware['driverVersion']}",
             f"cuda {int(hardware['cudaVersion'].split('.')[0]) * 1000 + int(hardware['cudaVersion'].split('.')[1]) * 10}"]
    for g in hardware["gpus"]:
        lines += ["gpu", f"  name {g['name']}", f"  uuid {g['uuid']}", f"  bus {g['pciBusId']}",
                  f"  memory_mib {g['memoryTotalMiB']}", "  compute 8.0", "  arch ampere", "  brand nvidia",
                  f"  minor {g['minor']}", f"  pci_device_id {PCI_DEVICE_ID}", "  mig_capable 1",
                  f"  mig_mode {1 if g.get('migDevices') else 0}"]
    return "\n".join(lines) + "\n"


def install_driver(lib: Path, hardware: dict) -> None:
    """The mock library and its config at the driver root. Both are rewritten in place (same inode), so a
    container the runtime gave them to by bind mount sees the new hardware at its next NVML init."""
    LIB_DIR.mkdir(parents=True, exist_ok=True)
    data = lib.read_bytes()
    if not NVML_LIB.exists() or NVML_LIB.read_bytes() != data:
        tmp = NVML_LIB.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.chmod(0o755)
        os.replace(tmp, NVML_LIB)  # a new inode: a running process keeps its mapping of the old one
    with open(NVML_CONFIG, "w") as f:
        f.write(mock_config(hardware))
    NVML_EVENTS.touch()


def add_event(line: str) -> None:
    """Appends one event line (`xid <gpu> <code>`, `lost <gpu>`) for the plugin's health check to receive."""
    with open(NVML_EVENTS, "a") as f:
        f.write(line.rstrip("\n") + "\n")


def clear_events() -> None:
    """Empties the event file (in place). The plugin keeps what it already received until it restarts."""
    with open(NVML_EVENTS, "w"):
        pass


def plugin_image_name(tag: str) -> str:
    return f"nvcr.io/nvidia/k8s-device-plugin:{tag}"


def plugin_version(state: dict) -> str:
    """The plugin release the bed runs (state `plugin_version`, written by `cluster.py plugin-version`; else TAG)."""
    return state.get("plugin_version") or TAG


def check_tag(tag: str) -> None:
    if tag not in PLUGIN_TAGS:
        raise bed.BedError(f"no NVIDIA device plugin release {tag!r} on the bed: one of {', '.join(PLUGIN_TAGS)}")


def release_bins(tag: str) -> Path:
    """The directory with NVIDIA's binaries at `tag`: build.sh's NVIDIA_BIN for TAG; for PREV_TAG the plugin alone,
    built on first use (`build.sh nvidia-prev`, cached like every group; its progress is shown)."""
    check_tag(tag)
    if tag == TAG:
        return bed.build(quiet=True).nvidia
    out = subprocess.run([str(bed.HERE / "build.sh"), "nvidia-prev"], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "NVIDIA_PREV_TAG": tag})
    dirs = dict(line.split("=", 1) for line in out.stdout.split())
    if out.returncode or "NVIDIA_PREV_BIN" not in dirs:
        raise bed.BedError(f"building NVIDIA's device plugin {tag} failed (see the [build] lines above)")
    return Path(dirs["NVIDIA_PREV_BIN"])


def plugin_image(tag: str, nv: Path) -> imagebuild.Image:
    """NVIDIA's plugin image at `tag` from the binaries in `nv`: both, as upstream's image has them, where both were
    built (TAG), else the plugin alone (PREV_TAG), with the C library they link."""
    bins = [b for b in ("nvidia-device-plugin", "gpu-feature-discovery") if (nv / b).exists()]
    return imagebuild.Image(plugin_image_name(tag), [], cmd=["nvidia-device-plugin"], labels=bed.IMAGE_LABEL,
                            env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                 # upstream's deployments/container/Dockerfile
                                 "NVIDIA_DISABLE_REQUIRE=true", "NVIDIA_VISIBLE_DEVICES=all",
                                 "NVIDIA_DRIVER_CAPABILITIES=utility"],
                            files=[(f"usr/bin/{b}", nv / b) for b in bins]
                            + imagebuild.shared_libs([nv / "nvidia-device-plugin"]))


def images(bins: bed.Bins) -> list:
    """The plugin image (both binaries, as upstream's image has them, with the C library they link) and NFD's; and
    the plugin image of the release the state names, where that is not TAG (a bed restarted in place after
    `plugin-version PREV_TAG` keeps running it)."""
    nv = bins.nvidia
    imgs = [plugin_image(TAG, nv),
            imagebuild.Image(NFD_IMAGE, [], cmd=["nfd-master"], labels=bed.IMAGE_LABEL,
                             files=[("usr/bin/nfd-master", bins.nfd / "nfd-master")])]
    if (tag := plugin_version(bed.read_state())) != TAG:
        imgs.append(plugin_image(tag, release_bins(tag)))
    return imgs


# ---------------------------------------------------------------- the chart's objects

TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
               {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _hp(name: str, path: str, kind: str = "") -> dict:
    return {"name": name, "hostPath": {"path": path, **({"type": kind} if kind else {})}}


def _env(d: dict[str, str]) -> list[dict]:
    return [{"name": k, "value": v} for k, v in d.items()]


def chart_env(layout: str, config: dict | None) -> dict[str, str]:
    env = {"MPS_ROOT": "/run/nvidia/mps", "PASS_DEVICE_SPECS": "true", "DEVICE_LIST_STRATEGY": "volume-mounts",
           "NVIDIA_DRIVER_ROOT": str(DRIVER_ROOT)}
    if layout == "operator":
        env["MIG_STRATEGY"] = "single"  # NVIDIA/gpu-operator deployments/gpu-operator/values.yaml mig.strategy
    if config:
        env["CONFIG_FILE"] = "/config/config.yaml"
    return env


def plugin_objects(layout: str, config: dict | None, host_dir: str = bed.DEVICE_PLUGIN_DIR,
                   image: str = IMAGE) -> list[dict]:
    """The plugin's ConfigMap (when the profile has a config) and DaemonSet, with the layout's names and labels;
    `image`: the release's (plugin_image_name), as the chart's image.tag sets it."""
    lay = shapes.LAYOUT_OBJECTS[layout]
    objs = shapes.namespace_objects(layout)
    mounts = [{"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"},
              {"name": "driver-root", "mountPath": "/driver-root", "readOnly": True},
              {"name": "mps-shm", "mountPath": "/dev/shm"}, {"name": "mps-root", "mountPath": "/mps"},
              {"name": "cdi-root", "mountPath": "/var/run/cdi"}]
    volumes = [_hp("kubelet-device-plugins-dir", host_dir, "Directory"),
               _hp("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"), _hp("mps-shm", "/run/nvidia/mps/shm"),
               _hp("driver-root", str(DRIVER_ROOT), "Directory"), _hp("cdi-root", "/var/run/cdi", "DirectoryOrCreate")]
    if config:
        objs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": bed.PLUGIN_CM, "namespace": lay.namespace, "labels": shapes.BED_LABEL},
                     "data": {"config.yaml": json.dumps(config, indent=1)}})
        mounts.append({"name": "config", "mountPath": "/config", "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": bed.PLUGIN_CM}})
    objs.append({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": lay.daemonset, "namespace": lay.namespace, "labels": shapes.BED_LABEL},
        "spec": {"selector": {"matchLabels": lay.labels}, "updateStrategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": lay.labels}, "spec": {
                     "priorityClassName": "system-node-critical", "runtimeClassName": bed.NVIDIA_RUNTIME,
                     "tolerations": TOLERATIONS, "affinity": shapes.affinity(),
                     "containers": [{
                         "name": "nvidia-device-plugin-ctr", "image": image, "imagePullPolicy": "IfNotPresent",
                         "command": ["nvidia-device-plugin"],
                         "env": _env(chart_env(layout, config))
                         + _env({"NVIDIA_MIG_MONITOR_DEVICES": "all", "NVIDIA_VISIBLE_DEVICES": "all",
                                 "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}),
                         "securityContext": {"privileged": True},  # compatWithCPUManager
                         "volumeMounts": mounts}],
                     "volumes": volumes}}}})
    return objs


def gfd_objects(layout: str, config: dict | None) -> list[dict]:
    """GPU Feature Discovery as the chart's daemonset-gfd.yml with gfd.enabled=true (privileged by the chart's
    default gfd.securityContext), one DaemonSet per layout companion; it publishes NodeFeature objects (its
    default --use-node-feature-api), which NFD's master turns into node labels. Its /sys is the bed's PCI tree
    (the chart mounts the host's /sys there; GFD reads the PCI class for nvidia.com/gpu.mode)."""
    lay = shapes.LAYOUT_OBJECTS[layout]
    env = {"MIG_STRATEGY": "single"} if layout == "operator" else {}
    mounts = [{"name": "output-dir", "mountPath": "/etc/kubernetes/node-feature-discovery/features.d"},
              {"name": "host-sys", "mountPath": "/sys"}]
    volumes = [_hp("output-dir", "/etc/kubernetes/node-feature-discovery/features.d"),
               _hp("host-sys", str(bed.GPU_SIM / "sys"))]
    if config:
        env["CONFIG_FILE"] = "/config/config.yaml"
        mounts.append({"name": "config", "mountPath": "/config", "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": bed.PLUGIN_CM}})
    out = []
    for name, labels in lay.companions:
        out.append({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": lay.namespace, "labels": shapes.BED_LABEL},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "priorityClassName": "system-node-critical", "runtimeClassName": bed.NVIDIA_RUNTIME,
                "serviceAccountName": GFD_SA, "tolerations": TOLERATIONS, "affinity": shapes.affinity(),
                "containers": [{
                    "name": "gpu-feature-discovery-ctr", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                    "command": ["gpu-feature-discovery"],
                    "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
                    + _env(env),
                    "securityContext": {"privileged": True},
                    "volumeMounts": mounts}],
                "volumes": volumes}}}})
    return shapes.namespace_objects(layout) + gfd_rbac(lay.namespace) + out


GFD_SA = "gpu-feature-discovery"


def gfd_rbac(namespace: str) -> list[dict]:
    """What the chart's role.yml grants GFD's service account with the NodeFeature API: nodefeatures in its
    namespace (and nodes get, to own the object)."""
    meta = {"labels": {"app.kubernetes.io/part-of": "gpuconform-localcluster"}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": GFD_SA, "namespace": namespace, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"gpuconform-bed-{GFD_SA}", **meta},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures"],
                    "verbs": ["get", "list", "watch", "create", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"gpuconform-bed-{GFD_SA}-{namespace}", **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"gpuconform-bed-{GFD_SA}"},
         "subjects": [{"kind": "ServiceAccount", "name": GFD_SA, "namespace": namespace}]},
    ]


def apply_nfd(kubectl: bed.Kubectl) -> None:
    """NFD's CRDs (NodeFeature, NodeFeatureRule, NodeFeatureGroup; from its module at NFD_TAG, copied by build.sh)
    and its master."""
    kubectl("apply", "-f", str(bed.build(quiet=True).nfd / "nfd-api-crds.yaml"))
    kubectl.apply(*nfd_objects())


def nfd_objects() -> list[dict]:
    """NFD's master (deployment/base/master, rbac) with the plugin chart's NFD values: extraLabelNs nvidia.com."""
    meta = {"labels": {"app.kubernetes.io/part-of": "gpuconform-localcluster"}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NFD_NS, **meta}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nfd-master", "namespace": NFD_NS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "nfd-master"},
         "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["watch", "list"]},
                   {"apiGroups": [""], "resources": ["nodes", "nodes/status"],
                    "verbs": ["get", "patch", "update", "list"]},
                   {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeatures", "nodefeaturerules",
                                                                   "nodefeaturegroups"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["nfd.k8s-sigs.io"], "resources": ["nodefeaturegroup/status"],
                    "verbs": ["patch", "update"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                   {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "resourceNames": ["nfd-master.nfd.kubernetes.io"], "verbs": ["get", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "nfd-master"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nfd-master"},
         "subjects": [{"kind": "ServiceAccount", "name": "nfd-master", "namespace": NFD_NS}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nfd-master-conf", "namespace": NFD_NS},
         "data": {"nfd-master.conf": "extraLabelNs: [\"nvidia.com\"]\n"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "nfd-master", "namespace": NFD_NS, "labels": {"app": "nfd"}},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nfd-master"}},
                  "template": {"metadata": {"labels": {"app": "nfd-master"}}, "spec": {
                      "serviceAccountName": "nfd-master", "enableServiceLinks": False, "tolerations": [],
                      "containers": [{"name": "nfd-master", "image": NFD_IMAGE, "imagePullPolicy": "IfNotPresent",
                                      "command": ["nfd-master", "-config=/etc/kubernetes/node-feature-discovery/nfd-master.conf"],
                                      "env": [{"name": "NODE_NAME",
                                               "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                                      "volumeMounts": [{"name": "conf", "mountPath":
                                                        "/etc/kubernetes/node-feature-discovery", "readOnly": True}]}],
                      "volumes": [{"name": "conf", "configMap": {"name": "nfd-master-conf"}}]}}}},
    ]


NFD_LABELS_ANNOTATION = "nfd.node.kubernetes.io/feature-labels"  # NFD master: the labels it manages on the node


def nfd_managed_labels(kubectl: bed.Kubectl, node: str = bed.NODE_NAME) -> set[str]:
    ann = kubectl.json("get", "node", node)["metadata"].get("annotations", {}).get(NFD_LABELS_ANNOTATION, "")
    return {k if "/" in k else f"feature.node.kubernetes.io/{k}" for k in ann.split(",") if k}


def remove_gfd(kubectl: bed.Kubectl) -> None:
    """Leaving the nvidia stack: GFD's DaemonSets and NodeFeature objects go, and NFD's master removes the labels
    it applied from them (waited for, so the simulated stack's labels written next are not removed with them)."""
    if not kubectl("get", "crd", "nodefeatures.nfd.k8s-sigs.io", "-o", "name", check=False).strip():
        return
    for lay in shapes.LAYOUT_OBJECTS.values():
        for name, _ in lay.companions:
            if kubectl("get", "daemonset", "-n", lay.namespace, name, "-o", "jsonpath={.spec.template.spec.containers[0].image}",
                       check=False).strip() == IMAGE:
                kubectl("delete", "daemonset", "-n", lay.namespace, name, "--cascade=foreground", "--wait=true")
    kubectl("delete", "nodefeatures", "-A", "--all", "--wait=true", check=False)
    bed.wait_for("NFD's master to remove the labels GFD published", lambda: not {
        k for k in nfd_managed_labels(kubectl) if k.startswith("nvidia.com/")}, 90, "kubelet")


HEALTH_CHECK_STARTED = "Ignoring the following XIDs for health checks"  # internal/rm/health.go, just before EventSetCreate


def wait_health_check(kubectl: bed.Kubectl) -> None:
    """Waits until the running plugin's health check listens: the mock delivers only events appended after an
    event set registered its GPUs (as NVML records only events after nvmlDeviceRegisterEvents)."""

    def listening() -> bool:
        for p in shapes.plugin_pods(kubectl, shapes.current()[1]):
            log = kubectl("logs", "-n", p["metadata"]["namespace"], p["metadata"]["name"], check=False)
            if HEALTH_CHECK_STARTED in log:
                return True
        return False

    bed.wait_for("NVIDIA's plugin to start its health check", listening, 60, "kubelet")
