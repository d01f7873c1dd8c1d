"""What each vendor's device plugin and its companions look like on a real cluster, read from upstream source.

Every fact here carries the upstream file it was read from; docs/vendors.md has the full table with commits.
The suite infers a node's expected resources, the plugin's socket names and the plugin pods from these facts,
so one config covers plain, time-sliced and MIG pools and any of the documented install layouts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NVIDIA, AMD, INTEL = "nvidia", "amd", "intel"


def socket_name(vendor: str, resource: str) -> str:
    """The plugin's socket file in the kubelet's device-plugins directory for one resource.

    NVIDIA serves one socket per resource, "nvidia-" + the name after "nvidia.com/" + ".sock"
    (NVIDIA/k8s-device-plugin internal/plugin/server.go, getPluginSocketPath): nvidia-gpu.sock,
    nvidia-gpu.shared.sock, nvidia-mig-1g.10gb.sock. Intel's plugins name it "<resource namespace>-<device
    type>.sock" (intel/intel-device-plugins-for-kubernetes pkg/deviceplugin/server.go). AMD's plugin runs under
    kubevirt's device-plugin manager, which names it "<resource namespace>_<name>" with no suffix
    (ROCm/k8s-device-plugin vendor/github.com/kubevirt/device-plugin-manager/pkg/dpm/plugin.go)."""
    domain, _, name = resource.partition("/")
    if vendor == INTEL:
        return f"{domain}-{name}.sock"
    if vendor == AMD:
        return f"{domain}_{name}"
    return f"nvidia-{name}.sock"


# PCI vendor IDs the node probe counts a vendor's GPU functions by (gpuconform/nodeprobe.py gpu_functions).
# NVIDIA's is 0x10de (NVIDIA/go-nvlib pkg/nvpci/nvpci.go, PCINvidiaVendorID). Other vendors' GPU PCI classes
# are not researched yet: their nodes are not counted (the check says "not checked").
PCI_VENDOR = {NVIDIA: "0x10de"}


@dataclass(frozen=True)
class Layout:
    """One documented way a vendor installs its device plugin, recognised by its pods' labels."""

    name: str
    vendor: str
    labels: dict[str, str]  # all must match the plugin pod's labels ("*": the key must be present, any value)
    source: str  # where upstream sets these labels
    container: str = ""  # when set, a container of this name must be in the pod too (a label-only match is weak)


LAYOUTS: tuple[Layout, ...] = (
    Layout("nvidia-operator", NVIDIA, {"app": "nvidia-device-plugin-daemonset"},
           "NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml"),
    Layout("nvidia-static", NVIDIA, {"name": "nvidia-device-plugin-ds"},
           "NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml"),
    # The chart puts the same name and instance labels (and no component label) on its GPU Feature Discovery
    # and MPS control-daemon pods: those are told apart by COMPANION_MARKERS (their DaemonSets are
    # <fullname>-gpu-feature-discovery and <fullname>-mps-control-daemon) and by not mounting device-plugins.
    Layout("nvidia-helm", NVIDIA, {"app.kubernetes.io/name": "nvidia-device-plugin"},
           "NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/templates/_helpers.tpl"),
    Layout("amd-helm", AMD, {"name": "amd-gpu-dp-ds"},
           "ROCm/k8s-device-plugin helm/amd-gpu/templates/deviceplugin-daemonset.yaml"),
    Layout("amd-static", AMD, {"name": "amdgpu-dp-ds"}, "ROCm/k8s-device-plugin k8s-ds-amdgpu-dp.yaml"),
    # The AMD GPU operator labels every pod of a DeviceConfig only daemonset-name=<DeviceConfig name>: the plugin,
    # but also its node labeller, metrics exporter and config manager. Its plugin container is "device-plugin"
    # (DaemonSet <DeviceConfig>-device-plugin, namespace of the DeviceConfig, kube-amd-gpu in the docs).
    Layout("amd-operator", AMD, {"daemonset-name": "*"},
           "ROCm/gpu-operator@6df13c1 internal/plugin/plugin.go SetDevicePluginAsDesired (matchLabels, container "
           "name); internal/controllers/device_config_reconciler.go (DaemonSet name); "
           "docs/installation/kubernetes-helm.md (namespace kube-amd-gpu)", container="device-plugin"),
    # the same label from the kustomize deployment and from the operator (DaemonSet intel-gpu-plugin-<CR name>)
    Layout("intel", INTEL, {"app": "intel-gpu-plugin"},
           "intel/intel-device-plugins-for-kubernetes deployments/gpu_plugin/base/intel-gpu-plugin.yaml, "
           "pkg/controllers/gpu/controller.go"),
)

# Pods that run next to a plugin, often with its labels, but are not the plugin: GPU Feature Discovery (and its
# sidecar), the MPS control daemon, the GPU operator's validators, AMD's node labeller, DCGM exporters, NFD.
COMPANION_MARKERS: tuple[str, ...] = ("gpu-feature-discovery", "feature-discovery", "mps-control-daemon",
                                      "operator-validator", "validator", "node-labeller", "labeller", "dcgm",
                                      "nfd-worker", "nfd-master")

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"

# Every kubelet plugin registers through the kubelet's plugins_registry directory: a GPU DRA driver's, and also every
# CSI node plugin's (kubernetes-csi node-driver-registrar) and other DRA drivers' (NICs, NVIDIA's compute domains).
# A GPU DRA driver's pod is told apart by the program it runs: kubernetes-sigs/dra-driver-nvidia-gpu
# deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml (container `gpus` runs gpu-kubelet-plugin;
# the GPU operator's state-dra-driver runs the same image); ROCm/k8s-gpu-dra-driver cmd/gpu-kubeletplugin;
# intel/intel-resource-drivers-for-kubernetes cmd/kubelet-gpu-plugin. A CSI node plugin by its registrar.
DRA_PLUGIN_PROGRAMS: dict[str, tuple[str, ...]] = {NVIDIA: ("gpu-kubelet-plugin",), AMD: ("gpu-kubeletplugin",),
                                                   INTEL: ("kubelet-gpu-plugin",)}
CSI_REGISTRAR_MARKERS: tuple[str, ...] = ("node-driver-registrar", "--kubelet-registration-path")

# Labels that mark a GPU node before (or without) any plugin registering. NVIDIA: `nvidia.com/gpu.present` is
# set by the GPU operator only, from NFD's PCI labels (NVIDIA/gpu-operator controllers/state_manager.go);
# standalone installs have NFD's label for vendor 0x10de, by vendor or by class+vendor (the chart's nodeAffinity
# in deployments/helm/nvidia-device-plugin/values.yaml). AMD: NFD's class+vendor label (ROCm/k8s-device-plugin
# helm/amd-gpu/values.yaml) and the AMD GPU operator's amd-gpu rule. Intel: the NFD rule's
# intel.feature.node.kubernetes.io/gpu (intel-device-plugins-for-kubernetes deployments/nfd/overlays/
# node-feature-rules). A PCI vendor label alone is not used for Intel: most servers have Intel PCI devices.
GPU_NODE_LABELS: dict[str, tuple[str, ...]] = {
    NVIDIA: ("nvidia.com/gpu.present=true", "feature.node.kubernetes.io/pci-10de.present=true",
             "feature.node.kubernetes.io/pci-0300_10de.present=true",
             "feature.node.kubernetes.io/pci-0302_10de.present=true"),
    # amd-vgpu: the operator's NFD rule for VF guests (MI210/MI300X VFs), ROCm/gpu-operator@6df13c1
    # helm-charts-k8s/templates/gpu-nfd-default-rule.yaml rules amd-gpu and amd-vgpu
    AMD: ("feature.node.kubernetes.io/amd-gpu=true", "feature.node.kubernetes.io/amd-vgpu=true",
          "feature.node.kubernetes.io/pci-0300_1002.present=true"),
    INTEL: ("intel.feature.node.kubernetes.io/gpu=true",),
}

# Resource keys of the vendor's domain that are not GPUs and must never count as stale or over-advertised.
# Intel's plugin with monitoring enabled adds gpu.intel.com/monitoring (or, in the deprecated split mode,
# <driver>_monitoring) with capacity 1, which grants all GPUs to monitoring agents (intel-device-plugins-for-
# kubernetes cmd/gpu_plugin/gpu_plugin.go, monitorSuffix/monitorResource). Older releases' resource manager
# advertised millicores, memory.max and tiles as resources; they are node labels now (upstream commit 281ca081).
AUXILIARY_RESOURCES: dict[str, tuple[str, ...]] = {
    INTEL: ("gpu.intel.com/i915_monitoring", "gpu.intel.com/xe_monitoring", "gpu.intel.com/monitoring",
            "gpu.intel.com/millicores", "gpu.intel.com/memory.max", "gpu.intel.com/tiles"),
}

# AMD's plugin with -resource_naming_strategy=mixed advertises partitioned GPUs as amd.com/<compute>_<memory>,
# e.g. amd.com/cpx_nps4 (ROCm/k8s-device-plugin internal/pkg/amdgpu/amdgpu.go).
_AMD_PARTITION = re.compile(r"^amd\.com/[a-z]px_nps\d+$")

# AMD compute partition modes: partitions per GPU. SPX/DPX/TPX/QPX are 1/2/3/4 partitions; CPX is one partition
# per XCD, so it depends on the model (amdsmi.h amdsmi_accelerator_partition_profile_t.num_partitions: "On MI300X:
# SPX=>1, DPX=>2, QPX=>4, CPX=>8", ROCm amdsmi docs 7.1.1; TPX: ROCm amdsmi docs conceptual/partition.md lists it,
# 3 partitions inferred from the name, unverified). The plugin lists each partition as a device: the GPU's own
# card plus /sys/devices/platform/amdgpu_xcp_* (ROCm/k8s-device-plugin@ed76468 internal/pkg/amdgpu/amdgpu.go
# GetAMDGPUs). The node labeller's device-id generator reads /sys/class/drm/card<N>/device/device, a PCI
# attribute that the xcp platform devices lack, so the device-id labels count physical GPUs (inferred, unverified).
AMD_PARTITIONS_PER_MODE = {"spx": 1, "dpx": 2, "tpx": 3, "qpx": 4}
# XCDs per GPU model, by PCI device ID (the CPX partition count). 74a1 = MI300X (ROCm/gpu-operator@6df13c1
# helm-charts-k8s/templates/gpu-nfd-default-rule.yaml rule amd-gpu-mi300x); 8 XCDs (ROCm amdsmi docs,
# conceptual/partition.md). Other partition-capable models (MI300A, MI325X, MI350 series) are not researched yet.
AMD_XCDS = {"74a1": 8}
AMD_PARTITION_LABEL = "amd.com/gpu.compute-memory-partition"  # e.g. cpx_nps4 (k8s-node-labeller main.go l.356)


def amd_partition_resources(capacity: dict) -> list[str]:
    """The amd.com/<compute>_<memory> resources of the plugin's mixed naming strategy on a node."""
    return sorted(k for k in capacity if _AMD_PARTITION.match(k))


# Intel's plugin names each card's resource after the card's kernel driver, so one node with an integrated i915 GPU
# and a discrete xe card advertises both (intel-device-plugins-for-kubernetes@94a91bc cmd/gpu_plugin/
# device_props.go driver(), gpu_plugin.go scan: devTree.AddDevice(devProps.driver(), ...)).
INTEL_DRIVER_RESOURCES = ("gpu.intel.com/i915", "gpu.intel.com/xe")


def is_gpu_resource(vendor: str, key: str) -> bool:
    """A resource key that a GPU plugin of this vendor advertises as devices (not an auxiliary resource)."""
    if key in AUXILIARY_RESOURCES.get(vendor, ()):
        return False
    if vendor == NVIDIA:
        return key == "nvidia.com/gpu" or key.startswith(("nvidia.com/gpu.", "nvidia.com/mig-"))
    if vendor == AMD:
        return key == "amd.com/gpu" or bool(_AMD_PARTITION.match(key))
    return key in INTEL_DRIVER_RESOURCES


def flag_values(argv: list[str], name: str) -> list[str]:
    """Every value of the command-line flag -name / --name in `argv`, written `-name=v` or `-name v` (Go's flag
    package and urfave/cli, which the vendors' plugins use, accept both); "" for a flag with no value after it."""
    out = []
    for i, a in enumerate(argv):
        flag, eq, val = a.lstrip("-").partition("=")
        if a.startswith("-") and flag == name:
            out.append(val if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
    return out
