"""Each GPU node's allocation path ("device-plugin", "dra", "none"), decided from that node's own labels, capacity
and the ResourceSlices naming it (pure). Only device-plugin nodes are certified; the others are left out with the
reason. The rules and their upstream sources: docs/vendors.md, "Nodes without a container device plugin"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from . import vendors
from .counts import qty

DEVICE_PLUGIN, DRA, DRA_EXTENDED, NONE = "device-plugin", "dra", "dra-extended-resource", "none"
DRA_PATHS = (DRA, DRA_EXTENDED)  # a DRA driver serves the node's GPUs: its checks allocate through ResourceClaims


def is_dra(path: str) -> bool:
    return path in DRA_PATHS

WORKLOAD_CONFIG = "nvidia.com/gpu.workload.config"  # GPUOP state_manager.go gpuWorkloadConfigLabelKey
VM_WORKLOADS = ("vm-passthrough", "vm-vgpu")  # gpuWorkloadConfigVMPassthrough, gpuWorkloadConfigVMVgpu
DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"  # gpuStateLabels[container]
DEPLOY_DRA_DRIVER = "nvidia.com/gpu.deploy.dra-driver"  # the GPUCluster (DRA) stack's kubelet-plugin selector
SANDBOX_PLUGIN_LABELS = ("nvidia.com/gpu.deploy.sandbox-device-plugin",  # kubevirt (gpuStateLabels[vm-*])
                         "nvidia.com/gpu.deploy.kata-sandbox-device-plugin")  # kata (getEffectiveStateLabels)
SANDBOX_PLUGIN = "nvidia-sandbox-device-plugin-daemonset"  # assets/state-sandbox-device-plugin
# The vendors' GPU DRA drivers (the ResourceSlices' spec.driver): NVIDIA/k8s-dra-driver-gpu (now
# kubernetes-sigs/dra-driver-nvidia-gpu) gpu.nvidia.com; ROCm/gpu-operator docs/dra/dra-driver.md gpu.amd.com;
# intel/intel-resource-drivers-for-kubernetes gpu.intel.com. Slices of another driver (a NIC's, a tenant's test
# driver) say nothing about how the node's GPUs are served: they never take a GPU node out of certification.
GPU_DRA_DRIVERS: dict[str, tuple[str, ...]] = {vendors.NVIDIA: ("gpu.nvidia.com",), vendors.AMD: ("gpu.amd.com",),
                                               vendors.INTEL: ("gpu.intel.com",)}
# The DeviceClass a driver's MIG devices are asked for by (their `type` attribute "mig", parent GPU in `parentUUID`:
# NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go, read at 03af8246; the chart's classes gpu.nvidia.com,
# mig.nvidia.com, vfio.gpu.nvidia.com). Only NVIDIA's driver publishes MIG devices.
MIG_DEVICE_CLASSES: dict[str, str] = {"gpu.nvidia.com": "mig.nvidia.com"}


@dataclass(frozen=True)
class NodeMode:
    path: str  # DEVICE_PLUGIN | DRA | NONE
    reason: str  # one sentence for the report
    evidence: str  # the label or object that decided, e.g. "label nvidia.com/gpu.workload.config=vm-passthrough"

    @property
    def certified_here(self) -> bool:
        """Whether this suite certifies the node: its GPUs come from a container device plugin or a DRA driver
        (behind an extended resource name or not)."""
        return self.path in (DEVICE_PLUGIN, *DRA_PATHS)

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason, "evidence": self.evidence}


def slices_by_node(slices: Iterable[dict]) -> dict[str, list[dict]]:
    """ResourceSlices grouped by spec.nodeName (slices of no single node, e.g. nodeSelector or allNodes, are left
    out: they say nothing about one node's path)."""
    out: dict[str, list[dict]] = {}
    for s in slices:
        node = (s.get("spec") or {}).get("nodeName")
        if node:
            out.setdefault(node, []).append(s)
    return out


def extended_classes(classes: Iterable[dict], vendor: str) -> dict[str, tuple[str, str]]:
    """DeviceClasses (resource.k8s.io/v1) that put one of the vendor's GPU DRA drivers behind an extended resource
    name: driver -> (DeviceClass name, spec.extendedResourceName). KEP-5004 (DRAExtendedResource; kubernetes
    staging/src/k8s.io/api/resource/v1/types.go DeviceClassSpec.ExtendedResourceName): a pod requesting that
    resource on a node where no device plugin advertises it gets a claim from the class. The driver is recognised
    in the class's CEL selectors (`device.driver == "gpu.nvidia.com"`, as NVIDIA's DRA driver's classes select)."""
    out: dict[str, tuple[str, str]] = {}
    for c in classes:
        spec = c.get("spec") or {}
        name = spec.get("extendedResourceName")
        if not name or not vendors.is_gpu_resource(vendor, name):
            continue
        cel = " ".join(str(((sel or {}).get("cel") or {}).get("expression") or "") for sel in spec.get("selectors") or [])
        for driver in GPU_DRA_DRIVERS.get(vendor, ()):
            if f'"{driver}"' in cel or f"'{driver}'" in cel:
                out.setdefault(driver, ((c.get("metadata") or {}).get("name") or "?", name))
    return out


def _drivers(slices: list[dict]) -> str:
    return ", ".join(sorted({(s.get("spec") or {}).get("driver") or "?" for s in slices}))


def _no_container_plugin_label(labels: dict[str, str], dra_slices: bool = False) -> tuple[str, str, str] | None:
    """(path, reason, evidence) when the node's labels say it runs no container device plugin by design. The
    operator's device-plugin label switched off says nothing more where a GPU DRA driver publishes the node's
    devices (`dra_slices`: a DRA driver installed beside the operator, its device plugin turned off per node)."""
    if labels.get(DEPLOY_DRA_DRIVER) == "true":
        return (DRA, "the GPU operator serves this node's GPUs with its DRA driver (GPUCluster stack), not a "
                     "device plugin", f"label {DEPLOY_DRA_DRIVER}=true")
    workload = labels.get(WORKLOAD_CONFIG)
    if workload in VM_WORKLOADS and labels.get(DEPLOY_DEVICE_PLUGIN) != "true":
        sandbox = next((k for k in SANDBOX_PLUGIN_LABELS if labels.get(k) == "true"), None)
        return (NONE, f"GPUs reserved for virtual machines ({workload}): the GPU operator runs its sandbox device "
                      f"plugin ({SANDBOX_PLUGIN}) here, no container device plugin",
                f"label {WORKLOAD_CONFIG}={workload}" + (f", {sandbox}=true" if sandbox else ""))
    if labels.get(DEPLOY_DEVICE_PLUGIN) == "false" and not dra_slices:
        return (NONE, "the device plugin is switched off on this node by its GPU operator deploy label",
                f"label {DEPLOY_DEVICE_PLUGIN}=false")
    return None


def allocation_path(labels: dict[str, str], capacity: dict[str, str], allocatable: dict[str, str],
                    slices: list[dict], vendor: str, extended: dict[str, tuple[str, str]] | None = None) -> NodeMode:
    """The node's allocation path from its own objects; `slices` are the ResourceSlices naming this node.

    1. The vendor's GPU resource advertised (capacity > 0) -> device-plugin: only a device plugin puts it there
       (a DRA extended-resource mapping does not show in capacity). It stays device-plugin with ResourceSlices or a
       label saying otherwise beside it (said in the reason), unless such a label is there and nothing of it is
       allocatable (what a removed plugin leaves behind).
    2. A label saying the node runs no container plugin by design -> dra or none (the device plugin switched off
       by label where the GPU DRA driver publishes the node's devices: as 3).
    3. ResourceSlices of the vendor's GPU DRA driver for the node -> dra; another driver's slices are only noted.
    A dra node whose driver a DeviceClass puts behind the vendor's GPU resource name (`extended`:
    extended_classes; NVIDIA's chart does for gpu.nvidia.com on resource.k8s.io/v1) is dra-extended-resource.
    4. Otherwise device-plugin: a GPU node whose plugin never registered is certified, so that failure is reported.
    """
    labels, capacity, allocatable = labels or {}, capacity or {}, allocatable or {}
    every = slices
    others = [s for s in slices if (s.get("spec") or {}).get("driver") not in GPU_DRA_DRIVERS.get(vendor, ())]
    slices = [s for s in slices if s not in others]
    advertised = {k: v for k, v in capacity.items() if vendors.is_gpu_resource(vendor, k) and (qty(v) or 0) > 0}
    by_label = _no_container_plugin_label(labels, bool(slices))
    live = any((qty(allocatable.get(k)) or 0) > 0 for k in advertised)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(advertised.items()))
    if advertised and (live or by_label is None):
        notes = []
        if by_label is not None:
            notes.append(f"although {by_label[2]} says otherwise")
        if every:
            notes.append(f"it also has {len(every)} ResourceSlice(s) of {_drivers(every)} (a GPU DRA driver's "
                         "beside the plugin fails the capacity check: FAIL-GPU-OFFERED-TWICE)")
        return NodeMode(DEVICE_PLUGIN, "a device plugin advertises the node's GPUs"
                        + (f" ({'; '.join(notes)})" if notes else ""), f"capacity {shown}")
    stale = f"; capacity {shown} with none allocatable is left from an earlier plugin" if advertised else ""
    behind = next((extended[d] for d in sorted({(s.get("spec") or {}).get("driver") for s in slices})
                   if d in (extended or {})), None)
    if by_label is not None:
        path, reason, evidence = by_label
        if slices:
            reason += f"; {len(slices)} ResourceSlice(s) of {_drivers(slices)}"
        if path == DRA and behind is not None:
            return NodeMode(DRA_EXTENDED, reason + f"; DeviceClass {behind[0]} serves pods requesting {behind[1]} "
                            f"from it (extended resource){stale}", f"{evidence}; DeviceClass {behind[0]} "
                            f"extendedResourceName={behind[1]}")
        return NodeMode(path, reason + stale, evidence)
    if slices:
        if behind is not None:
            return NodeMode(DRA_EXTENDED, f"a DRA driver ({_drivers(slices)}) publishes this node's devices and serves "
                                          f"pods requesting {behind[1]} through DeviceClass {behind[0]} (extended "
                                          f"resource); no device plugin advertises a GPU resource{stale}",
                            f"{len(slices)} ResourceSlice(s) with spec.nodeName of this node; DeviceClass {behind[0]} "
                            f"extendedResourceName={behind[1]}")
        return NodeMode(DRA, f"a DRA driver ({_drivers(slices)}) publishes this node's devices, no device plugin "
                             f"advertises a GPU resource{stale}",
                        f"{len(slices)} ResourceSlice(s) with spec.nodeName of this node")
    besides = f" (ResourceSlices of {_drivers(others)}, not a GPU DRA driver, do not change that)" if others else ""
    return NodeMode(DEVICE_PLUGIN, "a GPU node (by its labels or nodes.selector) and nothing says its GPUs are served "
                                   f"otherwise: a container device plugin is expected{besides}",
                    "no GPU resource advertised, no label or GPU driver's ResourceSlice saying otherwise")


def of_node(node: dict, slices: list[dict], vendor: str,
            extended: dict[str, tuple[str, str]] | None = None) -> NodeMode:
    """`allocation_path` of a Node object (as a dict) and the ResourceSlices naming it."""
    status = node.get("status") or {}
    return allocation_path(node.get("metadata", {}).get("labels") or {}, status.get("capacity") or {},
                           status.get("allocatable") or {}, slices, vendor, extended)
