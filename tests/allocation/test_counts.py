"""Allocation counts: what a node advertises matches its hardware (sharing- and MIG-aware)."""

from fixtures.checks import hand_over
from gpuconform import counts, verdicts


def test_advertised_gpus_match_the_hardware(run, cfg, gpu_node, evidence, record_property):
    """MUST: capacity = allocatable = physical GPUs x sharing replicas (or the MIG profile counts), as the node's
    own labels describe its pool; no device is Unhealthy, none is over- or under-advertised, and no stale GPU
    resource key remains."""
    node = run.refresh_node(gpu_node)
    exp = run.expectation(gpu_node, node)
    evidence.note("expectation", {"pool": exp.describe(), **exp.__dict__})
    logs = None
    if verdicts.unhealthy_ids_needed(node, exp):  # the plugin log names the Unhealthy devices
        logs = [run.pod_log(p["metadata"]["namespace"], p["metadata"]["name"], tail=500)
                for p in run.plugin_pods(gpu_node)]
    cap, alloc = counts.advertised(node, exp.resource)
    for k, v in (("expected", exp.advertised), ("capacity", cap), ("allocatable", alloc)):
        record_property(k, v)
    hand_over(verdicts.count_findings(node, exp, logs))
