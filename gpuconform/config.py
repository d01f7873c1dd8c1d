"""The suite's configuration: one declarative schema (`FIELDS`) drives loading, validation, typed access
(`cfg.get("burst.samples")`, `cfg.seconds(...)`, `cfg.timeouts.pod_start`) and the generated reference
(docs/config-reference.md). Precedence, validation and the environment variables read outside the schema:
docs/architecture.md, "Configuration"."""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from gpuconform import kubeletroute
from gpuconform.presets import PRESETS


class ConfigError(Exception):
    """A bad configuration value. The message is one line naming its source."""


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")
_DURATION_HINT = "a duration like 5s or 250ms"


def parse_duration(value: Any, where: str) -> float:
    """'250ms' | '5s' | '2m' | 5 -> seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected {_DURATION_HINT}, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):  # YAML's .nan/.inf: NaN compares false, so a NaN threshold never fails
            raise ConfigError(f"{where}: must be a finite duration, got {value!r}")
        if value < 0:
            raise ConfigError(f"{where}: must not be negative, got {value!r}")
        return float(value)
    m = _DURATION.match(str(value).strip())
    if not m:
        raise ConfigError(f"{where}: expected {_DURATION_HINT}, got {value!r}")
    n = float(m.group(1))
    return n / 1000 if m.group(2) == "ms" else n * 60 if m.group(2) == "m" else n


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    """A finite int or float: YAML's .nan passes no comparison and .inf overflows int() (activeDeadlineSeconds)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# Bounds on the config's YAML, whether from the file, an environment variable or --gpuconform-set: the schema is
# three levels deep, so anything far deeper or far larger is a mistake or an attack, refused before it is built.
MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_DEPTH = 20


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases (a few hundred bytes of nested aliases expand into megabytes:
    the "billion laughs"; a config has no use for them) and nesting deeper than MAX_YAML_DEPTH (the composer
    recurses once per level, so a deep `[[[...` file would end in RecursionError)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "YAML anchors and aliases (&name, *name, <<) are not "
                                              "allowed in the config: write each value out", event.start_mark)
        if self._depth >= MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels",
                                              event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _safe_yaml(text: str) -> Any:
    """`text` as YAML under the config's bounds; raises yaml.YAMLError (with a mark where it has one)."""
    if len(text.encode("utf-8", errors="replace")) > MAX_CONFIG_BYTES:
        raise yaml.YAMLError(f"larger than {MAX_CONFIG_BYTES} bytes")
    return yaml.load(text, Loader=_ConfigLoader)  # noqa: S506 - a SafeLoader subclass


def _yaml_problem(e: yaml.YAMLError) -> str:
    """The YAML error's cause on one line (a reader error's text spans lines)."""
    return " ".join(str(getattr(e, "problem", None) or e).split())


def _yaml_text(raw: str) -> Any:
    try:
        return _safe_yaml(raw)
    except yaml.YAMLError as e:
        raise ValueError(f"not valid YAML ({_yaml_problem(e)})") from None


# ------------------------------------------------------------------ kinds: what a field accepts

@dataclass(frozen=True, kw_only=True)
class Kind:
    """What a field accepts. `check` returns None or the reason, worded to follow the key ("must be ...");
    `from_text` turns an environment or `--gpuconform-set` string into a value (it may raise ValueError with a
    reason); `name` is the type column of the reference and `rule` its validation column."""

    name: str = ""
    rule: str = ""

    def check(self, v: Any) -> str | None:
        raise NotImplementedError

    def from_text(self, raw: str) -> Any:
        return raw


@dataclass(frozen=True, kw_only=True)
class Str(Kind):
    name: str = "string"
    rule: str = "must be a string"
    pattern: re.Pattern | None = None  # a non-empty value must match it
    required: bool = False  # the empty string is not allowed
    test: Callable[[str], bool] | None = None  # any further condition on a non-empty value

    def check(self, v: Any) -> str | None:
        ok = isinstance(v, str) and (bool(v) or not self.required)
        if ok and v:
            ok = (self.pattern is None or bool(self.pattern.match(v))) and (self.test is None or self.test(v))
        return None if ok else f"{self.rule}, got {v!r}"


@dataclass(frozen=True, kw_only=True)
class Enum(Kind):
    choices: tuple[str, ...] = ()
    name: str = "enum"
    rule: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", "one of " + ", ".join(f"`{c}`" for c in self.choices))
        object.__setattr__(self, "rule", "must be " + "|".join(self.choices))

    def check(self, v: Any) -> str | None:
        return None if isinstance(v, str) and v in self.choices else f"{self.rule}, got {v!r}"


@dataclass(frozen=True, kw_only=True)
class Int(Kind):
    min: int = 0
    name: str = "integer"
    rule: str = ""

    def __post_init__(self) -> None:
        if not self.rule:
            object.__setattr__(self, "rule", f"must be an integer >= {self.min}")

    def check(self, v: Any) -> str | None:
        return None if _is_int(v) and v >= self.min else f"{self.rule}, got {v!r}"

    def from_text(self, raw: str) -> Any:
        return int(raw) if re.fullmatch(r"-?\d+", raw.strip()) else raw


@dataclass(frozen=True, kw_only=True)
class Number(Kind):
    """A number within [min, max]; `positive` excludes 0."""

    min: float | None = None
    max: float | None = None
    positive: bool = False
    name: str = "number"
    rule: str = "must be a number"

    def check(self, v: Any) -> str | None:
        ok = (_is_number(v) and (self.min is None or v >= self.min) and (self.max is None or v <= self.max)
              and (not self.positive or v > 0))
        return None if ok else f"{self.rule}, got {v!r}"

    def from_text(self, raw: str) -> Any:
        return float(raw) if re.fullmatch(r"-?\d+(\.\d+)?", raw.strip()) else raw


@dataclass(frozen=True, kw_only=True)
class Bool(Kind):
    name: str = "boolean"
    rule: str = "must be true or false"

    def check(self, v: Any) -> str | None:
        return None if isinstance(v, bool) else f"{self.rule}, got {v!r}"

    def from_text(self, raw: str) -> Any:
        return raw.strip().lower() in ("1", "true", "yes", "on")  # anything else is false (documented)


@dataclass(frozen=True, kw_only=True)
class Duration(Kind):
    """Seconds (`5`) or a number with ms, s or m. `positive`: 0 is refused (a timeout never waits forever)."""

    positive: bool = False
    name: str = "duration"
    rule: str = ""

    def __post_init__(self) -> None:
        if not self.rule:
            object.__setattr__(self, "rule", f"must be {_DURATION_HINT}" + ("; must be positive" if self.positive
                                                                             else ""))

    def check(self, v: Any) -> str | None:
        try:
            s = parse_duration(v, "")
        except ConfigError:
            return f"must be {_DURATION_HINT}, got {v!r}"
        if self.positive and s <= 0:
            return "must be positive: the suite never waits forever"
        return None


@dataclass(frozen=True, kw_only=True)
class ListOf(Kind):
    """A list whose items all pass `item`."""

    item: Callable[[Any], bool] = lambda _: True
    name: str = "list"
    rule: str = "must be a list"

    def check(self, v: Any) -> str | None:
        return None if isinstance(v, list) and all(self.item(i) for i in v) else f"{self.rule}, got {v!r}"

    def from_text(self, raw: str) -> Any:
        return _yaml_text(raw)


# core/v1 Toleration, as the API server validates it (kubernetes pkg/apis/core/validation/validation.go
# ValidateTolerations; the key is a label key, IsQualifiedName; the value a label value, IsValidLabelValue).
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
_LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")


def toleration_problem(t: Any) -> str | None:
    """Why `t` is not a Kubernetes toleration the API server would accept, or None. Checked here so a bad entry
    is one config error before the run, not a 422 on every test pod."""
    if not isinstance(t, dict):
        return f"must be a mapping, got {t!r}"
    unknown = sorted(str(k) for k in t if k not in _TOLERATION_FIELDS)
    if unknown:
        return f"unknown field(s) {', '.join(unknown)} (known: {', '.join(_TOLERATION_FIELDS)})"
    key, op, value, effect = (t.get(k, "") for k in ("key", "operator", "value", "effect"))
    for name, v in (("key", key), ("operator", op), ("value", value), ("effect", effect)):
        if not isinstance(v, str):
            return f"{name} must be a string, got {v!r}"
    if key and (len(key.rsplit("/", 1)[-1]) > 63 or len(key) > 253 + 64 or not _QUALIFIED_NAME.match(key)):
        return f"key must be a label key like example.com/name, got {key!r}"
    if op not in ("", "Equal", "Exists"):
        return f"operator must be Exists or Equal, got {op!r}"
    if not key and op != "Exists":
        return "operator must be Exists when key is empty (it then tolerates every taint)"
    if op == "Exists" and value:
        return f"value must be empty with operator Exists, got {value!r}"
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f"value must be a label value (63 characters at most), got {value!r}"
    if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        return f"effect must be NoSchedule, PreferNoSchedule, NoExecute or empty, got {effect!r}"
    if "tolerationSeconds" in t:
        secs = t["tolerationSeconds"]
        if not _is_int(secs):
            return f"tolerationSeconds must be an integer, got {secs!r}"
        if effect != "NoExecute":
            return "tolerationSeconds is only allowed with effect NoExecute"
    return None


@dataclass(frozen=True, kw_only=True)
class Tolerations(Kind):
    """A list of Kubernetes tolerations; an error names the first bad entry by its index."""

    name: str = "list of tolerations"
    rule: str = ("must be a list of Kubernetes tolerations (key, operator Exists|Equal, value, effect "
                 "NoSchedule|PreferNoSchedule|NoExecute, tolerationSeconds with NoExecute)")

    def check(self, v: Any) -> str | None:
        if not isinstance(v, list):
            return f"{self.rule}, got {v!r}"
        for i, t in enumerate(v):
            problem = toleration_problem(t)
            if problem:
                return f"entry {i} is not a Kubernetes toleration: {problem}"
        return None

    def from_text(self, raw: str) -> Any:
        return _yaml_text(raw)


@dataclass(frozen=True, kw_only=True)
class MapOf(Kind):
    """A mapping of names to non-negative integers; `entry` names an entry in an error ("pool", "profile")."""

    entry: str = "entry"
    name: str = "mapping"
    rule: str = "must be a mapping"

    def check(self, v: Any) -> str | None:
        if not isinstance(v, dict):
            return f"{self.rule}, got {v!r}"
        for k, n in v.items():
            if not _is_int(n) or n < 0:
                return f"{self.entry} {k!r}: expected a non-negative integer, got {n!r}"
        return None

    def from_text(self, raw: str) -> Any:
        return _yaml_text(raw)


@dataclass(frozen=True, kw_only=True)
class AutoOr(Kind):
    """The word `auto` (the node's labels decide) or a value of one of `kinds`; a mapping value is judged by the
    mapping kind, so its error names the bad entry."""

    kinds: tuple[Kind, ...] = ()
    name: str = ""
    rule: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", "`auto` or " + " or ".join(k.name for k in self.kinds))

    def check(self, v: Any) -> str | None:
        if v == "auto" and isinstance(v, str):
            return None
        for k in self.kinds:
            if isinstance(k, MapOf) and isinstance(v, dict):
                return k.check(v)
            if k.check(v) is None:
                return None
        return f"{self.rule}, got {v!r}"

    def from_text(self, raw: str) -> Any:
        text = raw.strip()
        if text == "auto":
            return "auto"
        for k in self.kinds:
            if isinstance(k, Int) and re.fullmatch(r"\d+", text):
                return int(text)
            if isinstance(k, Bool) and text.lower() in ("true", "false"):
                return text.lower() == "true"
            if isinstance(k, MapOf) and text.startswith("{"):
                return _yaml_text(text)
        return raw


# ------------------------------------------------------------------ the schema

ENV_PREFIX = "GPUCONFORM_"


def env_name(dotted: str) -> str:
    """nodes.expectedGpus -> GPUCONFORM_NODES_EXPECTED_GPUS"""
    return ENV_PREFIX + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", dotted).replace(".", "_").upper()


@dataclass(frozen=True)
class Field:
    key: str  # dotted, e.g. "thresholds.startP99"
    kind: Kind
    default: Any
    doc: str

    @property
    def env(self) -> str:
        return env_name(self.key)

    @property
    def section(self) -> str:
        return self.key.rsplit(".", 1)[0] if "." in self.key else ""


_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SELECTOR = re.compile(r"^\s*!?[A-Za-z0-9./_-]+\s*((=|==|!=)\s*[A-Za-z0-9._-]*)?\s*"
                       r"(,\s*!?[A-Za-z0-9./_-]+\s*((=|==|!=)\s*[A-Za-z0-9._-]*)?\s*)*$")
SELECTOR = Str(name="label selector", rule="must be a label selector like a=b,c!=d", pattern=_SELECTOR)
# A RuntimeClass name is an object name: a lower-case RFC 1123 subdomain (k8s.io/apimachinery validation IsDNS1123Subdomain).
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
IMAGE = Str(name="image reference", rule="must be an image reference", required=True, test=lambda v: " " not in v)
# The node probe's image has no default: it runs as uid 0 beside the kubelet's sockets, so the suite never picks one
# for the user (a bare name such as gpuconform/suite resolves to Docker Hub, whose owner nobody here knows).
NODE_PROBE_IMAGE = Str(name="image reference", rule="must be an image reference (or empty: not set)",
                       test=lambda v: " " not in v)


def _plain_host_dir(v: str) -> list[str] | None:
    """An absolute host path's segments (one trailing '/' allowed), or None when it is not absolute or has an
    empty, '.' or '..' segment (`/var//lib`, `/var/lib/../..`: a path whose meaning is not what it reads)."""
    if not v.startswith("/") or any(c.isspace() or ord(c) < 32 for c in v):
        return None
    segs = v[1:].removesuffix("/").split("/") if v != "/" else []
    return segs if segs and all(s not in ("", ".", "..") for s in segs) else None


# The host paths the probes may mount (the admission policy in manifests/rbac-policy.yaml allows the same): the
# kubelet's root directory wherever a distribution puts it (/var/lib/kubelet; k0s /var/lib/k0s/kubelet; MicroK8s
# /var/snap/microk8s/common/var/lib/kubelet) ends in `kubelet`; sysfs is /sys, or a directory named `sys`
# (a simulated PCI tree such as the test bed's), never /proc/sys. `/`, /etc or /root are refused.
def kubelet_dir_ok(v: str) -> bool:
    segs = _plain_host_dir(v)
    return segs is not None and segs[-1] == "kubelet"


def sysfs_path_ok(v: str) -> bool:
    segs = _plain_host_dir(v)
    return segs is not None and segs[-1] == "sys" and segs[0] != "proc"


KUBELET_DIR = Str(name="host path", rule="must be the absolute path of the kubelet's root directory, ending in "
                  "/kubelet (e.g. /var/lib/kubelet)", required=True, test=kubelet_dir_ok)
SYSFS_PATH = Str(name="host path", rule="must be /sys or an absolute path ending in /sys outside /proc",
                 required=True, test=sysfs_path_ok)
DURATION = Duration()
TIMEOUT = Duration(positive=True)
_ANY = ("any",)  # "any": the check does not compare this setting

# Sections, in the reference's order, with the text shown above their table ("" = none).
SECTIONS: dict[str, str] = {
    "": "",
    "nodes": "Which nodes are GPU nodes, and how many GPUs each must advertise.",
    "sharing": "GPU sharing (time-slicing, MPS). `auto` = from each node's GPU Feature Discovery (GFD) labels, so "
               "one config covers pools of different shapes.",
    "mig": "Multi-Instance GPU. `auto` = from each node's GFD labels.",
    "plugin": "Empty namespace/selector = find the plugin pods on each node by what they are (docs/vendors.md): "
              "DaemonSet pods mounting the kubelet's device-plugins directory, or with a known install layout's "
              "labels, in any namespace. Set them only for a layout those rules do not know. Empty socket = "
              "upstream's name per resource.",
    "operator": "GPU operator: where its validator pods run. Empty namespace = no operator, and its check is "
                "deselected.",
    "topology": "What each GPU node's kubelet is expected to run (read from its configz); `any` = not compared.",
    "kubelet": "How the kubelet's /metrics and /configz are read (gpuconform/kubeletroute.py): on each kubelet's own "
               "port as `get nodes/metrics` and `get nodes/configz` (manifests/rbac.yaml), the kubelet's serving "
               "certificate verified before the run's credentials are sent; or, where a kubelet cannot be reached "
               "or verified, through the API server's node proxy (`get nodes/proxy`, manifests/optional/rbac-nodes-proxy.yaml: "
               "a fallback, since that grant is also exec into any pod of the node).",
    "images": "The test pods' images: mirror them for an air-gapped cluster.",
    "thresholds": "Latency thresholds; every violation is reported.",
    "burst": "The latency check: single pods one after another, then a burst of pods at once.",
    "rollout": "The rollout rehearsal (docs/rollout.md): empty mode = off, and its check is deselected. The check "
               "runs first on each node, holds a pod on every free device but one, sends a small GPU pod at the "
               "last one every probeEvery, and watches the node while the plugin's (or DRA driver's) DaemonSet "
               "rolls: `restart` restarts the DaemonSet as `kubectl rollout restart` does (needs "
               "manifests/rbac-rollout.yaml), `observe` waits for your own upgrade (helm, the GPU operator).",
    "timeouts": "Every wait of the suite is bounded; fixed poll and grace intervals are in gpuconform/timing.py.",
    "limits": "qps/burst: the client's own rate limit; client-go's defaults (5/10) would make concurrent checks "
              "queue on the client for most of a run, and the apiserver's API Priority and Fairness still protects "
              "the server. concurrency: checks running at once across nodes (gpuconform/pytest_plugin/scheduler.py); on one node, "
              "checks that share its GPUs never overlap.",
    "coverage": "",
    "nodeProbe": "",
    "baseline": "`--gpuconform-baseline FILE`: a latency percentile regresses when it grew by more than "
                "latencyRelative AND by more than latencyAbsolute (timestamps have 1 s resolution); a check regresses "
                "when it passed before.",
}

# Docker's official busybox 1.36.1 by its multi-arch index digest, the one several public projects pin (read from
# their sources; this repository's machines cannot reach the registry to resolve it again). A tag can be pushed
# over; a digest names one image, and the pod fails with ERROR-F14-IMAGE-PULL rather than run something else.
BUSYBOX = "busybox:1.36.1@sha256:73aaf090f3d85aa34ee199857f03fa3a95c8ede2ffd4cc2cdb5b94e566b11662"

_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

FIELDS: tuple[Field, ...] = (
    Field("preset", Str(rule="must be empty or a preset name (table above)", test=lambda v: v in PRESETS), "",
          "a vendor profile from gpuconform/presets.py (table above), applied under this file's own keys"),
    Field("vendor", Enum(choices=("nvidia", "amd", "intel")), "nvidia",
          "which vendor tooling the workload probes may rely on; with amd or intel the probes that need NVIDIA "
          "tooling report NOTCHECKED-OPTIONAL"),
    Field("resourceName", Str(name="resource name", rule="must look like vendor.com/name", pattern=_RESOURCE,
                              required=True), "nvidia.com/gpu",
          "the extended resource the device plugin advertises and the test pods request (a node's sharing or MIG "
          "shape may turn it into `<resource>.shared` or `<domain>/mig-<profile>`)"),
    Field("nodes.selector", SELECTOR, "",
          "label selector of the nodes to certify; it selects, as everywhere in Kubernetes: a node advertising GPUs "
          "outside it is left out (e.g. \"pool=canary\" certifies the canary pool only). Empty = every node with one "
          "of the vendor's GPU node labels (nvidia: nvidia.com/gpu.present=true or NFD's "
          "feature.node.kubernetes.io/pci-10de.present=true) or one of its GPU resources in capacity. Either way a "
          "node that runs no container device plugin by design (GPU operator vm-passthrough or vm-vgpu, "
          "nvidia.com/gpu.deploy.device-plugin=false, a DRA driver) is left out as not applicable; the report "
          "header and the summary's left_out_nodes list every GPU-looking node left out and why"),
    Field("nodes.exclude", SELECTOR, "", 'label selector of nodes to leave alone, e.g. "type=kwok"; applied after '
          "nodes.selector"),
    Field("nodes.expectedGpus", AutoOr(kinds=(Int(min=0), MapOf(entry="pool")),
                                       name="`auto` or integer or mapping",
                                       rule="must be auto, a non-negative integer or a pool mapping"), "auto",
          "physical GPUs per node: auto (the vendor's discovery labels, e.g. GFD nvidia.com/gpu.count) | an integer "
          "| {poolLabelValue: integer} (needs nodes.poolLabel)"),
    Field("nodes.poolLabel", Str(), "", "label whose value selects the nodes.expectedGpus entry"),

    Field("sharing.strategy", Enum(choices=("auto", "none", "time-slicing", "mps")), "auto",
          "how each GPU is shared: auto (GFD gpu.sharing-strategy) | none | time-slicing | mps"),
    Field("sharing.replicas", AutoOr(kinds=(Int(min=1),), rule="must be auto or an integer >= 1"), "auto",
          "advertised devices per GPU when shared: auto (GFD gpu.replicas; Intel: the plugin's -shared-dev-num) | "
          "an integer"),
    Field("sharing.renamed", AutoOr(kinds=(Bool(),), rule="must be auto, true or false"), "auto",
          "whether shared GPUs are advertised as `<resource>.shared` (renameByDefault): auto = whichever of the two "
          "the node has"),

    Field("mig.strategy", Enum(choices=("auto", "none", "single", "mixed")), "auto",
          "the plugin's MIG strategy: auto (each node's own labels: MIG single where GFD's gpu.product names a MIG "
          "profile, mixed where it has mig-<profile>.count labels; the mig.strategy label alone, written on every "
          "GPU node, never makes a node MIG) | none | single | mixed"),
    Field("mig.profiles", MapOf(entry="profile", rule="must be a mapping of MIG profile to count"), {},
          'mixed: expected devices per profile and node, e.g. {"mig-1g.10gb": 7}; empty = from the GFD '
          "mig-<profile>.count labels"),

    Field("plugin.namespace", Str(), "",
          "the namespace the plugin pods (device plugin and DRA driver) may run in, or several comma-separated "
          "(where admins install them; tenants cannot write there): pods elsewhere, even doing a plugin's job, are "
          "set aside as look-alikes. Empty = any namespace, where only a DaemonSet's pod mounting the kubelet's "
          "plugin directory counts, whatever its labels (the report warns)"),
    Field("plugin.selector", SELECTOR, "",
          "label selector narrowing the plugin pods (where more than one DaemonSet does a plugin's job); a selected "
          "pod must still be a DaemonSet's pod mounting the device-plugins directory"),
    Field("plugin.socket", Str(), "",
          "the plugin's socket file in the kubelet's device-plugins directory (the socket check); empty = "
          "upstream's name per resource"),
    Field("plugin.maxRestarts", Int(min=0), 0, "restarts allowed before a plugin pod counts as crash-looping"),

    Field("operator.namespace", Str(), "", "namespace of the GPU operator's validator pods"),
    Field("operator.validatorSelector", SELECTOR, "app=nvidia-operator-validator",
          "label selector of the operator's validator pods"),

    Field("topology.policy", Enum(choices=_ANY + ("none", "best-effort", "restricted", "single-numa-node")),
          "single-numa-node", "the kubelet's expected topologyManagerPolicy"),
    Field("topology.cpuManagerPolicy", Enum(choices=_ANY + ("none", "static")), "static",
          "the kubelet's expected cpuManagerPolicy"),
    Field("topology.scope", Enum(choices=_ANY + ("container", "pod")), "any",
          "the kubelet's expected topologyManagerScope"),

    Field("images.vectorAdd", IMAGE, "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
          "the CUDA vector-add sample run by the workload check"),
    Field("images.probe", IMAGE, BUSYBOX,
          "the probe pods' image; needs sh, cat, ls; nvidia-smi comes from the runtime's injection. The default is "
          "Docker's official busybox, pinned by digest"),
    Field("images.nodeProbe", NODE_PROBE_IMAGE, "",
          "the node probe's image: the suite's own image (manifests/Dockerfile: Python with grpcio for the "
          "kubelet's PodResources API), built and pushed to your registry, ideally named by digest. No default: "
          "until it is set the node probe's checks report NOTCHECKED-OPTIONAL (node probe image not set) and pull "
          "nothing, since the probe runs as uid 0 beside the kubelet's sockets"),
    Field("images.pullPolicy", Enum(choices=("Always", "IfNotPresent", "Never")), "IfNotPresent",
          "imagePullPolicy of the test pods"),
    Field("images.pullSecrets", ListOf(item=lambda s: isinstance(s, str) and bool(s), name="list of names",
                                       rule="must be a list of secret names"), [],
          "imagePullSecrets of the test pods, by name (redacted in the reports)"),
    Field("runtimeClassName", Str(rule="must be empty or a RuntimeClass name (lower-case DNS subdomain)",
                                  test=lambda v: len(v) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(v))), "",
          "the RuntimeClass every workload and probe pod names; empty = the node's default runtime. Name what the "
          "cluster's GPU workloads use: GPU operator v25.10.0 and later (CDI on by default, `nvidia` kept for the "
          "operator's own pods), the operator's NRI plugin (`cdi.nriPluginEnabled`, no RuntimeClass) and a "
          "standalone plugin with the NVIDIA toolkit as the node's default runtime: empty; GPU operator before "
          "v25.10.0 or with `cdi.enabled: false`: `nvidia` (its `operator.runtimeClass`). An NVIDIA runtime class on "
          "a CDI install honours the pods' NVIDIA_VISIBLE_DEVICES=all: FAIL-ISOLATION, explained as this setting "
          "(NVIDIA/gpu-operator controllers/object_controls.go, deployments/gpu-operator/values.yaml; "
          "docs/vendors.md). The privileged node probe never names one"),
    Field("tolerations", Tolerations(), _TOLERATIONS,
          "tolerations put on every test pod, so it can run on tainted GPU nodes"),

    Field("thresholds.scheduleP99", DURATION, "5s", "create -> Scheduled event, 99th percentile"),
    Field("thresholds.startP50", DURATION, "5s", "create -> container started, median"),
    Field("thresholds.startP99", DURATION, "10s", "create -> container started, 99th percentile"),
    Field("thresholds.allocateP99", DURATION, "1s",
          "kubelet Allocate RPC histogram (bucket upper bound), 99th percentile"),

    Field("thresholds.rolloutWindow", DURATION, "30s",
          "the rollout rehearsal: the longest a node may go without a plugin pod serving it, or offer fewer GPUs "
          "than before, while its plugin rolls (GPU pods the kubelet admits meanwhile are rejected for good)"),

    Field("burst.size", Int(min=0), 0,
          "pods in the burst; 0 = all free GPUs on the node (capped by limits.maxGpusPerNode)"),
    Field("burst.samples", Int(min=1), 5, "single pods created one after another before the burst"),

    Field("rollout.mode", Str(rule="must be empty, restart or observe", test=lambda v: v in ("", "restart", "observe")),
          "",
          "`restart`: the suite restarts the DaemonSet; `observe`: it waits for your rollout; empty: no rehearsal "
          "(also `--gpuconform-rollout MODE`)"),
    Field("rollout.daemonSet", Str(rule="must be empty or NAMESPACE/NAME", test=lambda v: not v or (
        v.count("/") == 1 and all(_DNS_SUBDOMAIN.fullmatch(x) for x in v.split("/")))), "",
          "the DaemonSet to roll or watch, NAMESPACE/NAME; empty = the one owning each node's plugin pod"),
    Field("rollout.timeout", TIMEOUT, "600s",
          "how long the rehearsal waits for the rollout to start (observe) and to pass each node"),
    Field("rollout.probeEvery", TIMEOUT, "3s", "how often a small GPU pod is sent at the node during the rollout"),

    Field("timeouts.podStart", TIMEOUT, "120s", "create -> Running/terminal for one test pod (images pre-pulled)"),
    Field("timeouts.podComplete", TIMEOUT, "180s", "create -> Succeeded/Failed for run-to-completion probes"),
    Field("timeouts.apiRequest", TIMEOUT, "30s", "one API request"),
    Field("timeouts.cleanup", TIMEOUT, "25s", "deleting what the run created (also on SIGINT/SIGTERM)"),

    Field("limits.maxGpusPerNode", Int(min=1), 8, "the most GPUs one check requests on a node"),
    Field("limits.qps", Number(positive=True, rule="must be a positive number"), 50.0,
          "API requests per second, sustained"),
    Field("limits.burst", Int(min=1), 100, "API requests at once above qps"),
    Field("limits.concurrency", Int(min=1), 16, "checks running at once across nodes"),

    Field("coverage.minCertifiedFraction", Number(min=0, max=1, rule="must be between 0 and 1"), 1.0,
          "share of GPU nodes that must pass every check; below it a run with no failures exits 6 (nothing "
          "certified)"),

    Field("nodeProbe.enabled", Bool(), True,
          "the privileged, read-only hostPath probes: the plugin socket listing, and the node probe reading the "
          "kubelet's PodResources API, its device checkpoint and the PCI tree (optional)"),
    Field("nodeProbe.kubeletDir", KUBELET_DIR,
          "/var/lib/kubelet", "the kubelet's root directory on the nodes (--root-dir): device-plugins/ and "
          "pod-resources/ are read below it (mounted read-only, nothing else of it)"),
    Field("nodeProbe.sysfsPath", SYSFS_PATH, "/sys",
          "the host directory whose bus/pci/devices the node probe counts the vendor's GPU PCI functions in "
          "(mounted read-only, recursively where the runtime can)"),
    Field("kubelet.access", Enum(choices=kubeletroute.ACCESS), "auto",
          "`auto`: each kubelet's own port, and the node proxy where that kubelet cannot be reached or verified and "
          "nodes/proxy is granted; `direct`: the kubelet's port only; `proxy`: the node proxy only (a runner with no "
          "network path to the nodes' kubelet port)"),
    Field("kubelet.caFile", Str(name="file path", rule="must be empty or the path of a readable file (PEM CA bundle)",
                                test=lambda v: os.path.isfile(v) and os.access(v, os.R_OK)), "",
          "the CA bundle the kubelets' serving certificates are verified against; empty = the CA the API server is "
          "trusted with (the kubeconfig's, or the service account's ca.crt), which signs serving certificates "
          "issued through serverTLSBootstrap. A kubelet whose certificate does not verify is not read directly"),
    Field("keepNamespaceOnFailure", Bool(), False,
          "keep a failed check's pods and the run's namespace for inspection (delete them later with "
          "`make cleanup`)"),

    Field("baseline.latencyRelative", Number(min=0, rule="must be a number >= 0 (0.2 = 20%)"), 0.2,
          "a latency percentile regresses only when it grew by more than this share (0.2 = 20%) and by more than "
          "baseline.latencyAbsolute"),
    Field("baseline.latencyAbsolute", DURATION, "1s",
          "a latency percentile regresses only when it grew by more than this and by more than "
          "baseline.latencyRelative"),
    Field("baseline.allowNewFailures", Int(min=0), 0,
          "checks that passed in the baseline and do not pass now, tolerated before the comparison fails"),
)

BY_KEY: dict[str, Field] = {f.key: f for f in FIELDS}


@dataclass(frozen=True)
class CrossRule:
    """A rule relating two fields: `broken(cfg)` True means the value of `key` is refused with `message`."""

    key: str
    broken: Callable[["Config"], bool]
    message: str


CROSS_RULES: tuple[CrossRule, ...] = (
    CrossRule("nodes.expectedGpus",
              lambda c: isinstance(c.get("nodes.expectedGpus"), dict) and not c.get("nodes.poolLabel"),
              "is a per-pool mapping, so nodes.poolLabel must name the pool label"),
)

# Variables the suite and its tools read outside the schema (see the module docstring), with the reason.
OUTSIDE_ENV: dict[str, str] = {
    "GPUCONFORM_CONFIG": "the config file (like `--gpuconform-config`); it cannot be set in the file it names",
    "GPUCONFORM_CONTEXT": "the kubeconfig context (like `--gpuconform-context`): which cluster, chosen with "
                          "`--k8s-kubeconfig` / `KUBECONFIG`, not a setting of the checks",
    "KUBECONFIG": "the kubeconfig file when `--k8s-kubeconfig` is not given (Kubernetes client convention)",
    "KUBERNETES_SERVICE_HOST": "set by Kubernetes in a pod: the suite then uses its ServiceAccount (in-cluster "
                               "config)",
    "GPUCONFORM_REPORT_DIR": "the in-cluster Job wrapper's report directory (manifests/gpuconform_job.py)",
    "GPUCONFORM_RETRIEVAL_WINDOW": "seconds the Job wrapper keeps the reports fetchable after the run",
}
CONFIG_FILE_ENV, CONTEXT_ENV = "GPUCONFORM_CONFIG", "GPUCONFORM_CONTEXT"


def sections() -> dict[str, list[Field]]:
    """Section name ("" = top level) -> its fields, in the schema's order."""
    out: dict[str, list[Field]] = {s: [] for s in SECTIONS}
    for f in FIELDS:
        out.setdefault(f.section, []).append(f)
    return out


def _tree() -> dict[str, Any]:
    """The nested key structure: a section is a dict, a field its Field."""
    root: dict[str, Any] = {}
    for f in FIELDS:
        cur = root
        parts = f.key.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = f
    return root


TREE = _tree()


def defaults() -> dict[str, Any]:
    """A fresh nested dict of every default, shaped like the YAML file."""
    def build(node: dict[str, Any]) -> dict[str, Any]:
        return {k: build(v) if isinstance(v, dict) else copy.deepcopy(v.default) for k, v in node.items()}
    return build(TREE)


DEFAULTS: dict[str, Any] = defaults()  # derived from FIELDS (read-only by convention; load() copies it)


# ------------------------------------------------------------------ typed access

_MISSING = object()


@dataclass(frozen=True)
class Config:
    data: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # dotted key -> where its value came from

    def get(self, dotted: str, default: Any = _MISSING) -> Any:
        """The value of a field ("burst.samples") or a section's mapping ("thresholds"). A key the schema does not
        know raises KeyError; one missing from `data` (a partial recorded config) reads as its default."""
        node: Any = TREE
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                raise KeyError(f"{dotted!r} is not a config key (see docs/config-reference.md)")
            node = node[part]
        cur: Any = self.data
        for part in dotted.split("."):
            if not isinstance(cur, Mapping) or part not in cur:
                if default is not _MISSING:
                    return default
                return copy.deepcopy(node.default) if isinstance(node, Field) else {}
            cur = cur[part]
        return cur

    def __getitem__(self, key: str) -> Any:
        raise TypeError(f"read the config as cfg.get({key + '.<key>'!r}), not cfg[{key!r}]: one access style")

    def seconds(self, dotted: str) -> float:
        """A duration field in seconds."""
        f = BY_KEY.get(dotted)
        if f is None or not isinstance(f.kind, Duration):
            raise KeyError(f"{dotted!r} is not a duration key")
        return parse_duration(self.get(dotted), dotted)

    @property
    def timeouts(self) -> "Timeouts":
        """The timeouts.* keys as attributes (a wait names its timeout by attribute, not by key string)."""
        return Timeouts(**{attr: self.seconds(key) for attr, key in Timeouts.KEYS.items()})

    def redacted(self) -> dict[str, Any]:
        """The config as the reports show it (gpuconform/redaction.py, the one rule)."""
        from .redaction import redact

        return redact(self.data)


@dataclass(frozen=True)
class Timeouts:
    """Every timeouts.* key in seconds; `key(attr)` names the config key (messages say what to raise)."""

    pod_start: float
    pod_complete: float
    api_request: float
    cleanup: float

    KEYS = {"pod_start": "timeouts.podStart", "pod_complete": "timeouts.podComplete",
            "api_request": "timeouts.apiRequest", "cleanup": "timeouts.cleanup"}

    @classmethod
    def key(cls, attr: str) -> str:
        return cls.KEYS[attr]


def view(cfg: "Config | Mapping[str, Any]") -> Config:
    """`cfg` as a Config: pure functions take the run's Config or a recorded config's plain dict."""
    return cfg if isinstance(cfg, Config) else Config(dict(cfg))


# ------------------------------------------------------------------ loading

def _merge(data: dict, over: dict, tree: dict, where: str, sources: dict, prefix: str = "") -> None:
    for key, value in over.items():
        dotted = f"{prefix}{key}"
        if key not in tree:
            known = ", ".join(sorted(tree))
            raise ConfigError(f"{where}: unknown key '{dotted}' (known keys here: {known})")
        if isinstance(tree[key], dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: '{dotted}' must be a mapping, got {type(value).__name__}")
            _merge(data[key], value, tree[key], where, sources, dotted + ".")
        else:
            data[key] = value
            sources[dotted] = where


def _set(data: dict, dotted: str, value: Any, sources: dict, where: str) -> None:
    cur = data
    parts = dotted.split(".")
    for p in parts[:-1]:
        cur = cur[p]
    cur[parts[-1]] = value
    sources[dotted] = where


def _from_text(f: Field, raw: str, where: str) -> Any:
    try:
        return f.kind.from_text(raw)
    except ValueError as e:
        raise ConfigError(f"{where}: '{f.key}' {e}") from None


def _read_file(path: str | os.PathLike) -> dict:
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {p} is a directory, not a YAML file") from None
    except OSError as e:
        raise ConfigError(f"config file {p} cannot be read ({e.strerror or type(e).__name__})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {p} is larger than {MAX_CONFIG_BYTES} bytes: not a suite config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {p} is not UTF-8 text (byte {raw[e.start]:#04x} at offset {e.start})") \
            from None
    try:
        loaded = _safe_yaml(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{p}{at}: not valid YAML ({_yaml_problem(e)})") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys, got {type(loaded).__name__}")
    return loaded


def load(path: str | os.PathLike | None, overrides: dict[str, str] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """Builds the effective config. `overrides` are `dotted.key=value` pairs from the command line."""
    data = defaults()
    sources: dict[str, str] = {}
    overrides = overrides or {}
    loaded = _read_file(path) if path else {}
    env = os.environ if environ is None else environ
    preset, preset_from = loaded.get("preset", ""), str(path)
    if BY_KEY["preset"].env in env:
        preset, preset_from = env[BY_KEY["preset"].env], f"environment variable {BY_KEY['preset'].env}"
    if "preset" in overrides:
        preset, preset_from = overrides["preset"], "--gpuconform-set preset"
    if preset:  # applied first, under the file's own keys
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ConfigError(f"{preset_from}: 'preset' must be a preset name, got {preset!r} "
                              f"(known: {', '.join(PRESETS)})")
        _merge(data, copy.deepcopy(PRESETS[preset][1]), TREE, f"preset {preset}", sources)
    if loaded:
        _merge(data, loaded, TREE, str(path), sources)
    for f in FIELDS:
        if f.env in env:
            where = f"environment variable {f.env}"
            _set(data, f.key, _from_text(f, env[f.env], where), sources, where)
    for dotted, raw in overrides.items():
        if dotted not in BY_KEY:
            raise ConfigError(f"--gpuconform-set {dotted}=...: unknown key '{dotted}'")
        where = f"--gpuconform-set {dotted}"
        _set(data, dotted, _from_text(BY_KEY[dotted], raw, where), sources, where)
    cfg = Config(data, sources)
    validate(cfg)
    return cfg


def errors(cfg: Config) -> Iterable[str]:
    """Every problem of `cfg`, one line each, naming the value's source; the schema's order, then CROSS_RULES."""
    for f in FIELDS:
        reason = f.kind.check(cfg.get(f.key))
        if reason:
            yield f"{cfg.sources.get(f.key, 'default')}: '{f.key}' {reason}"
    for rule in CROSS_RULES:
        if rule.broken(cfg):
            yield f"{cfg.sources.get(rule.key, 'default')}: '{rule.key}' {rule.message}"


def validate(cfg: Config) -> None:
    """Raises ConfigError with the first problem (one line)."""
    for problem in errors(cfg):
        raise ConfigError(problem)
