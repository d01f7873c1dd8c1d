"""`make bench`: the suite's wall time on the local test bed against its critical path, and its API requests.

The suite runs as its own ServiceAccount bound to the ClusterRoles shipped in manifests/ (so it is also a
least-privilege run), and a dedicated APF FlowSchema matches exactly that identity: the apiserver's
`apiserver_flowcontrol_dispatched_requests_total{flow_schema="gpuconform-bench"}` delta is then the number of
requests the suite made, counted by the server (watches count once, when they start), except long-running
non-watch requests (pods/log, nodes/proxy), which the apiserver serves outside APF. The suite's own client count
(summary.json `api_requests`) is printed next to it and includes those.

Critical path = the slowest pod start the suite has to wait for (create -> container started, server clocks)
plus cleanup (namespace deletion requested -> namespaces gone). Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from bedtools import (KUBECONFIG, ROOT, as_list, get, identity_objects, kubectl, run_pytest,  # noqa: E402
                      token_kubeconfig)

NS = SA = FLOW = "gpuconform-bench"
METRIC = "apiserver_flowcontrol_dispatched_requests_total"
# Matches exactly the bench's ServiceAccount, so the APF counter for this schema counts the suite's requests.
FLOW_SCHEMA = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": FLOW},
    "spec": {"matchingPrecedence": 100, "priorityLevelConfiguration": {"name": "global-default"},
             "distinguisherMethod": {"type": "ByUser"},
             "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": SA, "namespace": NS}}],
                        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                           "clusterScope": True, "namespaces": ["*"]}],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}


def dispatched() -> float:
    for line in kubectl("get", "--raw", "/metrics").splitlines():
        if line.startswith(METRIC) and f'flow_schema="{FLOW}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_gone(run_id: str, timeout: float = 120) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not get("namespaces", "-l", f"gpuconform.dev/run={run_id}")["items"]:
            break
        time.sleep(0.2)
    return time.monotonic() - t0


def main() -> int:
    if not KUBECONFIG.exists():
        print("bench: the local cluster is not running; run `make cluster-up` first", file=sys.stderr)
        return 2
    objs = identity_objects(NS, SA) + [FLOW_SCHEMA]
    kubectl("apply", "-f", "-", input=as_list(objs))
    try:
        with tempfile.TemporaryDirectory(prefix="gpuconform-bench-") as tmp:
            kcfg, summary_path = Path(tmp) / "kubeconfig", Path(tmp) / "summary.json"
            token_kubeconfig(kcfg, NS, SA)
            run_id = "bench-" + time.strftime("%H%M%S")
            before = dispatched()
            t0 = time.monotonic()
            proc = run_pytest("tests", "-q", "--gpuconform-config", str(ROOT / "localcluster" / "gpuconform.yaml"),
                             "--k8s-kubeconfig", str(kcfg), "--gpuconform-run-id", run_id,
                             "--gpuconform-summary", str(summary_path), kubeconfig=kcfg, timeout=1800)
            wall = time.monotonic() - t0
            tail = wait_gone(run_id)
            requests = dispatched() - before
            summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    finally:
        kubectl("delete", "--wait=false", "-f", "-", input=as_list(objs), check=False)
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-2000:])
        print(f"bench: the suite did not pass (exit {proc.returncode}); figures would be meaningless", file=sys.stderr)
        return 1
    pods = [p for p in summary.get("pods", []) if p["started"] is not None]
    slowest = max(pods, key=lambda p: p["started"] - p["created"])
    start_s = slowest["started"] - slowest["created"]
    cleanup = summary.get("cleanup_s", 0.0) + tail
    critical = start_s + cleanup
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows = [
        ("suite wall time", f"{wall:.1f} s"),
        ("critical path", f"{critical:.1f} s = slowest pod start {start_s:.1f} s ({slowest['pod']}) "
                          f"+ cleanup {cleanup:.1f} s (delete requests {summary.get('cleanup_s', 0):.1f} s, "
                          f"namespaces gone after {tail:.1f} s more)"),
        ("wall time / critical path", f"{wall / critical:.1f}x" if critical else "n/a"),
        ("pods created", f"{len(summary.get('pods', []))} (timestamps have 1 s resolution)"),
        ("API requests (apiserver APF metric)", f"{requests:.0f} (flow schema {FLOW}; watches counted once, "
                                                 "pods/log and nodes/proxy reads bypass APF)"),
        ("API requests (suite's own count)", f"{summary.get('api_requests')}, of which "
                                              f"{summary.get('api_requests_long_running')} pods/log or nodes/proxy"),
        ("peak RSS of the suite process", f"{rss:.0f} MiB"),
    ]
    print("\ngpuconform bench (local test bed, healthy cluster)")
    for k, v in rows:
        print(f"  {k:38} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
