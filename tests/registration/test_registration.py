"""Registration: the device plugin is registered with the kubelet on every GPU node, not merely Running."""

import pytest

from gpuconform import pods, verdicts


def test_plugin_pod_is_ready_and_not_crash_looping(check):
    """MUST: every GPU node runs a Ready device-plugin pod that is not crash-looping (restarts within
    plugin.maxRestarts). Found by what it does: a DaemonSet's pod mounting the device-plugins directory (in
    plugin.namespace when set); labels only name the layout, so a pod that merely looks like the plugin is set
    aside, never judged, as are companion pods (feature discovery, MPS, validators)."""
    found = check.plugin()
    check.note("plugin discovery", {"layout": found.layout, "why": found.why, "companions set aside": found.companions,
                                    "look-alikes set aside": found.look_alikes})
    check.record("plugin_layout", found.layout)  # also on a pass: the audit trail says what was judged
    check.record("plugin_found", found.why)
    if found.look_alikes:  # pods labelled like the plugin that do not do its job: named, never judged
        check.record("plugin_look_alikes", "; ".join(found.look_alikes))
    for p in found.pods:
        check.evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
    check.hand_over(verdicts.plugin_findings(check.node, found, check.cfg.get("plugin.maxRestarts")))


def test_gpu_resource_is_in_node_capacity(check):
    """MUST: a GPU node's capacity and allocatable list each of its GPU resources (whole, shared or MIG, from the
    node's own labels) with a non-zero count. On a DRA node: its GPU DRA driver publishes the node's pools, each
    complete (resourceSliceCount slices at its generation, within a few seconds of a republish) and listing
    devices. On a device-plugin node, no GPU DRA driver publishes the same node's GPUs."""
    check.path.capacity()


@pytest.mark.at_run_end
def test_kubelet_counts_the_plugin_registration(check):
    """MUST: the kubelet's kubelet_device_plugin_registration_total for each of the node's GPU resources is
    present, and neither it grew nor the kubelet restarted (process_start_time_seconds) during the run: a
    re-registration means a plugin or kubelet restart. On a DRA node: the kubelet's plugin manager holds the
    driver's registration socket as registered (plugin_manager_total_plugins, state actual_state_of_world), and
    the kubelet did not restart during the run."""
    check.path.registration(check.kubelet_metrics(required=True))


@pytest.mark.node_probe
def test_plugin_socket_exists_in_device_plugins_dir(check):
    """MUST: the plugin's socket exists in the kubelet's device-plugins directory (read through an optional,
    read-only hostPath probe in a privileged namespace). On a DRA node: the driver's registration socket is in
    the kubelet's plugins_registry directory."""
    check.needs(check.cfg.get("nodeProbe.enabled"), "nodeProbe.enabled is false: socket not checked")
    check.needs_usable_node()
    name, state = check.run_to_completion(check.socket_probe_pod())
    check.path.socket(check.log(name), pods.exit_code(state))


@pytest.mark.gpu_operator
def test_gpu_operator_validation_passed_on_the_node(check):
    """MUST: where a GPU operator manages the node, its validator pod there is Ready (driver, toolkit, CUDA and
    plugin validations passed); otherwise the node's results are not meaningful (error, not fail)."""
    mine = check.run.inventory.operator_validators(check.node)
    for p in mine:
        check.evidence.pod(p["metadata"]["namespace"], p["metadata"]["name"])
    check.hand_over(verdicts.operator_findings(check.node, mine, check.cfg.get("operator.validatorSelector"),
                                               check.cfg.get("operator.namespace")))
