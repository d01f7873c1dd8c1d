"""Registration: the device plugin is registered with the kubelet on every GPU node, not merely Running."""

import pytest

from fixtures.plugin import raise_for
from gpuconform import metrics, nodes, pods
from gpuconform.counts import qty
from gpuconform.reasons import skip_reason


def test_plugin_pod_is_ready_and_not_crash_looping(run, cfg, gpu_node, evidence):
    """MUST: every GPU node runs a Ready device-plugin pod that is not crash-looping (restarts within
    plugin.maxRestarts)."""
    mine = run.plugin_pods(gpu_node)
    if not mine:
        raise_for("GPU-F08-PLUGIN-NOT-READY", f"{gpu_node}: no pod matching {cfg['plugin']['selector']!r} in "
                  f"namespace {cfg['plugin']['namespace']} runs on this GPU node")
    for p in mine:
        evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
        name = p["metadata"]["name"]
        for cs in p.get("status", {}).get("containerStatuses", []) or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            last = (cs.get("lastState") or {}).get("terminated") or {}
            if waiting.get("reason") == "CrashLoopBackOff" or cs.get("restartCount", 0) > cfg["plugin"]["maxRestarts"]:
                raise_for("GPU-F08-PLUGIN-CRASHLOOP",
                          f"{gpu_node}: plugin pod {name} container {cs['name']} restarted {cs.get('restartCount', 0)} "
                          f"times (allowed {cfg['plugin']['maxRestarts']}), state {waiting.get('reason') or 'running'}; "
                          f"last termination: exit {last.get('exitCode')} {last.get('reason')}: "
                          f"{(last.get('message') or '').strip()[:400] or '(no termination message)'}")
        if nodes.condition(p, "Ready") != "True":
            raise_for("GPU-F08-PLUGIN-NOT-READY", f"{gpu_node}: plugin pod {name} is not Ready "
                      f"(phase {p.get('status', {}).get('phase')})")


def test_gpu_resource_is_in_node_capacity(run, cfg, gpu_node, evidence):
    """MUST: a GPU node's capacity and allocatable list the GPU resource with a non-zero count."""
    node = run.refresh_node(gpu_node)
    res = cfg["resourceName"]
    cap, alloc = (qty((node["status"].get(k) or {}).get(res)) for k in ("capacity", "allocatable"))
    if cap is None:
        raise_for("GPU-F01-NOT-REGISTERED", f"{gpu_node}: {res} is absent from capacity; the plugin never "
                  f"registered with this kubelet (pod Running is not proof of registration)")
    if not cap or not alloc:
        raise_for("GPU-F02-CAPACITY-ZERO", f"{gpu_node}: {res} capacity={cap} allocatable={alloc}; the plugin "
                  f"lost or never re-established its registration")


def test_kubelet_counts_the_plugin_registration(run, cfg, gpu_node, evidence):
    """MUST: the kubelet's kubelet_device_plugin_registration_total for the resource is present, and neither it
    grew nor the kubelet restarted (process_start_time_seconds) during the run: a re-registration means a
    plugin or kubelet restart."""
    if not run.optional.get("nodes/proxy"):
        pytest.skip(skip_reason("ENV-NOT-CHECKED", "nodes/proxy not granted: kubelet metrics not checked"))
    samples = run.kubelet_metrics(gpu_node)
    now = metrics.value(samples, "kubelet_device_plugin_registration_total", resource_name=cfg["resourceName"])
    started, started_before = metrics.value(samples, "process_start_time_seconds"), run.kubelet_started_before.get(gpu_node)
    evidence.note("registration_total", {"at_start": run.registration_before.get(gpu_node), "now": now,
                                         "kubelet_process_start_at_start": started_before, "kubelet_process_start_now": started})
    if now is None:
        raise_for("GPU-F01-NOT-REGISTERED", f"{gpu_node}: kubelet_device_plugin_registration_total"
                  f"{{resource_name=\"{cfg['resourceName']}\"}} is absent: the kubelet has no registration "
                  f"for this resource since it started")
    if started is not None and started_before is not None and started != started_before:
        raise_for("GPU-F11-REGISTRATION-UNSTABLE", f"{gpu_node}: the kubelet restarted during the run (process "
                  f"start time {started_before:.0f} -> {started:.0f}); its registration counter restarted at {now:g}, "
                  f"so the plugin had to re-register and allocatable may have dropped meanwhile")
    before = run.registration_before.get(gpu_node)
    if before is not None and now > before:
        raise_for("GPU-F11-REGISTRATION-UNSTABLE", f"{gpu_node}: registration counter went {before:g} -> {now:g} "
                  f"during the run (plugin or kubelet restarted)")


@pytest.mark.node_probe
def test_plugin_socket_exists_in_device_plugins_dir(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: the plugin's socket exists in the kubelet's device-plugins directory (read through an optional,
    read-only hostPath probe in a privileged namespace)."""
    if not cfg["nodeProbe"]["enabled"]:
        pytest.skip(skip_reason("ENV-NOT-CHECKED", "nodeProbe.enabled is false: socket not checked"))
    if (why := run.node(gpu_node).skip_reason(0)):
        pytest.skip(skip_reason(*why))
    ns = run.ensure_namespace(privileged=True)
    name = pod_runner.create(pods.socket_probe_pod(f"socket-{gpu_node}"[:63], ns, run.run_id, gpu_node, cfg,
                                                  run.cfg.seconds("timeouts.podComplete")))
    states = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node, namespace=ns)[name]
    listing = run.pod_log(ns, name)
    evidence.note("device-plugins listing", listing)
    sock = cfg["plugin"]["socket"]
    if pods.exit_code(states) != 0:
        raise_for("ENV-API", f"{gpu_node}: socket probe exited {pods.exit_code(states)}: {listing[-300:]}")
    if not any(line.split()[-1:] == [sock] for line in listing.splitlines()):
        raise_for("GPU-F01-NOT-REGISTERED", f"{gpu_node}: {sock} not found in /var/lib/kubelet/device-plugins "
                  f"(entries: {[ln.split()[-1] for ln in listing.splitlines()[1:] if ln.split()]})")



@pytest.mark.gpu_operator
def test_gpu_operator_validation_passed_on_the_node(run, cfg, gpu_node, evidence):
    """MUST: where a GPU operator manages the node, its validator pod there is Ready (driver, toolkit, CUDA and
    plugin validations passed); otherwise the node's results are not meaningful (error, not fail)."""
    d = cfg["operator"]
    mine = run.operator_validators(gpu_node)
    if not mine:
        raise_for("ENV-OPERATOR-NOT-READY", f"{gpu_node}: no validator pod matching {d['validatorSelector']!r} in "
                  f"namespace {d['namespace']} runs on this GPU node (operator not deployed here?)")
    for p in mine:
        evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
        st = p.get("status", {})
        if nodes.condition(p, "Ready") == "True":
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
        raise_for("ENV-OPERATOR-NOT-READY", f"{gpu_node}: GPU operator validator {p['metadata']['name']} is not "
                  f"Ready (phase {st.get('phase')}): " + ("; ".join(stuck) or "no container state reported"))
