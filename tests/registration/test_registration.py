"""Registration: the device plugin is registered with the kubelet on every GPU node, not merely Running."""

import pytest

from fixtures.checks import raise_for
from gpuconform import metrics, nodes, pods, verdicts
from gpuconform.reasons import skip_reason


def test_plugin_pod_is_ready_and_not_crash_looping(run, cfg, gpu_node, evidence, record_property):
    """MUST: every GPU node runs a Ready device-plugin pod that is not crash-looping (restarts within
    plugin.maxRestarts). Found by what it is (DaemonSet pod mounting the device-plugins directory, or a known
    install layout's labels) in any namespace; companion pods (feature discovery, MPS, validators) are not it."""
    found = run.find_plugin(gpu_node)
    evidence.note("plugin discovery", {"layout": found.layout, "why": found.why, "companions set aside": found.companions})
    record_property("plugin_layout", found.layout)  # also on a pass: the audit trail says what was judged
    record_property("plugin_found", found.why)
    if not found.pods:
        raise_for("GPU-F08-PLUGIN-NOT-READY", f"{gpu_node}: no device-plugin pod runs on this GPU node ({found.why}"
                  + (f"; companions seen: {', '.join(found.companions)}" if found.companions else "")
                  + "). Check the plugin DaemonSet's node selector and tolerations, or set plugin.selector")
    for p in found.pods:
        evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
    for finding in verdicts.plugin_pod_findings(gpu_node, found.pods, cfg["plugin"]["maxRestarts"]):
        raise_for(finding.code, finding.message)


def test_gpu_resource_is_in_node_capacity(run, cfg, gpu_node, evidence):
    """MUST: a GPU node's capacity and allocatable list each of its GPU resources (whole, shared or MIG, from the
    node's own labels) with a non-zero count."""
    node = run.refresh_node(gpu_node)
    exp = run.expectation(gpu_node, node)
    evidence.note("expected resources", {"pool": exp.describe(), "resources": exp.resources})
    for finding in verdicts.capacity_findings(node, exp):
        raise_for(finding.code, finding.message)


@pytest.mark.at_run_end
def test_kubelet_counts_the_plugin_registration(run, cfg, gpu_node, evidence):
    """MUST: the kubelet's kubelet_device_plugin_registration_total for each of the node's GPU resources is
    present, and neither it grew nor the kubelet restarted (process_start_time_seconds) during the run: a
    re-registration means a plugin or kubelet restart."""
    if not run.optional.get("nodes/proxy"):
        pytest.skip(skip_reason("ENV-NOT-CHECKED", "nodes/proxy not granted: kubelet metrics not checked"))
    samples = run.kubelet_metrics(gpu_node)
    resources = run.expectation(gpu_node).resources
    now = {r: metrics.value(samples, "kubelet_device_plugin_registration_total", resource_name=r) for r in resources}
    started, started_before = metrics.value(samples, "process_start_time_seconds"), run.kubelet_started_before.get(gpu_node)
    before = run.registration_before.get(gpu_node) or {}
    evidence.note("registration_total", {"at_start": before, "now": now,
                                         "kubelet_process_start_at_start": started_before, "kubelet_process_start_now": started})
    for res, n in now.items():
        if n is None:
            raise_for("GPU-F01-NOT-REGISTERED", f"{gpu_node}: kubelet_device_plugin_registration_total"
                      f"{{resource_name=\"{res}\"}} is absent: the kubelet has no registration "
                      f"for this resource since it started")
    if started is not None and started_before is not None and started != started_before:
        raise_for("GPU-F11-REGISTRATION-UNSTABLE", f"{gpu_node}: the kubelet restarted during the run (process "
                  f"start time {started_before:.0f} -> {started:.0f}); its registration counters restarted at "
                  f"{now}, so the plugin had to re-register and allocatable may have dropped meanwhile")
    for res, n in now.items():
        if before.get(res) is not None and n > before[res]:
            raise_for("GPU-F11-REGISTRATION-UNSTABLE", f"{gpu_node}: registration counter for {res} went "
                      f"{before[res]:g} -> {n:g} during the run (plugin or kubelet restarted)")


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
    if pods.exit_code(states) != 0:
        raise_for("ENV-API", f"{gpu_node}: socket probe exited {pods.exit_code(states)}: {listing[-300:]}")
    want = run.expectation(gpu_node).sockets(cfg["plugin"]["socket"])
    for finding in verdicts.socket_findings(gpu_node, listing, want):
        raise_for(finding.code, finding.message)



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
