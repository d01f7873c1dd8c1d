"""Finding the device-plugin pod(s) on a GPU node without configuration.

A device plugin is recognised by what it is, not by where one install method happens to put it: a pod owned by
a DaemonSet that mounts the kubelet's device-plugins directory from the host (it must, to serve its socket next
to kubelet.sock), or whose labels are those of a documented install layout (gpuconform/vendors.py, with the
upstream file of each), in any namespace. Companion pods that share a chart's labels (GPU Feature Discovery, the
MPS control daemon, validators, node labellers) are never taken for the plugin. `plugin.namespace` and
`plugin.selector` remain as overrides for layouts the rules do not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .nodes import matches
from .vendors import COMPANION_MARKERS, LAYOUTS, Layout


@dataclass(frozen=True)
class Found:
    pods: list[dict]  # the plugin pods on the node
    layout: str  # e.g. "nvidia-helm", "generic", "configured"
    why: str  # one line for the report: how the pods were recognised
    companions: list[str] = field(default_factory=list)  # namespace/name of companion pods seen and set aside


NOT_FOUND = Found([], "", "")  # a node where no plugin pod was found (or none was looked for)


def _owner(pod: dict) -> dict:
    """The pod's first owner reference ({} when it has none)."""
    return (pod.get("metadata", {}).get("ownerReferences") or [{}])[0]


def device_plugin_mounts(pod: dict) -> list[str]:
    """Host paths of hostPath volumes that a container mounts and that are a kubelet device-plugins directory."""
    vols = {v.get("name"): (v.get("hostPath") or {}).get("path", "") for v in pod.get("spec", {}).get("volumes") or []
            if v.get("hostPath")}
    out = []
    for c in (pod.get("spec", {}).get("containers") or []) + (pod.get("spec", {}).get("initContainers") or []):
        for m in c.get("volumeMounts") or []:
            path = vols.get(m.get("name"), "")
            if path.rstrip("/").endswith("/device-plugins") and path not in out:
                out.append(path)
    return out


def is_companion(pod: dict) -> bool:
    """GPU Feature Discovery, MPS control daemon, validator, node labeller, DCGM, NFD: by name, labels or
    container names (Helm gives them the chart's name label, so labels alone cannot tell them apart)."""
    md = pod.get("metadata", {})
    words = [md.get("name", ""), *(md.get("labels") or {}).values(),
             *(c.get("name", "") for c in pod.get("spec", {}).get("containers") or [])]
    words.append(_owner(pod).get("name", ""))
    return any(marker in w for w in words for marker in COMPANION_MARKERS)


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


def find_plugin_pods(pods_on_node: list[dict], vendor: str, namespace: str = "", selector: str = "") -> Found:
    """The plugin pods among the pods bound to one node (any namespace). With `selector` (the override
    plugin.selector, optionally limited to plugin.namespace) only that selection counts."""
    if selector:
        mine = [p for p in pods_on_node if matches(p.get("metadata", {}).get("labels") or {}, selector)
                and (not namespace or p["metadata"].get("namespace") == namespace)]
        where = f"namespace {namespace}" if namespace else "any namespace"
        return Found(mine, "configured", f"plugin.selector {selector!r} in {where}")
    plugins, companions, why = [], [], []
    layouts = set()
    for p in pods_on_node:
        if namespace and p["metadata"].get("namespace") != namespace:
            continue
        lay = layout_of(p, vendor)
        mounts = device_plugin_mounts(p)
        if not lay and not (mounts and _owner(p).get("kind") == "DaemonSet"):
            continue
        if is_companion(p):
            companions.append(_name(p))
            continue
        plugins.append(p)
        owner = _owner(p)
        how = []
        if lay:
            layouts.add(lay.name)
            how.append("labels " + ",".join(f"{k}={v}" for k, v in lay.labels.items()) + f" ({lay.name} layout)")
        else:
            layouts.add("generic")
        if mounts:
            how.append(f"mounts {mounts[0]}")
        why.append(f"{_name(p)} ({owner.get('kind', 'no owner')} {owner.get('name', '-')}): " + ", ".join(how))
    layout = ", ".join(sorted(layouts)) if layouts else "none"
    return Found(plugins, layout, "; ".join(why) if why else "no pod on the node is owned by a DaemonSet and mounts "
                 "a device-plugins directory, and none carries a known plugin layout's labels", companions)
