"""Vendor profiles: partial configs a team selects with `preset: NAME` (file), GPUCONFORM_PRESET or
`--gpuconform-set preset=NAME`. Precedence: defaults < preset < config file < environment < command line.

Each preset states what the plugin is expected to advertise, so the counts check can tell a sharing/MIG
setup that was applied from one that was not (with sharing.strategy "auto" the GFD labels decide instead).
AMD and Intel count GPUs from their own discovery labels (node labeller, NFD rules). Their workload
probes (CUDA vector-add, nvidia-smi isolation/NUMA evidence) are NVIDIA tooling; with vendor amd/intel
those checks report "not checked" (NOTCHECKED-OPTIONAL) instead of a false verdict.
"""

from __future__ import annotations

from typing import Any

# No preset names a plugin namespace, selector or socket: the plugin pods are found on each node by what they
# are and the sockets follow upstream's naming per resource (gpuconform/discovery.py, gpuconform/vendors.py).
_NVIDIA: dict[str, Any] = {
    "vendor": "nvidia",
    "resourceName": "nvidia.com/gpu",
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def _nvidia(**over: Any) -> dict[str, Any]:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in _NVIDIA.items()}
    for k, v in over.items():
        out[k] = {**out.get(k, {}), **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _intel(driver: str) -> dict[str, Any]:
    # sharing auto: each GPU is advertised -shared-dev-num times, read from the plugin pod's args; GPU count
    # from NFD's gpu.intel.com/device.count; the <driver>_monitoring resource is not a GPU (gpuconform/vendors.py)
    return {"vendor": "intel", "resourceName": f"gpu.intel.com/{driver}", "mig": {"strategy": "none"},
            "tolerations": []}


PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "nvidia": ("NVIDIA device plugin, any pool shape: each node's GFD labels decide whether it is plain, "
               "time-sliced (renamed or not) or MIG (single or mixed)", _nvidia()),
    "nvidia-plain": ("NVIDIA device plugin, whole GPUs only: sharing or MIG on a node is a finding",
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
    "amd": ("AMD ROCm device plugin: amd.com/gpu (counts from the node labeller's device-id labels, else set "
            "nodes.expectedGpus)",
            {"vendor": "amd", "resourceName": "amd.com/gpu",
             "sharing": {"strategy": "none"}, "mig": {"strategy": "none"},
             "tolerations": [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}),
    "intel-i915": ("Intel GPU plugin, legacy i915 driver: gpu.intel.com/i915 (counts from NFD's "
                   "gpu.intel.com/device.count, else set nodes.expectedGpus)", _intel("i915")),
    "intel-xe": ("Intel GPU plugin, xe driver: gpu.intel.com/xe (counts from NFD's gpu.intel.com/device.count, "
                 "else set nodes.expectedGpus)", _intel("xe")),
}
