"""How many GPUs a node must advertise, and what it means when it advertises something else.

Rules: capacity = all devices the plugin lists, allocatable = the Healthy ones;
expected advertised = physical x max(replicas, 1); with sharing renamed the resource is `<name>.shared`;
MIG mixed advertises `<vendor>/mig-<profile>` per profile. Physical counts come from config or GFD labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from . import vendors
from .config import Config, view
from .pods import is_terminal

GFD = "nvidia.com/"


# A resource.Quantity as the API server writes it (k8s.io/apimachinery pkg/api/resource/quantity.go): a signed
# decimal number, then a binary-SI suffix (Ki..Ei), a decimal-SI one (m, k, M..E) or a decimal exponent (e3).
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d{1,4})?$")
_SUFFIX = {"": 0, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64_MAX = 2**63 - 1  # a Quantity's largest integer value (int64)


def parse_qty(v: Any) -> int:
    """A device count written as a Kubernetes quantity -> int, or ValueError saying why it is malformed.

    Extended resources are integers, but the API server canonicalises them as quantities: 1000 devices are
    written "1k", and a label or an older object may say "2e3". Fractions ("500m", "1.5"), negative numbers,
    anything past int64 and anything that is not a quantity ("eight", "4_0", "") are malformed."""
    text = str(v) if not isinstance(v, bool) else repr(v)
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"{text!r} is not an integer quantity")
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        value = number * (1 << _BINARY[suffix])
    else:
        value = number.scaleb(_SUFFIX[suffix] if suffix in _SUFFIX else int(suffix[1:]))  # "E" is exa, "E3" 10^3
    if value != value.to_integral_value() or value < 0 or value > _INT64_MAX:
        raise ValueError(f"{text!r} is not a whole, non-negative count")
    return int(value)


def qty(v: Any) -> int | None:
    """An extended-resource quantity ("4", "1k") as int; None when absent or malformed (parse_qty says why)."""
    if v is None:
        return None
    try:
        return parse_qty(v)
    except (ValueError, ArithmeticError):
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
    # where each number came from, for the report: "resource", "physical", "replicas", "mig" -> the label, config
    # key or object that said so (the node's own objects decide; a cluster-wide label is evidence only)
    basis: dict[str, str] = field(default_factory=dict)
    malformed: str = ""  # the count label whose value is not a count ("key='value' (malformed: why)"), if any

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
            # mixed: per profile; single: the MIG devices are nvidia.com/gpu, replicated like whole GPUs
            return self.mig_replicas.get(self.workload_resource, self.replicas if self.mig_strategy == "single" else 1)
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



@dataclass(frozen=True)
class Offered:
    """What a node's plugin or driver offers of its GPUs, as the count and PCI checks compare it with the labels and
    the bus: `count` in units of `per_gpu` per GPU (None where it does not count them), MIG devices where
    `mig_devices`; and how many of them are out of service (Unhealthy, tainted), named where known. A device
    plugin's capacity (offered, and the count check's own), a DRA driver's published GPUs (dradevices.published)."""

    what: str  # the offer, in words ("capacity nvidia.com/gpu", "GPUs gpu.nvidia.com publishes")
    count: int | None
    per_gpu: int = 1
    mig_devices: bool = False  # the count counts MIG devices (a device plugin under the single MIG strategy)
    out_of_service: int = 0  # devices out of service
    out_named: list[str] = field(default_factory=list)  # which, where known
    out_how: str = ""  # the words after their number: "of 4 nvidia.com/gpu devices are Unhealthy (...)"


def offered(node: dict, exp: Expectation) -> Offered:
    """A device plugin's offer: the node's capacity of its GPU resource, x replicas per GPU; under a MIG strategy
    it counts MIG devices, which vary per GPU, so not GPUs."""
    cap = qty(((node.get("status") or {}).get("capacity") or {}).get(exp.resource))
    return Offered(f"capacity {exp.resource}", cap if exp.mig_strategy == "none" else None, exp.replicas,
                   exp.mig_strategy == "single")

def _malformed(labels: dict[str, str], keys: list[str]) -> str | None:
    """The first of `keys` whose label value is not a count, as "key='value' (malformed: why)"."""
    for k in keys:
        if k in labels:
            try:
                parse_qty(labels[k])
            except (ValueError, ArithmeticError) as e:
                return f"{k}={labels[k]!r} (malformed: {e})"
    return None


def _count_label(labels: dict[str, str], vendor: str) -> tuple[int | None, str]:
    """Physical GPUs from the labels the vendor's discovery publishes, and which label said so; with no count, the
    label text says whether the label is missing or malformed (a value that is not an integer is never read as
    "no label", and neither is ever a pass: counts.Expectation.advertised is then None).

    NVIDIA: GFD's nvidia.com/gpu.count (NVIDIA/k8s-device-plugin internal/lm/resource.go). Intel: the NFD rule's
    gpu.intel.com/device.count (intel-device-plugins-for-kubernetes deployments/nfd/overlays/node-feature-rules/
    node-feature-rules.yaml). AMD: the node labeller's per-device-ID counts beta.amd.com/gpu.device-id.<id>=<n>,
    summed (ROCm/k8s-device-plugin cmd/k8s-node-labeller/main.go)."""
    if vendor == vendors.INTEL:
        bad = _malformed(labels, sorted(k for k in labels if k.startswith("gpu.intel.com/device")
                                        and k.endswith(".count")))
        if bad:
            return None, f"NFD label {bad}"
        n = qty(labels.get("gpu.intel.com/device.count"))
        # device.count comes from the Max/Flex rules only and counts only those cards; the generic rules count every
        # Intel GPU of class 0300 / 0380 (one .count label per class, on its first device ID): the sum covers an
        # integrated GPU beside a Flex card too (platform-labeling-rules.yaml, intel.gpu.generic.count.300/380)
        generic = sum(c for c, _ in _intel_classes(labels).values() if c is not None) or None
        if n is not None and (generic is None or generic <= n):
            return n, "NFD label gpu.intel.com/device.count"
        return generic, "NFD labels gpu.intel.com/device-id.<class>-<device>.count" + ("" if generic else " (missing)")
    if vendor == vendors.AMD:
        keys = sorted(k for k in labels if k.startswith(("beta.amd.com/gpu.device-id.", "amd.com/gpu.device-id.")))
        bad = _malformed(labels, keys)
        if bad:
            return None, f"AMD node labeller label {bad}"
        ids = {k: qty(labels[k]) for k in keys}
        vals = [v for v in ids.values() if v is not None]
        if not vals:
            # the labeller writes them only with its -device-id flag (ROCm/k8s-device-plugin cmd/k8s-node-labeller
            # main.go; the chart's labeller is off by default; the GPU operator's passes -device-id)
            return None, "AMD node labeller label beta.amd.com/gpu.device-id.<id> (missing: written only with " \
                         "-device-id)"
        # The labeller publishes the same counts under the beta. and the GA prefix: count one of them.
        beta = [v for k, v in ids.items() if k.startswith("beta.") and v is not None]
        return sum(beta or vals), "AMD node labeller labels (beta.)amd.com/gpu.device-id.<id>"
    key = f"{GFD}gpu.count"
    bad = _malformed(labels, [key])
    if bad:
        return None, f"GFD label {bad}"
    n = qty(labels.get(key))
    return n, f"GFD label {key}" + ("" if n is not None else " (missing)")


def shared_dev_num(plugin_pods: list[dict]) -> int | None:
    """Intel's -shared-dev-num=N from the plugin pods' args: each GPU is advertised N times (the operator passes
    the GpuDevicePlugin's sharedDevNum as this flag; intel-device-plugins-for-kubernetes cmd/gpu_plugin/
    gpu_plugin.go and pkg/controllers/gpu/controller.go)."""
    n = plugin_arg(plugin_pods, "shared-dev-num")
    return qty(n) or None


def plugin_arg(plugin_pods: list[dict], name: str) -> str | None:
    """The value of the plugin's flag -name / --name (as `-name=v` or `-name v`, also inside a `sh -c` string)."""
    for p in plugin_pods:
        for c in p.get("spec", {}).get("containers") or []:
            argv = [w for a in [*(c.get("command") or []), *(c.get("args") or [])] for w in str(a).split()]
            val = next((v for v in vendors.flag_values(argv, name) if v), None)
            if val:
                return val
    return None


def _intel_classes(labels: dict[str, str]) -> dict[str, tuple[int | None, list[str]]]:
    """PCI class -> (Intel GPUs of that class, the device IDs present) from NFD's generic rules: a
    gpu.intel.com/device-id.<class>-<device>.present label per device ID and one .count label per class, on its
    first device (intel-device-plugins-for-kubernetes@94a91bc deployments/nfd/overlays/node-feature-rules/
    platform-labeling-rules.yaml)."""
    out: dict[str, tuple[int | None, list[str]]] = {}
    for k, v in sorted(labels.items()):
        m = re.match(r"^gpu\.intel\.com/device-id\.([0-9a-f]{4})-([0-9a-f]{4})\.(count|present)$", k)
        if m:
            n, ids = out.get(m.group(1), (None, []))
            ids = ids if m.group(2) in ids else [*ids, m.group(2)]
            out[m.group(1)] = ((qty(v) if m.group(3) == "count" else n), ids)
    return out


def intel_cards(node: dict, resource: str, replicas: int, physical: int, source: str, plugin_pods: list[dict],
                from_labels: bool) -> tuple[int, str]:
    """The cards the Intel plugin should advertise as `resource` on this node, from the label count `physical`,
    narrowed by what the labels cannot tell apart; the source says how. Where only bounds are known, a node whose
    advertised cards lie within them gets those as its count (the source says the count is bounded, not exact).

    - -allow-ids / -deny-ids drop cards by PCI device ID (cmd/gpu_plugin/gpu_plugin.go filterOutInvalidCards);
      the labels count per PCI class, so a class with several device IDs is only bounded.
    - A PF with SR-IOV VFs is skipped and its VFs advertised (gpu_plugin.go scan, isPfWithVfs;
      cmd/internal/pluginutils/sriov.go): with NFD's pci-<class>_8086.sriov.capable label, P PFs with VFs among N
      counted functions leave N - P cards, at least half of N.
    - Cards on the other driver (i915 beside xe) are advertised under the other resource: the labels do not say
      which card has which driver, so both resources together are judged against the count."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    capacity = node.get("status", {}).get("capacity", {}) or {}
    lo = hi = physical
    notes: list[str] = []
    flt = next(((f, v) for f in ("allow-ids", "deny-ids") if (v := plugin_arg(plugin_pods, f))), None)
    classes = _intel_classes(labels)
    if flt and from_labels and classes:
        want = {i.strip().lower().removeprefix("0x") for i in flt[1].split(",") if i.strip()}
        lo = hi = 0
        for n, ids in classes.values():
            keep = [i for i in ids if (i in want) == (flt[0] == "allow-ids")]
            n = n if n is not None else len(ids)
            if keep:
                lo, hi = lo + (n if len(keep) == len(ids) else len(keep)), hi + n - (len(ids) - len(keep))
        notes.append(f"-{flt[0]}={flt[1]} leaves {lo if lo == hi else f'{lo} to {hi}'} of them")
    if from_labels and any(k.startswith("feature.node.kubernetes.io/pci-03") and k.endswith("_8086.sriov.capable")
                           and v == "true" for k, v in labels.items()):
        lo = (lo + 1) // 2
        notes.append("SR-IOV capable: a PF with VFs is not advertised, its VFs are (isPfWithVfs)")
    other = next((r for r in vendors.INTEL_DRIVER_RESOURCES if r != resource and (qty(capacity.get(r)) or 0) > 0),
                 None)
    if other and resource in capacity:
        k = -(-(qty(capacity.get(other)) or 0) // max(replicas, 1))
        lo, hi = max(lo - k, 0), max(hi - k, 0)
        notes.append(f"{k} card(s) advertised as {other} (the labels do not say which card runs which driver: "
                     f"{resource} and {other} together are judged against the count)")
    if not notes:
        return physical, source
    cap = qty(capacity.get(resource)) or 0
    cards = cap // max(replicas, 1)
    n = cards if lo <= cards <= hi else (hi if cards > hi else lo)
    bound = f"; bounded, not exact: {lo} to {hi}" if lo != hi else ""
    return n, f"{source}, {'; '.join(notes)}: {n} for {resource}{bound}"


def amd_resource(capacity: dict, labels: dict[str, str], resource: str) -> str:
    """The node's own AMD GPU resource: with -resource_naming_strategy=mixed a partition-capable node advertises
    amd.com/<compute>_<memory> instead of amd.com/gpu (ROCm/k8s-device-plugin@ed76468 cmd/k8s-device-plugin/
    main.go getResourceList; the GPU operator defaults to mixed for PF/VF passthrough, ROCm/gpu-operator@6df13c1
    internal/plugin/plugin.go). The one named by the node's partition label first."""
    found = vendors.amd_partition_resources(capacity)
    mode = f"amd.com/{labels.get(vendors.AMD_PARTITION_LABEL, '')}"
    return mode if mode in found else (found[0] if found else resource)


def amd_partitions(labels: dict[str, str], capacity: dict, resource: str, physical: int,
                   source: str) -> tuple[int | None, str]:
    """Physical GPUs x partitions per GPU: the AMD plugin lists each compute partition as a device, whole-GPU
    (single) or partition (mixed) naming alike. The mode comes from the mixed resource name or the labeller's
    amd.com/gpu.compute-memory-partition label; None (count unknown, said in the source) where the partition count
    of the mode or model is not known and the node advertises more devices than GPUs."""
    name = resource.split("/", 1)[1]
    mode = name if resource in vendors.amd_partition_resources({resource: 1}) else labels.get(
        vendors.AMD_PARTITION_LABEL, "")
    compute = mode.split("_")[0]
    per = vendors.AMD_PARTITIONS_PER_MODE.get(compute)
    ids = {k.rsplit(".", 1)[1] for k in labels if k.startswith("beta.amd.com/gpu.device-id.")}
    if compute == "cpx":
        xcds = {vendors.AMD_XCDS.get(i) for i in ids}
        per = xcds.pop() if len(xcds) == 1 else None
    cap = qty(capacity.get(resource)) or 0
    if per is not None:
        return physical * per, f"{source} GPUs x {per} {compute.upper()} partitions each ({mode})" if per > 1 else \
            source
    if mode:
        why = f"partition mode {mode}: partitions per GPU not known for this model"
    elif cap > physical > 0 and cap % physical == 0 and (ids & set(vendors.AMD_XCDS) or labels.get(
            "amd.com/gpu.compute-partitioning-supported") == "true"):
        why = (f"advertises {cap} devices for {physical} GPUs and {vendors.AMD_PARTITION_LABEL} is absent (the "
               "labeller writes it only with -compute-memory-partition): partitions per GPU unknown")
    else:
        return physical, source
    return None, f"{source} GPUs, {why}: count not verified (set nodes.expectedGpus to the device count)"


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
    if vendor == vendors.AMD and resource not in capacity:
        resource = amd_resource(capacity, labels, resource)  # the mixed naming strategy: amd.com/cpx_nps4 ...

    eg = cfg.get("nodes.expectedGpus")
    physical: int | None
    malformed = ""
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
            f"{label} on {name} (set nodes.expectedGpus)"
        if physical is None and "(malformed:" in label:  # _malformed's text: a value that is not a count
            malformed = label

    strategy = cfg.get("sharing.strategy")
    if strategy == "auto":
        strategy = labels.get(f"{GFD}gpu.sharing-strategy", "none") if vendor == vendors.NVIDIA else "none"
    replicas_cfg = cfg.get("sharing.replicas")
    if vendor == vendors.INTEL and replicas_cfg == "auto" and cfg.get("sharing.strategy") == "auto":
        n = shared_dev_num(plugin_pods or [])
        strategy, replicas_cfg = ("time-slicing", n) if n and n > 1 else ("none", 1)
    if vendor == vendors.INTEL and physical is not None:  # filtered cards, SR-IOV VFs, i915 beside xe
        physical, source = intel_cards(node, resource, int(replicas_cfg) if strategy not in ("none", "") and str(
            replicas_cfg).isdigit() else 1, physical, source, plugin_pods or [], not isinstance(eg, (int, dict)))
    if vendor == vendors.AMD and physical is not None:  # partitioned GPUs: each partition is a device
        physical, source = amd_partitions(labels, capacity, resource, physical, source)
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

    resource_basis = f"config resourceName={cfg.get('resourceName')}" + (
        "" if resource == cfg.get("resourceName") else f"; the node advertises {resource}")
    replicas_basis = (f"sharing strategy {strategy or 'none'} (config sharing.strategy={cfg.get('sharing.strategy')}"
                      f", sharing.replicas={cfg.get('sharing.replicas')}; labels {GFD}gpu.sharing-strategy="
                      f"{labels.get(f'{GFD}gpu.sharing-strategy')}, {GFD}gpu.replicas={labels.get(f'{GFD}gpu.replicas')})")
    mig, mig_basis = _mig_strategy(cfg.get("mig.strategy"), labels, vendor)
    profiles: dict[str, int] = {}
    mig_replicas: dict[str, int] = {}
    if mig == "mixed":
        domain = resource.split("/")[0]
        profiles = {f"{domain}/{k}": int(v) for k, v in (cfg.get("mig.profiles") or {}).items()}
        if profiles:
            mig_basis += "; profiles from config mig.profiles"
        else:
            profiles, mig_replicas, folded = _gfd_mig_profiles(labels, capacity, domain)
            mig_basis += "; profiles from GFD labels nvidia.com/mig-<profile>.count" + (
                f" ({'; '.join(folded)})" if folded else "")
        if not profiles and cfg.get("mig.strategy") == "auto":
            mig, mig_basis = "none", f"{mig_basis}: no MIG device on this node, so its GPUs are whole GPUs"
    basis = {"resource": resource_basis, "physical": source, "replicas": replicas_basis, "mig": mig_basis}
    return Expectation(resource, physical, replicas, source, mig, profiles, vendor,
                       whole_gpus_too=mig == "mixed" and resource in capacity, mig_replicas=mig_replicas, basis=basis,
                       malformed=malformed)


def _mig_strategy(configured: str, labels: dict[str, str], vendor: str) -> tuple[str, str]:
    """A node's MIG shape and what said so. A configured strategy is taken as stated. With `auto` the node's own
    labels decide, never the strategy label alone: GFD writes nvidia.com/mig.strategy on every GPU node from the
    plugin's configured strategy, MIG or not (NVIDIA/k8s-device-plugin v0.19.3 internal/lm/strategy.go,
    mig-strategy.go NewResourceLabeler), and the GPU operator's default is `single` (NVIDIA/gpu-operator
    deployments/gpu-operator/values.yaml mig.strategy). Under `single` GFD labels MIG devices as nvidia.com/gpu with
    the product `<model>-MIG-<profile>` (resource.go NewMIGResourceLabeler, baseLabeler), and with no GPU in MIG
    mode it writes the whole GPUs' labels only (newMigStrategySingleLabeler returns empty{}); under `mixed` the
    MIG devices get nvidia.com/mig-<profile>.* labels (decided by the caller from those labels)."""
    if configured != "auto":
        return configured, f"config mig.strategy={configured}"
    if vendor != vendors.NVIDIA:
        return "none", f"vendor {vendor}: no MIG"
    label = labels.get(f"{GFD}mig.strategy")
    if label is None:
        return "none", f"no {GFD}mig.strategy label"
    said = f"{GFD}mig.strategy={label} (the plugin's configured strategy, written on every GPU node)"
    if label == "single":
        product = labels.get(f"{GFD}gpu.product", "")
        if "-MIG-" in product:
            return "single", f"{said}; {GFD}gpu.product={product} names a MIG profile"
        return "none", f"{said}; {GFD}gpu.product={product or '(absent)'} names no MIG profile: whole GPUs"
    return label, said


# A MIG profile name as GFD and the plugin print it ('+' already '.', go-nvlib device/mig_profile.go String,
# k8s-device-plugin internal/resource/nvml-mig-device.go GetName): an optional "<C>c." compute-instance prefix,
# "<G>g.<GB>gb", then attributes ".me", ".me.all", ".gfx" or "-me".
_PROFILE = re.compile(r"^mig-(?:(\d+)c\.)?(\d+g\.\d+gb)((?:[.-][a-z]+)*)$")


def _gfd_mig_profiles(labels: dict[str, str], capacity: dict, domain: str) -> tuple[dict, dict, list[str]]:
    """MIG mixed: resource -> expected count, resource -> replicas (where > 1), and how profiles were folded.

    GFD labels every MIG profile nvidia.com/mig-<profile>.count (NVIDIA/k8s-device-plugin internal/lm/
    mig-strategy.go newMigStrategyMixedLabeler). The plugin advertises C == G profiles only (internal/rm/rm.go
    AddDefaultResourcesToConfig), and before v0.20.0 its resource patterns were unanchored (fixed by commit
    0dfdfb979), so a device with attributes (1g.10gb+me) or a compute-instance profile (1c.3g.40gb) landed under
    its base profile's resource (mig-1g.10gb, mig-3g.40gb). Which of the two a node runs is read from what it
    advertises: a profile advertised under its own name is counted there; otherwise its devices are expected
    under the base profile (a plugin before v0.20.0), or (compute-instance profiles on v0.20.0+) nowhere."""
    profiles: dict[str, int] = {}
    mig_replicas: dict[str, int] = {}
    elsewhere: dict[str, list[tuple[str, int, bool]]] = {}  # base resource -> (profile, devices, has attributes)
    for k, v in sorted(labels.items()):
        m = re.match(rf"^{re.escape(GFD)}(mig-.+)\.count$", k)
        if not m or not qty(v):
            continue
        # Time-sliced MIG devices: advertised = count x mig-<p>.replicas, as <p>.shared when renamed; GFD keys its
        # labels by the original name (internal/lm/resource.go, replicationInfo).
        base, r = f"{domain}/{m.group(1)}", max(qty(labels.get(f"{GFD}{m.group(1)}.replicas")) or 1, 1)
        key = f"{base}.shared" if r > 1 and f"{base}.shared" in capacity and base not in capacity else base
        n = (qty(v) or 0) * r
        shape = _PROFILE.match(m.group(1))
        if shape and (shape.group(1) or shape.group(3)) and key not in capacity:
            elsewhere.setdefault(f"{domain}/mig-{shape.group(2)}", []).append((m.group(1), n, bool(shape.group(3))))
            continue
        profiles[key] = n
        if r > 1:
            mig_replicas[key] = r
    folded = []
    for base, devs in sorted(elsewhere.items()):
        if (qty(capacity.get(base)) or 0) > profiles.get(base, 0):  # the base resource holds them: before v0.20.0
            profiles[base] = profiles.get(base, 0) + sum(n for _, n, _ in devs)
            folded.append(f"{', '.join(p for p, _, _ in devs)} counted under {base} (a plugin before v0.20.0)")
            continue
        for p, n, attributes in devs:
            if attributes:  # v0.20.0+ advertises it under its own name: expected there
                profiles[f"{domain}/{p}"] = n
            else:
                folded.append(f"{p} not expected (a compute-instance profile gets no resource, v0.20.0+)")
    return profiles, mig_replicas, folded


def advertised(node: dict, resource: str) -> tuple[int | None, int | None]:
    """(capacity, allocatable) of one resource in the node's status; None where it is absent."""
    st = node.get("status", {})
    return qty((st.get("capacity") or {}).get(resource)), qty((st.get("allocatable") or {}).get(resource))


def extended_resources(node: dict) -> list[str]:
    """The node's extended resource keys (vendor/name), for messages: hugepages and kubernetes.io/ keys left out."""
    cap_all = node.get("status", {}).get("capacity", {}) or {}
    return sorted(k for k in cap_all if "/" in k and not k.startswith(("hugepages-", "kubernetes.io/")))


def may_count_one_model(node: dict, exp: Expectation) -> bool:
    """Whether `exp`'s count is GFD's nvidia.com/gpu.count and the node advertises more than it allows: GFD labels
    one GPU model per node (the model whose labeler Go map order merges last: k8s-device-plugin v0.19.3 internal/lm/
    mig-strategy.go newGPULabelers), so a node with two models may be healthy; the PCI bus then decides."""
    cap, _ = advertised(node, exp.resource)
    return (exp.vendor == vendors.NVIDIA and exp.mig_strategy == "none" and exp.source.startswith("GFD label")
            and exp.advertised is not None and cap is not None and cap > exp.advertised)


def free_gpus(node: dict, resource: str, pods: list[dict]) -> int:
    """allocatable - requests of non-terminal pods bound to the node."""
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


def free_by_claims(published: int, pods_on_node: list[dict], extended: str = "") -> int:
    """A DRA node's free devices, estimated without reading claims: the devices its driver publishes less one per
    ResourceClaim entry of its non-terminal pods, and, where the driver serves an extended resource name
    (`extended`, KEP-5004), less what its pods request of that name (a claim of another driver, or of several
    devices, makes this an estimate; the scheduler's allocation decides)."""
    live = [p for p in pods_on_node if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    held = sum(len((p.get("spec") or {}).get("resourceClaims") or []) for p in live)
    if extended:
        held += sum(pod_request(p, extended) for p in live)
    return max(published - held, 0)
