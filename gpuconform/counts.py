"""How many GPUs a node must advertise, and what it means when it advertises something else.

Rules (DESIGN.md section 4): capacity = all devices the plugin lists, allocatable = the Healthy ones;
expected advertised = physical x max(replicas, 1); with sharing renamed the resource is `<name>.shared`;
MIG mixed advertises `<vendor>/mig-<profile>` per profile. Physical counts come from config or GFD labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import vendors
from .config import Config, view
from .pods import is_terminal

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
    resource: str  # the resource key the node must advertise (whole GPUs, shared replicas or MIG single)
    physical: int | None  # physical GPUs (MIG single: MIG devices); None = unknown
    replicas: int  # sharing replicas (1 = no sharing)
    source: str  # where `physical` came from, for messages
    mig_strategy: str = "none"
    mig_profiles: dict[str, int] = field(default_factory=dict)  # resource -> count (mixed)
    vendor: str = "nvidia"
    whole_gpus_too: bool = False  # MIG mixed: the node also advertises GPUs not in MIG mode as `resource`
    mig_replicas: dict[str, int] = field(default_factory=dict)  # MIG resource -> time-slicing replicas (if > 1)

    @property
    def advertised(self) -> int | None:
        return None if self.physical is None else self.physical * self.replicas

    @property
    def resources(self) -> list[str]:
        """Every resource the plugin must register on this node (MIG mixed: one per profile)."""
        if self.mig_strategy == "mixed":
            return sorted(self.mig_profiles) + ([self.resource] if self.whole_gpus_too else [])
        return [self.resource]

    @property
    def workload_resource(self) -> str:
        """What the workload checks request on this node: the node's own GPU resource; on a MIG mixed node the
        profile with the most devices (ties: by name), so the burst check has the most devices to hand out."""
        if self.mig_strategy == "mixed" and self.mig_profiles:
            return sorted(self.mig_profiles.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        return self.resource

    @property
    def unit(self) -> str:
        """What one device of the workload resource is: "mig" (a MIG device, exclusive), "replica" (a
        time-sliced share of a GPU: replicas of one GPU share its UUID) or "gpu" (a whole GPU)."""
        if self.mig_strategy in ("mixed", "single"):
            return "mig"
        return "replica" if self.replicas > 1 else "gpu"

    @property
    def per_device(self) -> int:
        """How many pods may hold one physical device (or MIG device) of the workload resource at once."""
        if self.unit == "mig":
            return self.mig_replicas.get(self.workload_resource, 1)
        return self.replicas if self.unit == "replica" else 1

    def sockets(self, override: str = "") -> list[str]:
        """The socket file(s) the plugin serves in the kubelet's device-plugins directory (one per resource)."""
        if override:
            return [override]
        return [vendors.socket_name(self.vendor, r) for r in self.resources]

    def describe(self) -> str:
        """One line for the report: the node's pool shape as the suite understood it."""
        if self.mig_strategy == "mixed":
            return "MIG mixed: " + ", ".join(f"{r}={n}" for r, n in sorted(self.mig_profiles.items()))
        shape = f"{self.physical if self.physical is not None else '?'} GPU(s)"
        if self.mig_strategy == "single":
            shape = f"{self.physical if self.physical is not None else '?'} MIG device(s) (MIG single)"
        if self.replicas > 1:
            shape += f" x {self.replicas} replicas"
        return f"{self.resource}: {shape}"


def _count_label(labels: dict[str, str], vendor: str) -> tuple[int | None, str]:
    """Physical GPUs from the labels the vendor's discovery publishes, and which label said so.

    NVIDIA: GFD's nvidia.com/gpu.count (NVIDIA/k8s-device-plugin internal/lm/resource.go). Intel: the NFD rule's
    gpu.intel.com/device.count (intel-device-plugins-for-kubernetes deployments/nfd/overlays/node-feature-rules/
    node-feature-rules.yaml). AMD: the node labeller's per-device-ID counts beta.amd.com/gpu.device-id.<id>=<n>,
    summed (ROCm/k8s-device-plugin cmd/k8s-node-labeller/main.go)."""
    if vendor == vendors.INTEL:
        n = qty(labels.get("gpu.intel.com/device.count"))
        if n is not None:
            return n, "NFD label gpu.intel.com/device.count"
        # device.count comes from the Max/Flex rules only; the generic rule counts per PCI class and device ID
        ids = [qty(v) for k, v in labels.items() if k.startswith("gpu.intel.com/device-id.") and k.endswith(".count")]
        vals = [v for v in ids if v is not None]
        return (sum(vals) if vals else None), "NFD labels gpu.intel.com/device-id.<class>-<device>.count"
    if vendor == vendors.AMD:
        ids = {k: qty(v) for k, v in labels.items() if k.startswith(("beta.amd.com/gpu.device-id.",
                                                                       "amd.com/gpu.device-id."))}
        vals = [v for v in ids.values() if v is not None]
        if not vals:
            return None, "AMD node labeller label beta.amd.com/gpu.device-id.<id>"
        # The labeller publishes the same counts under the beta. and the GA prefix: count one of them.
        beta = [v for k, v in ids.items() if k.startswith("beta.") and v is not None]
        return sum(beta or vals), "AMD node labeller labels (beta.)amd.com/gpu.device-id.<id>"
    return qty(labels.get(f"{GFD}gpu.count")), f"GFD label {GFD}gpu.count"


def shared_dev_num(plugin_pods: list[dict]) -> int | None:
    """Intel's -shared-dev-num=N from the plugin pods' args: each GPU is advertised N times (the operator passes
    the GpuDevicePlugin's sharedDevNum as this flag; intel-device-plugins-for-kubernetes cmd/gpu_plugin/
    gpu_plugin.go and pkg/controllers/gpu/controller.go)."""
    for p in plugin_pods:
        for c in p.get("spec", {}).get("containers") or []:
            argv = [*(c.get("command") or []), *(c.get("args") or [])]
            for i, a in enumerate(argv):
                flag, eq, val = a.lstrip("-").partition("=")
                if flag == "shared-dev-num":
                    val = val if eq else (argv[i + 1] if i + 1 < len(argv) else "")
                    if qty(val):
                        return qty(val)
    return None


def expectation(node: dict, cfg: Config | dict, plugin_pods: list[dict] | None = None) -> Expectation:
    """What `node` must advertise, from the config and the node's own labels. `cfg` is the effective Config (or
    a recorded config's plain data). With the `auto` settings each node's labels decide its shape (plain, time-sliced, MIG), so one config
    covers a cluster of mixed pools. `plugin_pods` (the node's plugin pods) give Intel's sharedDevNum."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    capacity = node.get("status", {}).get("capacity", {}) or {}
    cfg = view(cfg)
    resource = cfg.get("resourceName")
    vendor = cfg.get("vendor")
    name = node.get("metadata", {}).get("name", "?")
    if vendor == vendors.INTEL and resource not in capacity:
        # The kernel driver (i915 or xe) is a property of each node: one config covers both kinds of node
        # (intel-device-plugins-for-kubernetes cmd/gpu_plugin: the resource is named after the driver in use).
        resource = next((r for r in ("gpu.intel.com/i915", "gpu.intel.com/xe") if r in capacity), resource)

    eg = cfg.get("nodes.expectedGpus")
    physical: int | None
    if isinstance(eg, int):
        physical, source = eg, f"config nodes.expectedGpus={eg}"
    elif isinstance(eg, dict):
        pool = labels.get(cfg.get("nodes.poolLabel"), "")
        physical = eg.get(pool)
        source = f"config nodes.expectedGpus[{pool!r}]={physical}" if physical is not None else \
            f"no nodes.expectedGpus entry for pool {pool!r} (label {cfg.get('nodes.poolLabel')})"
    else:
        physical, label = _count_label(labels, vendor)
        source = f"{label}={physical}" if physical is not None else \
            f"no {label} on {name} (set nodes.expectedGpus)"

    strategy = cfg.get("sharing.strategy")
    if strategy == "auto":
        strategy = labels.get(f"{GFD}gpu.sharing-strategy", "none") if vendor == vendors.NVIDIA else "none"
    replicas_cfg = cfg.get("sharing.replicas")
    if vendor == vendors.INTEL and replicas_cfg == "auto" and cfg.get("sharing.strategy") == "auto":
        n = shared_dev_num(plugin_pods or [])
        strategy, replicas_cfg = ("time-slicing", n) if n and n > 1 else ("none", 1)
    if strategy in ("none", ""):
        replicas = 1
    elif replicas_cfg == "auto":
        replicas = max(qty(labels.get(f"{GFD}gpu.replicas")) or 1, 1)
    else:
        replicas = int(replicas_cfg)
    renamed = cfg.get("sharing.renamed")
    if renamed == "auto":
        # GFD labels do not say whether the shared resource was renamed; the plugin advertises one of the two
        # names (NVIDIA/k8s-device-plugin api/config/v1/replicas.go, renameByDefault): take the one present.
        renamed = f"{resource}.shared" in capacity and resource not in capacity
    if strategy not in ("none", "") and renamed and not resource.endswith(".shared"):
        resource = f"{resource}.shared"

    mig = cfg.get("mig.strategy")
    if mig == "auto":
        mig = labels.get(f"{GFD}mig.strategy", "none") if vendor == vendors.NVIDIA else "none"
    profiles: dict[str, int] = {}
    mig_replicas: dict[str, int] = {}
    if mig == "mixed":
        domain = resource.split("/")[0]
        profiles = {f"{domain}/{k}": int(v) for k, v in (cfg.get("mig.profiles") or {}).items()}
        if not profiles:
            # GFD: nvidia.com/mig-<profile>.count per profile; profiles such as 1g.10gb, 1g.10gb.me, 1c.3g.20gb
            # (NVIDIA/k8s-device-plugin internal/lm/resource.go, the mig-<profile> resource names)
            for k, v in labels.items():
                m = re.match(rf"^{re.escape(GFD)}(mig-.+)\.count$", k)
                if m and qty(v):
                    # Time-sliced MIG devices: advertised = count x mig-<p>.replicas, as <p>.shared when renamed;
                    # GFD keys its labels by the original name (internal/lm/resource.go, replicationInfo).
                    base, r = f"{domain}/{m.group(1)}", max(qty(labels.get(f"{GFD}{m.group(1)}.replicas")) or 1, 1)
                    key = f"{base}.shared" if r > 1 and f"{base}.shared" in capacity and base not in capacity else base
                    profiles[key] = (qty(v) or 0) * r
                    if r > 1:
                        mig_replicas[key] = r
        if not profiles and cfg.get("mig.strategy") == "auto":
            # The GPU operator labels every node with the cluster's MIG strategy, also nodes whose GPUs are not
            # in MIG mode (NVIDIA/k8s-device-plugin internal/lm/strategy.go): those advertise whole GPUs.
            mig = "none"
    return Expectation(resource, physical, replicas, source, mig, profiles, vendor,
                       whole_gpus_too=mig == "mixed" and resource in capacity, mig_replicas=mig_replicas)


@dataclass(frozen=True)
class Finding:
    code: str
    message: str


def advertised(node: dict, resource: str) -> tuple[int | None, int | None]:
    """(capacity, allocatable) of one resource in the node's status; None where it is absent."""
    st = node.get("status", {})
    return qty((st.get("capacity") or {}).get(resource)), qty((st.get("allocatable") or {}).get(resource))


def extended_resources(node: dict) -> list[str]:
    """The node's extended resource keys (vendor/name), for messages: hugepages and kubernetes.io/ keys left out."""
    cap_all = node.get("status", {}).get("capacity", {}) or {}
    return sorted(k for k in cap_all if "/" in k and not k.startswith(("hugepages-", "kubernetes.io/")))


def registration_finding(node: dict, resource: str, exp: Expectation) -> Finding | None:
    """Whether the plugin registered `resource` with this node's kubelet at all: GPU-F01 when the resource is absent
    from capacity, GPU-F02 when its capacity or allocatable is 0 although devices are expected; None otherwise.
    The one verdict behind both the capacity check (each resource) and the count check (before counting)."""
    name = node["metadata"]["name"]
    cap, alloc = advertised(node, resource)
    want = exp.mig_profiles.get(resource, exp.advertised if resource == exp.resource else None)
    if cap is None:
        return Finding("GPU-F01-NOT-REGISTERED",
                       f"{name}: {resource} is absent from node capacity although the node is a GPU node "
                       f"({exp.describe()}; {exp.source}): the plugin never registered it with this kubelet (pod "
                       f"Running is not proof of registration); extended resources present: "
                       f"{extended_resources(node) or 'none'}")
    if (not cap or not alloc) and (want is None or want > 0):
        return Finding("GPU-F02-CAPACITY-ZERO",
                       f"{name}: {resource} capacity={cap} allocatable={alloc}, expected "
                       f"{want if want is not None else '> 0'} ({exp.source}): the plugin lost or never "
                       "re-established its registration")
    return None


def check_counts(node: dict, exp: Expectation, unhealthy_ids: list[str] | None = None) -> list[Finding]:
    """Compares what the node advertises with `exp`. An empty list means conformant."""
    name = node["metadata"]["name"]
    status = node.get("status", {})
    cap_all, alloc_all = status.get("capacity", {}) or {}, status.get("allocatable", {}) or {}
    cap, alloc = advertised(node, exp.resource)
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
        # Under mixed, GPUs not in MIG mode stay nvidia.com/gpu (NVIDIA/k8s-device-plugin internal/rm/device_map.go);
        # with MIG devices present at least one GPU is in MIG mode, so fewer whole GPUs than physical ones.
        if not out and exp.mig_profiles and cap is not None and exp.physical is not None and cap > exp.physical - 1:
            out.append(Finding("GPU-F04-OVERADVERTISED", f"{name}: advertises {cap} whole {exp.resource} beside MIG "
                               f"devices, but the node has {exp.physical} GPUs ({exp.source}) and at least one is "
                               "in MIG mode"))
        if cap is not None and alloc is not None and cap > alloc:
            out.append(Finding("GPU-F03-UNHEALTHY-DEVICES", f"{name}: {cap - alloc} of {cap} whole {exp.resource} "
                               f"devices are Unhealthy (capacity={cap}, allocatable={alloc})"))
        return out

    if cap is None:
        vendor = exp.resource.split("/")[0]
        mig_keys = [k for k in extended_resources(node) if k.startswith(f"{vendor}/mig-") and (qty(cap_all[k]) or 0) > 0]
        if mig_keys:
            out.append(Finding("GPU-F09-MIG-MISMATCH",
                               f"{name}: advertises MIG resources {mig_keys} (MIG strategy mixed) instead of "
                               f"{exp.resource}, but the expected MIG strategy is {exp.mig_strategy}"))
            return out
    if (unregistered := registration_finding(node, exp.resource, exp)) is not None:
        return [unregistered]
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
        if k.startswith(vendor) and k not in expected and (qty(v) or 0) > 0 and vendors.is_gpu_resource(exp.vendor, k):
            out.append(Finding("GPU-F04-STALE-RESOURCE",
                               f"{name}: advertises {k}={v}, which the configuration does not expect "
                               f"(expected resource keys: {sorted(expected)})"))
    return out


def free_gpus(node: dict, resource: str, pods: list[dict]) -> int:
    """allocatable - requests of non-terminal pods bound to the node (DESIGN.md section 4)."""
    alloc = qty((node.get("status", {}).get("allocatable") or {}).get(resource)) or 0
    name = node["metadata"]["name"]
    used = sum(pod_request(p, resource) for p in pods if p.get("spec", {}).get("nodeName") == name
               and not is_terminal(p))
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
