"""End-to-end: the shipped RBAC plus admission policy (manifests/rbac.yaml, manifests/rbac-policy.yaml) refuse each
misuse of the suite's ServiceAccount token on a real API server, and admit what the suite itself sends.

namespace.yaml, rbac.yaml and rbac-policy.yaml are applied as shipped; every request below is made with a fresh
token of `gpuconform-system/gpuconform` (the identity the policy is bound to), not by impersonation. Writes that
must be refused are sent with `--dry-run=server` (admission runs, nothing is stored even if the policy were to
let one through) and must fail naming the policy, so a refusal for another reason (RBAC, Pod Security) does not
count. The suite's own run namespaces are created for real by the ServiceAccount and deleted by it at the end; its
pods (built by gpuconform/pods.py from the bed's config) are sent with `--dry-run=server`. Holds the bed's suite
lock while the policy is installed (it applies cluster-wide to that ServiceAccount; test_incluster.py installs
the same objects). Needs the local cluster (`make cluster-up`).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from bedtools import KUBECTL, KUBECONFIG, ROOT, as_list, kubectl, suite_image_by_digest, token_kubeconfig
from test_incluster import NS, delete_all, suite_lock

POLICY = "gpuconform-writes"
PARAMS = "gpuconform-policy"  # the policy's parameters (ConfigMap in gpuconform-system)
REFUSED = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request"
RUN = f"vap-{secrets.token_hex(3)}"
MAIN, NODE = f"gpuconform-{RUN}", f"gpuconform-{RUN}-node"
FOREIGN = f"gc-foreign-{secrets.token_hex(3)}"
GPU_NODE = "gpu-node-0"

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]


def shipped_identity() -> list[dict]:
    """The runner namespace, the ServiceAccount with its ClusterRoles, and the admission policy, as shipped, with
    the policy's sysfsPath parameter set to the bed's simulated tree (localcluster/gpuconform.yaml
    nodeProbe.sysfsPath), as an operator sets it to the suite config's."""
    objs = []
    for f in ("namespace.yaml", "rbac.yaml", "rbac-policy.yaml"):
        objs += [o for o in yaml.safe_load_all((ROOT / "manifests" / f).read_text()) if o]
    param = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == PARAMS)
    param["data"]["sysfsPath"] = bed_cfg().get("nodeProbe.sysfsPath").rstrip("/")
    param["data"]["rootImages"] = bed_cfg().get("images.nodeProbe")
    return objs


def as_sa(kubeconfig: Path, *args: str, obj: dict | None = None) -> subprocess.CompletedProcess:
    """kubectl as the ServiceAccount (its token kubeconfig); output captured, never asserted here."""
    return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          input=json.dumps(obj) if obj is not None else None, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})


def patch_as_sa(kubeconfig: Path, name: str, metadata: dict, dry_run: bool) -> subprocess.CompletedProcess:
    """A merge PATCH of a namespace's metadata as the ServiceAccount, sent as the suite sends it (kubectl patch,
    label and annotate GET the object first, which the token may not): a CompletedProcess-like result."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    try:
        api.patch_namespace(name, {"metadata": metadata}, **({"dry_run": "All"} if dry_run else {}))
        return subprocess.CompletedProcess([], 0, "patched", "")
    except client.ApiException as e:
        return subprocess.CompletedProcess([], 1, "", f"{e.status} {e.reason}: {e.body}")


def run_namespace(name: str, level: str) -> dict:
    """As gpuconform/pytest_plugin/namespaces.py creates it."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "annotations": {"gpuconform.dev/heartbeat": "2026-12-04T10:11:12Z"},
        "labels": {"app.kubernetes.io/part-of": "gpuconform", "gpuconform.dev/run": RUN,
                   "pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level}}}


def bed_cfg():
    """The bed's config with the node probe's image named by digest, as the policy's rootImages lists it."""
    from gpuconform import config

    return config.load(ROOT / "localcluster" / "gpuconform.yaml",
                       environ={"GPUCONFORM_IMAGES_NODE_PROBE": suite_image_by_digest()})


def suite_pods() -> list[dict]:
    from gpuconform import pods

    cfg = bed_cfg()
    return [pods.probe_pod(f"count-{GPU_NODE}", MAIN, RUN, "count", GPU_NODE, cfg, gpus=1, resource="nvidia.com/gpu"),
            pods.vector_add_pod(f"va-{GPU_NODE}", MAIN, RUN, GPU_NODE, cfg, 60, "nvidia.com/gpu"),
            pods.run_long_pod(f"access-{GPU_NODE}", MAIN, RUN, "access", GPU_NODE, cfg, "nvidia.com/gpu"),
            pods.socket_probe_pod(f"socket-{GPU_NODE}", NODE, RUN, GPU_NODE, cfg, 60),
            pods.socket_probe_pod(f"socket-dra-{GPU_NODE}", NODE, RUN, GPU_NODE, cfg, 60, "plugins_registry"),
            pods.node_probe_pod(f"nodeprobe-hw-{GPU_NODE}", NODE, RUN, GPU_NODE, cfg, 60),
            pods.node_probe_pod(f"nodeprobe-dra-{GPU_NODE}", NODE, RUN, GPU_NODE, cfg, 60, checkpoint=False)]


def hostile_pod(namespace: str, name: str, **spec_over) -> dict:
    """A suite-shaped pod (so only the hostile edit can be what is refused)."""
    from gpuconform import pods

    p = pods.probe_pod(name, namespace, RUN, "count", GPU_NODE, bed_cfg(), gpus=0)
    p["spec"].update(spec_over)
    return p


def host_root_pod() -> dict:
    p = hostile_pod(NODE, "hostroot", volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "root", "mountPath": "/host", "readOnly": True}]
    return p


def host_path_pod(path: str, kind: str | None = "Directory", recursive: str | None = "Enabled",
                  root: bool = False) -> dict:
    """A suite-shaped pod in the -node namespace mounting one host path read-only (`kind`, `recursive`: None
    leaves the field out), as uid 1000 or (`root`) as the node probe's uid 0."""
    import copy

    from gpuconform import pods

    p = copy.deepcopy(hostile_pod(NODE, "hostpath", volumes=[
        {"name": "h", "hostPath": {"path": path, **({"type": kind} if kind else {})}}]))
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "h", "mountPath": "/host", "readOnly": True,
                                                   **({"recursiveReadOnly": recursive} if recursive else {})}]
    if root:  # as the node probe, the one root reader: with its image, which rootImages lists
        p["spec"]["securityContext"] = copy.deepcopy(pods.HOST_READER_ROOT_POD)
        p["spec"]["containers"][0]["image"] = bed_cfg().get("images.nodeProbe")
    return p


def node_probe_running(image: str) -> dict:
    """The suite's node probe (uid 0, host paths) with another image."""
    from gpuconform import pods

    p = pods.node_probe_pod(f"nodeprobe-x-{GPU_NODE}", NODE, RUN, GPU_NODE, bed_cfg(), 60)
    p["spec"]["containers"][0]["image"] = image
    return p


def privileged_pod() -> dict:
    p = hostile_pod(NODE, "priv")
    p["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    return p


@pytest.fixture(scope="module")
def sa(tmp_path_factory) -> Iterator[Path]:
    """The shipped identity and policy installed, a token kubeconfig of the ServiceAccount, the run's two
    namespaces created by it, and a foreign namespace made by the admin; all removed afterwards."""
    objs = shipped_identity()
    kc = tmp_path_factory.mktemp("sa") / "kubeconfig"
    with suite_lock():
        delete_all(objs)  # leftovers of an interrupted earlier run
        try:
            kubectl("apply", "-f", "-", input=as_list(objs))
            token_kubeconfig(kc, NS, "gpuconform")
            kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": FOREIGN, "labels": {"app.kubernetes.io/part-of": "gpuconform"}}}))
            # the policy is enforced once the API server has loaded it (about a second): wait for a known refusal
            end, last = time.monotonic() + 60, None
            while time.monotonic() < end:
                last = as_sa(kc, "delete", "namespace", FOREIGN, "--dry-run=server")
                if REFUSED in last.stderr:
                    break
                time.sleep(1)
            else:
                pytest.fail(f"the policy was not enforced within 60s; last answer: {last and last.stderr}")
            for name, level in ((MAIN, "restricted"), (NODE, "privileged")):
                out = as_sa(kc, "create", "-f", "-", obj=run_namespace(name, level))
                assert out.returncode == 0, f"the suite's own namespace {name} was refused: {out.stderr}"
            yield kc
        finally:
            for name in (MAIN, NODE):
                gone = as_sa(kc, "delete", "namespace", name, "--wait=false", "--ignore-not-found")
                if gone.returncode:
                    kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
            kubectl("delete", "namespace", FOREIGN, "--wait=false", "--ignore-not-found", check=False)
            delete_all(objs)


def test_the_suites_own_requests_are_admitted(sa):
    beat = patch_as_sa(sa, MAIN, {"annotations": {"gpuconform.dev/heartbeat": "2026-12-04T10:12:12Z"}}, False)
    assert beat.returncode == 0, f"heartbeat patch refused: {beat.stderr}"
    for p in suite_pods():
        out = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=p)
        assert out.returncode == 0, f"the suite's pod {p['metadata']['name']} was refused: {out.stderr}"
    gone = as_sa(sa, "delete", "namespace", NODE, "--dry-run=server")
    assert gone.returncode == 0, f"deleting its own namespace was refused: {gone.stderr}"


MISUSES = {
    "a privileged namespace under another name": ("create", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": f"gc-evil-{secrets.token_hex(3)}", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}),
    "a run-like namespace without the run label": ("create", {"apiVersion": "v1", "kind": "Namespace",
                                                              "metadata": {"name": f"gpuconform-{RUN}x-node"}}),
    "a pod in kube-system": ("create", lambda: hostile_pod("kube-system", "evil")),
    "a hostPath / pod": ("create", host_root_pod),
    "a privileged pod in the run's privileged namespace": ("create", privileged_pod),
    "a hostPID pod": ("create", lambda: hostile_pod(NODE, "hostpid", hostPID=True)),
    "a pod pinned to a node by spec.nodeName": ("create", lambda: hostile_pod(NODE, "pinned", nodeName=GPU_NODE)),
    # (deleting kube-system itself is refused earlier by the NamespaceLifecycle admission plugin, for everyone:
    # testing/unit/test_admission_policy.py shows the policy refuses it too)
    "deleting gpuconform-system": ("delete", ["namespace", NS]),
    "deleting another team's namespace labelled part-of=gpuconform": ("delete", ["namespace", FOREIGN]),
    "relabelling the restricted run namespace privileged": ("patch", (MAIN, {"labels": {
        "pod-security.kubernetes.io/enforce": "privileged"}})),
    "labelling a foreign namespace as a run's": ("patch", (FOREIGN, {"labels": {"gpuconform.dev/run": RUN}})),
    # issue 29 (security-review-2026-12b): allow-lists, not deny-lists
    "P1: the device-plugins directory (kubelet.sock) in a uid 0 pod": ("create", lambda: host_path_pod(
        "/var/lib/kubelet/device-plugins", root=True)),
    "P2: another pod's emptyDir holding a symlink named sys": ("create", lambda: host_path_pod(
        "/var/lib/kubelet/pods/0b6a2c1e-1111-2222-3333-444455556666/volumes/kubernetes.io~empty-dir/d/x/sys",
        root=True)),
    "P2: a kubelet-like path the runtime would create": ("create", lambda: host_path_pod(
        "/etc/kubernetes/manifests/kubelet/device-plugins")),
    "P2: the pod-resources directory as DirectoryOrCreate": ("create", lambda: host_path_pod(
        "/var/lib/kubelet/pod-resources", kind="DirectoryOrCreate", root=True)),
    "P1: the node probe running an image rootImages does not list (its tag)": ("create", lambda: node_probe_running(
        "localhost/gpuconform/suite:dev")),
    "P2: sysfs without recursiveReadOnly": ("create", lambda: host_path_pod(
        bed_cfg().get("nodeProbe.sysfsPath").rstrip("/"), recursive=None, root=True)),
    "P2: sysfs recursiveReadOnly IfPossible under the shipped Enabled parameter": ("create", lambda: host_path_pod(
        bed_cfg().get("nodeProbe.sysfsPath").rstrip("/"), recursive="IfPossible", root=True)),
    "D: a projected ServiceAccount token of another audience": ("create", lambda: hostile_pod(MAIN, "token", volumes=[
        {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"audience": "vault", "path": "t"}}]}}])),
    "D: a key-less Exists toleration (the control plane's taints too)": ("create", lambda: hostile_pod(
        MAIN, "everywhere", tolerations=[{"operator": "Exists"}])),
    "D: system-node-critical": ("create", lambda: hostile_pod(MAIN, "critical", priorityClassName="system-node-critical")),
    "D: AppArmor Unconfined": ("create", lambda: hostile_pod(NODE, "unconfined", securityContext={
        **hostile_pod(NODE, "x")["spec"]["securityContext"], "appArmorProfile": {"type": "Unconfined"}})),
    "P3: a run namespace created with the DRA admin-access label": ("create", lambda: {
        **run_namespace(f"gpuconform-{RUN}a", "restricted"), "metadata": {
            **run_namespace(f"gpuconform-{RUN}a", "restricted")["metadata"],
            "labels": {**run_namespace(f"gpuconform-{RUN}a", "restricted")["metadata"]["labels"],
                       "gpuconform.dev/run": f"{RUN}a", "resource.kubernetes.io/admin-access": "true"}}}),
    "P3: a run namespace created with a PodNodeSelector annotation": ("create", lambda: {
        **run_namespace(f"gpuconform-{RUN}b", "restricted"), "metadata": {
            **run_namespace(f"gpuconform-{RUN}b", "restricted")["metadata"],
            "labels": {**run_namespace(f"gpuconform-{RUN}b", "restricted")["metadata"]["labels"],
                       "gpuconform.dev/run": f"{RUN}b"},
            "annotations": {"gpuconform.dev/heartbeat": "2026-12-04T10:11:12Z",
                            "scheduler.alpha.kubernetes.io/node-selector": "node-role.kubernetes.io/control-plane="}}}),
    "P3: a run namespace patched with another annotation": ("patch", (MAIN, {"annotations": {
        "scheduler.alpha.kubernetes.io/node-selector": "x=y"}})),
}


@pytest.mark.parametrize("misuse", sorted(MISUSES))
def test_each_misuse_of_the_token_is_refused_by_the_policy(sa, misuse):
    verb, what = MISUSES[misuse]
    if verb == "create":
        obj = what() if callable(what) else what
        out = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=obj)
    elif verb == "patch":
        out = patch_as_sa(sa, *what, dry_run=True)
    else:
        out = as_sa(sa, verb, "--dry-run=server", *what)
    assert out.returncode != 0, f"{misuse}: admitted\n{out.stdout}"
    assert REFUSED in out.stderr, f"{misuse}: refused, but not by the policy: {out.stderr}"
    if misuse.startswith("deleting another team's"):
        assert kubectl("get", "namespace", FOREIGN, "-o", "name").strip() == f"namespace/{FOREIGN}"


def test_a_node_whose_runtime_cannot_mount_recursively_read_only_is_not_checked_not_errored(sa):
    """The bed's gpu-node-0 runs containerd 1.6, which reports no recursiveReadOnlyMounts: the suite mounts its host
    readers there IfPossible, which the shipped policy (parameter recursiveReadOnly: Enabled) refuses. That refusal,
    as the API server words it, is NOTCHECKED-OPTIONAL naming the runtime and the parameter, not an API error."""
    from gpuconform import pods, verdicts

    node = json.loads(kubectl("get", "node", GPU_NODE, "-o", "json"))
    mode = pods.recursive_read_only(node)
    assert mode == pods.RRO_IF_POSSIBLE, "the bed's gpu-node-0 runtime now mounts recursively read-only"
    p = pods.node_probe_pod(f"nodeprobe-health-{GPU_NODE}", NODE, RUN, GPU_NODE, bed_cfg(), 60, recursive=mode)
    assert pods.mounts_if_possible(p)
    out = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=p)
    assert out.returncode != 0 and REFUSED in out.stderr, out.stderr
    found = verdicts.creation_refused(p["metadata"]["name"], GPU_NODE, out.stderr, pods.mounts_if_possible(p))
    assert found is not None and found.code == "NOTCHECKED-OPTIONAL", out.stderr
    assert "recursiveReadOnlyMounts" in found.message and "recursiveReadOnly to IfPossible" in found.message


def test_a_node_probe_image_the_policy_does_not_list_is_not_checked_not_errored(sa):
    """A node probe image that rootImages does not list (here the bed's image by its tag), refused as the API server
    words it, is NOTCHECKED-OPTIONAL naming the parameter."""
    from gpuconform import verdicts

    p = node_probe_running("localhost/gpuconform/suite:dev")
    out = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=p)
    assert out.returncode != 0 and REFUSED in out.stderr, out.stderr
    found = verdicts.creation_refused(p["metadata"]["name"], GPU_NODE, out.stderr)
    assert found is not None and found.code == "NOTCHECKED-OPTIONAL" and "rootImages" in found.message, out.stderr


def test_the_token_reads_logs_and_events_only_in_the_run_namespaces_it_bound(sa):
    """Review P7: no cluster-wide pods/log or events. The ServiceAccount binds gpuconform-run to itself in its run
    namespace (as the suite does: namespaces.run_binding), which the policy admits; it then reads logs and events
    there and nowhere else, and may not bind another role."""
    from gpuconform.pytest_plugin.namespaces import run_binding

    me = {"kind": "ServiceAccount", "name": "gpuconform", "namespace": NS}
    out = as_sa(sa, "create", "-f", "-", obj=run_binding(MAIN, RUN, me))
    assert out.returncode == 0, f"the suite's own binding was refused: {out.stderr}"
    deadline = time.monotonic() + 10
    while as_sa(sa, "auth", "can-i", "get", "pods", "--subresource=log", "-n", MAIN).stdout.strip() != "yes":
        assert time.monotonic() < deadline, "the binding was not honoured within 10 s"
        time.sleep(0.2)
    assert as_sa(sa, "auth", "can-i", "list", "events", "-n", MAIN).stdout.strip() == "yes"
    for ns in ("kube-system", "nvidia-device-plugin", "default"):
        for verb in (("get", "pods", "--subresource=log"), ("list", "events")):  # "no" or "no - <why>"
            answer = as_sa(sa, "auth", "can-i", *verb, "-n", ns).stdout.strip()
            assert answer.split()[0] == "no", (ns, verb, answer)
    admin = {**run_binding(MAIN, RUN, me), "metadata": {**run_binding(MAIN, RUN, me)["metadata"], "name": "x"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}
    out = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=admin)
    # refused: by the policy, or by RBAC's escalation check (bind is granted for gpuconform-run by name only)
    assert out.returncode != 0 and (REFUSED in out.stderr or "permissions not currently held" in out.stderr), out.stderr


def test_admin_access_only_in_a_dry_run(sa):
    """P3: a ResourceClaim asking DRA admin access is admitted as the suite's own server-side dry run (its
    admin-access trial) and refused by the policy when it would be stored. The run namespace is labelled
    resource.kubernetes.io/admin-access=true by the admin for this test (the API server itself refuses admin access
    in an unlabelled namespace before admission: the policy's refusal is what this shows); label removed after."""
    from gpuconform import pods

    claim = pods.claim(f"admin-{RUN}", MAIN, RUN, "gpu.nvidia.com", 1, admin_access=True)
    kubectl("label", "namespace", MAIN, "resource.kubernetes.io/admin-access=true", "--overwrite")
    try:
        trial = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=claim)
        assert trial.returncode == 0, f"the suite's admin-access trial (dry run) was refused: {trial.stderr}"
        stored = as_sa(sa, "create", "-f", "-", obj=claim)
        assert stored.returncode != 0, f"an admin-access claim was stored: {stored.stdout}"
        assert REFUSED in stored.stderr and "adminAccess" in stored.stderr, stored.stderr
    finally:
        kubectl("delete", "resourceclaim", "-n", MAIN, f"admin-{RUN}", "--ignore-not-found", check=False)
        kubectl("label", "namespace", MAIN, "resource.kubernetes.io/admin-access-", check=False)


def test_without_its_parameters_the_policy_refuses_every_write(sa):
    """The binding's parameterNotFoundAction is Deny: with the ConfigMap gone, even the suite's own pod is refused
    (fail closed); restored after."""
    from gpuconform import pods

    param = next(o for o in shipped_identity() if o["kind"] == "ConfigMap" and o["metadata"]["name"] == PARAMS)
    p = pods.probe_pod(f"count-{GPU_NODE}", MAIN, RUN, "count", GPU_NODE, bed_cfg(), gpus=0)
    kubectl("delete", "configmap", "-n", NS, PARAMS)
    try:
        end, out = time.monotonic() + 30, None
        while time.monotonic() < end:
            out = as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=p)
            if out.returncode != 0:
                break
            time.sleep(1)
        assert out is not None and out.returncode != 0 and POLICY in out.stderr, out and out.stderr
    finally:
        kubectl("apply", "-f", "-", input=json.dumps(param))
        end = time.monotonic() + 30
        while time.monotonic() < end and as_sa(sa, "create", "--dry-run=server", "-f", "-", obj=p).returncode:
            time.sleep(1)


def test_the_node_proxy_reaches_only_the_kubelets_metrics_and_configz(sa):
    """With the optional grant (manifests/optional/rbac-nodes-proxy.yaml), `get nodes/proxy` reaches every kubelet path,
    exec included. The API server admits a node-proxy request as CONNECT with the path in NodeProxyOptions, so the
    policy fences the ServiceAccount to /metrics and /configz: the kubelet's pod list and an exec through the proxy
    are refused at admission."""
    grant = [o for o in yaml.safe_load_all((ROOT / "manifests" / "optional" / "rbac-nodes-proxy.yaml").read_text()) if o]
    kubectl("apply", "-f", "-", input=as_list(grant))
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:  # RBAC is read through the authorizer's cache
            metrics = as_sa(sa, "get", "--raw", f"/api/v1/nodes/{GPU_NODE}/proxy/metrics")
            if metrics.returncode == 0:
                break
            time.sleep(1)
        assert metrics.returncode == 0 and "kubelet_" in metrics.stdout, metrics.stderr
        configz = as_sa(sa, "get", "--raw", f"/api/v1/nodes/{GPU_NODE}/proxy/configz")
        assert configz.returncode == 0 and "kubeletconfig" in configz.stdout, configz.stderr
        plugin = kubectl("get", "pods", "-n", "nvidia-device-plugin", "-o", "name").split()[0].split("/")[1]
        for path in ("pods", f"exec/nvidia-device-plugin/{plugin}/nvidia-device-plugin-ctr?command=id&output=1",
                     "metrics/../pods", "configz/"):
            out = as_sa(sa, "get", "--raw", f"/api/v1/nodes/{GPU_NODE}/proxy/{path}")
            assert out.returncode != 0 and REFUSED in out.stderr, f"{path}: {out.returncode} {out.stderr[:300]}"
    finally:
        kubectl("delete", "-f", "-", "--ignore-not-found", input=as_list(grant), check=False)


def test_the_kubelets_metrics_and_configz_are_read_on_their_port_without_nodes_proxy(sa, tmp_path):
    """Issue 29 item 2: with the shipped grants alone (nodes/metrics, nodes/configz; no nodes/proxy), the suite's
    kubelet reader reads the real node's kubelet on its own port as the ServiceAccount, the kubelet's serving
    certificate verified against the API server's CA; those grants reach no other kubelet path (the pod list is
    refused by the kubelet), and with a CA that did not sign the kubelets' certificates nothing is read."""
    from kubernetes.client import ApiException

    from gpuconform import kube
    from gpuconform.pytest_plugin import preflight
    from gpuconform.pytest_plugin.kubelet import Kubelet

    os.environ.pop("KUBECONFIG", None)  # the SA's kubeconfig below, never the admin's
    cluster = kube.connect(str(sa), None, 50, 100, 10.0)
    granted = {name: preflight.can(cluster, verb, group, res, sub, None)
               for name, (verb, group, res, sub, _) in preflight.OPTIONAL.items() if name.startswith("nodes/")}
    assert granted == {"nodes/metrics": True, "nodes/configz": True, "nodes/proxy": False}
    nodes = {GPU_NODE: json.loads(kubectl("get", "node", GPU_NODE, "-o", "json"))}
    k = Kubelet(cluster, granted, "auto", "", node=nodes.get)
    for n in nodes:
        assert "kubelet_" in (k.get(n, "metrics") or ""), k.how_read(n, "metrics")
        assert k.how_read(n, "metrics").startswith("on the kubelet's port, https://"), k.how_read(n, "metrics")
        assert "kubeletconfig" in (k.get(n, "configz") or ""), k.how_read(n, "configz")
    url = k.read_as[(GPU_NODE, "metrics")].split(", ", 1)[1].split(" ", 1)[0]
    with pytest.raises(ApiException) as refused:
        cluster.kubelet_direct(k.client(), f"{url}/pods", 3.0)
    assert refused.value.status == 403, refused.value
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
                    "-keyout", str(tmp_path / "other.key"), "-out", str(tmp_path / "other.crt")],
                   check=True, capture_output=True)
    other = Kubelet(cluster, granted, "auto", str(tmp_path / "other.crt"), node=nodes.get)
    assert other.get(GPU_NODE, "metrics") is None
    assert "did not verify against kubelet.caFile" in other.how_read(GPU_NODE, "metrics")



def test_both_bed_nodes_are_certified_as_the_caged_service_account(sa, dra_node, tmp_path):
    """Issue 29's done-when: the whole suite, run as the shipped ServiceAccount with the shipped policy in force
    (and no nodes/proxy), certifies both bed nodes, the device-plugin node and the DRA node; the kubelets are read
    on their own port. Checks the cage makes impossible on a node (gpu-node-0's runtime cannot mount recursively
    read-only) are NOTCHECKED-OPTIONAL, which costs no certification."""
    from bedtools import run_pytest

    out = tmp_path / "summary.json"
    proc = run_pytest("tests", "-q", "--gpuconform-config", str(ROOT / "localcluster" / "gpuconform.yaml"),
                      "--gpuconform-set", f"images.nodeProbe={suite_image_by_digest()}",
                      "--gpuconform-summary", str(out), kubeconfig=sa, timeout=600)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads(out.read_text())
    bad = [r for r in summary["results"] if r["outcome"] == "failed" or (r["reason"] or "").startswith("ERROR")]
    assert proc.returncode == 0 and not bad, json.dumps(bad, indent=1) + proc.stdout[-2000:]
    assert sorted(summary["certified_nodes"]) == ["gpu-node-0", "gpu-node-dra"], summary["certified_nodes"]
    assert summary["environment"]["admission policy"].startswith("in force"), summary["environment"]
    assert summary["optional_permissions"]["nodes/proxy"] is False
    assert all(how.startswith("on the kubelet's port") for reads in summary["kubelet_reads"].values()
               for how in reads.values()), summary["kubelet_reads"]
