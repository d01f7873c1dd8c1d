"""Registration verdicts (tests/registration): the plugin pod, the node's capacity, the kubelet's registration
counter, the plugin socket and the GPU operator's validator, each from what the check read."""

from __future__ import annotations

from .. import metrics
from ..counts import Expectation
from .common import Finding
from .counts import registration_finding
from ..discovery import Found
from ..nodes import condition

REGISTRATIONS = "kubelet_device_plugin_registration_total"
PROCESS_START = "process_start_time_seconds"


def plugin_findings(node: str, found: Found, max_restarts: int) -> list[Finding]:
    """No device-plugin pod on the GPU node at all, or one crash-looping or not Ready (plugin_pod_findings)."""
    if not found.pods:
        companions = f"; companions seen: {', '.join(found.companions)}" if found.companions else ""
        look_alikes = f"; look-alikes set aside: {', '.join(found.look_alikes)}" if found.look_alikes else ""
        return [Finding("FAIL-F08-PLUGIN-NOT-READY", f"{node}: no device-plugin pod runs on this GPU node "
                        f"({found.why}{companions}{look_alikes}). Check the plugin DaemonSet's node selector and "
                        "tolerations, or set plugin.namespace / plugin.selector")]
    return plugin_pod_findings(node, found.pods, max_restarts)


# Terminations a container did not make itself: its node or runtime lost it (a reboot, the runtime's state gone).
# The kubelet records ContainerStatusUnknown for a container it can no longer locate (pkg/kubelet/kubelet_pods.go);
# containerd's CRI gives a container it reloads without its task exit 255, reason "Unknown" (internal/cri/server
# helpers: unknownExitCode, unknownExitReason).
NODE_LOST = ("ContainerStatusUnknown", "Unknown")


def own_restarts(cs: dict) -> int:
    """The container's restarts less the last one where its node or runtime lost it (NODE_LOST): every pod on a
    rebooted node restarts once, and that restart is not the plugin's. Earlier terminations are not recorded, so
    only the last can be told apart."""
    n = int(cs.get("restartCount") or 0)
    last = (cs.get("lastState") or {}).get("terminated") or {}
    return n - 1 if n and last.get("reason") in NODE_LOST else n


def plugin_pod_findings(node: str, plugin_pods: list[dict], max_restarts: int) -> list[Finding]:
    """A plugin pod crash-looping (or restarted more than allowed, its node's restart not counted) or not Ready."""
    out: list[Finding] = []
    for p in plugin_pods:
        name = f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
        for cs in p.get("status", {}).get("containerStatuses", []) or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            last = (cs.get("lastState") or {}).get("terminated") or {}
            if waiting.get("reason") == "CrashLoopBackOff" or own_restarts(cs) > max_restarts:
                out.append(Finding("FAIL-F08-PLUGIN-CRASHLOOP",
                                   f"{node}: plugin pod {name} container {cs['name']} restarted "
                                   f"{cs.get('restartCount', 0)} times (allowed {max_restarts}), state "
                                   f"{waiting.get('reason') or 'running'}; last termination: exit "
                                   f"{last.get('exitCode')} {last.get('reason')}: "
                                   f"{(last.get('message') or '').strip()[:400] or '(no termination message)'}"))
        if not out and condition(p, "Ready") != "True":
            out.append(Finding("FAIL-F08-PLUGIN-NOT-READY", f"{node}: plugin pod {name} is not Ready "
                               f"(phase {p.get('status', {}).get('phase')})"))
    return out


def capacity_findings(node: dict, exp: Expectation) -> list[Finding]:
    """Each of the node's GPU resources present in capacity with a non-zero count (and allocatable)."""
    out = [f for res in exp.resources if (f := registration_finding(node, res, exp)) is not None]
    if not exp.resources:
        out.append(Finding("FAIL-F09-MIG-MISMATCH", f"{node['metadata']['name']}: MIG strategy mixed but no "
                           "nvidia.com/mig-*.count labels and no mig.profiles configured: no resource to look for"))
    return out


def socket_findings(node: str, listing: str, want: list[str | tuple[str, ...]], exit_code: int | None = 0,
                    where: str = "device-plugins", code: str = "FAIL-F01-NOT-REGISTERED") -> list[Finding]:
    """`ls -la` of the kubelet's registration directory `where` (the probe's log, `exit_code` its exit status) must
    show every socket of `want`: a name, or a tuple of names any one of which will do (a DRA driver's registration
    socket, whose name a rolling update derives from its pod: AllocationPath.sockets). `code` when one is missing
    (the path's not-registered code); a probe that failed gives no verdict (ERROR-API)."""
    if exit_code != 0:
        return [Finding("ERROR-API", f"{node}: socket probe exited {exit_code}: {listing[-300:]}")]
    entries = [ln.split()[-1] for ln in listing.splitlines()[1:] if ln.split()]
    options = [(w,) if isinstance(w, str) else tuple(w) for w in want]
    missing = [o for o in options if not set(o) & set(entries)]
    if not missing:
        return []
    named = ", ".join(o[0] if len(o) == 1 else f"{o[0]} (or one of {', '.join(o[1:])})" for o in missing)
    return [Finding(code, f"{node}: {named} not found in the kubelet's {where} directory (expected "
                          f"{[o[0] for o in options]}; entries: {[e for e in entries if e not in ('.', '..')]})")]


def registration_counts(samples: list[metrics.Sample], resources: list[str]) -> dict[str, float | None]:
    """kubelet_device_plugin_registration_total per resource from the kubelet's /metrics (None: no sample)."""
    return {r: metrics.value(samples, REGISTRATIONS, resource_name=r) for r in resources}


def kubelet_started(samples: list[metrics.Sample]) -> float | None:
    """The kubelet's process_start_time_seconds (None when it does not export it)."""
    return metrics.value(samples, PROCESS_START)


def registration_findings(node: str, now: dict[str, float | None], before: dict[str, float | None],
                          started: float | None, started_before: float | None,
                          absent: dict[str, str] | None = None,
                          code: str = "FAIL-F01-NOT-REGISTERED") -> list[Finding]:
    """Neither the kubelet restarted nor a registration counter grew since the run started (F11: a re-registration
    means a plugin or kubelet restart), and each of `now`'s registrations is present (`code`, the path's
    not-registered code; `absent` says why one is missing, by key). `now`/`before` map what registers (a resource,
    a DRA driver) to the kubelet's count of its registrations, None where it has none: the device plugin's from
    registration_counts, a DRA driver's from dra_registrations. A restart comes first: right after one, the
    registration is absent until the plugin has registered again, and the restart is the cause to name. Upstream
    (kubernetes v1.34): the device-plugin counter is an in-memory CounterVec in the kubelet's legacy registry
    (pkg/kubelet/metrics/metrics.go, DevicePluginRegistrationCount), incremented by the registration server's
    Register (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go), so a new kubelet process has no sample for a
    resource until its plugin registers again."""
    out = []
    if started is not None and started_before is not None and started != started_before:
        out.append(Finding("FAIL-F11-REGISTRATION-UNSTABLE", f"{node}: the kubelet restarted during the run (process "
                           f"start time {started_before:.0f} -> {started:.0f}); its registrations restarted at "
                           f"{now}, so every plugin had to register again and allocatable may have dropped "
                           "meanwhile"))
    absent = absent or {}
    out += [Finding(code, f"{node}: " + absent.get(key, f"{REGISTRATIONS}{{resource_name=\"{key}\"}} is absent: the "
                                             "kubelet has no registration for this resource since it started"))
            for key, n in now.items() if n is None]
    for key, n in now.items():
        if n is not None and before.get(key) is not None and n > before[key]:
            out.append(Finding("FAIL-F11-REGISTRATION-UNSTABLE", f"{node}: registration counter for {key} went "
                               f"{before[key]:g} -> {n:g} during the run (plugin or kubelet restarted)"))
    return out


# The kubelet's plugin manager gauge (kubernetes v1.37.2 pkg/kubelet/pluginmanager/metrics/metrics.go, ALPHA):
# plugins by socket_path and state; "actual_state_of_world" holds the plugins whose registration completed
# (a DRA driver's, a CSI driver's), "desired_state_of_world" the sockets the watcher found.
PLUGIN_MANAGER = "plugin_manager_total_plugins"


def dra_registrations(samples: list[metrics.Sample], driver: str,
                      sockets: tuple[str, ...]) -> tuple[dict[str, float | None], dict[str, str], dict]:
    """A DRA driver's registration as registration_findings takes it, from the kubelet's plugin manager gauge: 1
    when one of its registration `sockets` (AllocationPath.sockets) is in the actual state of world, None (with
    why, for `absent`) when it is only found (desired state) or not known. Returns (now, absent, evidence)."""
    states: dict[str, list[str]] = {}
    for name, labels, value in samples:
        ls = dict(labels)
        sock = ls.get("socket_path", "")
        if name == PLUGIN_MANAGER and value > 0 and sock.rsplit("/", 1)[-1] in sockets:
            states.setdefault(ls.get("state", ""), []).append(sock)
    ev = {"driver": driver, "registered (actual state)": states.get("actual_state_of_world", []),
          "found (desired state)": states.get("desired_state_of_world", []), "its socket names": list(sockets)}
    if states.get("actual_state_of_world"):
        return {driver: 1.0}, {}, ev
    found = states.get("desired_state_of_world")
    why = (f"its socket {found[0]} is found but the registration did not complete" if found else
           "no socket of it is known to the plugin manager")
    return {driver: None}, {driver: f"the kubelet's {PLUGIN_MANAGER} has no registered plugin of {driver}: {why}"}, ev


def operator_findings(node: str, validators: list[dict], selector: str, namespace: str) -> list[Finding]:
    """The GPU operator's validator pod on the node is Ready (driver, toolkit, CUDA and plugin validations passed);
    otherwise ERROR-OPERATOR-NOT-READY naming the stuck (init) containers."""
    if not validators:
        return [Finding("ERROR-OPERATOR-NOT-READY", f"{node}: no validator pod matching {selector!r} in namespace "
                        f"{namespace} runs on this GPU node (operator not deployed here?)")]
    out = []
    for p in validators:
        st = p.get("status", {})
        if condition(p, "Ready") == "True":
            continue
        stuck = []
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            state = cs.get("state") or {}
            why = (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get("reason")
            last = (cs.get("lastState") or {}).get("terminated") or (state.get("terminated") or {})
            if not cs.get("ready") and why:
                msg = (last.get("message") or "").strip()[:200]
                stuck.append(f"{cs['name']}: {why}, restarts {cs.get('restartCount', 0)}"
                             + (f", last exit {last.get('exitCode')}: {msg}" if last else ""))
        out.append(Finding("ERROR-OPERATOR-NOT-READY", f"{node}: GPU operator validator {p['metadata']['name']} is not "
                           f"Ready (phase {st.get('phase')}): " + ("; ".join(stuck) or "no container state reported")))
    return out
