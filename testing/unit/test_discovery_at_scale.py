"""Discovery at real pod density (review R1): it keeps only the pods on GPU nodes, slimmed page by page
(pods.slim), and relists when a continue token expires; slimming changes no plugin, look-alike, expectation or free
count on any recorded layout, and the free count no longer scans every pod for every node."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pydantic
import pytest
import urllib3
from kubernetes.client import ApiClient, ApiException

from gpuconform import cleanup, counts, healthtimes, kube, latency, nodes, pods
from gpuconform import config as gconfig, discovery
from gpuconform.counts import expectation, free_gpus
from gpuconform.pytest_plugin import inventory

LAYOUTS = sorted((Path(__file__).parent / "data" / "layouts").glob("*.json"))
VENDOR = {"amd": "amd", "intel": "intel", "nvidia": "nvidia"}


def at_density(on_node: list[dict], node: dict) -> list[dict]:
    """`on_node` and what a node also holds at real density: each DaemonSet pod of it once more as a ReplicaSet's
    (a look-alike, so slimmed: its hostPath volumes and mounts decide its reason), a tenant as make bench-scale
    makes them (the service-account token volume and its mounts, env, cpu and memory, a probe), and a tenant
    holding every extended resource of the node in a container and more of it in an init container."""
    out = list(on_node)
    for p in on_node:
        if any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or []):
            q = copy.deepcopy(p)
            q["metadata"]["name"] += "-rs"
            q["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "look-5d9",
                                                 "uid": "u-rs", "controller": True, "blockOwnerDeletion": True}]
            out.append(q)
    name = node["metadata"]["name"]
    token = {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
    mount = {"name": token["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    ctr = {"name": "app", "image": "registry.example.com/team/app:1.2.3", "volumeMounts": [mount],
           "env": [{"name": "SETTING_0", "value": "v"}], "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}}
    out.append({"metadata": {"name": "tenant-0", "namespace": "t", "uid": "u0", "labels": {"team": "a"},
                             "creationTimestamp": "2026-12-07T06:00:00Z"},
                "spec": {"nodeName": name, "volumes": [{"name": "cache", "emptyDir": {}}, token],
                         "containers": [ctr, {**ctr, "name": "sidecar"}]},
                "status": {"phase": "Pending", "qosClass": "Burstable"}})
    extended = [r for r in (node.get("status") or {}).get("allocatable") or {} if "/" in r]
    gpu = {"name": "cuda", "image": "cuda", "resources": {"limits": {r: "1" for r in extended},
                                                          "requests": {"cpu": "1", **{r: "1" for r in extended}}}}
    out.append({"metadata": {"name": "tenant-gpu", "namespace": "t", "uid": "u1"},
                "spec": {"nodeName": name, "containers": [gpu], "initContainers": [
                    {**gpu, "resources": {"limits": {r: "2" for r in extended}}}]},
                "status": {"phase": "Running"}})
    return out


@pytest.mark.parametrize("path", LAYOUTS, ids=lambda p: p.stem)
def test_slimmed_pods_give_every_recorded_layout_the_same_plugins_expectations_and_free_counts(path):
    data = json.loads(path.read_text())
    vendor = VENDOR[path.stem.split("-")[0]]
    cfg = gconfig.load(None, {"vendor": vendor}, environ={}).data
    for node in data["nodes"]:
        name = node["metadata"]["name"]
        full = at_density([p for p in data.get("pods", []) if p["spec"].get("nodeName") == name
                           and not pods.is_terminal(p)], node)
        slim = [pods.slim(p) for p in full]
        for dra in (False, True):
            a, b = discovery.find_plugin_pods(full, vendor, dra=dra), discovery.find_plugin_pods(slim, vendor, dra=dra)
            assert [p["metadata"]["name"] for p in a.pods] == [p["metadata"]["name"] for p in b.pods]
            assert (a.look_alikes, a.companions, a.why) == (b.look_alikes, b.companions, b.why)
            assert expectation(node, cfg, a.pods) == expectation(node, cfg, b.pods)
            for p in a.pods:  # its ReplicaSet copy is a look-alike, told so from its slimmed self
                copy_of = f"{p['metadata'].get('namespace')}/{p['metadata']['name']}-rs ("
                assert any(x.startswith(copy_of) for x in b.look_alikes), (copy_of, b.look_alikes)
        # the GPU resources: extended resources (pods.slim keeps no cpu or memory)
        for r in (r for r in (node.get("status", {}).get("allocatable") or {}) if "/" in r):
            assert free_gpus(node, r, full) == free_gpus(node, r, slim)
        exp = {name: expectation(node, cfg, discovery.find_plugin_pods(full, vendor).pods)}
        assert nodes.describe_nodes([node], full, exp) == nodes.describe_nodes([node], slim, exp)
        assert counts.free_by_claims(8, full, "nvidia.com/gpu") == counts.free_by_claims(8, slim, "nvidia.com/gpu")


STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def instants(o):
    """`o` with every timestamp as the instant it names: the API server's "...Z" and the client's "+00:00" alike."""
    if isinstance(o, dict):
        return {k: instants(v) for k, v in o.items()}
    if isinstance(o, list):
        return [instants(v) for v in o]
    return cleanup.parse_time(o) if isinstance(o, str) and STAMP.match(o) else o


@pytest.mark.parametrize("path", LAYOUTS, ids=lambda p: p.stem)
def test_a_raw_list_gives_the_dicts_the_clients_models_gave_but_for_the_spelling_of_timestamps(path):
    """_list_all reads its pages raw: every recorded node, pod and ResourceSlice comes out as `to_dict` of the
    client's model of it made (the old path), timestamps apart, which name the same instant."""
    data = json.loads(path.read_text())
    api = ApiClient()
    inv = inventory.Inventory.__new__(inventory.Inventory)
    inv.cluster = SimpleNamespace(request_timeout=5)
    for key, kind in (("nodes", "V1Node"), ("pods", "V1Pod"), ("resourceslices", "V1ResourceSlice")):
        items = data.get(key) or []
        new, rv = inv._list_all(lambda limit, _continue, _request_timeout, _preload_content: page(
            items[int(_continue or 0):int(_continue or 0) + 2],
            str(int(_continue or 0) + 2) if int(_continue or 0) + 2 < len(items) else None))
        assert rv == "7" and len(new) == len(items)
        for raw_obj, item in zip(new, items):
            try:
                old = kube.to_dict(api, api.deserialize(json.dumps(item), kind, "application/json"))
            except pydantic.ValidationError:  # the client's model rejects it (a recorded owner without uid): the
                continue  # old path failed the whole LIST; read raw, it is kept as sent
            assert instants(raw_obj) == instants(old)
            assert instants(pods.slim(raw_obj)) == instants(pods.slim(old))


@pytest.mark.parametrize("z,offset", [("2026-12-07T06:00:00Z", "2026-12-07T06:00:00+00:00"),
                                      ("2026-12-07T06:00:00.123456Z", "2026-12-07T06:00:00.123456+00:00")])
def test_a_timestamp_reads_alike_as_the_api_server_spells_it_and_as_the_client_did(z, offset):
    """Objects from a raw LIST (discovery; the watches' first objects) spell times "...Z", those the client
    converts (the watches' events, single reads) "+00:00": every reader of these times parses them."""
    assert cleanup.parse_time(z) == cleanup.parse_time(offset) is not None
    assert latency.ts(z) == latency.ts(offset) is not None

    def obj(t):
        return {"metadata": {"managedFields": [{"time": t, "fieldsV1": {"f:status": {"f:allocatable": {}},
                                                                        "f:metadata": {"f:annotations": {
                                                                            f"f:{cleanup.HEARTBEAT}": {}}}}}]},
                "spec": {"driver": "d", "pool": {"name": "p"}, "devices": [{"name": "g", "taints": [
                    {"key": "k", "effect": "NoSchedule", "timeAdded": t}]}]}}
    assert healthtimes.status_written(obj(z), "f:allocatable") == healthtimes.status_written(obj(offset),
                                                                                           "f:allocatable")
    assert healthtimes.slice_written([obj(z)], "d", "p/g") == healthtimes.slice_written([obj(offset)], "d", "p/g")
    assert cleanup.heartbeat_at(obj(z)) == cleanup.heartbeat_at(obj(offset))


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


def test_a_slim_pod_keeps_hostpath_volumes_and_their_mounts_and_gpu_requests_only_with_repeated_strings_shared():
    """What else slimming drops (the token volume and its mounts, cpu and memory, uid, creationTimestamp, owner
    details no reader reads), what it keeps (hostPath volumes and the mounts of them: look-alikes; extended
    resources: the GPU requests), and one copy of the strings every page repeats (each page is decoded anew)."""
    text = json.dumps({
        "metadata": {"name": "web-1", "namespace": "team-a", "uid": "u", "creationTimestamp": "2026-12-07T06:00:00Z",
                     "labels": {"app": "web", "pod-template-hash": "5d9"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9",
                                          "uid": "r", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": "gpu-0", "priority": 0,
                 "volumes": [{"name": "dp", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
                             {"name": "kube-api-access-x", "projected": {"sources": []}}],
                 "initContainers": [{"name": "init", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}],
                 "containers": [{"name": "web", "image": "nginx", "volumeMounts": [
                     {"name": "dp", "mountPath": "/dp"}, {"name": "kube-api-access-x", "mountPath": "/var/run"}],
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
                                   "limits": {"nvidia.com/gpu": "2"}, "claims": [{"name": "c"}]}}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}})
    a, b = pods.slim(json.loads(text)), pods.slim(json.loads(text))
    assert a == {"metadata": {"name": "web-1", "namespace": "team-a", "labels": {"app": "web", "pod-template-hash":
                                                                                 "5d9"},
                              "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d9", "controller": True}]},
                 "spec": {"nodeName": "gpu-0",
                          "volumes": [{"name": "dp", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
                          "initContainers": [{"name": "init", "image": "busybox"}],
                          "containers": [{"name": "web", "image": "nginx", "volumeMounts": [
                              {"name": "dp", "mountPath": "/dp"}],
                              "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]},
                 "status": {"phase": "Running"}}
    assert discovery.device_plugin_mounts(a) == ["/var/lib/kubelet/device-plugins"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"] and a["spec"]["nodeName"] is b["spec"]["nodeName"]
    assert all(x is y for x, y in zip([*a["metadata"]["labels"].values(), a["spec"]["containers"][0]["image"]],
                                      [*b["metadata"]["labels"].values(), b["spec"]["containers"][0]["image"]]))


def raw(body: dict) -> urllib3.HTTPResponse:
    """What the client returns for `_preload_content=False`: urllib3's response, its body not read yet."""
    return urllib3.HTTPResponse(body=io.BytesIO(json.dumps(body).encode()), status=200, preload_content=False)


def page(items, cont, rv="7"):
    return raw({"kind": "List", "metadata": {"resourceVersion": rv, **({"continue": cont} if cont else {})},
                "items": items})


def test_an_expired_continue_token_lists_again_and_keep_and_trim_apply_per_page():
    calls = []

    def lister(limit, _continue, _request_timeout, _preload_content=True, **kw):
        assert _preload_content is False  # read raw: no models
        calls.append(_continue)
        if _continue is None:
            return page([{"n": 1}, {"n": 2}], "c1")
        if len(calls) == 2:  # etcd compacted the snapshot between the pages
            raise ApiException(status=410, reason="Gone: continue token expired")
        return page([{"n": 3}], None)

    inv = inventory.Inventory.__new__(inventory.Inventory)
    inv.cluster = SimpleNamespace(request_timeout=5)
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
