"""What each vendor's device plugin and its companions look like on a real cluster, read from upstream source.

Every fact here carries the upstream file it was read from; docs/vendors.md has the full table with commits.
The suite infers a node's expected resources, the plugin's socket names and the plugin pods from these facts,
so one config covers plain, time-sliced and MIG pools and any of the documented install layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

NVIDIA, AMD, INTEL = "nvidia", "amd", "intel"


def socket_name(vendor: str, resource: str) -> str:
    """The plugin's socket file in the kubelet's device-plugins directory for one resource.

    NVIDIA serves one socket per resource, "nvidia-" + the name after "nvidia.com/" + ".sock"
    (NVIDIA/k8s-device-plugin internal/plugin/server.go): nvidia-gpu.sock, nvidia-gpu.shared.sock,
    nvidia-mig-1g.10gb.sock. Intel's plugins name it "<resource namespace>-<device type>.sock"
    (intel/intel-device-plugins-for-kubernetes pkg/deviceplugin/manager.go). AMD's uses the
    Kubernetes device-plugin manager's "<resource namespace>_<name>" (ROCm/k8s-device-plugin
    cmd/k8s-device-plugin/main.go with kubevirt's device-plugin manager)."""
    domain, _, name = resource.partition("/")
    if vendor == INTEL:
        return f"{domain}-{name}.sock"
    if vendor == AMD:
        return f"{domain}_{name}"
    return f"nvidia-{name}.sock"


@dataclass(frozen=True)
class Layout:
    """One documented way a vendor installs its device plugin, recognised by its pods' labels."""

    name: str
    vendor: str
    labels: dict[str, str]  # all must match the plugin pod's labels
    source: str  # where upstream sets these labels


LAYOUTS: tuple[Layout, ...] = (
    Layout("nvidia-operator", NVIDIA, {"app": "nvidia-device-plugin-daemonset"},
           "NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml"),
    Layout("nvidia-static", NVIDIA, {"name": "nvidia-device-plugin-ds"},
           "NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml"),
    # The chart puts the same name label on its GPU Feature Discovery and MPS control-daemon pods: those are
    # told apart by COMPANION_MARKERS and by not mounting the device-plugins directory.
    Layout("nvidia-helm", NVIDIA, {"app.kubernetes.io/name": "nvidia-device-plugin"},
           "NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/templates/_helpers.tpl"),
    Layout("amd-helm", AMD, {"name": "amd-gpu-dp-ds"},
           "ROCm/k8s-device-plugin helm/amd-gpu/templates/device-plugin.yaml"),
    Layout("intel-operator", INTEL, {"app": "intel-gpu-plugin"},
           "intel/intel-device-plugins-for-kubernetes deployments/gpu_plugin/base/intel-gpu-plugin.yaml"),
)

# Pods that run next to a plugin, often with its labels, but are not the plugin: GPU Feature Discovery (and its
# sidecar), the MPS control daemon, the GPU operator's validators, AMD's node labeller, DCGM exporters, NFD.
COMPANION_MARKERS: tuple[str, ...] = ("gpu-feature-discovery", "feature-discovery", "mps-control-daemon",
                                      "operator-validator", "validator", "node-labeller", "labeller", "dcgm",
                                      "nfd-worker", "nfd-master")

DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"

# Labels that mark a GPU node before (or without) any plugin registering. NVIDIA: `nvidia.com/gpu.present` is
# set by the GPU operator only (NVIDIA/gpu-operator controllers/state_manager.go); standalone installs have NFD's
# PCI label for vendor 0x10de (kubernetes-sigs/node-feature-discovery, the chart's nodeAffinity in
# deployments/helm/nvidia-device-plugin/values.yaml). AMD: NFD rule feature.node.kubernetes.io/amd-gpu
# (ROCm/k8s-device-plugin helm/amd-gpu/values.yaml). Intel: intel.feature.node.kubernetes.io/gpu
# (intel-device-plugins-for-kubernetes deployments/nfd/overlays/node-feature-rules).
GPU_NODE_LABELS: dict[str, tuple[str, ...]] = {
    NVIDIA: ("nvidia.com/gpu.present=true", "feature.node.kubernetes.io/pci-10de.present=true"),
    AMD: ("feature.node.kubernetes.io/amd-gpu=true", "feature.node.kubernetes.io/pci-1002.present=true"),
    INTEL: ("intel.feature.node.kubernetes.io/gpu=true", "feature.node.kubernetes.io/pci-8086.present=true"),
}

# Resource keys of the vendor's domain that are not GPUs and must never count as stale or over-advertised.
# Intel's plugin with monitoring enabled adds one "<driver>_monitoring" resource with capacity 1 that grants
# access to all GPUs for monitoring agents (intel-device-plugins-for-kubernetes cmd/gpu_plugin/gpu_plugin.go,
# monitorType / "_monitoring").
AUXILIARY_RESOURCES: dict[str, tuple[str, ...]] = {
    INTEL: ("gpu.intel.com/i915_monitoring", "gpu.intel.com/xe_monitoring", "gpu.intel.com/monitoring",
            "gpu.intel.com/millicores", "gpu.intel.com/memory.max", "gpu.intel.com/tiles"),
}


def is_gpu_resource(vendor: str, key: str) -> bool:
    """A resource key that a GPU plugin of this vendor advertises as devices (not an auxiliary resource)."""
    if key in AUXILIARY_RESOURCES.get(vendor, ()):
        return False
    if vendor == NVIDIA:
        return key == "nvidia.com/gpu" or key.startswith(("nvidia.com/gpu.", "nvidia.com/mig-"))
    if vendor == AMD:
        return key.startswith("amd.com/") and key.split("/", 1)[1].startswith("gpu")
    return key in ("gpu.intel.com/i915", "gpu.intel.com/xe")
