"""End-to-end: the suite delivered in-cluster (manifests/) against the local test bed.

The manifests are applied as shipped, with these adaptations for the bed, all in `bed_objects`:
- the bed runs no kube-proxy, so the `kubernetes` Service VIP is unreachable from pods: the Job's container gets
  KUBERNETES_SERVICE_HOST/PORT set to the API server's endpoint (read from the Service's EndpointSlice);
- the ConfigMap gets the bed's current config (localcluster/gpuconform.yaml; the shipped copy is its snapshot);
- the admission policy's parameters (ConfigMap gpuconform-policy) get the bed's sysfs path, and recursiveReadOnly
  IfPossible where a node's runtime cannot mount recursively read-only (policy_params);
- no CPU request for the runner and its reports sidecar: the bed's only real node has 1 allocatable CPU, and the
  topology check's Guaranteed pod needs all of it (on a real cluster the runner prefers non-GPU nodes and requests
  100m);
- a run id in the Job's args, so the test finds (and would remove) exactly the namespaces this run created.
The image is localhost/gpuconform/suite:dev, built and imported by `cluster.py up` (localcluster/imagebuild.py);
the `suite_image` fixture rebuilds it from the working tree and imports it first (a no-op when nothing changed).

Each test holds the bed's suite lock (/tmp/gpuconform-cluster.lock, flock) while its Job runs and deletes
everything it applied (the namespace and the cluster-scoped RBAC) even when it fails.
Needs the local cluster (`make cluster-up`); skipped with a reason when it is not running.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from bedtools import KUBECONFIG, ROOT, get, kubectl, suite_image_by_digest

MANIFESTS = ROOT / "manifests"
NS, JOB = "gpuconform-system", "gpuconform"
LOCK = Path("/tmp/gpuconform-cluster.lock")
RUN_LABEL = "gpuconform.dev/run"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]


# ---------------------------------------------------------------- helpers

def manifests() -> list[dict]:
    """Every object in manifests/*.yaml, in the order `kubectl apply -f manifests/` applies them."""
    objs = []
    for f in sorted(MANIFESTS.glob("*.yaml")):
        objs += [o for o in yaml.safe_load_all(f.read_text()) if o]
    return objs


def find(objs: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def apiserver_endpoint() -> tuple[str, str]:
    """The API server's address as pods must reach it on the bed (there is no kube-proxy for the Service VIP)."""
    sl = get("endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes")["items"][0]
    return sl["endpoints"][0]["addresses"][0], str(sl["ports"][0]["port"])


def policy_params(objs: list[dict]) -> None:
    """The admission policy's parameters set for the bed, as an operator sets them for a cluster: sysfsPath to the
    suite config's (the simulated PCI tree), and recursiveReadOnly IfPossible where a GPU node's runtime reports no
    recursive read-only mounts (the device-plugin node's containerd 1.6 publishes no status.runtimeHandlers; the
    DRA node's containerd 2.x does)."""
    from gpuconform import pods

    cfg = yaml.safe_load((ROOT / "localcluster" / "gpuconform.yaml").read_text())
    data = find(objs, "ConfigMap", "gpuconform-policy")["data"]
    data["sysfsPath"] = (cfg.get("nodeProbe") or {}).get("sysfsPath", data["sysfsPath"]).rstrip("/")
    data["rootImages"] = suite_image_by_digest()  # the node probe's image, as bed_objects names it
    gpu_nodes = [n for n in get("nodes")["items"] if (n["metadata"].get("labels") or {}).get("type") != "kwok"]
    if any(pods.recursive_read_only(n) != pods.RRO_ENABLED for n in gpu_nodes):
        data["recursiveReadOnly"] = pods.RRO_IF_POSSIBLE


def bed_objects(run_id: str, window: int) -> list[dict]:
    objs = copy.deepcopy(manifests())
    # the bed's config, its node probe's image named by digest (the policy's rootImages lists it so)
    bed = yaml.safe_load((ROOT / "localcluster" / "gpuconform.yaml").read_text())
    bed["images"]["nodeProbe"] = suite_image_by_digest()
    find(objs, "ConfigMap", "gpuconform-config")["data"]["gpuconform.yaml"] = yaml.safe_dump(bed, sort_keys=False)
    policy_params(objs)
    job = find(objs, "Job", JOB)
    job["spec"]["activeDeadlineSeconds"] = 420  # a hung run cannot outlive the test's budget
    ctr = job["spec"]["template"]["spec"]["containers"][0]
    host, port = apiserver_endpoint()
    ctr["env"] = [e for e in ctr["env"] if e["name"] != "GPUCONFORM_RETRIEVAL_WINDOW"] + [
        {"name": "GPUCONFORM_RETRIEVAL_WINDOW", "value": str(window)},
        {"name": "KUBERNETES_SERVICE_HOST", "value": host}, {"name": "KUBERNETES_SERVICE_PORT", "value": port}]
    ctr["args"] = [*ctr.get("args", []), "--gpuconform-run-id", run_id]
    for c in [ctr, *job["spec"]["template"]["spec"].get("initContainers", [])]:  # the reports sidecar too
        c.get("resources", {}).get("requests", {}).pop("cpu", None)
    return objs


def lock_held_by_an_ancestor() -> bool:
    """True under `flock /tmp/gpuconform-cluster.lock pytest ...`: taking the lock again would wait forever."""
    try:
        ino = os.stat(LOCK).st_ino
        holders = set()
        for line in Path("/proc/locks").read_text().splitlines():
            f = line.split()
            if "FLOCK" in f and "->" not in f:
                i = f.index("FLOCK")
                if int(f[i + 4].rsplit(":", 1)[1]) == ino:
                    holders.add(int(f[i + 3]))
        pid = os.getpid()
        while pid > 1:
            if pid in holders:
                return True
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return False


@contextlib.contextmanager
def suite_lock(timeout: float = 1800) -> Iterator[None]:
    """The bed's suite lock (the same flock(2) lock `flock /tmp/gpuconform-cluster.lock ...` takes)."""
    if lock_held_by_an_ancestor():
        yield
        return
    with open(LOCK, "a") as f:
        end = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    pytest.fail(f"{LOCK} still held by another suite run after {timeout:.0f}s")
                time.sleep(2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def delete_all(objs: list[dict], run_id: str | None = None) -> None:
    """Deletes what `objs` created, in the order that lets a running suite clean up after itself: the Job first
    (its pod gets SIGTERM and deletes the run's namespaces while its ServiceAccount and RBAC still exist), then
    the namespace and the cluster-scoped RBAC; waits until the namespace is gone so the next apply works."""
    def wait_gone(what: str, *args: str, timeout: float = 150) -> None:
        end = time.monotonic() + timeout
        while kubectl("get", *args, "--ignore-not-found", "-o", "name", check=False).strip():
            assert time.monotonic() < end, f"{what} still there after {timeout:.0f}s"
            time.sleep(2)

    kubectl("delete", "job", "-n", NS, JOB, "--ignore-not-found", "--wait=false", check=False)
    wait_gone("the suite pod", "pods", "-n", NS, "-l", f"job-name={JOB}", timeout=90)
    kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", check=False,
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    if run_id:  # namespaces of a suite run that was killed before its own cleanup
        kubectl("delete", "namespace", "-l", f"{RUN_LABEL}={run_id}", "--ignore-not-found", "--wait=false",
                check=False)
    wait_gone(f"namespace {NS}", "namespace", NS)


@contextlib.contextmanager
def applied(objs: list[dict], run_id: str) -> Iterator[None]:
    delete_all(objs)  # leftovers of an interrupted earlier run
    try:
        kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
        yield
    finally:
        delete_all(objs, run_id)


def suite_pod(timeout: float, until_ready: bool) -> dict:
    """The Job's pod once it is Ready (reports complete) or its container terminated; fails with its state."""
    end, last = time.monotonic() + timeout, None
    while time.monotonic() < end:
        items = get("pods", "-n", NS, "-l", f"job-name={JOB}")["items"]
        if items:
            last = items[0]
            st = last.get("status", {})
            cs = (st.get("containerStatuses") or [{}])[0]
            if cs.get("state", {}).get("terminated"):
                return last
            if until_ready and cs.get("ready"):
                return last
        time.sleep(2)
    logs = kubectl("logs", "-n", NS, f"job/{JOB}", "-c", "suite", "--tail=40", check=False)
    pytest.fail(f"the suite pod was not {'Ready' if until_ready else 'done'} after {timeout:.0f}s; "
                f"last status: {json.dumps((last or {}).get('status'), indent=1)[:3000]}\nlog tail:\n{logs}")


def job_finished(timeout: float = 60) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = get("job", "-n", NS, JOB)
        done = [c["type"] for c in job.get("status", {}).get("conditions", [])
                if c["type"] in ("Complete", "Failed") and c["status"] == "True"]
        if done:
            return job
        time.sleep(2)
    pytest.fail(f"Job {JOB} not finished after {timeout:.0f}s: {json.dumps(job.get('status'))}")


def exit_code(pod: dict) -> int | None:
    term = (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated") or {}
    return term.get("exitCode")


def summary_from_log(log: str) -> dict:
    lines = [ln for ln in log.splitlines() if ln.startswith("GPUCONFORM_SUMMARY ")]
    assert len(lines) == 1, f"expected one GPUCONFORM_SUMMARY line in the log, got {len(lines)}:\n{log[-3000:]}"
    return json.loads(lines[0].split(" ", 1)[1])


@pytest.fixture(scope="module")
def suite_image() -> str:
    """Builds the suite image from the working tree as `cluster.py up` does and imports it (seconds when nothing
    changed), so the Job runs the code under test rather than the tree of the last `up`."""
    sys.path.insert(0, str(ROOT / "localcluster"))
    import cluster

    cluster.ctr("images", "import", str(cluster.build_suite_image()))
    cluster.gpunode.tag_by_digest(cluster.ctr, cluster.IMAGES["suite"])
    image = find(manifests(), "Job", JOB)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == cluster.IMAGES["suite"], "suite-job.yaml should name the image the test bed builds"
    return image


# ---------------------------------------------------------------- tests

def test_manifests_are_plain_least_privilege_and_restricted(tmp_path):
    """Static: what the pre-flight requires is exactly what the required ClusterRole grants; the optional
    nodes/proxy is apart, in manifests/optional/, which `kubectl apply -f manifests/` does not apply; the runner namespace enforces restricted and is not a sweepable run namespace; the
    shipped config is valid."""
    from gpuconform.pytest_plugin.preflight import OPTIONAL, REQUIRED, RUN_READS, RUN_ROLE, SELF_BIND
    from gpuconform import config

    objs = manifests()
    shipped = tmp_path / "gpuconform.yaml"
    shipped.write_text(find(objs, "ConfigMap", "gpuconform-config")["data"]["gpuconform.yaml"])
    config.load(shipped, environ={})  # raises ConfigError naming the key if the schema moved on

    def grants(role: dict) -> set[tuple[str, str, str]]:
        return {(verb, group, res) for r in role["rules"] for verb in r["verbs"] for group in r["apiGroups"]
                for res in r["resources"]}

    required = {(verb, group, f"{res}/{sub}" if sub else res) for verb, group, res, sub, _ in REQUIRED}
    # its reads of its own pods' logs and events: bound by the suite to itself, in its run namespaces only
    required |= {(verb, group, res) for verb, group, res, _, _ in SELF_BIND}
    bind = [r for r in find(objs, "ClusterRole", "gpuconform")["rules"] if "bind" in r["verbs"]]
    assert bind == [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
                     "resourceNames": [RUN_ROLE]}]
    assert grants(find(objs, "ClusterRole", RUN_ROLE)) == {(verb, group, f"{res}/{sub}" if sub else res)
                                                           for verb, group, res, sub in RUN_READS}
    assert not [o for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
                and o["roleRef"]["name"] == RUN_ROLE], "gpuconform-run is bound by the suite, in its namespaces only"
    # the optional read-only LISTs (resourceslices, ...) sit in the main role; the optional nodes/proxy apart
    optional = {name: (verb, group, f"{res}/{sub}" if sub else res)
                for name, (verb, group, res, sub, _) in OPTIONAL.items()}
    assert grants(find(objs, "ClusterRole", "gpuconform")) == required | {
        v for name, v in optional.items() if name != "nodes/proxy"}
    assert not [o for o in objs if "nodes/proxy" in str(o.get("rules"))], "nodes/proxy is granted by default"
    proxy = [o for o in yaml.safe_load_all((MANIFESTS / "optional" / "rbac-nodes-proxy.yaml").read_text()) if o]
    assert grants(find(proxy, "ClusterRole", "gpuconform-nodes-proxy")) == {optional["nodes/proxy"]}
    ns = find(objs, "Namespace", NS)["metadata"]["labels"]
    assert ns["pod-security.kubernetes.io/enforce"] == "restricted"
    assert "app.kubernetes.io/part-of" not in ns
    job = find(objs, "Job", JOB)["spec"]
    assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] and job["ttlSecondsAfterFinished"]
    names = [f.name for f in sorted(MANIFESTS.glob("*.yaml"))]
    assert names.index("namespace.yaml") == 0 and names[-1] == "suite-job.yaml", names  # apply order


def test_job_runs_the_suite_in_cluster_and_its_reports_can_be_fetched(suite_image, tmp_path):
    from gpuconform.pytest_plugin.preflight import OPTIONAL

    run_id = f"incluster-{secrets.token_hex(3)}"
    objs = bed_objects(run_id, window=300)
    t0 = time.monotonic()
    with suite_lock(), applied(objs, run_id):
        t_locked = time.monotonic()
        pod = suite_pod(timeout=200, until_ready=True)
        name = pod["metadata"]["name"]
        assert exit_code(pod) is None, "the pod ended before its retrieval window"
        out = tmp_path / "reports"
        # the documented way, from the sidecar without the ServiceAccount token (needs tar in the image)
        kubectl("cp", "-c", "reports", f"{NS}/{name}:/reports", str(out))
        token_in_reports = kubectl("exec", "-n", NS, "-c", "reports", name, "--", "ls",
                                   "/var/run/secrets/kubernetes.io/serviceaccount", check=False)
        kubectl("exec", "-n", NS, "-c", "reports", name, "--", "touch", "/reports/done")
        job = job_finished()
        pod = get("pod", "-n", NS, name)
        log = kubectl("logs", "-n", NS, name, "-c", "suite")  # the default container is the reports sidecar
        left = [n["metadata"]["name"] for n in get("namespaces", "-l", f"{RUN_LABEL}={run_id}")["items"]
                if n.get("status", {}).get("phase") != "Terminating"]
        t_run = time.monotonic() - t_locked
    print(f"in-cluster run: {t_run:.0f}s with the lock, {time.monotonic() - t0:.0f}s in all")

    assert "token" not in token_in_reports, "the reports container must not hold the ServiceAccount token"
    summary = json.loads((out / "summary.json").read_text())
    bad = [r for r in summary["results"] if r["outcome"] != "passed"]
    assert not bad, json.dumps(bad, indent=1)
    assert summary["exit_status"] == 0, summary
    assert summary["results"] and summary["certified_nodes"] == summary["gpu_nodes"] == ["gpu-node-0"]
    assert summary["run_id"] == run_id
    # the pre-flight proved the cage: the policy refused its dry run, and the report carries no warning of it
    assert summary["environment"]["admission policy"].startswith("in force"), summary["environment"]
    assert not any("admission policy" in w for w in summary.get("warnings", [])), summary.get("warnings")
    assert any(r["check"] == "test_plugin_socket_exists_in_device_plugins_dir" for r in summary["results"]), \
        "the privileged node probe should run in-cluster too (in its own privileged run namespace)"
    # as shipped: every optional read but the node proxy (manifests/optional/, not applied)
    assert summary["optional_permissions"] == {name: name != "nodes/proxy" for name in OPTIONAL}
    # from a pod, the kubelet is read on its own port (issue 29 item 2), without nodes/proxy
    reads = summary["kubelet_reads"]["gpu-node-0"]
    assert all(how.startswith("on the kubelet's port, https://") and "the API server's CA" in how
               for how in reads.values()) and set(reads) == {"metrics", "configz"}, reads
    assert summary["kubelet_requests"] >= 2, summary["kubelet_requests"]
    html = (out / "report.html").read_text()
    assert len(html) > 10_000 and "<html" in html.lower()
    assert (out / "junit.xml").read_text().lstrip().startswith("<?xml")
    assert (out / "exit-code").read_text().strip() == "0"
    assert summary_from_log(log)["exit_status"] == 0
    assert exit_code(pod) == 0
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"]), job["status"]
    assert not left, f"the in-cluster run left namespaces behind: {left}"


def test_a_missing_permission_fails_the_job_with_exit_7_naming_it(suite_image):
    from gpuconform.pytest_plugin.preflight import REQUIRED

    run_id = f"incluster-{secrets.token_hex(3)}"
    objs = bed_objects(run_id, window=0)
    role = find(objs, "ClusterRole", "gpuconform")
    pods_rule = next(r for r in role["rules"] if r["resources"] == ["pods"])
    pods_rule["verbs"].remove("delete")
    with suite_lock(), applied(objs, run_id):
        pod = suite_pod(timeout=150, until_ready=False)
        job = job_finished()
        log = kubectl("logs", "-n", NS, pod["metadata"]["name"], "-c", "suite")
    assert exit_code(pod) == 7, log[-3000:]
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"]["conditions"]), job["status"]
    lines = [ln for ln in log.splitlines() if "missing permissions" in ln]
    assert len(lines) == 1, f"expected one line naming the missing permissions, got {len(lines)}:\n{log[-3000:]}"
    line = lines[0]
    assert "delete pods" in line and "in-cluster service account" in line, line
    others = {f"{verb} {res}{'/' + sub if sub else ''}" for verb, _, res, sub, _ in REQUIRED} - {"delete pods"}
    assert not [p for p in others if p in line], f"names permissions that are granted: {line}"
    assert summary_from_log(log)["exit_status"] == 7
