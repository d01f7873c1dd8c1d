"""Discovery at real pod density (review R1): it keeps only the pods on GPU nodes, slimmed page by page
(pods.slim), and relists when a continue token expires; slimming changes no plugin, look-alike, expectation or free
count on any recorded layout, and the free count no longer scans every pod for every node."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client import ApiException

from gpuconform import config as gconfig, discovery, nodes, pods
from gpuconform.counts import expectation, free_gpus
from gpuconform.pytest_plugin import inventory

LAYOUTS = sorted((Path(__file__).parent / "data" / "layouts").glob("*.json"))
VENDOR = {"amd": "amd", "intel": "intel", "nvidia": "nvidia"}


@pytest.mark.parametrize("path", LAYOUTS, ids=lambda p: p.stem)
def test_slimmed_pods_give_every_recorded_layout_the_same_plugins_expectations_and_free_counts(path):
    data = json.loads(path.read_text())
    vendor = VENDOR[path.stem.split("-")[0]]
    cfg = gconfig.load(None, {"vendor": vendor}, environ={}).data
    for node in data["nodes"]:
        name = node["metadata"]["name"]
        full = [p for p in data.get("pods", []) if p["spec"].get("nodeName") == name and not pods.is_terminal(p)]
        slim = [pods.slim(p) for p in full]
        a, b = discovery.find_plugin_pods(full, vendor), discovery.find_plugin_pods(slim, vendor)
        assert [p["metadata"]["name"] for p in a.pods] == [p["metadata"]["name"] for p in b.pods]
        assert (a.look_alikes, a.companions, a.why) == (b.look_alikes, b.companions, b.why)
        assert expectation(node, cfg, a.pods) == expectation(node, cfg, b.pods)
        for r in (node.get("status", {}).get("allocatable") or {}):
            assert free_gpus(node, r, full) == free_gpus(node, r, slim)


def test_a_slim_pod_drops_managed_fields_env_and_statuses_but_a_daemonsets_pod_stays_whole():
    tenant = {"metadata": {"name": "job", "namespace": "t", "uid": "u", "managedFields": [{"manager": "x"}],
                           "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 10000}},
              "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i", "env": [{"name": "PASSWORD",
                                                                                             "value": "s3cret"}],
                                                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
              "status": {"phase": "Running", "containerStatuses": [{"name": "c"}]}}
    s = pods.slim(tenant)
    assert "managedFields" not in s["metadata"] and "annotations" not in s["metadata"]
    assert s["spec"]["containers"] == [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    assert s["status"] == {"phase": "Running"} and "s3cret" not in json.dumps(s)
    ds = {**tenant, "metadata": {**tenant["metadata"], "ownerReferences": [{"kind": "DaemonSet", "name": "p"}]}}
    w = pods.slim(ds)
    assert "managedFields" not in w["metadata"] and w["spec"] == ds["spec"] and w["status"] == ds["status"]


def page(items, cont, rv="7"):
    return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue=cont, resource_version=rv))


def test_an_expired_continue_token_lists_again_and_keep_and_trim_apply_per_page():
    calls = []

    def lister(limit, _continue, _request_timeout, **kw):
        calls.append(_continue)
        if _continue is None:
            return page([{"n": 1}, {"n": 2}], "c1")
        if len(calls) == 2:  # etcd compacted the snapshot between the pages
            raise ApiException(status=410, reason="Gone: continue token expired")
        return page([{"n": 3}], None)

    inv = inventory.Inventory.__new__(inventory.Inventory)
    inv.cluster = SimpleNamespace(request_timeout=5, api=SimpleNamespace(sanitize_for_serialization=lambda o: o))
    out, rv = inv._list_all(lister, keep=lambda d: d["n"] != 2, trim=lambda d: {"m": d["n"]})
    assert (out, rv) == ([{"m": 1}, {"m": 3}], "7") and calls == [None, "c1", None, "c1"]

    def always_gone(limit, _continue, _request_timeout, **kw):
        if _continue is None:
            return page([{"n": 1}], "c")
        raise ApiException(status=410, reason="Gone")
    with pytest.raises(ApiException):
        inv._list_all(always_gone)


def test_describe_nodes_reads_each_nodes_own_pods():
    node = lambda n: {"metadata": {"name": n}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}  # noqa: E731
    held = lambda n: {"metadata": {"name": "p"}, "spec": {"nodeName": n, "containers": [  # noqa: E731
        {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}}
    exp = {n: SimpleNamespace(workload_resource="nvidia.com/gpu", describe=lambda: "") for n in ("a", "b")}
    got = {g.name: g.free for g in nodes.describe_nodes([node("a"), node("b")], [held("a"), held("a"), held("b")], exp)}
    assert got == {"a": 2, "b": 3}
