"""How many GPUs a node must advertise, and what it means when it advertises something else.

Rules (DESIGN.md section 4): capacity = all devices the plugin lists, allocatable = the Healthy ones;
expected advertised = physical x max(replicas, 1); with sharing renamed the resource is `<name>.shared`;
MIG mixed advertises `<vendor>/mig-<profile>` per profile. Physical counts come from config or GFD labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

GFD = "nvidia.com/"


def qty(v: Any) -> int | None:
    """An extended-resource quantity ("4") as int; None when absent."""
    if v is None:
        return None
    try:
        return int(str(v))
    except ValueError:
        return None


@dataclass(frozen=True)
class Expectation:
    resource: str  # the resource key the node must advertise
    physical: int | None  # physical GPUs (MIG single: MIG devices); None = unknown
    replicas: int  # sharing replicas (1 = no sharing)
    source: str  # where `physical` came from, for messages
    mig_strategy: str = "none"
    mig_profiles: dict[str, int] = field(default_factory=dict)  # resource -> count (mixed)

    @property
    def advertised(self) -> int | None:
        return None if self.physical is None else self.physical * self.replicas


def expectation(node: dict, cfg: dict) -> Expectation:
    """What `node` must advertise. `cfg` is the effective config's data."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    resource = cfg["resourceName"]
    name = node.get("metadata", {}).get("name", "?")

    eg = cfg["nodes"]["expectedGpus"]
    physical: int | None
    if isinstance(eg, int):
        physical, source = eg, f"config nodes.expectedGpus={eg}"
    elif isinstance(eg, dict):
        pool = labels.get(cfg["nodes"]["poolLabel"], "")
        physical = eg.get(pool)
        source = f"config nodes.expectedGpus[{pool!r}]={physical}" if physical is not None else \
            f"no nodes.expectedGpus entry for pool {pool!r} (label {cfg['nodes']['poolLabel']})"
    else:
        physical = qty(labels.get(f"{GFD}gpu.count"))
        source = f"GFD label {GFD}gpu.count={physical}" if physical is not None else \
            f"no {GFD}gpu.count label on {name} (set nodes.expectedGpus)"

    strategy = cfg["sharing"]["strategy"]
    if strategy == "auto":
        strategy = labels.get(f"{GFD}gpu.sharing-strategy", "none")
    replicas_cfg = cfg["sharing"]["replicas"]
    if strategy in ("none", ""):
        replicas = 1
    elif replicas_cfg == "auto":
        replicas = max(qty(labels.get(f"{GFD}gpu.replicas")) or 1, 1)
    else:
        replicas = int(replicas_cfg)
    if strategy not in ("none", "") and cfg["sharing"]["renamed"] and not resource.endswith(".shared"):
        resource = f"{resource}.shared"

    mig = cfg["mig"]["strategy"]
    if mig == "auto":
        mig = labels.get(f"{GFD}mig.strategy", "none")
    profiles: dict[str, int] = {}
    if mig == "mixed":
        vendor = resource.split("/")[0]
        profiles = {f"{vendor}/{k}": int(v) for k, v in (cfg["mig"]["profiles"] or {}).items()}
        if not profiles:
            for k, v in labels.items():
                m = re.match(rf"^{re.escape(GFD)}(mig-[^.]+\.[^.]+)\.count$", k)
                if m and qty(v):
                    profiles[f"{vendor}/{m.group(1)}"] = qty(v) or 0
    return Expectation(resource, physical, replicas, source, mig, profiles)


@dataclass(frozen=True)
class Finding:
    code: str
    message: str


def check_counts(node: dict, exp: Expectation, unhealthy_ids: list[str] | None = None) -> list[Finding]:
    """Compares what the node advertises with `exp`. An empty list means conformant."""
    name = node["metadata"]["name"]
    status = node.get("status", {})
    cap_all, alloc_all = status.get("capacity", {}) or {}, status.get("allocatable", {}) or {}
    cap, alloc = qty(cap_all.get(exp.resource)), qty(alloc_all.get(exp.resource))
    out: list[Finding] = []
    want = exp.advertised

    if exp.mig_strategy == "mixed":
        for res, n in sorted(exp.mig_profiles.items()):
            got = qty(alloc_all.get(res))
            if got != n:
                out.append(Finding("GPU-F09-MIG-MISMATCH", f"{name}: {res} allocatable is {got if got is not None else 'absent'}, "
                                   f"expected {n} (MIG strategy mixed)"))
        if not exp.mig_profiles:
            out.append(Finding("GPU-F09-MIG-MISMATCH", f"{name}: MIG strategy mixed but no nvidia.com/mig-*.count labels "
                               "and no mig.profiles configured"))
        return out

    if cap is None:
        keys = sorted(k for k in cap_all if "/" in k and not k.startswith(("hugepages-", "kubernetes.io/")))
        vendor = exp.resource.split("/")[0]
        mig_keys = [k for k in keys if k.startswith(f"{vendor}/mig-") and (qty(cap_all[k]) or 0) > 0]
        if mig_keys:
            out.append(Finding("GPU-F09-MIG-MISMATCH",
                               f"{name}: advertises MIG resources {mig_keys} (MIG strategy mixed) instead of "
                               f"{exp.resource}, but the expected MIG strategy is {exp.mig_strategy}"))
            return out
        out.append(Finding("GPU-F01-NOT-REGISTERED",
                           f"{name}: {exp.resource} is absent from node capacity although the node is a GPU node "
                           f"({exp.source}); extended resources present: {keys or 'none'}"))
        return out
    if (cap == 0 or alloc == 0) and (want is None or want > 0):
        out.append(Finding("GPU-F02-CAPACITY-ZERO",
                           f"{name}: {exp.resource} capacity={cap} allocatable={alloc}, expected "
                           f"{want if want is not None else '> 0'} ({exp.source})"))
        return out
    if alloc is not None and cap > alloc:
        ids = f": {', '.join(unhealthy_ids)}" if unhealthy_ids else " (device IDs not found in the plugin log)"
        out.append(Finding("GPU-F03-UNHEALTHY-DEVICES",
                           f"{name}: {cap - alloc} of {cap} {exp.resource} devices are Unhealthy "
                           f"(capacity={cap}, allocatable={alloc}){ids}"))
    if want is not None:
        shared = exp.replicas > 1
        if cap > want:
            out.append(Finding("GPU-F04-OVERADVERTISED",
                               f"{name}: advertises {cap} {exp.resource}, the hardware supports {want} "
                               f"({exp.physical} GPUs x {exp.replicas} replicas; {exp.source})"))
        elif cap < want and shared and exp.physical is not None and cap == exp.physical:
            out.append(Finding("GPU-F10-SHARING-MISMATCH",
                               f"{name}: advertises {cap} {exp.resource} but labels say {exp.physical} GPUs shared "
                               f"x {exp.replicas} replicas = {want}: the sharing config is not applied"))
        elif cap < want:
            out.append(Finding("GPU-F04-UNDERADVERTISED",
                               f"{name}: advertises {cap} {exp.resource}, expected {want} ({exp.source})"))
    return out


def stale_resources(node: dict, exp: Expectation) -> list[Finding]:
    """GPU resource keys of the same vendor that the configuration does not expect (left by an old config)."""
    name = node["metadata"]["name"]
    vendor = exp.resource.split("/")[0] + "/"
    cap_all = node.get("status", {}).get("capacity", {}) or {}
    expected = {exp.resource, *exp.mig_profiles}
    out = []
    for k, v in sorted(cap_all.items()):
        if k.startswith(vendor) and k not in expected and (qty(v) or 0) > 0:
            out.append(Finding("GPU-F04-STALE-RESOURCE",
                               f"{name}: advertises {k}={v}, which the configuration does not expect "
                               f"(expected resource keys: {sorted(expected)})"))
    return out


def free_gpus(node: dict, resource: str, pods: list[dict]) -> int:
    """allocatable - requests of non-terminal pods bound to the node (DESIGN.md section 4)."""
    alloc = qty((node.get("status", {}).get("allocatable") or {}).get(resource)) or 0
    name = node["metadata"]["name"]
    used = sum(pod_request(p, resource) for p in pods if p.get("spec", {}).get("nodeName") == name
               and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"))
    return max(alloc - used, 0)


def pod_request(pod: dict, resource: str) -> int:
    """A pod's effective request: max(sum over containers, largest init container), as the scheduler counts."""
    def req(c: dict) -> int:
        res = c.get("resources") or {}
        return qty((res.get("limits") or {}).get(resource) or (res.get("requests") or {}).get(resource)) or 0
    spec = pod.get("spec", {})
    return max(sum(req(c) for c in spec.get("containers", [])),
               max((req(c) for c in spec.get("initContainers", []) or []), default=0))


_UUID = re.compile(r"\b(GPU-[0-9a-fA-F-]{36}|MIG-[0-9a-fA-F-]{36})\b")


def unhealthy_from_log(log: str) -> list[str]:
    """Device IDs named on plugin log lines that mark devices unhealthy (NVIDIA: 'marked unhealthy')."""
    found: list[str] = []
    for line in log.splitlines():
        if "unhealthy" in line.lower():
            for m in _UUID.findall(line):
                if m not in found:
                    found.append(m)
    return found
