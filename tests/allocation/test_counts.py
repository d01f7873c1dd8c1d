"""Allocation counts: what a node advertises matches its hardware (sharing- and MIG-aware)."""

from fixtures.checks import raise_for
from gpuconform import counts


def test_advertised_gpus_match_the_hardware(run, cfg, gpu_node, evidence, record_property):
    """MUST: capacity = allocatable = physical GPUs x sharing replicas (or the MIG profile counts), as the node's
    own labels describe its pool; no device is Unhealthy, none is over- or under-advertised, and no stale GPU
    resource key remains."""
    node = run.refresh_node(gpu_node)
    exp = run.expectation(gpu_node, node)
    evidence.note("expectation", {"pool": exp.describe(), **exp.__dict__})
    status = node["status"]
    unhealthy = None
    cap, alloc = counts.qty(status["capacity"].get(exp.resource)), counts.qty(status["allocatable"].get(exp.resource))
    if cap is not None and alloc is not None and cap > alloc:
        unhealthy = []
        for p in run.plugin_pods(gpu_node):
            unhealthy += counts.unhealthy_from_log(run.pod_log(p["metadata"]["namespace"], p["metadata"]["name"],
                                                               tail=500))
    for k, v in (("expected", exp.advertised), ("capacity", cap), ("allocatable", alloc)):
        record_property(k, v)
    findings = counts.check_counts(node, exp, unhealthy) + counts.stale_resources(node, exp)
    if findings:
        first = findings[0]
        more = "".join(f"\n  also [{f.code}] {f.message}" for f in findings[1:])
        raise_for(first.code, first.message + more)
