"""GPU node discovery: which nodes are GPU nodes, and which of them can take the suite's pods right now."""

from __future__ import annotations

from dataclasses import dataclass

from . import vendors
from .counts import Expectation, free_gpus, qty


def parse_selector(sel: str) -> list[tuple[str, str, str | None]]:
    """'a=b,c!=d,e,!f' -> [(key, op, value)] with op in = != exists !exists."""
    out: list[tuple[str, str, str | None]] = []
    for term in (t.strip() for t in sel.split(",") if t.strip()):
        if "!=" in term:
            k, v = term.split("!=", 1)
            out.append((k.strip(), "!=", v.strip()))
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            out.append((k.strip(), "=", v.strip()))
        elif term.startswith("!"):
            out.append((term[1:].strip(), "!exists", None))
        else:
            out.append((term, "exists", None))
    return out


def matches(labels: dict[str, str], sel: str) -> bool:
    for k, op, v in parse_selector(sel):
        if op == "=" and labels.get(k) != v:
            return False
        if op == "!=" and labels.get(k) == v:
            return False
        if op == "exists" and k not in labels:
            return False
        if op == "!exists" and k in labels:
            return False
    return True


@dataclass(frozen=True)
class GpuNode:
    name: str
    ready: bool
    schedulable: bool
    advertised: int | None  # allocatable of the node's workload resource (None = absent)
    free: int
    taints: tuple[str, ...]
    resource: str = "nvidia.com/gpu"  # what the workload checks request on this node (its own GPU resource)
    pool: str = ""  # the node's shape as understood from its labels, for the report

    @property
    def usable(self) -> bool:
        """Ready and schedulable: pods can be placed (whether GPUs are free is separate)."""
        return self.ready and self.schedulable

    def skip_reason(self, need: int) -> tuple[str, str] | None:
        """(code, message) when the node cannot take a pod needing `need` GPUs; None when it can."""
        if not self.ready:
            return "ENV-NODE-NOT-READY", f"{self.name} is NotReady"
        if not self.schedulable:
            return "ENV-NODE-NOT-READY", f"{self.name} is cordoned (spec.unschedulable)"
        if need and self.advertised and self.free < need:
            return "GPU-F07-BUSY", f"{self.name} has {self.free} free GPU(s) of {self.advertised}, the check needs {need}"
        return None


def is_gpu_node(node: dict, vendor: str, selector: str, exclude: str) -> bool:
    """A node the suite must certify: not excluded, and either selected by `selector` (empty: any of the vendor's
    GPU-node labels, gpuconform/vendors.py) or advertising one of the vendor's GPU resources. A node labelled as
    GPU node whose plugin never registered is found by its labels, so that failure is reported, not hidden."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    if exclude and matches(labels, exclude):
        return False
    if selector:
        by_label = matches(labels, selector)
    else:
        by_label = any(matches(labels, s) for s in vendors.GPU_NODE_LABELS.get(vendor, ()))
    has_resource = any(vendors.is_gpu_resource(vendor, k) for k in node.get("status", {}).get("capacity") or {})
    return by_label or has_resource


def condition(obj: dict, kind: str) -> str | None:
    """The status ("True", "False", "Unknown") of a node's or pod's condition of this type; None if absent."""
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status")
    return None


def describe_nodes(nodes: list[dict], pods: list[dict], expectations: dict[str, Expectation]) -> list[GpuNode]:
    """Each node with its own workload resource (from its expectation) and the GPUs of it that are free."""
    out = []
    for n in nodes:
        exp = expectations[n["metadata"]["name"]]
        resource = exp.workload_resource
        taints = tuple(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in n.get("spec", {}).get("taints") or [])
        out.append(GpuNode(n["metadata"]["name"], condition(n, "Ready") == "True",
                           not n.get("spec", {}).get("unschedulable", False),
                           qty((n.get("status", {}).get("allocatable") or {}).get(resource)),
                           free_gpus(n, resource, pods), taints, resource, exp.describe()))
    return sorted(out, key=lambda g: g.name)
