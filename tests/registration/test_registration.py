"""Registration: the device plugin is registered with the kubelet on every GPU node, not merely Running."""

import pytest

from gpuconform.pytest_plugin.checks import hand_over
from gpuconform import pods, verdicts


def test_plugin_pod_is_ready_and_not_crash_looping(run, cfg, gpu_node, evidence, record_property):
    """MUST: every GPU node runs a Ready device-plugin pod that is not crash-looping (restarts within
    plugin.maxRestarts). Found by what it does: a DaemonSet's pod mounting the device-plugins directory (in
    plugin.namespace when set); labels only name the layout, so a pod that merely looks like the plugin is set
    aside, never judged, as are companion pods (feature discovery, MPS, validators)."""
    found = run.find_plugin(gpu_node)
    evidence.note("plugin discovery", {"layout": found.layout, "why": found.why, "companions set aside": found.companions,
                                       "look-alikes set aside": found.look_alikes})
    record_property("plugin_layout", found.layout)  # also on a pass: the audit trail says what was judged
    record_property("plugin_found", found.why)
    if found.look_alikes:  # pods labelled like the plugin that do not do its job: named, never judged
        record_property("plugin_look_alikes", "; ".join(found.look_alikes))
    for p in found.pods:
        evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
    hand_over(verdicts.plugin_findings(gpu_node, found, cfg.get("plugin.maxRestarts")))


def test_gpu_resource_is_in_node_capacity(run, cfg, gpu_node, evidence):
    """MUST: a GPU node's capacity and allocatable list each of its GPU resources (whole, shared or MIG, from the
    node's own labels) with a non-zero count."""
    node = run.refresh_node(gpu_node)
    exp = run.expectation(gpu_node, node)
    evidence.note("expected resources", {"pool": exp.describe(), "resources": exp.resources, "basis": exp.basis})
    hand_over(verdicts.capacity_findings(node, exp))


@pytest.mark.at_run_end
def test_kubelet_counts_the_plugin_registration(run, cfg, gpu_node, evidence):
    """MUST: the kubelet's kubelet_device_plugin_registration_total for each of the node's GPU resources is
    present, and neither it grew nor the kubelet restarted (process_start_time_seconds) during the run: a
    re-registration means a plugin or kubelet restart."""
    hand_over(verdicts.not_checked(run.optional.get("nodes/proxy", False),
                                   "nodes/proxy not granted: kubelet metrics not checked"))
    samples = run.kubelet_metrics(gpu_node)
    now = verdicts.registration_counts(samples, run.expectation(gpu_node).resources)
    started, started_before = verdicts.kubelet_started(samples), run.kubelet_started_before.get(gpu_node)
    before = run.registration_before.get(gpu_node) or {}
    evidence.note("registration_total", {"at_start": before, "now": now,
                                         "kubelet_process_start_at_start": started_before, "kubelet_process_start_now": started})
    hand_over(verdicts.registration_findings(gpu_node, now, before, started, started_before))


@pytest.mark.node_probe
def test_plugin_socket_exists_in_device_plugins_dir(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: the plugin's socket exists in the kubelet's device-plugins directory (read through an optional,
    read-only hostPath probe in a privileged namespace)."""
    hand_over(verdicts.not_checked(cfg.get("nodeProbe.enabled"), "nodeProbe.enabled is false: socket not checked"))
    hand_over(verdicts.unusable(run.node(gpu_node), 0))
    ns = run.ensure_namespace(privileged=True)
    name = pod_runner.create(pods.socket_probe_pod(pods.pod_name("socket", gpu_node), ns, run.run_id, gpu_node, cfg,
                                                  cfg.seconds("timeouts.podComplete")))
    state = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node, namespace=ns)[name]
    listing = run.pod_log(ns, name)
    evidence.note("device-plugins listing", listing)
    want = run.expectation(gpu_node).sockets(cfg.get("plugin.socket"))
    hand_over(verdicts.socket_findings(gpu_node, listing, want, pods.exit_code(state)))


@pytest.mark.gpu_operator
def test_gpu_operator_validation_passed_on_the_node(run, cfg, gpu_node, evidence):
    """MUST: where a GPU operator manages the node, its validator pod there is Ready (driver, toolkit, CUDA and
    plugin validations passed); otherwise the node's results are not meaningful (error, not fail)."""
    mine = run.operator_validators(gpu_node)
    for p in mine:
        evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
    hand_over(verdicts.operator_findings(gpu_node, mine, cfg.get("operator.validatorSelector"),
                                         cfg.get("operator.namespace")))
