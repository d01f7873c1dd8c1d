"""Vendor profiles: partial configs a team selects with `preset: NAME` (file), GPUCONFORM_PRESET or
`--gpuconform-set preset=NAME`. Precedence: defaults < preset < config file < environment < command line.

Each preset states what the plugin is expected to advertise, so the counts check can tell a sharing/MIG
setup that was applied from one that was not (with sharing.strategy "auto" the GFD labels decide instead).
AMD and Intel have no GPU Feature Discovery labels for counts: set nodes.expectedGpus. Their workload
probes (CUDA vector-add, nvidia-smi isolation/NUMA evidence) are NVIDIA tooling; with vendor amd/intel
those checks report "not checked" (ENV-NOT-CHECKED) instead of a false verdict.
"""

from __future__ import annotations

from typing import Any

_NVIDIA: dict[str, Any] = {
    "vendor": "nvidia",
    "resourceName": "nvidia.com/gpu",
    "nodes": {"selector": "nvidia.com/gpu.present=true"},
    "plugin": {"selector": "app.kubernetes.io/name=nvidia-device-plugin", "socket": "nvidia-gpu.sock"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def _nvidia(**over: Any) -> dict[str, Any]:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in _NVIDIA.items()}
    for k, v in over.items():
        out[k] = {**out.get(k, {}), **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _intel(driver: str) -> dict[str, Any]:
    # Intel's plugins name their socket <resource namespace>-<device type>.sock
    return {"vendor": "intel", "resourceName": f"gpu.intel.com/{driver}",
            "nodes": {"selector": "intel.feature.node.kubernetes.io/gpu=true"},
            "sharing": {"strategy": "none"}, "mig": {"strategy": "none"},
            "plugin": {"namespace": "inteldeviceplugins-system", "selector": "app=intel-gpu-plugin",
                       "socket": f"gpu.intel.com-{driver}.sock"},
            "tolerations": []}


PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "nvidia": ("NVIDIA device plugin, whole GPUs, no sharing, no MIG",
               _nvidia(sharing={"strategy": "none"}, mig={"strategy": "none"})),
    "nvidia-mig-single": ("NVIDIA MIG strategy single: nvidia.com/gpu counts MIG devices (GFD gpu.count)",
                          _nvidia(sharing={"strategy": "none"}, mig={"strategy": "single"})),
    "nvidia-mig-mixed": ("NVIDIA MIG strategy mixed: one nvidia.com/mig-<profile> resource per profile "
                         "(counts from GFD mig-*.count labels or mig.profiles)",
                         _nvidia(sharing={"strategy": "none"}, mig={"strategy": "mixed"})),
    "nvidia-time-slicing": ("NVIDIA time-slicing: nvidia.com/gpu = GPUs x replicas (GFD gpu.replicas)",
                            _nvidia(sharing={"strategy": "time-slicing", "renamed": False}, mig={"strategy": "none"})),
    "nvidia-time-slicing-renamed": ("NVIDIA time-slicing with renameByDefault: nvidia.com/gpu.shared",
                                    _nvidia(sharing={"strategy": "time-slicing", "renamed": True},
                                            mig={"strategy": "none"})),
    "amd": ("AMD ROCm device plugin: amd.com/gpu (set nodes.expectedGpus)",
            {"vendor": "amd", "resourceName": "amd.com/gpu",
             "nodes": {"selector": "feature.node.kubernetes.io/amd-gpu=true"},
             "sharing": {"strategy": "none"}, "mig": {"strategy": "none"},
             # the AMD plugin's device-plugin manager names its socket <resource namespace>_<name>
             "plugin": {"selector": "name=amdgpu-dp-ds", "socket": "amd.com_gpu"},
             "tolerations": [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}),
    "intel-i915": ("Intel GPU plugin, legacy i915 driver: gpu.intel.com/i915 (set nodes.expectedGpus)", _intel("i915")),
    "intel-xe": ("Intel GPU plugin, xe driver: gpu.intel.com/xe (set nodes.expectedGpus)", _intel("xe")),
}
