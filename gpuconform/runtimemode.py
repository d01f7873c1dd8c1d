"""How an NVIDIA install hands GPUs to workloads, recognised from the cluster's RuntimeClasses and the device plugin
pod's device-list-strategy, and whether the configured `runtimeClassName` fits it (pure). The isolation check uses
it to say when a pod that requested no GPU sees GPUs because of the configuration rather than the plugin. The
upstream facts: docs/vendors.md, "GPU operator runtime classes and CDI"."""

from __future__ import annotations

from dataclasses import dataclass

from . import vendors

CDI = "cdi"  # the plugin lists devices through CDI only; the operator's nvidia-cdi/nvidia-legacy may be present
LEGACY = "legacy-runtime"  # the plugin lists devices for the NVIDIA runtime (envvar or volume-mounts)
NRI = "nri"  # the operator's NRI plugin injects CDI devices; no NVIDIA RuntimeClass exists
UNKNOWN = "unknown"

STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")  # api/config/v1/consts.go (v0.19.3)
DEFAULT_STRATEGY = ["envvar"]  # cmd/nvidia-device-plugin/main.go (v0.19.3): the flag's default
OPERATOR_CDI_CLASSES = ("nvidia-cdi", "nvidia-legacy")  # gpu-operator assets/pre-requisites/02{1,2}0_*.yaml
NVIDIA_HANDLERS = ("nvidia", "nvidia-cdi", "nvidia-legacy")  # the toolkit's runtime handlers (nvidia-ctk runtime)
NRI_ANNOTATION_PREFIX = "nvidia.cdi.k8s.io/container."  # gpu-operator object_controls.go setNRIPluginAnnotation


@dataclass(frozen=True)
class Mode:
    """What the install was recognised as (`mode`: CDI, LEGACY, NRI or UNKNOWN), in words (`why`), and the inputs."""

    mode: str
    why: str
    strategies: list[str] | None = None  # the plugin's device-list-strategy (None: not known)
    strategy_source: str = ""
    runtime_classes: dict[str, str] | None = None  # name -> handler (None: not readable)
    note: str = ""  # why the RuntimeClasses are missing ("RuntimeClasses not readable: ...")
    operator: bool = False  # the GPU operator's CDI RuntimeClasses are present

    def evidence(self) -> dict:
        return {"mode": self.mode, "why": self.why, "device-list-strategy": self.strategies,
                "strategy from": self.strategy_source,
                "runtime classes": self.runtime_classes if self.runtime_classes is not None else self.note}


def _split(value: str) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()]


def _plugin_containers(plugin_pods: list[dict]) -> list[tuple[str, dict, list[str]]]:
    """(pod name, container, argv) of the NVIDIA device plugin's own containers: the operator's
    `nvidia-device-plugin` (/bin/entrypoint.sh), the Helm chart's `nvidia-device-plugin-ctr`; not the chart's
    config-manager sidecar nor a gpu-feature-discovery container."""
    out = []
    for p in plugin_pods:
        for c in p.get("spec", {}).get("containers") or []:
            argv = [*(c.get("command") or []), *(c.get("args") or [])]
            text = " ".join([c.get("name") or "", *argv])
            if "device-plugin" in text and "config-manager" not in text and "feature-discovery" not in text:
                out.append((p.get("metadata", {}).get("name", "?"), c, argv))
    return out


def device_list_strategy(plugin_pods: list[dict]) -> tuple[list[str] | None, str]:
    """The plugin's device-list-strategy and where it came from: `--device-list-strategy` in the container's
    command or args (repeatable, comma-separated; it wins over the environment, as urfave/cli flags do), else the
    env DEVICE_LIST_STRATEGY, else the default `envvar` unless a config file is named (it may set
    deviceListStrategy: not known). (None, why) without an NVIDIA plugin container."""
    containers = _plugin_containers(plugin_pods)
    for name, c, argv in containers:
        found = [s for v in vendors.flag_values(argv, "device-list-strategy") for s in _split(v)]
        if found:
            return found, f"pod {name} container {c.get('name')} arg --device-list-strategy"
        env = {e.get("name"): e for e in c.get("env") or []}
        e = env.get("DEVICE_LIST_STRATEGY")
        if e is not None:
            if "value" not in e:
                return None, f"pod {name} env DEVICE_LIST_STRATEGY is not a literal value"
            return _split(e.get("value") or ""), f"pod {name} container {c.get('name')} env DEVICE_LIST_STRATEGY"
    for name, c, argv in containers:
        if any(e.get("name") == "CONFIG_FILE" for e in c.get("env") or []) or \
                vendors.flag_values(argv, "config-file"):
            return None, f"pod {name} names a config file (it may set deviceListStrategy)"
        return list(DEFAULT_STRATEGY), f"pod {name} container {c.get('name')}: not set (the plugin's default)"
    return None, "no NVIDIA device plugin container found"


def _nri(plugin_pods: list[dict]) -> bool:
    return any(k.startswith(NRI_ANNOTATION_PREFIX)
               for p in plugin_pods for k in (p.get("metadata", {}).get("annotations") or {}))


def recognise(runtime_classes: list[dict] | None, plugin_pods: list[dict], note: str = "") -> Mode:
    """The install's mode from the RuntimeClass objects (None: not readable, `note` says why) and the node's
    plugin pods."""
    rcs = None if runtime_classes is None else {
        (r.get("metadata") or {}).get("name", ""): r.get("handler", "") for r in runtime_classes}
    strategies, source = device_list_strategy(plugin_pods)
    kw = dict(strategies=strategies, strategy_source=source, runtime_classes=rcs, note=note)
    nvidia_rcs = sorted(n for n, h in (rcs or {}).items() if h in NVIDIA_HANDLERS or n in NVIDIA_HANDLERS)
    operator = rcs is not None and any(n in rcs for n in OPERATOR_CDI_CLASSES)
    listed = f"device-list-strategy {','.join(strategies or [])} ({source})"
    if strategies is None:
        return Mode(UNKNOWN, f"the plugin's device-list-strategy is not known ({source})", operator=operator, **kw)
    if strategies and all(s.startswith("cdi-") for s in strategies):
        if _nri(plugin_pods) or (rcs is not None and not nvidia_rcs):
            how = "the GPU operator's NRI plugin (its annotation is on the plugin pod)" if _nri(plugin_pods) else \
                "the runtime's native CDI or the GPU operator's NRI plugin"
            return Mode(NRI, f"NRI / no NVIDIA RuntimeClass: the plugin lists devices through CDI ({listed}) and "
                             f"{how} injects them", **kw)
        if operator:
            return Mode(CDI, f"GPU operator CDI mode (RuntimeClasses {', '.join(nvidia_rcs)}; the plugin lists "
                             f"devices through CDI: {listed})", operator=True, **kw)
        return Mode(CDI, f"CDI: the plugin lists devices through CDI only ({listed})"
                         + ("" if rcs is not None else f"; {note or 'RuntimeClasses not read'}"), **kw)
    if any(s in ("envvar", "volume-mounts") for s in strategies):
        where = f"RuntimeClass(es) {', '.join(nvidia_rcs)}" if nvidia_rcs else \
            "no NVIDIA RuntimeClass (the NVIDIA runtime must be the default)" if rcs is not None else \
            (note or "RuntimeClasses not read")
        return Mode(LEGACY, f"legacy runtime mode: the NVIDIA runtime injects the devices ({listed}; {where})",
                    operator=operator, **kw)
    return Mode(UNKNOWN, f"unrecognised {listed}", operator=operator, **kw)


def mismatch(mode: Mode, runtime_class: str) -> str | None:
    """Why the configured `runtimeClassName` does not fit the install (None when it fits or cannot be told):
    on a CDI or NRI install every NVIDIA runtime class honours NVIDIA_VISIBLE_DEVICES in unprivileged pods while
    the default runtime injects only the allocated CDI devices, so the suite's pods must name none."""
    if not runtime_class or mode.mode not in (CDI, NRI):
        return None
    handler = (mode.runtime_classes or {}).get(runtime_class, "")
    if runtime_class not in NVIDIA_HANDLERS and handler not in NVIDIA_HANDLERS:
        return None
    what = "serves workloads through CDI" if mode.mode == CDI else \
        "serves workloads through CDI without an NVIDIA RuntimeClass (native CDI or the GPU operator's NRI plugin)"
    meant = "; the GPU operator, CDI by default since v25.10.0, keeps it for its own pods" if mode.operator else ""
    return (f"this install {what}; the `{runtime_class}` runtime class runs the NVIDIA container runtime, which "
            f"honours NVIDIA_VISIBLE_DEVICES=all for any pod (accept-nvidia-visible-devices-envvar-when-unprivileged "
            f"defaults to true{meant}), so leave runtimeClassName empty: workloads get exactly their allocated "
            f"devices from the runtime's native CDI")
