"""Finding the device-plugin pod(s) on a GPU node without configuration: by what it does (a DaemonSet's pod
mounting the kubelet's device-plugins directory from the host), never by what it is called; labels only name the
layout, look-alikes and companions are set aside. Why: docs/architecture.md, "Finding the device plugin"."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from .nodemode import SANDBOX_PLUGIN
from .nodes import matches
from .vendors import COMPANION_MARKERS, CSI_REGISTRAR_MARKERS, DRA_PLUGIN_PROGRAMS, LAYOUTS, Layout


@dataclass(frozen=True)
class Found:
    pods: list[dict]  # the plugin pods on the node
    layout: str  # e.g. "nvidia-helm", "generic", "configured"
    why: str  # one line for the report: how the pods were recognised
    companions: list[str] = field(default_factory=list)  # namespace/name of companion pods seen and set aside
    # namespace/name (and why) of pods that look like the plugin (its labels or plugin.selector) but do not do
    # its job or are outside plugin.namespace: never judged, named so an auditor sees they were ignored
    look_alikes: list[str] = field(default_factory=list)


NOT_FOUND = Found([], "", "")  # a node where no plugin pod was found (or none was looked for)


def controller_of(pod: dict) -> dict:
    """The pod's controller owner reference ({} when it has none); Kubernetes marks the one owner that manages the
    pod with controller: true (apimachinery metav1.GetControllerOf)."""
    refs = pod.get("metadata", {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), {})


# The kubelet directory whose hostPath mount marks a plugin pod: a device plugin serves its socket in
# device-plugins; a DRA driver's kubelet plugin registers through plugins_registry (kubernetes v1.37.2
# pkg/kubelet/pluginmanager; k8s.io/dynamic-resource-allocation kubeletplugin RegistrarDirectoryPath), as NVIDIA's
# DRA driver chart mounts it (docs/vendors.md).
DEVICE_PLUGINS_DIR, PLUGINS_REGISTRY_DIR = "/device-plugins", "/plugins_registry"
KUBELET_DIR = "/var/lib/kubelet"  # nodeProbe.kubeletDir's default (gpuconform/config.py)


def kubelet_path(kubelet_dir: str, suffix: str) -> str:
    """The one host path a plugin mounts: `<kubeletDir><suffix>`, normalised (no trailing or doubled '/')."""
    return posixpath.normpath((kubelet_dir or KUBELET_DIR).rstrip("/") + suffix)


def device_plugin_mounts(pod: dict, suffix: str = DEVICE_PLUGINS_DIR, kubelet_dir: str = KUBELET_DIR) -> list[str]:
    """Host paths of hostPath volumes that a container mounts and that are exactly the kubelet's device-plugins
    directory `<kubelet_dir>/device-plugins` (or, with `suffix`, another kubelet plugin directory). Not any path
    ending in it (issue 29, review T1: a tenant's DaemonSet mounting /tmp/x/device-plugins was judged as the
    plugin), and never one with `..` segments."""
    want = kubelet_path(kubelet_dir, suffix)
    vols = {v.get("name"): (v.get("hostPath") or {}).get("path", "") for v in pod.get("spec", {}).get("volumes") or []
            if v.get("hostPath")}
    out = []
    for c in (pod.get("spec", {}).get("containers") or []) + (pod.get("spec", {}).get("initContainers") or []):
        for m in c.get("volumeMounts") or []:
            path = vols.get(m.get("name"), "")
            if path and ".." not in path.split("/") and posixpath.normpath(path) == want and path not in out:
                out.append(path)
    return out


def does_the_job(pod: dict, suffix: str = DEVICE_PLUGINS_DIR, kubelet_dir: str = KUBELET_DIR) -> str:
    """'' when the pod does a device plugin's job (a DaemonSet's pod mounting the kubelet's device-plugins directory;
    with `suffix` PLUGINS_REGISTRY_DIR a DRA kubelet plugin's), else what it lacks, for the look-alike list."""
    lacks = []
    if controller_of(pod).get("kind") != "DaemonSet":
        lacks.append("no DaemonSet owner")
    if not device_plugin_mounts(pod, suffix, kubelet_dir):
        near = [(v.get("hostPath") or {}).get("path", "") for v in pod.get("spec", {}).get("volumes") or []
                if (v.get("hostPath") or {}).get("path", "").rstrip("/").endswith(suffix)]
        lacks.append(f"its hostPath {near[0]} is not the kubelet's {kubelet_path(kubelet_dir, suffix)}" if near
                     else f"no {suffix.strip('/')} hostPath mount")
    return ", ".join(lacks)


def is_companion(pod: dict) -> bool:
    """GPU Feature Discovery, MPS control daemon, validator, node labeller, DCGM, NFD: by name, labels or
    container names (Helm gives them the chart's name label, so labels alone cannot tell them apart)."""
    md = pod.get("metadata", {})
    words = [md.get("name", ""), *(md.get("labels") or {}).values(),
             *(c.get("name", "") for c in pod.get("spec", {}).get("containers") or [])]
    words.append(controller_of(pod).get("name", ""))
    return any(marker in w for w in words for marker in COMPANION_MARKERS)


def is_sandbox_plugin(pod: dict) -> bool:
    """The GPU operator's sandbox device plugin (VM passthrough/vGPU, gpuconform/nodemode.py): its DaemonSet is
    owned and named by the operator (assets/state-sandbox-device-plugin), so the controller's name decides."""
    return controller_of(pod).get("name", "") == SANDBOX_PLUGIN or \
        pod.get("metadata", {}).get("name", "").startswith(SANDBOX_PLUGIN + "-")


def _words(pod: dict) -> list[str]:
    """What the pod's containers run: names, images, commands and arguments."""
    spec = pod.get("spec", {})
    return [str(w) for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
            for w in [c.get("name", ""), c.get("image", ""), *(c.get("command") or []), *(c.get("args") or [])]]


def kubelet_plugin_kind(pod: dict, vendor: str) -> str:
    """Among the pods registering through plugins_registry: "gpu" when it runs the vendor's GPU DRA kubelet plugin
    (vendors.DRA_PLUGIN_PROGRAMS), "csi" for a CSI node plugin (its node-driver-registrar), else ""."""
    words = _words(pod)
    if any(p in w for w in words for p in DRA_PLUGIN_PROGRAMS.get(vendor, ())):
        return "gpu"
    if any(m in w for w in words for m in CSI_REGISTRAR_MARKERS):
        return "csi"
    return ""


def layout_of(pod: dict, vendor: str) -> Layout | None:
    labels = pod.get("metadata", {}).get("labels") or {}
    containers = {c.get("name") for c in pod.get("spec", {}).get("containers") or []}
    for lay in LAYOUTS:
        if lay.vendor == vendor and all(labels.get(k) == v or (v == "*" and k in labels)
                                        for k, v in lay.labels.items()) \
                and (not lay.container or lay.container in containers):
            return lay
    return None


def _name(p: dict) -> str:
    return f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"


def find_plugin_pods(pods_on_node: list[dict], vendor: str, namespace: str = "", selector: str = "",
                     dra: bool = False, kubelet_dir: str = KUBELET_DIR) -> Found:
    """The plugin pods among the pods bound to one node: those doing a plugin's job (does_the_job), in
    one of the `namespace`s when set (plugin.namespace: one, or several comma-separated), among the `selector`
    selection when set (plugin.selector). `dra`: the node's GPUs are served by a DRA driver, whose kubelet-plugin
    pods are the plugin there (plugin.namespace applies to them too; plugin.selector names the device plugin's
    labels and is not applied). `kubelet_dir` (nodeProbe.kubeletDir): the mount must be exactly its device-plugins
    (DRA: plugins_registry) directory."""
    suffix = PLUGINS_REGISTRY_DIR if dra else DEVICE_PLUGINS_DIR
    if dra:
        selector = ""
    spaces = {n.strip() for n in namespace.split(",") if n.strip()}
    plugins, companions, look_alikes, why = [], [], [], []
    layouts = set()
    for p in pods_on_node:
        lay = layout_of(p, vendor)
        picked = matches(p.get("metadata", {}).get("labels") or {}, selector) if selector else bool(lay)
        lacks = does_the_job(p, suffix, kubelet_dir)
        if not picked and lacks:
            continue  # neither looks like the plugin nor does its job: an ordinary pod
        if selector and not picked:
            continue  # does a plugin's job but is not in the configured selection
        if is_companion(p) or is_sandbox_plugin(p):
            companions.append(_name(p))
            continue
        if spaces and p["metadata"].get("namespace") not in spaces:
            if not picked:
                continue  # another namespace's DaemonSet (a NIC's plugin, say) that does not look like ours
            lacks = ", ".join(filter(None, [f"not in plugin.namespace {namespace}", lacks]))
        if lacks:
            look_alikes.append(f"{_name(p)} ({lacks})")
            continue
        plugins.append(p)
        owner = controller_of(p)
        how = []
        if selector:
            layouts.add("configured")
            how.append(f"plugin.selector {selector!r}")
        elif lay:
            layouts.add(lay.name)
            how.append("labels " + ",".join(f"{k}={v}" for k, v in lay.labels.items()) + f" ({lay.name} layout)")
        else:
            layouts.add("generic")
        how.append(f"mounts {device_plugin_mounts(p, suffix, kubelet_dir)[0]}")
        why.append(f"{_name(p)} (DaemonSet {owner.get('name', '-')}): " + ", ".join(how))
    if dra:  # other kubelet plugins register through plugins_registry too: keep the GPU driver's pods
        kinds = {_name(p): kubelet_plugin_kind(p, vendor) for p in plugins}
        gpu = any(k == "gpu" for k in kinds.values())
        for p in list(plugins):
            kind = kinds[_name(p)]
            if kind == "csi" or (gpu and kind != "gpu"):
                plugins.remove(p)
                why = [w for w in why if not w.startswith(f"{_name(p)} ")]
                what = "a CSI node plugin (node-driver-registrar)" if kind == "csi" else \
                    f"another kubelet plugin: it does not run {' or '.join(DRA_PLUGIN_PROGRAMS.get(vendor, ()))}"
                look_alikes.append(f"{_name(p)} ({what})")
    layout = ", ".join(sorted(layouts)) if layouts else "none"
    where = f" in namespace {namespace}" if namespace else ""
    among = f" among the pods matching plugin.selector {selector!r}" if selector else ""
    return Found(plugins, layout, "; ".join(why) if why else f"no pod on the node{where}{among} is owned by a "
                 f"DaemonSet and mounts {kubelet_path(kubelet_dir, suffix)}", companions, look_alikes)
