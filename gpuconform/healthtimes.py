"""How long a device that went out of service during a run took to reach each layer (issue 30 item 4): evidence
beside FAIL-F03-UNHEALTHY-DEVICES, never a verdict. Pure: the I/O (pytest_plugin/paths.py health_through_run)
hands in the objects and log lines it read at the end of the run.

Each layer's time is the one its own writer left, so every figure says where it comes from:
- plugin: the first line of the plugin's log naming the device unhealthy (the container runtime's timestamp, the
  node's clock; NVIDIA's plugin: "'nvidia.com/gpu' device marked unhealthy: GPU-...", internal/plugin/server.go,
  sent to the kubelet in the same step); on DRA, the device taint's `timeAdded` in the driver's slice;
- kubelet: the kubelet keeps no readable time of a device's health change, so none; its writes below show it;
- node status (device plugin): the kubelet's last write of the node's status (managedFields, API server clock),
  which carries the lower allocatable; on DRA the driver's last write of the slice;
- scheduler: it reads the same object (node allocatable; the slice's taints), so the same write;
- holding pod: the last write of the status of a pod whose `allocatedResourcesStatus` (KEP-4680) reports the
  device Unhealthy (API server clock): at or after the kubelet told the pod (a driver without a health service
  reports Unknown: no time).
Times are seconds after the earliest layer's (the plugin's where read); none is clamped."""

from __future__ import annotations

import re
from datetime import datetime

from .cleanup import parse_time

LAYERS = ("plugin", "kubelet", "node status", "scheduler", "holding pod")
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))\s")


def log_time(line: str) -> datetime | None:
    """The timestamp `kubectl logs --timestamps` puts before a line (RFC 3339, nanoseconds cut to microseconds)."""
    m = _LOG_TIME.match(line)
    if not m:
        return None
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", m.group(1))
    return parse_time(stamp)


def plugin_marked(device: str, log: str) -> tuple[datetime | None, str]:
    """When the plugin's log first names `device` as unhealthy, and that line."""
    for line in log.splitlines():
        if device in line and "unhealthy" in line.lower() and (t := log_time(line)):
            return t, line[:200]
    return None, ""


def status_written(obj: dict, *owned: str) -> datetime | None:
    """When the API server stored the last write of `obj`'s status fields `owned` (any of them: "f:allocatable",
    "f:containerStatuses", ...), from the managedFields entries that own one (the API server's clock); None when
    not recorded."""
    times = [parse_time(m.get("time")) for m in (obj.get("metadata") or {}).get("managedFields") or []
             if set(owned) & set((m.get("fieldsV1") or {}).get("f:status") or {})]
    return max((t for t in times if t), default=None)


def slice_written(slices: list[dict], driver: str, device: str) -> tuple[datetime | None, datetime | None]:
    """(the taint's timeAdded, the slice's last write) for a DRA device named "pool/device"."""
    pool, _, name = device.partition("/")
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != driver or (spec.get("pool") or {}).get("name") != pool:
            continue
        for d in spec.get("devices") or []:
            if d.get("name") == name:
                added = [parse_time(t.get("timeAdded")) for t in d.get("taints") or []]
                writes = [parse_time(m.get("time")) for m in (s.get("metadata") or {}).get("managedFields") or []]
                return min((t for t in added if t), default=None), max((t for t in writes if t), default=None)
    return None, None


def unhealthy_in(pod: dict, device: str | None) -> bool:
    """Whether the pod's allocatedResourcesStatus reports `device` (a device plugin's device ID) Unhealthy, or,
    with `device` None (a DRA pod known to hold the device through its claim: the kubelet names a DRA device by
    its CDI ID, not its name), any device of the pod. Unknown (a driver without a health service) is no report."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        for rs in cs.get("allocatedResourcesStatus") or []:
            for r in rs.get("resources") or []:
                if (device is None or r.get("resourceID") == device) and r.get("health") == "Unhealthy":
                    return True
    return False


def layer_times(device: str, plugin: tuple[datetime | None, str], status: tuple[datetime | None, str],
                pods: list[dict], holding: bool = False) -> dict:
    """The layers' times for one device: {"device", "from", layer: {"after_s" (None: not seen), "source"}}.
    `plugin`: (time, where from); `status`: the node's (or slice's) last write and what it is; `pods`: the pods on
    the node (`holding`: only those that hold the device, as a DRA pod's claims say)."""
    holders = [(status_written(p, "f:containerStatuses"), p["metadata"]["name"]) for p in pods
               if unhealthy_in(p, None if holding else device)]
    held_at, holder = min(((t, n) for t, n in holders if t), default=(None, ""))
    at: dict[str, tuple[datetime | None, str]] = {
        "plugin": plugin,
        "kubelet": (None, "the kubelet records no readable time of a device's health change: its writes are the "
                          "node status and the holding pod's"),
        "node status": status,
        "scheduler": (status[0], f"reads the same write: {status[1]}"),
        "holding pod": (held_at, f"last status write of {holder}, whose allocatedResourcesStatus reports it "
                                 f"Unhealthy" if holder else "no pod on the node reported it Unhealthy"),
    }
    known = [t for t, _ in at.values() if t]
    base = plugin[0] or min(known, default=None)
    out: dict = {"device": device, "from": "plugin" if plugin[0] else "earliest layer"}
    for layer in LAYERS:
        t, source = at[layer]
        out[layer] = {"after_s": round((t - base).total_seconds(), 2) if t and base else None, "source": source}
    return out


def render(times: list[dict]) -> str:
    """One line per device: "GPU-1: plugin +0.0s, kubelet n/a, node status +9.8s, ..."."""
    def fig(v: float | None) -> str:
        return "n/a" if v is None else f"{v:+.1f}s"
    return "; ".join(f"{t['device']}: " + ", ".join(f"{layer} {fig(t[layer]['after_s'])}" for layer in LAYERS)
                     for t in times)
