"""GPU node discovery: which nodes are GPU nodes, and which of them can take the suite's pods right now."""

from __future__ import annotations

from dataclasses import dataclass

from . import nodemode, vendors
from .allocpath import AllocationPath
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
    path: str = nodemode.DEVICE_PLUGIN  # its allocation path (gpuconform/nodemode.py)
    # On the DRA path: the GPU DRA driver and the DeviceClass the checks' claims name (the vendor's GPU class)
    dra_driver: str = ""
    device_class: str = ""
    # dra-extended-resource: the resource name (nvidia.com/gpu) pods may request instead of a claim, which the
    # scheduler turns into a claim of device_class (KEP-5004); "" elsewhere
    extended_resource: str = ""

    @property
    def allocation(self) -> AllocationPath:
        """The node's allocation path as facts (gpuconform/allocpath.py)."""
        if not nodemode.is_dra(self.path):
            return AllocationPath(self.path, self.resource)
        return AllocationPath(self.path, self.extended_resource, self.dra_driver, self.device_class,
                              self.device_class in nodemode.MIG_DEVICE_CLASSES.values())

    @property
    def usable(self) -> bool:
        """Ready and schedulable: pods can be placed (whether GPUs are free is separate)."""
        return self.ready and self.schedulable

    def skip_reason(self, need: int) -> tuple[str, str] | None:
        """(code, message) when the node cannot take a pod needing `need` GPUs; None when it can."""
        if not self.ready:
            return "SKIP-NODE-NOT-READY", f"{self.name} is NotReady"
        if not self.schedulable:
            return "SKIP-NODE-NOT-READY", f"{self.name} is cordoned (spec.unschedulable)"
        if need and self.advertised and self.free < need:
            return "SKIP-F07-BUSY", f"{self.name} has {self.free} free GPU(s) of {self.advertised}, the check needs {need}"
        return None


# Why a node that looks like a GPU node is not certified (the summary's `left_out_nodes`, the report's header).
EXCLUDED, NOT_SELECTED, NOT_APPLICABLE = "excluded", "not-selected", "not-applicable"
LEFT_OUT_TITLES = {EXCLUDED: "excluded by nodes.exclude", NOT_SELECTED: "not matched by nodes.selector",
                   NOT_APPLICABLE: "not applicable here (no container device plugin)"}


@dataclass(frozen=True)
class LeftOut:
    """A GPU-looking node the run does not certify, and why (one of LEFT_OUT_TITLES; for not-applicable also the
    node's allocation path, gpuconform/nodemode.py)."""
    name: str
    why: str
    reason: str
    path: str = ""
    evidence: str = ""

    def to_dict(self) -> dict[str, str]:
        d = {"why": self.why, "reason": self.reason}
        if self.path:
            d.update(path=self.path, evidence=self.evidence)
        return d


def looks_like_gpu_node(node: dict, vendor: str) -> bool:
    """One of the vendor's GPU-node labels (gpuconform/vendors.py) or one of its GPU resources in capacity."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    return (any(matches(labels, s) for s in vendors.GPU_NODE_LABELS.get(vendor, ()))
            or any(vendors.is_gpu_resource(vendor, k) for k in node.get("status", {}).get("capacity") or {}))


def selection(node: dict, vendor: str, selector: str, exclude: str) -> str | None:
    """None when the node is in the run's selection, else EXCLUDED or NOT_SELECTED. Not excluded, and: matched by
    `selector` when one is set (a selector selects, as everywhere in Kubernetes: a node advertising GPUs outside it
    is not added), else looking like a GPU node (any vendor GPU-node label or GPU resource). A labelled GPU node
    whose plugin never registered is selected by its labels, so that failure is reported, not hidden."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    if exclude and matches(labels, exclude):
        return EXCLUDED
    if selector:
        return None if matches(labels, selector) else NOT_SELECTED
    return None if looks_like_gpu_node(node, vendor) else NOT_SELECTED


def is_gpu_node(node: dict, vendor: str, selector: str, exclude: str) -> bool:
    """In the run's selection (`selection`); whether it is certified also depends on its allocation path."""
    return selection(node, vendor, selector, exclude) is None


def select_nodes(all_nodes: list[dict], slices: list[dict], vendor: str, selector: str,
                 exclude: str, classes: list[dict] | None = None) -> tuple[list[dict], list[LeftOut]]:
    """The nodes to certify, and the GPU-looking (or selected) nodes left out with why, from one LIST of nodes and
    one of ResourceSlices: local work only, no request per node. Certified: selected, and the node's allocation
    path (gpuconform/nodemode.py, from its labels, capacity and the slices naming it) is the device plugin."""
    per_node = nodemode.slices_by_node(slices)
    extended = nodemode.extended_classes(classes or [], vendor)
    certify: list[dict] = []
    left: list[LeftOut] = []
    for n in all_nodes:
        name = n["metadata"]["name"]
        why = selection(n, vendor, selector, exclude)
        if why is not None:
            if looks_like_gpu_node(n, vendor):
                text = (f"matches nodes.exclude {exclude!r}" if why == EXCLUDED
                        else f"does not match nodes.selector {selector!r}")
                left.append(LeftOut(name, why, text))
            continue
        mode = nodemode.of_node(n, per_node.get(name, []), vendor, extended)
        if mode.certified_here:
            certify.append(n)
        else:
            left.append(LeftOut(name, NOT_APPLICABLE, mode.reason, mode.path, mode.evidence))
    return certify, sorted(left, key=lambda x: x.name)


def path_tally(certified: list[str], left_out: list[LeftOut]) -> str:
    """Each allocation path and how many GPU nodes take it, for the report header: "device-plugin 3 (certified
    here), dra 1 (certified here), dra-extended-resource 2"; `certified` are the paths of the nodes this run
    judges; nodes left out by selection are not counted (their path was not decided)."""
    counts: dict[str, int] = {nodemode.DEVICE_PLUGIN: 0}
    here: set[str] = set(certified) | {nodemode.DEVICE_PLUGIN}
    for p in certified:
        counts[p] = counts.get(p, 0) + 1
    for x in left_out:
        if x.why == NOT_APPLICABLE and x.path:
            counts[x.path] = counts.get(x.path, 0) + 1
    return ", ".join(f"{p} {n}" + (" (certified here)" if p in here else "")
                     for p, n in counts.items() if n or p == nodemode.DEVICE_PLUGIN)


def condition(obj: dict, kind: str) -> str | None:
    """The status ("True", "False", "Unknown") of a node's or pod's condition of this type; None if absent."""
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status")
    return None


def describe_nodes(nodes: list[dict], pods: list[dict], expectations: dict[str, Expectation]) -> list[GpuNode]:
    """Each node with its own workload resource (from its expectation) and the GPUs of it that are free."""
    out = []
    by_node: dict[str, list[dict]] = {}
    for p in pods:  # once: free_gpus per node would scan every pod for every node (40,000 x 1,000 at scale)
        by_node.setdefault((p.get("spec") or {}).get("nodeName") or "", []).append(p)
    for n in nodes:
        exp = expectations[n["metadata"]["name"]]
        resource = exp.workload_resource
        taints = tuple(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in n.get("spec", {}).get("taints") or [])
        out.append(GpuNode(n["metadata"]["name"], condition(n, "Ready") == "True",
                           not n.get("spec", {}).get("unschedulable", False),
                           qty((n.get("status", {}).get("allocatable") or {}).get(resource)),
                           free_gpus(n, resource, by_node.get(n["metadata"]["name"], [])), taints, resource,
                           exp.describe()))
    return sorted(out, key=lambda g: g.name)
