"""The suite's configuration: one YAML file, overridable by CLI options and environment variables.

Precedence: CLI option > environment variable > config file > default. Every value is validated before any
API call; an error names where the bad value came from (file and key, option, or variable). Unknown keys
are rejected. The reference with every key and its default is docs/config-reference.md (and
`gpuconform.example.yaml`).
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class ConfigError(Exception):
    """A bad configuration value. The message is one line naming its source."""


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")


def parse_duration(value: Any, where: str) -> float:
    """'250ms' | '5s' | '2m' | 5 -> seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a duration like 5s or 250ms, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigError(f"{where}: must not be negative, got {value!r}")
        return float(value)
    m = _DURATION.match(str(value).strip())
    if not m:
        raise ConfigError(f"{where}: expected a duration like 5s or 250ms, got {value!r}")
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n


# The schema: nested dicts of defaults. A default's type is the accepted type (durations are strings ending in
# s/ms/m). None means "optional, any of the documented forms", validated in _check below.
DEFAULTS: dict[str, Any] = {
    "preset": "",  # a vendor profile from gpuconform/presets.py, applied under this file's own keys
    "vendor": "nvidia",  # nvidia | amd | intel: which vendor tooling the workload probes may rely on
    "resourceName": "nvidia.com/gpu",
    "nodes": {
        "selector": "nvidia.com/gpu.present=true",  # label selector for GPU nodes (plus nodes with the resource)
        "exclude": "",  # label selector of nodes to leave alone, e.g. "type=kwok"
        "expectedGpus": "auto",  # auto (GFD labels) | integer | {poolLabelValue: integer}
        "poolLabel": "",  # label whose value selects the expectedGpus entry
    },
    "sharing": {"strategy": "auto", "replicas": "auto", "renamed": False},  # auto = from GFD labels
    "mig": {"strategy": "auto", "profiles": {}},  # mixed: {"mig-1g.10gb": 7, ...} per node
    "plugin": {
        "namespace": "kube-system",
        "selector": "app.kubernetes.io/name=nvidia-device-plugin",
        "socket": "nvidia-gpu.sock",
        "maxRestarts": 0,  # restarts allowed before a plugin pod counts as crash-looping
    },
    # GPU operator: where its validator pods run. Empty namespace = no operator, and its check is deselected.
    "operator": {"namespace": "", "validatorSelector": "app=nvidia-operator-validator"},
    "topology": {"policy": "single-numa-node", "cpuManagerPolicy": "static", "scope": "any"},
    "images": {
        "vectorAdd": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
        "probe": "busybox:1.36",  # needs sh, cat, ls; nvidia-smi comes from the runtime's injection
        "pullPolicy": "IfNotPresent",
        "pullSecrets": [],
    },
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "thresholds": {  # latency thresholds; every violation is reported
        "scheduleP99": "5s",  # create -> Scheduled event
        "startP50": "5s",  # create -> container started
        "startP99": "10s",
        "allocateP99": "1s",  # kubelet Allocate RPC histogram (bucket upper bound)
    },
    "burst": {"size": 0, "samples": 5},  # size 0 = all free GPUs on the node (capped by limits.maxGpusPerNode)
    "timeouts": {
        "podStart": "120s",  # create -> Running/terminal for one test pod (images pre-pulled)
        "podComplete": "180s",  # create -> Succeeded/Failed for run-to-completion probes
        "imagePull": "300s",  # pre-pull per node
        "apiRequest": "30s",  # one API request
        "cleanup": "25s",  # deleting what the run created (also on SIGINT/SIGTERM)
    },
    "limits": {"maxGpusPerNode": 8, "concurrency": 4, "qps": 5.0, "burst": 10},
    "coverage": {"minCertifiedFraction": 1.0},
    "nodeProbe": {"enabled": True},  # privileged hostPath probe for the plugin socket (optional)
    "keepNamespaceOnFailure": False,
    # --gpuconform-baseline FILE: a latency percentile regresses when it grew by more than latencyRelative AND
    # by more than latencyAbsolute (timestamps have 1 s resolution); a check regresses when it passed before.
    "baseline": {"latencyRelative": 0.2, "latencyAbsolute": "1s", "allowNewFailures": 0},
}

ENV_PREFIX = "GPUCONFORM_"


@dataclass(frozen=True)
class Config:
    data: dict[str, Any]
    sources: dict[str, str]  # dotted key -> where its value came from

    def get(self, dotted: str) -> Any:
        cur: Any = self.data
        for part in dotted.split("."):
            cur = cur[part]
        return cur

    def seconds(self, dotted: str) -> float:
        return parse_duration(self.get(dotted), dotted)

    def redacted(self) -> dict[str, Any]:
        d = copy.deepcopy(self.data)
        d["images"]["pullSecrets"] = ["<redacted>" for _ in d["images"]["pullSecrets"]]
        return d


def _merge(base: dict, over: dict, where: str, sources: dict, prefix: str = "") -> None:
    for key, value in over.items():
        dotted = f"{prefix}{key}"
        if key not in base:
            known = ", ".join(sorted(base))
            raise ConfigError(f"{where}: unknown key '{dotted}' (known keys here: {known})")
        if isinstance(base[key], dict) and key != "profiles":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: '{dotted}' must be a mapping, got {type(value).__name__}")
            _merge(base[key], value, where, sources, dotted + ".")
        else:
            base[key] = value
            sources[dotted] = where


def _coerce(value: str, default: Any) -> Any:
    if default == "auto" and re.fullmatch(r"\d+", value):  # keys that take auto or a number
        return int(value)
    if isinstance(default, bool):
        return value.lower() in ("1", "true", "yes", "on")
    if isinstance(default, (list, dict)):
        return yaml.safe_load(value)
    if isinstance(default, int):
        return int(value) if re.fullmatch(r"-?\d+", value) else value
    if isinstance(default, float):
        return float(value) if re.fullmatch(r"-?\d+(\.\d+)?", value) else value
    return value


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("profiles",):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def env_name(dotted: str) -> str:
    """nodes.expectedGpus -> GPUCONFORM_NODES_EXPECTED_GPUS"""
    return ENV_PREFIX + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", dotted).replace(".", "_").upper()


def load(path: str | os.PathLike | None, overrides: dict[str, str] | None = None,
         environ: dict[str, str] | None = None) -> Config:
    """Builds the effective config. `overrides` are `dotted.key=value` pairs from the command line."""
    data = copy.deepcopy(DEFAULTS)
    sources: dict[str, str] = {}
    loaded: dict = {}
    if path:
        p = Path(path)
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except FileNotFoundError:
            raise ConfigError(f"config file {p} does not exist") from None
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" line {mark.line + 1}" if mark else ""
            raise ConfigError(f"{p}{at}: not valid YAML ({getattr(e, 'problem', e)})") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of keys, got {type(loaded).__name__}")
    env = os.environ if environ is None else environ
    preset, preset_from = loaded.get("preset", ""), f"{path}: 'preset'"
    if env_name("preset") in env:
        preset, preset_from = env[env_name("preset")], f"environment variable {env_name('preset')}"
    if "preset" in (overrides or {}):
        preset, preset_from = (overrides or {})["preset"], "--gpuconform-set preset"
    if preset:
        from gpuconform.presets import PRESETS

        if preset not in PRESETS:
            raise ConfigError(f"{preset_from}: unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        _merge(data, copy.deepcopy(PRESETS[preset][1]), f"preset {preset}", sources)
    if loaded:
        _merge(data, loaded, str(path), sources)
    flat_defaults = _flatten(DEFAULTS)
    for dotted, default in flat_defaults.items():
        name = env_name(dotted)
        if name in env:
            _set(data, dotted, _coerce(env[name], default), sources, f"environment variable {name}")
    for dotted, raw in (overrides or {}).items():
        if dotted not in flat_defaults:
            raise ConfigError(f"--gpuconform-set {dotted}=...: unknown key '{dotted}'")
        _set(data, dotted, _coerce(raw, flat_defaults[dotted]), sources, f"--gpuconform-set {dotted}")
    cfg = Config(data, sources)
    _check(cfg)
    return cfg


def _set(data: dict, dotted: str, value: Any, sources: dict, where: str) -> None:
    cur = data
    parts = dotted.split(".")
    for p in parts[:-1]:
        cur = cur[p]
    cur[parts[-1]] = value
    sources[dotted] = where


_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SELECTOR = re.compile(r"^\s*!?[A-Za-z0-9./_-]+\s*((=|==|!=)\s*[A-Za-z0-9._-]*)?\s*"
                       r"(,\s*!?[A-Za-z0-9./_-]+\s*((=|==|!=)\s*[A-Za-z0-9._-]*)?\s*)*$")


def _check(cfg: Config) -> None:
    def where(key: str) -> str:
        return cfg.sources.get(key, "default")

    def bad(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{where(key)}: '{key}' {msg}")

    if cfg.get("vendor") not in ("nvidia", "amd", "intel"):
        raise bad("vendor", f"must be nvidia|amd|intel, got {cfg.get('vendor')!r}")
    if not _RESOURCE.match(str(cfg.get("resourceName"))):
        raise bad("resourceName", f"must look like vendor.com/name, got {cfg.get('resourceName')!r}")
    for key in ("nodes.selector", "nodes.exclude", "plugin.selector", "operator.validatorSelector"):
        v = cfg.get(key)
        if not isinstance(v, str) or (v and not _SELECTOR.match(v)):
            raise bad(key, f"must be a label selector like a=b,c!=d, got {v!r}")
    if not cfg.get("plugin.selector"):
        raise bad("plugin.selector", "must not be empty (it finds the plugin pods)")
    eg = cfg.get("nodes.expectedGpus")
    if isinstance(eg, dict):
        if not cfg.get("nodes.poolLabel"):
            raise bad("nodes.expectedGpus", "is a per-pool mapping, so nodes.poolLabel must name the pool label")
        for k, v in eg.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad("nodes.expectedGpus", f"pool {k!r}: expected a non-negative integer, got {v!r}")
    elif not (eg == "auto" or (isinstance(eg, int) and not isinstance(eg, bool) and eg >= 0)):
        raise bad("nodes.expectedGpus", f"must be auto, a non-negative integer or a pool mapping, got {eg!r}")
    if cfg.get("sharing.strategy") not in ("auto", "none", "time-slicing", "mps"):
        raise bad("sharing.strategy", f"must be auto|none|time-slicing|mps, got {cfg.get('sharing.strategy')!r}")
    r = cfg.get("sharing.replicas")
    if not (r == "auto" or (isinstance(r, int) and not isinstance(r, bool) and r >= 1)):
        raise bad("sharing.replicas", f"must be auto or an integer >= 1, got {r!r}")
    if cfg.get("mig.strategy") not in ("auto", "none", "single", "mixed"):
        raise bad("mig.strategy", f"must be auto|none|single|mixed, got {cfg.get('mig.strategy')!r}")
    if cfg.get("topology.policy") not in ("any", "none", "best-effort", "restricted", "single-numa-node"):
        raise bad("topology.policy", "must be any|none|best-effort|restricted|single-numa-node, "
                  f"got {cfg.get('topology.policy')!r}")
    if cfg.get("topology.cpuManagerPolicy") not in ("any", "none", "static"):
        raise bad("topology.cpuManagerPolicy", f"must be any|none|static, got {cfg.get('topology.cpuManagerPolicy')!r}")
    if cfg.get("topology.scope") not in ("any", "container", "pod"):
        raise bad("topology.scope", f"must be any|container|pod, got {cfg.get('topology.scope')!r}")
    if cfg.get("images.pullPolicy") not in ("Always", "IfNotPresent", "Never"):
        raise bad("images.pullPolicy", f"must be Always|IfNotPresent|Never, got {cfg.get('images.pullPolicy')!r}")
    for key in ("images.vectorAdd", "images.probe"):
        if not isinstance(cfg.get(key), str) or not cfg.get(key) or " " in cfg.get(key):
            raise bad(key, f"must be an image reference, got {cfg.get(key)!r}")
    if not isinstance(cfg.get("tolerations"), list) or not all(isinstance(t, dict) for t in cfg.get("tolerations")):
        raise bad("tolerations", "must be a list of Kubernetes tolerations")
    for section in ("thresholds", "timeouts"):
        for k in DEFAULTS[section]:
            key = f"{section}.{k}"
            try:
                s = parse_duration(cfg.get(key), key)
            except ConfigError as e:
                raise ConfigError(f"{where(key)}: {e}") from None
            if section == "timeouts" and s <= 0:
                raise bad(key, "must be positive: the suite never waits forever")
    for key, lo in (("limits.maxGpusPerNode", 1), ("limits.concurrency", 1), ("limits.burst", 1),
                    ("burst.size", 0), ("burst.samples", 1), ("plugin.maxRestarts", 0)):
        v = cfg.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise bad(key, f"must be an integer >= {lo}, got {v!r}")
    q = cfg.get("limits.qps")
    if not isinstance(q, (int, float)) or isinstance(q, bool) or q <= 0:
        raise bad("limits.qps", f"must be a positive number, got {q!r}")
    rel = cfg.get("baseline.latencyRelative")
    if not isinstance(rel, (int, float)) or isinstance(rel, bool) or rel < 0:
        raise bad("baseline.latencyRelative", f"must be a number >= 0 (0.2 = 20%), got {rel!r}")
    try:
        parse_duration(cfg.get("baseline.latencyAbsolute"), "baseline.latencyAbsolute")
    except ConfigError as e:
        raise ConfigError(f"{where('baseline.latencyAbsolute')}: {e}") from None
    anf = cfg.get("baseline.allowNewFailures")
    if not isinstance(anf, int) or isinstance(anf, bool) or anf < 0:
        raise bad("baseline.allowNewFailures", f"must be an integer >= 0, got {anf!r}")
    f = cfg.get("coverage.minCertifiedFraction")
    if not isinstance(f, (int, float)) or isinstance(f, bool) or not 0 <= f <= 1:
        raise bad("coverage.minCertifiedFraction", f"must be between 0 and 1, got {f!r}")
