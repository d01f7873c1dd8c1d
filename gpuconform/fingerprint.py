"""What a verdict was given on (the summary's `environment` and the report's header): versions, node counts,
plugin images, digests and configuration hash, kubelet policies, GFD labels. A pure function of what the run
already read (discovery's node objects and plugin pods, configz where a check read it): no request of its own."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Iterable

from .discovery import NOT_FOUND, Found

NOT_READ = "not read (the kubelet policy check did not run)"


def distinct(values: Iterable[Any]) -> str | None:
    """'a, b' of the distinct non-empty values, sorted; None when there are none."""
    vals = sorted({v for v in values if v})
    return ", ".join(vals) if vals else None


def tally(values: Iterable[Any], sep: str) -> str:
    """'a (3 nodes), b (1 node)' from the values' counts."""
    return sep.join(f"{k} ({v} node{'s' if v != 1 else ''})" for k, v in sorted(Counter(values).items()))


def plugin_config_hash(plugin_pods: list[dict]) -> str | None:
    """What configures the plugin as far as the pod spec shows it (args, env, mounted ConfigMaps): equal hashes
    across runs mean the same plugin configuration."""
    shapes = sorted(json.dumps({"containers": [{k: c.get(k) for k in ("command", "args", "env")}
                                               for c in p["spec"].get("containers", [])],
                                "volumes": [v for v in p["spec"].get("volumes", []) if "configMap" in v]},
                               sort_keys=True) for p in plugin_pods)
    return hashlib.sha256("\n".join(sorted(set(shapes))).encode()).hexdigest()[:16] if shapes else None


def fingerprint(*, run_id: str, server_version: str, host: str, credentials: str, node_count: int,
                gpu_nodes: list[tuple[str, str]], node_objs: dict[str, dict], plugins: dict[str, Found],
                configz: dict[str, dict]) -> dict[str, Any]:
    """`gpu_nodes`: (name, pool) of each GPU node in order; `node_objs` / `plugins` / `configz` by node name."""
    gpu = [node_objs[name] for name, _ in gpu_nodes]
    info = [n["status"].get("nodeInfo", {}) for n in gpu]
    labels = [n["metadata"].get("labels", {}) for n in gpu]
    found = [plugins.get(name, NOT_FOUND) for name, _ in gpu_nodes]
    fp: dict[str, Any] = {
        "run id": run_id, "cluster version": server_version, "API server": host, "credentials": credentials,
        "nodes": node_count, "GPU nodes": len(gpu),
        "kubelet versions": distinct(i.get("kubeletVersion") for i in info),
        "container runtimes": distinct(i.get("containerRuntimeVersion") for i in info),
        "GPU products (GFD)": distinct(lb.get("nvidia.com/gpu.product") for lb in labels),
        "driver (GFD)": distinct(lb.get("nvidia.com/cuda.driver-version.full") for lb in labels),
        "CUDA runtime (GFD)": distinct(lb.get("nvidia.com/cuda.runtime-version.full") for lb in labels),
        "topology manager policy": distinct(c.get("topologyManagerPolicy", "none") for c in configz.values())
        or NOT_READ,
        "CPU manager policy": distinct(c.get("cpuManagerPolicy", "none") for c in configz.values()) or NOT_READ,
    }
    plugin = [p for f in found for p in f.pods]
    fp["plugin layouts"] = tally((f.layout or "none" for f in found), ", ")
    fp["plugin namespaces"] = distinct(p["metadata"].get("namespace") for p in plugin)
    fp["GPU pools"] = tally((pool for _, pool in gpu_nodes), "; ")
    statuses = [cs for p in plugin for cs in p.get("status", {}).get("containerStatuses", []) or []]
    fp["plugin images"] = distinct(cs.get("image") for cs in statuses)
    fp["plugin image digests"] = distinct((cs.get("imageID") or "").rsplit("@", 1)[-1] for cs in statuses)
    fp["plugin config hash"] = plugin_config_hash(plugin)
    return fp
