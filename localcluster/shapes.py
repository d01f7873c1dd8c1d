"""The shapes the real (kubelet) node of the test bed can take: a GPU pool profile and a plugin install layout.

    GPUCONFORM_BED_PROFILE = plain | time-slicing | time-slicing-renamed | mig-mixed     (default plain)
    GPUCONFORM_BED_LAYOUT  = helm | static | operator                                    (default helm)

`make cluster-up` starts with them; `make bed PROFILE=... LAYOUT=...` (cluster.py bed PROFILE LAYOUT) switches a
running bed. Each imitates what upstream ships, never what the suite expects (docs/vendors.md has the sources):

- profiles: the simulated plugin's config uses NVIDIA's config-file keys (flags.migStrategy,
  sharing.timeSlicing); the hardware description gets MIG devices for mig-mixed; the node gets the labels GPU
  Feature Discovery writes for that shape (gpu.count, gpu.replicas, gpu.sharing-strategy, gpu.product with
  -SHARED, mig.strategy, mig-<profile>.count).
- layouts: the plugin DaemonSet with the namespace, name and pod labels of NVIDIA's Helm chart, static
  manifest or GPU operator, each with its companion DaemonSets (GPU Feature Discovery carrying the chart's
  labels; the operator's GFD), and the node labels that install has (NFD's pci-10de for Helm/static, the
  operator's nvidia.com/gpu.present).

This module holds the shapes (tables, the bed's current shape, the objects of the simulated stack); gpunode.py
applies them to the node (deploy_plugin, restart_plugin, switch) and nvidia.py builds NVIDIA's stack's objects.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field

import bed

PROFILES = ("plain", "time-slicing", "time-slicing-renamed", "mig-mixed")
LAYOUTS = ("helm", "static", "operator")
# Which plugin runs: NVIDIA's own (nvidia.py: the plugin, GFD and NFD's master over the mock NVML) or the simulated
# one (images/: the fault injector for what NVIDIA's cannot be made to do, with the labels GFD would write).
# GPUCONFORM_BED_STACK picks it at start-up (default nvidia). mig-mixed always runs the simulated plugin: NVIDIA's
# reads MIG devices' capability minors from /proc/driver/nvidia-caps/mig-minors (go-nvlib pkg/nvlib/info via
# internal/rm/nvml_devices.go GetPaths), and runc refuses mounts under /proc outside its allow-list, so no
# container can be shown a simulated one.
STACKS = ("nvidia", "sim")
TS_REPLICAS = 4
# Each simulated A100-40GB under mig-mixed: one 3g.20gb and two 1g.5gb instances (a valid A100-40GB partition).
MIG_PER_GPU = (("3g.20gb", 2), ("1g.5gb", 9), ("1g.5gb", 10))  # (profile, GPU instance id)
NFD_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"
OPERATOR_PRESENT = "nvidia.com/gpu.present"


def current() -> tuple[str, str]:
    """The bed's profile and layout: the state of a running bed, else the environment, else the defaults."""
    st = bed.read_state()
    profile = st.get("profile") or os.environ.get("GPUCONFORM_BED_PROFILE") or "plain"
    layout = st.get("layout") or os.environ.get("GPUCONFORM_BED_LAYOUT") or "helm"
    check(profile, layout)
    return profile, layout


def wanted_stack() -> str:
    """The plugin stack asked for: the running bed's, else GPUCONFORM_BED_STACK, else nvidia."""
    stack = bed.read_state().get("base_stack") or os.environ.get("GPUCONFORM_BED_STACK") or "nvidia"
    if stack not in STACKS:
        raise bed.BedError(f"unknown plugin stack {stack!r} (GPUCONFORM_BED_STACK / STACK=): one of {', '.join(STACKS)}")
    return stack


def stack_for(profile: str, wanted: str | None = None) -> str:
    """The stack a profile runs on: the one asked for, except mig-mixed, which only the simulated plugin serves."""
    return "sim" if profile == "mig-mixed" else (wanted or wanted_stack())


def current_stack() -> str:
    return bed.read_state().get("stack") or stack_for(current()[0])


def check(profile: str, layout: str) -> None:
    if profile not in PROFILES:
        raise bed.BedError(f"unknown bed profile {profile!r} (GPUCONFORM_BED_PROFILE / PROFILE=): one of {', '.join(PROFILES)}")
    if layout not in LAYOUTS:
        raise bed.BedError(f"unknown bed layout {layout!r} (GPUCONFORM_BED_LAYOUT / LAYOUT=): one of {', '.join(LAYOUTS)}")


# ---------------------------------------------------------------- profiles


def mig_devices(gpu_index: int, node: str = bed.NODE_NAME) -> list[dict]:
    return [{"profile": p, "uuid": f"MIG-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/gpu{gpu_index}/gi{gi}')}",
             "gi": gi, "ci": 0} for p, gi in MIG_PER_GPU]


def nvidia_config(profile: str) -> dict | None:
    """NVIDIA's plugin/GFD config file for a profile (api/config/v1, version v1), None for none (plain)."""
    if profile not in ("time-slicing", "time-slicing-renamed"):
        return None
    return {"version": "v1", "sharing": {"timeSlicing": {
        "renameByDefault": profile == "time-slicing-renamed",
        "resources": [{"name": bed.RESOURCE, "replicas": TS_REPLICAS}]}}}


def plugin_config(profile: str) -> dict:
    """The simulated plugin's healthy config for a profile (NVIDIA config-file keys; no socketName: the plugin
    derives upstream's socket name per resource)."""
    cfg: dict = {"resourceName": bed.RESOURCE}
    if profile in ("time-slicing", "time-slicing-renamed"):
        cfg["sharing"] = {"timeSlicing": {"renameByDefault": profile == "time-slicing-renamed",
                                          "resources": [{"name": bed.RESOURCE, "replicas": TS_REPLICAS}]}}
    if profile == "mig-mixed":
        cfg["flags"] = {"migStrategy": "mixed"}
    return cfg


def resources(profile: str) -> dict[str, int]:
    """What the node must advertise (capacity = allocatable) in the healthy state of a profile."""
    if profile == "time-slicing":
        return {bed.RESOURCE: bed.GPUS * TS_REPLICAS}
    if profile == "time-slicing-renamed":
        return {f"{bed.RESOURCE}.shared": bed.GPUS * TS_REPLICAS}
    if profile == "mig-mixed":
        out: dict[str, int] = {}
        for p, _ in MIG_PER_GPU:
            out[f"nvidia.com/mig-{p}"] = out.get(f"nvidia.com/mig-{p}", 0) + bed.GPUS
        return out
    return {bed.RESOURCE: bed.GPUS}


def whole_gpu_labels(count: int, product: str = bed.GPU_PRODUCT) -> dict[str, str]:
    """GPU Feature Discovery's labels for whole, unshared GPUs; gfd_labels adds those of a pool shape. No
    nvidia.com/mig.strategy: GFD writes none under the plugin's default strategy `none` (NVIDIA/k8s-device-plugin
    v0.19.3 internal/lm/strategy.go migStrategyLabeler)."""
    return {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.product": product.replace(" ", "-"), "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.family": "ampere",
            "nvidia.com/cuda.driver-version.full": bed.DRIVER, "nvidia.com/cuda.runtime-version.full": bed.CUDA}



def gfd_labels(profile: str, layout: str) -> dict[str, str]:
    """The labels GPU Feature Discovery (and NFD / the operator) put on the node for this shape
    (NVIDIA/k8s-device-plugin internal/lm/resource.go; docs/vendors.md)."""
    labels = whole_gpu_labels(bed.GPUS)
    labels.pop(OPERATOR_PRESENT, None)
    labels[NFD_NVIDIA] = "true"
    if layout == "operator":
        labels[OPERATOR_PRESENT] = "true"
        # GFD writes the plugin's configured MIG strategy on every GPU node, MIG or not, and the operator's
        # default is single (NVIDIA/k8s-device-plugin v0.19.3 internal/lm/strategy.go; NVIDIA/gpu-operator
        # deployments/gpu-operator/values.yaml mig.strategy): a plain operator node carries it
        labels["nvidia.com/mig.strategy"] = "single"
    if profile in ("time-slicing", "time-slicing-renamed"):
        labels.update({"nvidia.com/gpu.replicas": str(TS_REPLICAS), "nvidia.com/gpu.sharing-strategy": "time-slicing"})
        if profile == "time-slicing":  # GFD marks the product -SHARED only when the resource keeps its name
            labels["nvidia.com/gpu.product"] += "-SHARED"
    if profile == "mig-mixed":
        labels["nvidia.com/mig.strategy"] = "mixed"
        for res, n in resources(profile).items():
            labels[f"{res}.count"] = str(n)
    return labels


def stale_label_keys(keep: dict[str, str]) -> list[str]:
    """GFD/NFD/operator label keys of other shapes to remove when switching (kubectl label KEY-)."""
    every = {OPERATOR_PRESENT, NFD_NVIDIA, "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy",
             "nvidia.com/mig.strategy", *(f"nvidia.com/mig-{p}.count" for p, _ in MIG_PER_GPU)}
    return sorted(k for k in every if k not in keep)


# ---------------------------------------------------------------- layouts


@dataclass(frozen=True)
class Layout:
    namespace: str
    daemonset: str
    labels: dict[str, str]  # the plugin pods' labels (the DaemonSet selects on them)
    companions: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (DaemonSet name, pod labels)


# Names and labels as upstream ships them (docs/vendors.md gives the file of each).
LAYOUT_OBJECTS: dict[str, Layout] = {
    "helm": Layout("nvidia-device-plugin", "nvidia-device-plugin",
                   {"app.kubernetes.io/name": "nvidia-device-plugin", "app.kubernetes.io/instance": "nvidia-device-plugin"},
                   # the chart's GFD DaemonSet selects on the very same labels as the plugin's
                   [("nvidia-device-plugin-gpu-feature-discovery",
                     {"app.kubernetes.io/name": "nvidia-device-plugin",
                      "app.kubernetes.io/instance": "nvidia-device-plugin"})]),
    # the static GFD manifest has no namespace of its own; applied next to the plugin it lands in kube-system
    "static": Layout("kube-system", "nvidia-device-plugin-daemonset", {"name": "nvidia-device-plugin-ds"},
                     [("gpu-feature-discovery", {"app.kubernetes.io/name": "gpu-feature-discovery",
                                                 "app.kubernetes.io/part-of": "nvidia-gpu"})]),
    "operator": Layout("gpu-operator", "nvidia-device-plugin-daemonset", {"app": "nvidia-device-plugin-daemonset"},
                       [("gpu-feature-discovery", {"app": "gpu-feature-discovery"})]),
}

BED_LABEL = {"app.kubernetes.io/part-of": "gpuconform-localcluster"}  # on the DaemonSet objects, not the pods
GFD_CRASH = "gpu-feature-discovery: failed to get device info: simulated: NVML not initialised"


def selector(layout: str) -> str:
    return ",".join(f"{k}={v}" for k, v in LAYOUT_OBJECTS[layout].labels.items())


def affinity() -> dict:
    # The chart's default nodeAffinity: any of NFD's NVIDIA PCI label or the operator's gpu.present
    # (deployments/helm/nvidia-device-plugin/values.yaml); kwok nodes have no kubelet to register with, and the DRA
    # node (dranode.py) gets none: the GPU operator's deploy label keeps the device plugin off it
    # (gpu.deploy.device-plugin=false), or it is on the operator's DRA stack (gpu.deploy.dra-driver=true), whose
    # labelling removes the device plugin's and GFD's deploy labels (NVIDIA/gpu-operator v26.7.0
    # controllers/nodelabeling_controller.go updateGPUStateLabels).
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": ["true"]},
                              {"key": "type", "operator": "NotIn", "values": ["kwok"]},
                              {"key": "nvidia.com/gpu.deploy.device-plugin", "operator": "NotIn", "values": ["false"]},
                              {"key": "nvidia.com/gpu.deploy.dra-driver", "operator": "NotIn", "values": ["true"]}]}
        for key in (NFD_NVIDIA, OPERATOR_PRESENT)]}}}


def namespace_objects(layout: str) -> list[dict]:
    """The layout's namespace, privileged: a privileged plugin needs one (as the chart's docs say)."""
    ns = LAYOUT_OBJECTS[layout].namespace
    if ns == "kube-system":
        return []
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}}}]


def plugin_objects(layout: str, config: dict, host_dir: str = bed.DEVICE_PLUGIN_DIR) -> list[dict]:
    """The plugin's ConfigMap and DaemonSet in the layout's namespace with its names and labels."""
    lay = LAYOUT_OBJECTS[layout]
    hp = lambda name, path: {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}  # noqa: E731
    objs = namespace_objects(layout)
    objs += [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": bed.PLUGIN_CM, "namespace": lay.namespace,
                                                               "labels": BED_LABEL},
         "data": {"config.yaml": json.dumps(config, indent=1)}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": lay.daemonset, "namespace": lay.namespace, "labels": BED_LABEL},
         "spec": {
             "selector": {"matchLabels": lay.labels},
             "updateStrategy": {"type": "RollingUpdate"},
             "template": {
                 "metadata": {"labels": lay.labels},
                 "spec": {
                     "priorityClassName": "system-node-critical",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "affinity": affinity(),
                     "containers": [{
                         "name": "nvidia-device-plugin-ctr", "image": bed.IMAGES["plugin"],
                         "imagePullPolicy": "IfNotPresent",
                         "args": ["--config=/etc/gpu-sim/config.yaml"],
                         "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                         "securityContext": {"privileged": True},
                         "volumeMounts": [
                             {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                             {"name": "gpu-sim", "mountPath": str(bed.GPU_SIM)},
                             {"name": "config", "mountPath": "/etc/gpu-sim", "readOnly": True}]}],
                     "volumes": [hp("device-plugin", host_dir), hp("gpu-sim", str(bed.GPU_SIM)),
                                 {"name": "config", "configMap": {"name": bed.PLUGIN_CM}}],
                 }}}},
    ]
    return objs


def companion_objects(layout: str, crashing: bool = False) -> list[dict]:
    """The layout's companion DaemonSets (GPU Feature Discovery): they carry the chart's labels but never mount
    the device-plugins directory. `crashing` makes them exit at start (a companion crash-looping)."""
    lay = LAYOUT_OBJECTS[layout]
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    cmd = f"echo '{GFD_CRASH}' | tee /dev/termination-log; exit 1" if crashing else \
        "echo labels written; exec sleep 2147483647"
    return [{"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": name, "namespace": lay.namespace, "labels": BED_LABEL},
             "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                 "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                     "seccompProfile": {"type": "RuntimeDefault"}},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "affinity": affinity(), "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "gpu-feature-discovery", "image": bed.IMAGES["probe"],
                                 "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", cmd],
                                 "securityContext": restricted}]}}}}
            for name, labels in lay.companions]


def other_layout_objects(layout: str) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of the plugin and companion objects of every other layout, to delete on a switch."""
    out = []
    for name, lay in LAYOUT_OBJECTS.items():
        if name == layout:
            continue
        out.append(("daemonset", lay.namespace, lay.daemonset))
        out.append(("configmap", lay.namespace, bed.PLUGIN_CM))
        out += [("daemonset", lay.namespace, n) for n, _ in lay.companions]
    return [o for o in out if not (o[1] == LAYOUT_OBJECTS[layout].namespace and o[2] in
                                   (LAYOUT_OBJECTS[layout].daemonset, bed.PLUGIN_CM))]


# ---------------------------------------------------------------- the plugin's and its companions' pods


def _owned_by(p: dict, daemonset: str) -> bool:
    return any(r.get("kind") == "DaemonSet" and r.get("name") == daemonset for r in p["metadata"].get("ownerReferences") or [])


def plugin_pods(kubectl: bed.Kubectl, layout: str) -> list[dict]:
    """The plugin DaemonSet's pods (by owner: the Helm chart's GFD pods carry the very same labels)."""
    lay = LAYOUT_OBJECTS[layout]
    return [p for p in kubectl.json("get", "pods", "-n", lay.namespace, "-l", selector(layout))["items"]
            if not p["metadata"].get("deletionTimestamp") and _owned_by(p, lay.daemonset)]


def companion_pods(kubectl: bed.Kubectl, layout: str) -> list[dict]:
    lay = LAYOUT_OBJECTS[layout]
    names = {n for n, _ in lay.companions}
    return [p for p in kubectl.json("get", "pods", "-n", lay.namespace)["items"]
            if not p["metadata"].get("deletionTimestamp") and any(_owned_by(p, n) for n in names)]
