"""`make bench`: the suite's wall time on the local test bed against its critical path, and its API requests.

The suite runs as its own ServiceAccount bound to the ClusterRoles shipped in manifests/ (so it is also a
least-privilege run), and a dedicated APF FlowSchema matches exactly that identity: the apiserver's
`apiserver_flowcontrol_dispatched_requests_total{flow_schema="gpuconform-bench"}` delta is then the number of
requests the suite made, counted by the server (watches count once, when they start), except long-running
non-watch requests (pods/log, nodes/proxy), which the apiserver serves outside APF. The suite's own client count
(summary.json `api_requests`) is printed next to it and includes those.

Critical path = the slowest pod start the suite has to wait for (create -> container started, server clocks)
plus cleanup (namespace deletion requested -> namespaces gone). Schedule lower bound = pytest's own start-up with
the suite's plugin and config loaded (as in scale mode below: no check can begin before it) plus what one node's
checks need at least, from the run's own pod timeline: the checks that hold every GPU of the node the run can use follow
each other, so the sum of their spans (first pod seen to last device freed), plus the same cleanup
(gpuconform/schedule.py: the checks that take every free device, and any other check whose pods held every device
left by the run-long pods, such as the isolation check's two of the DRA node's three devices beside the access
check's one); the busiest node's bound is compared with the wall time including that cleanup. Figures are
printed, never asserted.

`make bench-scale N=...` (`python testing/bench.py --scale N`, default N=1000): the node-level checks at scale.
It creates N kwok GPU nodes `kwok-scale-<i>` spread over the bed's three kwok pools (plain, time-slicing,
mig-mixed; localcluster/cluster.py `kwok_node`, shapes from localcluster/shapes.py), labelled `type=kwok` and
`gpuconform.dev/bench=scale`, by server-side apply in chunks of 200, and waits until kwok has made them all
Ready (one LIST of the labelled nodes per second). Every DRA_EVERY-th node is a DRA node instead: the GPU
operator's DRA-stack labels, no GPU resource in capacity, and one ResourceSlice of `gpu.nvidia.com` (a complete
pool of 4 devices, as the bed's simulated driver publishes; resource.k8s.io/v1), so the DRA path's node check
(its pools complete and listing devices) runs at scale too. Then 40 tenant pods are bound to each scale node
(`--pods-per-node`, `make bench-scale PODS=...`; 40,000 at N=1000, real pod density: two containers with env,
requests and probes each, an applied-configuration annotation), which kwok leaves Pending (its gpu-pod-running
stage skips the label gpuconform.dev/bench-pod): discovery must hold what it needs of them within the Job's
memory (review R1). It then runs the suite as above with
`-k "(advertised or capacity) and not pci_hardware"` (the API-only node checks) and
`--gpuconform-set nodes.exclude=` (the bed's config excludes `type=kwok`; the
scale run judges every GPU node, the real one too), and deletes the nodes, and any pods bound to them, in a
`finally` (also on Ctrl-C or SIGTERM), waiting until they are gone.

Critical path in scale mode = the least any suite has to do for these checks: read every node once, i.e. one
paginated LIST of all nodes (limit 500, the official Python client's typed `list_node`, admin credentials,
best of 3), plus pytest's own start-up with the suite's plugin and config loaded (`pytest --collect-only -q`
of an empty directory: no test, no API request). Per-node requests = (APF requests - 30) / N, 30 being a
rough allowance for the per-run requests that do not grow with N (pre-flight, discovery, cleanup).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from bedtools import (KUBECONFIG, KUBECTL, ROOT, as_list, get, identity_objects, kubectl,  # noqa: E402
                      run_pytest, token_kubeconfig)

from gpuconform import schedule  # noqa: E402

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
    # an earlier bench's namespace may still be terminating (its objects are deleted with --wait=false)
    _wait_until(f"namespace {NS} (terminating)", lambda: int(bool(kubectl(
        "get", "namespace", NS, "--ignore-not-found", "-o", "jsonpath={.metadata.deletionTimestamp}").strip())), 120)
    kubectl("apply", "-f", "-", input=as_list(objs))
    try:
        with tempfile.TemporaryDirectory(prefix="gpuconform-bench-") as tmp:
            startup_s = pytest_startup_s(Path(tmp) / "empty")
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
    bound = schedule.lower_bound(summary.get("pods", []), cleanup)
    floor = startup_s + bound.seconds
    terms = [f"pytest start-up {startup_s:.1f} s"] + [f"{p.check} {p.seconds:.1f} s ({p.first} .. {p.last}"
             + (f"; {p.why}" if p.why != schedule.TAKES_ALL else "") + ")" for p in bound.parts] \
        + [f"cleanup {cleanup:.1f} s"]
    node = bound.node or "the node"
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows = [
        ("suite wall time", f"{wall:.1f} s"),
        ("critical path", f"{critical:.1f} s = slowest pod start {start_s:.1f} s ({slowest['pod']}) "
                          f"+ cleanup {cleanup:.1f} s (delete requests {summary.get('cleanup_s', 0):.1f} s, "
                          f"namespaces gone after {tail:.1f} s more)"),
        ("wall time / critical path", f"{wall / critical:.1f}x" if critical else "n/a"),
        ("schedule lower bound (busiest node)", f"{floor:.1f} s = " + " + ".join(terms) + ": pytest's start-up with "
                                                f"the suite's plugin (--collect-only of an empty directory), the span "
                                                f"of each check holding every GPU of {node} the run could use, then "
                                                f"cleanup"),
        ("each node's bound", ", ".join(f"{b.node} {startup_s + b.seconds:.1f} s" for b in schedule.node_bounds(
            summary.get("pods", []), cleanup))),
        ("wall time + cleanup / lower bound", f"{(wall + tail) / floor:.2f}x (goal <= 1.2x)"
                                              if bound.seconds else "n/a"),
        ("pods created", f"{len(summary.get('pods', []))} (timestamps have 1 s resolution)"),
        ("API requests (apiserver APF metric)", f"{requests:.0f} (flow schema {FLOW}; watches counted once, "
                                                 "pods/log and nodes/proxy reads bypass APF)"),
        ("API requests (suite's own count)", f"{summary.get('api_requests')}, of which "
                                              f"{summary.get('api_requests_long_running')} pods/log or nodes/proxy; and "
                                              f"{summary.get('kubelet_requests', 0)} to kubelets' own port"),
        ("peak RSS of the suite process", f"{rss:.0f} MiB"),
        *latency_rows(summary.get("latency") or []),
    ]
    print("\ngpuconform bench (local test bed, healthy cluster)")
    for k, v in rows:
        print(f"  {k:38} {v}")
    return 0


def latency_rows(latency: list[dict]) -> list[tuple[str, str]]:
    """Per GPU node, the latency check's pods (single samples and the burst): create -> running (server
    timestamps; on a DRA node this is claim-to-running: the claim is made from the template, allocated by the
    scheduler and prepared by the driver in between) and the kubelet's own step (Allocate RPC or
    NodePrepareResources, histogram delta)."""
    rows = []
    for x in sorted(latency, key=lambda x: (x.get("path") != "device-plugin", x["node"])):
        total = sorted(p["schedule_s"] + p["start_s"] for p in x["pods"]
                       if p.get("schedule_s") is not None and p.get("start_s") is not None)
        if not total:
            continue
        what = "submit-to-running" if x.get("path") == "device-plugin" else "claim-to-running"
        step = x.get("allocate")
        kubelet = (f"; {step['step']} mean {step['mean_s'] * 1000:.1f} ms over {step['n']} calls in its window"
                   if isinstance(step, dict) else "")
        rows.append((f"{what} ({x['node']})", f"p50 {total[len(total) // 2]:.2f} s, max {total[-1]:.2f} s over "
                                               f"{len(total)} pods (1 s resolution){kubelet}"))
    return rows


# ---------------------------------------------------------------- scale mode (make bench-scale)

SCALE_PREFIX = "kwok-scale"
SCALE_KEY, SCALE_VALUE = "gpuconform.dev/bench", "scale"
SCALE_SELECTOR = f"{SCALE_KEY}={SCALE_VALUE}"
CHUNK = 200  # nodes per server-side apply
FIXED_REQUESTS = 30  # rough allowance for the per-run requests that do not grow with N (module docstring)
# the node-level checks that read the API only; the node probe's PCI check (a pod per node, which kwok nodes never
# complete) is a per-node pod cost like the workload checks', not measured here
SCALE_CHECKS = "(advertised or capacity) and not pci_hardware"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


DRA_EVERY = 4  # every 4th scale node is a DRA node with a ResourceSlice
DRA_DRIVER, DRA_DEVICES = "gpu.nvidia.com", 4
# The GPU operator v26.7.0 DRA stack's labels (NVIDIA/gpu-operator controllers/state_manager.go: the device-plugin
# deploy label is removed, not set to false)
DRA_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true",
              "nvidia.com/gpu.deploy.dra-driver": "true"}


def is_dra(i: int) -> bool:
    return i % DRA_EVERY == DRA_EVERY - 1


def dra_node(node: dict) -> dict:
    """A kwok node as the GPU operator's DRA stack leaves it: its labels, no GPU resource (pods get GPUs through
    claims), no GFD pool labels (a DRA node runs no device plugin for GFD to describe)."""
    meta = node["metadata"]
    meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith("nvidia.com/")} | DRA_LABELS
    res = {k: v for k, v in node["status"]["capacity"].items() if not k.startswith("nvidia.com/")}
    node["status"] = {"capacity": res, "allocatable": res}
    return node


def resource_slice(node: str) -> dict:
    """The slice the bed's simulated DRA driver would publish for `node` (one complete pool named after it)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRA_DRIVER}", "labels": {SCALE_KEY: SCALE_VALUE}},
            "spec": {"driver": DRA_DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}", "attributes": {
                         "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node}-{d}"}}}
                                 for d in range(DRA_DEVICES)]}}


def scale_slices(n: int) -> list[dict]:
    return [resource_slice(f"{SCALE_PREFIX}-{i}") for i in range(n) if is_dra(i)]


def scale_nodes(n: int) -> list[dict]:
    """N kwok nodes over the bed's three kwok pools, shaped by localcluster/cluster.py kwok_node; every
    DRA_EVERY-th one a DRA node."""
    import cluster  # noqa: PLC0415 - localcluster/, on sys.path through bedtools

    out = []
    for i in range(n):
        node = cluster.kwok_node(i, prefix=SCALE_PREFIX, pool_prefix=SCALE_PREFIX, labels={SCALE_KEY: SCALE_VALUE})
        if is_dra(i):
            node = dra_node(node)
        # kwok gives pod IPs from the node's podCIDR, else from one /24 shared by every node: one range per node
        # keeps the DaemonSet pods on N nodes (the bed's GPU operator validator follows the GPU labels) from
        # exhausting it.
        node["spec"]["podCIDR"] = f"10.{64 + i // 256}.{i % 256}.0/24"
        out.append(node)
    return out


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


POD_NS = "gpuconform-bench-pods"  # make bench-scale's pods at real density (PODS_PER_NODE per scale node)
POD_KEY = "gpuconform.dev/bench-pod"  # kwok leaves them Pending (localcluster/kwok-stages.yaml gpu-pod-running)
POD_CHUNK = 500  # pods per create request batch


def scale_pods(n: int, per: int) -> Iterator[dict]:
    """`per` ordinary pods bound to each of the N scale nodes, as tenants' workloads look (two containers with env,
    requests, labels, an applied-configuration annotation, a token volume): no GPU requested, so every node's
    free count stays whole and its checks still pass; the suite's discovery must hold what it needs of them."""
    env = [{"name": f"SETTING_{k}", "value": f"value-{k}-" + "x" * 40} for k in range(12)]
    for i in range(n):
        for j in range(per):
            name = f"tenant-{i}-{j}"
            ctr = {"image": "registry.example.com/team/app:1.2.3", "env": env,
                   "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                   "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10}}
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "namespace": POD_NS,
                "labels": {POD_KEY: "scale", "app.kubernetes.io/name": "app", "team": f"team-{j % 8}"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps({"name": name,
                                                                                              "env": env})}},
                "spec": {"nodeName": f"{SCALE_PREFIX}-{i}", "tolerations": [{"operator": "Exists"}],
                         "containers": [{**ctr, "name": "app"}, {**ctr, "name": "sidecar"}],
                         "volumes": [{"name": "cache", "emptyDir": {}}]}}


def create_scale_pods(n: int, per: int) -> float:
    """Creates the pods (scale_pods) in batches, a progress line every 5,000; returns the seconds taken."""
    t0, batch, made = time.monotonic(), [], 0
    kubectl("create", "namespace", POD_NS)
    for p in scale_pods(n, per):
        batch.append(p)
        if len(batch) == POD_CHUNK:
            kubectl("create", "-f", "-", input=as_list(batch), timeout=600)
            made += len(batch)
            batch = []
            if made % 5000 == 0:
                print(f"  created {made}/{n * per} pods ({time.monotonic() - t0:.0f} s)", flush=True)
    if batch:
        kubectl("create", "-f", "-", input=as_list(batch), timeout=600)
    return time.monotonic() - t0


DELETE_PAGE = 1000  # pods per DELETE: about 15 s each on 2 cores, well inside the API server's 60 s request timeout


def delete_scale_pods_in_pages() -> None:
    """Deletes the tenant pods DELETE_PAGE at a time (DeleteCollection with `limit` deletes one page and returns:
    k8s.io/apiserver registry/generic/registry/store.go). One DELETE of all 40,000 outlasted the API server's 60 s
    request timeout here and was cut off part-way; the pages never are. Stops at the first page not full, or after
    three failed DELETEs in a row (the namespace's deletion then removes the rest, more slowly)."""
    t0, deleted, failures = time.monotonic(), 0, 0
    while failures < 3:
        out = _kc("delete", "--raw", f"/api/v1/namespaces/{POD_NS}/pods?gracePeriodSeconds=0&limit={DELETE_PAGE}",
                  timeout=600)
        if out is None:
            failures += 1
            continue
        failures = 0
        n = len(json.loads(out).get("items") or [])
        deleted += n
        if n and deleted % 10000 == 0:
            print(f"  deleted {deleted} pods ({time.monotonic() - t0:.0f} s)", flush=True)
        if n < DELETE_PAGE:
            break
    print(f"  {deleted} pods deleted in {time.monotonic() - t0:.1f} s", flush=True)


def remove_scale_pods() -> bool:
    """Deletes the pods with gracePeriodSeconds=0 (no pod waits for kwok to finish it, which took 16 minutes for
    40,000), then their namespace, and waits for it."""
    if (_kc("get", "namespace", POD_NS, "--ignore-not-found", "-o", "name") or "").strip():
        delete_scale_pods_in_pages()
    if _kc("delete", "namespace", POD_NS, "--ignore-not-found", "--wait=false") is None:
        return False
    try:
        _wait_until(f"namespace {POD_NS} (its pods)", lambda: int(bool((_kc(
            "get", "namespace", POD_NS, "--ignore-not-found", "-o", "name") or "").strip())), 1800)
    except TimeoutError as e:
        print(f"bench: {e}", file=sys.stderr)
        return False
    return True


def create_scale_nodes(n: int) -> tuple[float, float]:
    """Applies the N nodes in chunks and waits until all are Ready (one LIST of the labelled nodes per second,
    a progress line every ~10 s). Returns (seconds until created, seconds until all Ready), both from the start."""
    nodes = scale_nodes(n)
    t0 = time.monotonic()
    for at in range(0, n, CHUNK):
        kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=gpuconform-bench", "-f", "-",
                input=as_list(nodes[at:at + CHUNK]), timeout=600)
        print(f"  created {min(at + CHUNK, n)}/{n} nodes ({time.monotonic() - t0:.1f} s)", flush=True)
    slices = scale_slices(n)
    for at in range(0, len(slices), CHUNK):
        kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=gpuconform-bench", "-f", "-",
                input=as_list(slices[at:at + CHUNK]), timeout=600)
    print(f"  published {len(slices)} ResourceSlices for the DRA nodes ({time.monotonic() - t0:.1f} s)", flush=True)
    created = time.monotonic() - t0
    timeout, last = 120 + n / 5, t0
    while True:
        t = time.monotonic()
        items = get("nodes", "-l", SCALE_SELECTOR)["items"]
        ready = sum(_ready(i) for i in items)
        if ready >= n:
            return created, time.monotonic() - t0
        if t - t0 > timeout:
            raise TimeoutError(f"only {ready}/{n} scale nodes Ready after {timeout:.0f} s (is kwok running?)")
        if t - last >= 10:
            print(f"  {ready}/{n} nodes Ready ({t - t0:.0f} s)", flush=True)
            last = t
        time.sleep(max(0.0, 1 - (time.monotonic() - t)))


def _kc(*args: str, input: str | None = None, timeout: float = 300) -> str | None:
    """kubectl for the clean-up, in a session of its own: a Ctrl-C at the terminal, which reaches the whole
    foreground process group, must not kill the deletes half-way (the bench waits for them and then exits).
    Its output, or None (error printed) when it failed."""
    out = subprocess.run([KUBECTL, *args], capture_output=True, text=True, input=input, timeout=timeout,
                         env={**os.environ, "KUBECONFIG": str(KUBECONFIG)}, start_new_session=True)
    if out.returncode != 0:
        print(f"bench: kubectl {' '.join(args[:3])} ...: {out.stderr.strip()[:300]}", file=sys.stderr)
        return None
    return out.stdout


def _bound_pods() -> dict[str, list[str]] | None:
    """namespace -> names of the pods bound to a scale node; None when they could not be listed."""
    listing = _kc("get", "pods", "-A", "--no-headers", "-o",
                  "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,NODE:.spec.nodeName")
    if listing is None:
        return None
    out: dict[str, list[str]] = {}
    for line in listing.splitlines():
        ns, name, node = (line.split() + ["", "", ""])[:3]
        if node.startswith(SCALE_PREFIX + "-"):
            out.setdefault(ns, []).append(name)
    return out


def _scale_nodes_left() -> int:
    names = _kc("get", "nodes", "-l", SCALE_SELECTOR, "-o", "name")
    return 1 if names is None else len(names.split())  # unknown counts as not gone


def _pods_left() -> int:
    pods = _bound_pods()
    return 1 if pods is None else sum(map(len, pods.values()))


def _wait_until(what: str, left, timeout: float) -> int:
    """Polls `left()` (a count) once per second until 0 or `timeout`; returns what is left."""
    t0 = time.monotonic()
    while True:
        t = time.monotonic()
        n = left()
        if n == 0 or t - t0 > timeout:
            if n:
                print(f"bench: {n} {what} still there after {timeout:.0f} s", file=sys.stderr)
            return n
        time.sleep(max(0.0, 1 - (time.monotonic() - t)))


def remove_scale_nodes(n: int) -> bool:
    """Deletes the scale nodes and the pods left bound to them (DaemonSet pods kwok ran there); waits until both
    are gone. True when nothing is left."""
    t0, nodes_left, pods_left, removed = time.monotonic(), 0, 0, 0
    for _ in range(2):  # a second round if a delete failed
        _kc("delete", "resourceslices", "-l", SCALE_SELECTOR, "--wait=false")
        _kc("delete", "nodes", "-l", SCALE_SELECTOR, "--wait=false")
        nodes_left = _wait_until("scale nodes", _scale_nodes_left, 30 + n / 20)
        pods = _bound_pods() or {}
        removed += sum(map(len, pods.values()))
        for ns, names in pods.items():  # their node is gone: nothing runs them, so no grace period
            for at in range(0, len(names), CHUNK):
                _kc("delete", "pods", "-n", ns, "--grace-period=0", "--force", "--wait=false", *names[at:at + CHUNK])
        pods_left = _wait_until("pods bound to scale nodes", _pods_left, 30 + n / 20)
        if nodes_left == pods_left == 0:
            print(f"  removed the scale nodes and {removed} pods bound to them in {time.monotonic() - t0:.1f} s",
                  flush=True)
            return True
    print(f"bench: left {nodes_left} scale nodes and {pods_left} pods bound to them; remove them with\n"
          f"  kubectl delete nodes -l {SCALE_SELECTOR}", file=sys.stderr)
    return False


def list_nodes_s() -> tuple[float, int]:
    """Best of 3: one paginated LIST of all nodes (limit 500) with the official client's typed list_node."""
    from kubernetes import client, config  # noqa: PLC0415

    api = client.CoreV1Api(config.new_client_from_config(str(KUBECONFIG)))
    best, count = float("inf"), 0
    for _ in range(3):
        t0, cont, count = time.monotonic(), None, 0
        while True:
            resp = api.list_node(limit=500, _continue=cont)
            count += len(resp.items)
            cont = resp.metadata._continue
            if not cont:
                break
        best = min(best, time.monotonic() - t0)
    return best, count


def pytest_startup_s(empty_dir: Path) -> float:
    """pytest's start-up with the suite's plugin and config: --collect-only of an empty directory (exit 5)."""
    empty_dir.mkdir()
    t0 = time.monotonic()
    proc = run_pytest("--collect-only", "-q", "-p", "gpuconform.pytest_plugin.plugin", "--gpuconform-config",
                      str(ROOT / "localcluster" / "gpuconform.yaml"), str(empty_dir))
    took = time.monotonic() - t0
    if proc.returncode not in (0, 5):
        raise RuntimeError(f"pytest --collect-only failed (exit {proc.returncode}): {proc.stdout[-1000:]}{proc.stderr[-1000:]}")
    return took


def run_suite_measured(argv: list[str], kubeconfig: Path, timeout: float) -> tuple[int, str, float, float]:
    """Runs `python -m pytest ARGV` as `run_pytest` does; returns (exit code, output, wall s, peak RSS MiB of that
    process, from wait4: not mixed up with the kubectl processes the bench runs)."""
    import threading  # noqa: PLC0415

    with tempfile.TemporaryFile("w+") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv], cwd=ROOT,
                                env={**os.environ, "KUBECONFIG": str(kubeconfig)}, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Ctrl-C reached the suite too (same process group) and it deletes what it created: give it time;
            # SIGTERM reached only us: pass it on as SIGINT.
            for sig, grace in ((None, 5), (signal.SIGINT, 60), (signal.SIGKILL, 10)):
                if sig is not None and proc.poll() is None:
                    proc.send_signal(sig)
                try:
                    proc.wait(grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            raise
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode == -signal.SIGKILL and wall >= timeout:
        text += f"\nbench: the suite ran past {timeout:.0f} s and was killed"
    return proc.returncode, text, wall, usage.ru_maxrss / 1024


def render_time(html: Path) -> str:
    if not (Path(__file__).resolve().parent / "report_render.py").exists():
        return "n/a (testing/report_render.py missing)"
    try:
        from report_render import render_seconds  # noqa: PLC0415 - testing/, the script's own directory

        return f"{render_seconds(html):.2f} s (headless Chromium)"
    except Exception as e:  # noqa: BLE001 - a figure, not a verdict
        return f"n/a (rendering failed: {type(e).__name__}: {e})"


def bed_fault() -> str:
    """The fault the bed is in ('' when healthy): the real node is judged too, so a fault fails the run."""
    try:
        return json.loads((KUBECONFIG.parent / "state.json").read_text()).get("fault") or ""
    except (OSError, ValueError):
        return ""


def scale(n: int, keep: Path | None = None, per: int = 40) -> int:
    if not KUBECONFIG.exists():
        print("bench: the local cluster is not running; run `make cluster-up` first", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    objs = identity_objects(NS, SA) + [FLOW_SCHEMA]
    rc, interrupted, clean, fault, summary = 1, False, True, "", {}
    with tempfile.TemporaryDirectory(prefix="gpuconform-bench-scale-") as tmp:
        html, summary_path, kcfg = Path(tmp) / "report.html", Path(tmp) / "summary.json", Path(tmp) / "kubeconfig"
        try:
            if kubectl("get", "nodes", "-l", SCALE_SELECTOR, "-o", "name").split():
                print("removing scale nodes left by an earlier run", flush=True)
                remove_scale_nodes(n)
            print(f"creating {n} kwok GPU nodes {SCALE_PREFIX}-0..{n - 1} (label {SCALE_SELECTOR})", flush=True)
            created_s, ready_s = create_scale_nodes(n)
            print(f"  all {n} Ready after {ready_s:.1f} s", flush=True)
            pods_s = 0.0
            if per:
                print(f"creating {per} tenant pods on each scale node ({n * per} in namespace {POD_NS}, left "
                      f"Pending by kwok)", flush=True)
                pods_s = create_scale_pods(n, per)
                print(f"  {n * per} pods created in {pods_s:.1f} s", flush=True)
            list_s, listed = list_nodes_s()
            startup_s = pytest_startup_s(Path(tmp) / "empty")
            # an earlier bench's namespace may still be terminating (its objects are deleted with --wait=false)
            _wait_until(f"namespace {NS} (terminating)", lambda: int(bool(kubectl(
                "get", "namespace", NS, "--ignore-not-found", "-o", "jsonpath={.metadata.deletionTimestamp}").strip())),
                        120)
            kubectl("apply", "-f", "-", input=as_list(objs))
            token_kubeconfig(kcfg, NS, SA)
            run_id = "bench-scale-" + time.strftime("%H%M%S")
            fault = bed_fault()
            if fault:
                print(f"bench: warning: the bed is in fault {fault!r}; the real node's checks will not pass",
                      file=sys.stderr)
            print(f"running the suite (-k {SCALE_CHECKS!r}) on {n} kwok nodes + the bed's own", flush=True)
            before = dispatched()
            rc, output, wall, rss = run_suite_measured(
                ["tests", "-q", "-k", SCALE_CHECKS, "--gpuconform-config",
                 str(ROOT / "localcluster" / "gpuconform.yaml"), "--gpuconform-set", "nodes.exclude=",
                 "--k8s-kubeconfig", str(kcfg), "--gpuconform-run-id", run_id,
                 "--html", str(html), "--self-contained-html", "--gpuconform-summary", str(summary_path)],
                kcfg, timeout=1800 + 2 * n)
            wait_gone(run_id)
            requests = dispatched() - before
            summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
            # the headline figures now: the clean-up of 40,000 pods can take many minutes (or be cut short)
            print(f"  suite: exit {rc}, wall {wall:.1f} s, peak RSS {rss:.0f} MiB, {requests:.0f} API requests "
                  "(the full table follows the clean-up)", flush=True)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            def later(signum: int, frame: object) -> None:  # the cleanup itself is not interrupted
                nonlocal interrupted
                interrupted = True
                print("bench: cleaning up, please wait", file=sys.stderr)

            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, later)
            if per:
                print(f"removing the {n * per} tenant pods (namespace {POD_NS})", flush=True)
            clean = remove_scale_pods() if per else True
            print(f"removing the {n} scale nodes", flush=True)
            clean = remove_scale_nodes(n) and clean
            _kc("delete", "--wait=false", "--ignore-not-found", "-f", "-", input=as_list(objs))
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if interrupted:
            print("bench: interrupted; scale nodes removed" if clean else "bench: interrupted", file=sys.stderr)
            return 130
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for f in (html, summary_path):
                if f.exists():
                    shutil.copy2(f, keep / f.name)
        if rc != 0:
            print(output[-5000:])
            for r in summary.get("results", []):
                if r["outcome"] != "passed":
                    print(f"  {r['outcome']}: {r['node']} {r['check']} [{r['reason']}] {r['message'][:300]}")
            print(f"bench: the suite did not pass on {n} kwok nodes (exit {rc})"
                  + (f"; the bed was in fault {fault!r} (another run injecting faults?)" if fault else ""),
                  file=sys.stderr)
            return 1
        size = html.stat().st_size if html.exists() else 0
        render = render_time(html) if html.exists() else "n/a (no report written)"
    critical = list_s + startup_s
    suite_requests = summary.get("api_requests")
    results = summary.get("results", [])
    rows = [
        ("kwok GPU nodes (N)", f"{n}, {len(scale_slices(n))} of them DRA nodes with a ResourceSlice (+ "
                               f"{len(summary.get('gpu_nodes', [])) - n} other GPU node(s) judged; {len(results)} "
                               f"results, {len(summary.get('certified_nodes', []))} nodes certified)"),
        ("allocation paths", summary.get("environment", {}).get("allocation paths (GPU nodes)", "?")),
        ("node creation", f"{created_s:.1f} s (server-side apply, {CHUNK} per request batch)"),
        ("tenant pods on the scale nodes", f"{n * per} ({per} per node, Pending, bound; created in {pods_s:.1f} s)"
         if per else "none (--pods-per-node 0)"),
        ("nodes all Ready", f"{ready_s:.1f} s after creation started"),
        ("suite wall time", f"{wall:.1f} s (-k {SCALE_CHECKS!r})"),
        ("critical path", f"{critical:.2f} s = one paginated LIST of all {listed} nodes {list_s:.2f} s (official "
                          f"client, limit 500, best of 3) + pytest start-up with the suite's plugin {startup_s:.2f} s "
                          "(--collect-only of an empty directory)"),
        ("wall time / critical path", f"{wall / critical:.1f}x"),
        ("API requests (apiserver APF metric)", f"{requests:.0f} (flow schema {FLOW}; pods/log, nodes/proxy bypass APF)"),
        ("API requests (suite's own count)", f"{suite_requests}, of which "
                                              f"{summary.get('api_requests_long_running')} pods/log or nodes/proxy; and "
                                              f"{summary.get('kubelet_requests', 0)} to kubelets' own port"),
        ("requests per node", f"{(requests - FIXED_REQUESTS) / n:.2f} (APF), "
                              + (f"{(suite_requests - FIXED_REQUESTS) / n:.2f} (suite)" if suite_requests is not None
                                 else "n/a (suite)") + f" = (requests - {FIXED_REQUESTS}) / N"
                              + (f"; below 0: fewer than the {FIXED_REQUESTS} allowed for a run of any size"
                                 if requests < FIXED_REQUESTS else "")),
        ("peak RSS of the suite process", f"{rss:.0f} MiB"),
        ("HTML report size", f"{size} bytes ({size / 1048576:.1f} MiB, self-contained)"),
        ("HTML report render time", render),
    ]
    print(f"\ngpuconform bench, scale mode (local test bed + {n} kwok GPU nodes, healthy)")
    for k, v in rows:
        print(f"  {k:38} {v}")
    return 0 if clean else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--scale", type=int, metavar="N", help="scale mode: N kwok GPU nodes (make bench-scale N=...)")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="scale mode: copy report.html and summary.json to DIR")
    ap.add_argument("--pods-per-node", type=int, default=40, metavar="P",
                    help="scale mode: P tenant pods bound to each kwok node (default 40, real density; 0: none)")
    a = ap.parse_args()
    if a.scale is not None and not 1 <= a.scale <= 16384:
        ap.error("--scale N: 1 <= N <= 16384 (one /24 pod range per node in 10.64.0.0/10)")
    if a.pods_per_node < 0:
        ap.error("--pods-per-node P: P >= 0")
    raise SystemExit(scale(a.scale, a.keep, a.pods_per_node) if a.scale is not None else main())
