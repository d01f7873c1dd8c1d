"""`python testing/discovery_memory.py`: discovery's memory at real pod density, offline (issue 29, review R1).

Feeds discovery's pod LIST (gpuconform/pytest_plugin/inventory.py `Inventory._list_all`, keep = on a GPU node,
trim = pods.slim) N x P pods shaped as `make bench-scale` leaves them in the API server (testing/bench.py
`scale_pods` as stored: the server's defaults, the service-account token volume and its mounts, kubectl-create's
managedFields, a Pending status: kwok never runs these pods, localcluster/kwok-stages.yaml), as JSON LIST pages of
500 with continue tokens, made one page at a time. The stand-in for the client answers as the real one does: a
urllib3 response with the raw body for `_preload_content=False`, else the V1PodList the client deserializes from
the same JSON.

Each variant (`--before REV`: gpuconform as committed at REV, from `git archive`; "now": the working tree) runs in a
fresh process twice: once for the peak RSS (ru_maxrss, the process's start-up and imports included; "rss before"
is what it held before the LIST), once under tracemalloc for the Python heap's peak during the LIST and what the
kept list retains. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = 500  # discovery's LIST page size (Inventory._list_all)
BEFORE = "ec82d3f"  # the last commit before discovery read its LIST pages raw (review R1)
SCALE_PREFIX = "kwok-scale"  # testing/bench.py's scale nodes


def _fields(obj: object) -> dict:
    """kubectl-create's fieldsV1 of `obj`: maps and lists of named items keyed as the API server keys them."""
    if isinstance(obj, dict):
        return {".": {}, **{f"f:{k}": _fields(v) for k, v in obj.items()}} if obj else {}
    if isinstance(obj, list) and obj and all(isinstance(x, dict) and "name" in x for x in obj):
        return {".": {}, **{"k:" + json.dumps({"name": x["name"]}, separators=(",", ":")): _fields(x)
                            for x in obj}}
    return {}


def stored(p: dict, k: int, fields: dict) -> dict:
    """bench.py's `k`-th tenant pod `p` as the API server (kubernetes v1.37) stores it: its defaults, the
    ServiceAccount admission plugin's token volume mounted in every container (admission added them: not in
    managedFields), kubectl-create's managedFields `fields`, and the status of a pod nothing runs."""
    spec = {**p["spec"], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
            "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority"}
    token = f"kube-api-access-{k % 99991:05d}"
    spec["volumes"] = [*spec["volumes"], {"name": token, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                      "fieldPath": "metadata.namespace"}}]}}]}}]
    probe = {"timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    spec["containers"] = [{**c, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                           "imagePullPolicy": "IfNotPresent",
                           "readinessProbe": {**probe, **c["readinessProbe"],
                                              "httpGet": {**c["readinessProbe"]["httpGet"], "scheme": "HTTP"}},
                           "volumeMounts": [{"name": token, "readOnly": True,
                                             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}
                          for c in spec["containers"]]
    meta = {**p["metadata"], "uid": f"{k:08x}-7c1e-4b5a-9d2f-{k:012x}", "resourceVersion": str(1000 + k),
            "generation": 1, "creationTimestamp": "2026-07-01T10:00:00Z",
            "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-07-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}]}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending", "qosClass": "Burstable"}}


def created_fields(p: dict) -> dict:
    """kubectl-create's fieldsV1 of the pod as sent, with the server's defaults of its containers (the same for
    every pod of bench.py's: only keys and names make it)."""
    sent = stored(p, 0, {})
    spec = {k: v for k, v in sent["spec"].items() if k not in ("serviceAccount", "serviceAccountName")}
    spec["volumes"] = spec["volumes"][:-1]
    spec["containers"] = [{k: v for k, v in c.items() if k != "volumeMounts"} for c in spec["containers"]]
    meta = {k: p["metadata"][k] for k in ("labels", "annotations")}
    return {f"f:{k}": {f: v for f, v in _fields(v).items() if f != "."} for k, v in (("metadata", meta),
                                                                                   ("spec", spec))}


class Pages:
    """The API server's LIST pages of bench.scale_pods(nodes, per), made on demand (never all held at once)."""

    def __init__(self, nodes: int, per: int):
        sys.path.insert(0, str(ROOT / "testing"))
        import bench  # noqa: PLC0415 - testing/bench.py: the pods `make bench-scale` makes

        self.scale_pods, self.nodes, self.per = bench.scale_pods, nodes, per
        self.fields = created_fields(next(bench.scale_pods(1, 1)))
        self.gen, self.at = None, -1

    def page(self, start: int, rv: str) -> bytes:
        if self.gen is None or self.at != start:  # the first page, or a LIST started again
            self.gen, self.at = itertools.islice(self.scale_pods(self.nodes, self.per), start, None), start
        total = self.nodes * self.per
        items = [json.dumps(stored(p, self.at + n, self.fields), separators=(",", ":"))
                 for n, p in zip(range(PAGE), self.gen)]
        self.at += len(items)
        meta = {"resourceVersion": rv}
        if self.at < total:
            meta.update({"continue": f"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDV9.{self.at}",
                         "remainingItemCount": total - self.at})
        return (f'{{"kind":"PodList","apiVersion":"v1","metadata":{json.dumps(meta)},"items":['
                + ",".join(items) + "]}").encode()


def child(nodes: int, per: int, trace: bool) -> dict:
    """One LIST of every pod through Inventory._list_all, as discovery makes it; the figures as a dict."""
    import tracemalloc
    from types import SimpleNamespace

    import urllib3
    from kubernetes import client as k8s

    import gpuconform
    from gpuconform import pods
    from gpuconform.pytest_plugin import inventory

    api = k8s.ApiClient()
    modes = set()

    def lister(made: Pages):
        def list_pods(limit: int, _continue: str | None = None, _request_timeout: float | None = None,
                      _preload_content: bool = True, **kw: object) -> object:
            data = made.page(int(_continue.rsplit(".", 1)[1]) if _continue else 0, "12345")
            modes.add("raw" if not _preload_content else "models")
            if not _preload_content:  # what the client returns then: urllib3's response, body unread
                return urllib3.HTTPResponse(body=io.BytesIO(data), status=200, preload_content=False,
                                            headers={"Content-Type": "application/json"})
            return api.deserialize(data.decode("utf-8"), "V1PodList", "application/json")
        return list_pods

    names = {f"{SCALE_PREFIX}-{i}" for i in range(nodes)}
    inv = inventory.Inventory.__new__(inventory.Inventory)
    inv.cluster = SimpleNamespace(api=api, request_timeout=30.0)

    def list_all(made: Pages) -> tuple[list[dict], str]:
        return inv._list_all(lister(made), field_selector=pods.NON_TERMINAL_SELECTOR,
                             keep=lambda p: (p.get("spec") or {}).get("nodeName") in names, trim=pods.slim)
    list_all(Pages(1, 1))  # warm: the client's lazily imported models and their schemas are not the pods' cost
    made = Pages(nodes, per)
    rss_before = _rss_now()
    if trace:
        tracemalloc.start()
    t0 = time.monotonic()
    out, rv = list_all(made)
    took = time.monotonic() - t0
    figures = {"gpuconform": str(Path(gpuconform.__file__).parent), "read": "/".join(sorted(modes)),
               "kept": len(out), "seconds": round(took, 1), "rss_before_mib": round(rss_before / 2**20, 1),
               "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if trace:
        current, peak = tracemalloc.get_traced_memory()
        figures.update(heap_peak_mib=round(peak / 2**20, 1), kept_mib=round(current / 2**20, 1))
    assert rv == "12345" and len(out) == nodes * per, (rv, len(out))
    return figures


def _rss_now() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def run_variant(src: Path, nodes: int, per: int, trace: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--child", "--nodes", str(nodes), "--pods-per-node", str(per)]
                         + (["--trace"] if trace else []), env=env, capture_output=True, text=True, cwd=src)
    if out.returncode:
        raise SystemExit(f"discovery_memory: the child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, default=1000, help="GPU nodes (make bench-scale's N)")
    ap.add_argument("--pods-per-node", type=int, default=40, help="tenant pods on each (make bench-scale's PODS)")
    ap.add_argument("--before", default=BEFORE, metavar="REV", help=f"the revision to compare with (default {BEFORE}"
                    "); '' for the working tree alone")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.nodes, a.pods_per_node, a.trace)))
        return 0
    variants = [("now", ROOT)]
    with tempfile.TemporaryDirectory() as tmp:
        if a.before:
            old = Path(tmp) / "before"
            old.mkdir()
            subprocess.run(f"git -C {ROOT} archive {a.before} gpuconform | tar -x -C {old}", shell=True, check=True)
            variants.insert(0, (a.before, old))
        print(f"{a.nodes * a.pods_per_node} pods ({a.nodes} nodes x {a.pods_per_node}), LIST pages of {PAGE}")
        for label, src in variants:
            r, t = run_variant(src, a.nodes, a.pods_per_node, False), run_variant(src, a.nodes, a.pods_per_node, True)
            print(f"{label:>8}: read as {r['read']}: peak RSS {r['peak_rss_mib']} MiB (before the LIST "
                  f"{r['rss_before_mib']} MiB, LIST {r['seconds']} s); Python heap peak during the LIST "
                  f"{t['heap_peak_mib']} MiB, kept {t['kept']} pods: {t['kept_mib']} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
