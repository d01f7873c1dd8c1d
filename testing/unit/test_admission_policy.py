"""The shipped admission policy (manifests/rbac-policy.yaml) lets the suite's ServiceAccount do what the suite does
and refuses each misuse of its token that issue 18 names: a privileged namespace under another name, a hostPath `/`
pod or a pod pinned to a node, a pod in kube-system, deleting or relabelling a namespace that is not a run's.

The policy's CEL is evaluated with cel-python (a dev dependency) against recorded requests: the suite's own
namespaces and pods as its code builds them (gpuconform/pytest_plugin/namespaces.py, gpuconform/pods.py) and a table of hostile
ones. The Kubernetes-only CEL libraries are not used in `expression`s (only in one messageExpression), so standard
CEL evaluates them as the API server does; an expression that errors counts as a refusal (failurePolicy: Fail).
Without cel-python the structural test still checks that each misuse has its validation, on the right field.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuconform import config as gconfig, pods
from gpuconform.pytest_plugin.namespaces import run_binding

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "manifests" / "rbac-policy.yaml"
SA = "system:serviceaccount:gpuconform-system:gpuconform"
RUN = "20261204-101010-a1b2c3"
SA_SUBJECT = {"kind": "ServiceAccount", "name": "gpuconform", "namespace": "gpuconform-system"}


def shipped() -> tuple[dict, dict]:
    docs = [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    return policy, binding


def shipped_params() -> dict:
    """The policy's parameters as shipped (the ConfigMap the binding's paramRef names)."""
    docs = [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]
    return next(d for d in docs if d["kind"] == "ConfigMap")


def params(**data: str) -> dict:
    """The shipped parameters with `data` changed (the bed's sysfsPath, another kubelet dir)."""
    out = copy.deepcopy(shipped_params())
    out["data"].update(data)
    return out


# the bed's node probe image by digest, as an operator names it (the bed's config names a tag; the live tests
# name the digest the bed tagged it with: localcluster/gpunode.py tag_by_digest)
BED_PROBE_IMAGE = "localhost/gpuconform/suite@sha256:" + "2" * 64
DEFAULT_PROBE_IMAGE = "registry.example/gpuconform/suite@sha256:" + "1" * 64
# localcluster/gpuconform.yaml nodeProbe.sysfsPath, and the node probe's image
BED_PARAMS = {"sysfsPath": "/var/lib/gpu-sim/sys", "rootImages": BED_PROBE_IMAGE}


# ---------------------------------------------------------------- recorded requests

def suite_namespace(privileged: bool, run: str = RUN) -> dict:
    """The namespace exactly as gpuconform/pytest_plugin/namespaces.py creates it (through a recording fake client), plus the
    label the API server adds before validating admission (kubernetes.io/metadata.name)."""
    from gpuconform.pytest_plugin import namespaces

    sent: list[dict] = []

    class Core:
        def create_namespace(self, body: dict) -> None:
            sent.append(copy.deepcopy(body))

    class Cluster:
        core = Core()

    spaces = namespaces.Namespaces(Cluster(), run)  # type: ignore[arg-type]
    say, namespaces.log = namespaces.log, lambda msg: None  # quiet at collection time
    try:
        spaces.ensure(privileged=privileged)
    finally:
        spaces._ended.set()  # stops the heartbeat thread ensure() started
        namespaces.log = say
    ns = sent[0]
    ns["metadata"]["labels"]["kubernetes.io/metadata.name"] = ns["metadata"]["name"]
    return ns


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def bed_config() -> gconfig.Config:
    return gconfig.load(ROOT / "localcluster" / "gpuconform.yaml", environ={"GPUCONFORM_IMAGES_NODE_PROBE": BED_PROBE_IMAGE})


def default_config_with_image() -> gconfig.Config:
    return gconfig.load(None, environ={"GPUCONFORM_IMAGES_NODE_PROBE": DEFAULT_PROBE_IMAGE})


def root_reader(image: str) -> dict:
    """The node probe (uid 0, host paths) running `image`."""
    p = pods.node_probe_pod("nodeprobe-hw-n1", NODE["metadata"]["name"], RUN, "n1", bed_config(), 60)
    p["spec"]["containers"][0]["image"] = image
    return p


def suite_pods(cfg: gconfig.Config) -> list[dict]:
    main, node = f"gpuconform-{RUN}", f"gpuconform-{RUN}-node"
    return [pods.probe_pod("count-n1", main, RUN, "count", "n1", cfg, gpus=1, resource="nvidia.com/gpu"),
            pods.probe_pod("topo-n1", main, RUN, "topology", "n1", cfg, gpus=1, resource="nvidia.com/gpu",
                           guaranteed_cpus=1),
            pods.vector_add_pod("va-n1", main, RUN, "n1", cfg, 60, "nvidia.com/gpu"),
            pods.socket_probe_pod("socket-n1", node, RUN, "n1", cfg, 60),
            pods.socket_probe_pod("socket-dra-n1", node, RUN, "n1", cfg, 60, "plugins_registry"),
            pods.vector_add_pod("va-dra-n1", main, RUN, "n1", cfg, 60, "gpu.nvidia.com", "gpuconform-1x-gpu-nvidia-com"),
            pods.node_probe_pod("nodeprobe-hw-n1", node, RUN, "n1", cfg, 60),
            pods.run_long_pod("access-n1", main, RUN, "access", "n1", cfg, "nvidia.com/gpu")]


def request(op: str, resource: str, obj: dict | None = None, old: dict | None = None, ns: dict | None = None,
            user: str = SA, dry_run: bool = False, param: dict | None = None, sub: str = "") -> dict:
    """The admission request's CEL variables as a ValidatingAdmissionPolicy sees them (`params`: the binding's
    parameter object; by default the shipped one with the bed's sysfs path; `sub`: the subresource)."""
    subject = obj or old or {}
    return {"request": {"operation": op, "userInfo": {"username": user}, "dryRun": dry_run,
                        **({"subResource": sub} if sub else {}),  # the API server leaves it out when empty
                        "resource": {"group": "", "version": "v1", "resource": resource},
                        "name": subject.get("metadata", {}).get("name", ""),
                        "namespace": (ns or {}).get("metadata", {}).get("name", "")},
            "object": obj, "oldObject": old, "namespaceObject": ns,
            "params": param if param is not None else params(**BED_PARAMS)}


def pod_in(ns: dict, **spec_over: Any) -> dict:
    """A suite-shaped pod in `ns` (its run label), with `spec_over` applied: the hostile edits."""
    run = ns["metadata"]["labels"].get("gpuconform.dev/run", RUN)
    p = pods.probe_pod("p", ns["metadata"]["name"], run, "count", "n1", bed_config(), gpus=0)
    p["spec"].update(spec_over)
    return p


def host_path_pod(ns: dict, path: str, read_only: bool = True, kind: str | None = "Directory",
                  recursive: str | None = "Enabled", root: bool = False, **mount: Any) -> dict:
    """A suite-shaped pod mounting one hostPath (type `kind`, None: unset) read-only, recursively (`recursive`,
    None: unset), as uid 1000 or (`root`) as uid 0 like the node probe."""
    p = copy.deepcopy(pod_in(ns, volumes=[{"name": "h", "hostPath": {"path": path, **({"type": kind} if kind else {})}}]))
    m = {"name": "h", "mountPath": "/host", "readOnly": read_only, **mount}
    if recursive:
        m["recursiveReadOnly"] = recursive
    p["spec"]["containers"][0]["volumeMounts"] = [m]
    if root:  # as the node probe, the one root reader: its image, as rootImages lists it
        p["spec"]["securityContext"] = copy.deepcopy(pods.HOST_READER_ROOT_POD)
        p["spec"]["containers"][0]["image"] = BED_PROBE_IMAGE
    return p


def with_container(ns: dict, **sc: Any) -> dict:
    p = pod_in(ns)
    p["spec"]["containers"][0]["securityContext"] = {**p["spec"]["containers"][0]["securityContext"], **sc}
    return p


MAIN = suite_namespace(False)
NODE = suite_namespace(True)
KUBE_SYSTEM = namespace("kube-system")
TEAM = namespace("team-a-prod", **{"app.kubernetes.io/part-of": "gpuconform"})
SYSTEM = namespace("gpuconform-system", **{"app.kubernetes.io/name": "gpuconform"})


def relabelled(ns: dict, **labels: str) -> dict:
    out = copy.deepcopy(ns)
    out["metadata"]["labels"].update(labels)
    return out


def init_privileged() -> dict:
    p = pod_in(NODE)
    ctr = copy.deepcopy(p["spec"]["containers"][0])
    ctr["name"] = "init"
    ctr["securityContext"] = {"privileged": True}
    p["spec"]["initContainers"] = [ctr]
    return p


# (id, request, a unique piece of the validation that must refuse it, the field that validation must name)
MISUSES: list[tuple[str, dict, str, str]] = [
    ("a claim template in another team's namespace",
     request("CREATE", "resourceclaimtemplates", pods.claim_template("t", "kube-system", RUN, "gpu.nvidia.com", 1),
             ns=KUBE_SYSTEM), "only its run namespaces", "gpuconform.dev/run"),
    ("a shared claim in another team's namespace",
     request("CREATE", "resourceclaims", pods.claim("c", "kube-system", RUN, "gpu.nvidia.com", 1),
             ns=KUBE_SYSTEM), "only its run namespaces", "gpuconform.dev/run"),
    ("privileged namespace under another name",
     request("CREATE", "namespaces", namespace("team-x", **{"pod-security.kubernetes.io/enforce": "privileged"})),
     "only its run namespaces", "gpuconform.dev/run"),
    ("run-like name without the run label",
     request("CREATE", "namespaces", namespace(f"gpuconform-{RUN}-node")), "only its run namespaces",
     "gpuconform.dev/run"),
    ("run label that does not match the name",
     request("CREATE", "namespaces", relabelled(NODE, **{"gpuconform.dev/run": "other"})),
     "only its run namespaces", "metadata.name"),
    ("the suite's own system namespace taken as a run",
     request("CREATE", "namespaces", relabelled(namespace("gpuconform-system"), **{
         "gpuconform.dev/run": "system", "app.kubernetes.io/part-of": "gpuconform"})),
     "only its run namespaces", "gpuconform-system"),
    ("the restricted run namespace created privileged",
     request("CREATE", "namespaces", relabelled(MAIN, **{"pod-security.kubernetes.io/enforce": "privileged"})),
     "Pod Security restricted", "pod-security.kubernetes.io/enforce"),
    ("the restricted run namespace patched to privileged",
     request("UPDATE", "namespaces", relabelled(MAIN, **{"pod-security.kubernetes.io/enforce": "privileged"}), MAIN),
     "never its labels", "labels"),
    ("a foreign namespace patched into a run namespace",
     request("UPDATE", "namespaces", relabelled(namespace(f"gpuconform-{RUN}"), **MAIN["metadata"]["labels"]),
             namespace(f"gpuconform-{RUN}")),
     "never its labels", "oldObject.metadata.labels"),
    ("deleting kube-system", request("DELETE", "namespaces", old=KUBE_SYSTEM), "only its run namespaces", "run"),
    ("deleting another team's namespace with the part-of label", request("DELETE", "namespaces", old=TEAM),
     "only its run namespaces", "app.kubernetes.io/part-of"),
    ("deleting gpuconform-system", request("DELETE", "namespaces", old=SYSTEM), "only its run namespaces",
     "gpuconform-system"),
    ("a pod in kube-system", request("CREATE", "pods", pod_in(KUBE_SYSTEM), ns=KUBE_SYSTEM),
     "only its run namespaces", "namespaceObject"),
    ("deleting a pod in kube-system", request("DELETE", "pods", old=pod_in(KUBE_SYSTEM), ns=KUBE_SYSTEM),
     "only its run namespaces", "namespaceObject"),
    ("hostPath / in the -node namespace", request("CREATE", "pods", host_path_pod(NODE, "/"), ns=NODE),
     "mounts host paths only", "hostPath.path"),
    ("hostPath /etc", request("CREATE", "pods", host_path_pod(NODE, "/etc"), ns=NODE), "mounts host paths only",
     "hostPath.path"),
    ("hostPath /proc/sys", request("CREATE", "pods", host_path_pod(NODE, "/proc/sys"), ns=NODE),
     "mounts host paths only", "/proc/"),
    ("hostPath with back-steps", request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/../../../etc/kubelet"
                                                                             "/device-plugins"), ns=NODE),
     "mounts host paths only", "[.][.]"),
    ("an allowed hostPath in the restricted namespace",
     request("CREATE", "pods", host_path_pod(MAIN, "/var/lib/kubelet/pod-resources"), ns=MAIN),
     "mounts host paths only", "isNodeNs"),
    ("an allowed hostPath mounted writable",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/device-plugins", read_only=False), ns=NODE),
     "host paths read-only", "readOnly"),
    ("a privileged container", request("CREATE", "pods", with_container(NODE, privileged=True), ns=NODE),
     "never privileged", "privileged"),
    ("a privileged init container", request("CREATE", "pods", init_privileged(), ns=NODE), "never privileged",
     "initContainers"),
    ("an added capability",
     request("CREATE", "pods", with_container(NODE, capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}), ns=NODE),
     "never privileged", "capabilities.add"),
    ("privilege escalation", request("CREATE", "pods", with_container(NODE, allowPrivilegeEscalation=True), ns=NODE),
     "never privileged", "allowPrivilegeEscalation"),
    ("seccomp Unconfined on a container",
     request("CREATE", "pods", with_container(NODE, seccompProfile={"type": "Unconfined"}), ns=NODE),
     "never privileged", "seccompProfile"),
    ("hostPID", request("CREATE", "pods", pod_in(NODE, hostPID=True), ns=NODE), "no host namespace", "hostPID"),
    ("hostNetwork", request("CREATE", "pods", pod_in(NODE, hostNetwork=True), ns=NODE), "no host namespace",
     "hostNetwork"),
    ("a pod pinned to a node by spec.nodeName", request("CREATE", "pods", pod_in(NODE, nodeName="n1"), ns=NODE),
     "spec.nodeName", "nodeName"),
    ("a pod mounting a ServiceAccount token",
     request("CREATE", "pods", pod_in(MAIN, automountServiceAccountToken=True), ns=MAIN), "no ServiceAccount token",
     "automountServiceAccountToken"),
    ("a pod without the run label",
     request("CREATE", "pods", {**pod_in(MAIN), "metadata": {"name": "p", "namespace": MAIN["metadata"]["name"]}},
             ns=MAIN), "run label", "object.metadata.labels"),
    # issue 29 (security-review-2026-12b P1-P3): allow-lists, not deny-lists
    ("P2: another pod's emptyDir holding a symlink named sys",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/pods/0b6a2c1e-1111-2222-3333-444455556666/volumes/"
                                                   "kubernetes.io~empty-dir/d/x/sys", root=True), ns=NODE),
     "mounts host paths only", "hostPath.path"),
    ("P2: a kubelet-like directory the runtime would create",
     request("CREATE", "pods", host_path_pod(NODE, "/etc/kubernetes/manifests/kubelet/device-plugins"), ns=NODE),
     "mounts host paths only", "kubeletDir"),
    ("P2: an allowed directory of type DirectoryOrCreate",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/pod-resources", kind="DirectoryOrCreate",
                                             root=True), ns=NODE), "mounts host paths only", "hostPath.type"),
    ("P2: an allowed directory with no type",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/pod-resources", kind=None, root=True), ns=NODE),
     "mounts host paths only", "hostPath.type"),
    ("P2: the checkpoint mounted as a directory",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
                                             root=True), ns=NODE), "mounts host paths only", "File"),
    ("P1: the node probe running an image rootImages does not list",
     request("CREATE", "pods", root_reader("evil.example/root@sha256:" + "3" * 64), ns=NODE),
     "only with an image named by digest", "rootImages"),
    ("P1: the node probe naming its listed image by a tag, which can move",
     request("CREATE", "pods", root_reader("localhost/gpuconform/suite:dev"), ns=NODE,
             param=params(**{**BED_PARAMS, "rootImages": "localhost/gpuconform/suite:dev"})),
     "only with an image named by digest", "sha256"),
    ("P1: the node probe where rootImages is empty, as shipped",
     request("CREATE", "pods", root_reader(BED_PROBE_IMAGE), ns=NODE,
             param=params(**{**BED_PARAMS, "rootImages": ""})),
     "only with an image named by digest", "rootImages"),
    ("P7: binding cluster-admin in its run namespace",
     request("CREATE", "rolebindings", {**run_binding(MAIN["metadata"]["name"], RUN, SA_SUBJECT), "roleRef": {
         "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}, ns=MAIN),
     "binds only the ClusterRole gpuconform-run", "roleRef"),
    ("P7: binding its reads to another ServiceAccount",
     request("CREATE", "rolebindings", run_binding(MAIN["metadata"]["name"], RUN, {
         "kind": "ServiceAccount", "name": "default", "namespace": "kube-system"}), ns=MAIN),
     "binds only the ClusterRole gpuconform-run", "subjects"),
    ("P7: binding its reads to itself and a group",
     request("CREATE", "rolebindings", {**run_binding(MAIN["metadata"]["name"], RUN, SA_SUBJECT), "subjects": [
         SA_SUBJECT, {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}]},
             ns=MAIN), "binds only the ClusterRole gpuconform-run", "size(object.subjects)"),
    ("P7: binding its reads in another team's namespace",
     request("CREATE", "rolebindings", run_binding("kube-system", RUN, SA_SUBJECT), ns=KUBE_SYSTEM),
     "only its run namespaces", "gpuconform.dev/run"),
    ("P2: sysfs mounted without recursiveReadOnly",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/gpu-sim/sys", recursive=None, root=True), ns=NODE),
     "host paths read-only", "recursiveReadOnly"),
    ("P2: sysfs mounted recursiveReadOnly IfPossible where the parameter says Enabled",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/gpu-sim/sys", recursive="IfPossible", root=True),
             ns=NODE), "host paths read-only", "rroIfPossible"),
    ("P2: a host path mounted with propagation",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/gpu-sim/sys", recursive=None, root=True,
                                             mountPropagation="HostToContainer"), ns=NODE),
     "host paths read-only", "mountPropagation"),
    ("P2: another kubelet dir than the parameter's",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/k0s/kubelet/pod-resources", root=True), ns=NODE),
     "mounts host paths only", "kubeletDir"),
    ("P2: a hostile parameter (kubeletDir /etc) admits nothing below it",
     request("CREATE", "pods", host_path_pod(NODE, "/etc/pod-resources", root=True), ns=NODE,
             param=params(kubeletDir="/etc")), "mounts host paths only", "paramsOk"),
    ("P2: a hostile parameter (sysfsPath /) admits no /",
     request("CREATE", "pods", host_path_pod(NODE, "/", root=True), ns=NODE, param=params(sysfsPath="/")),
     "mounts host paths only", "paramsOk"),
    ("P1: the device-plugins directory in a uid 0 pod",
     request("CREATE", "pods", host_path_pod(NODE, "/var/lib/kubelet/device-plugins", root=True), ns=NODE),
     "device-plugins directory only", "runAsNonRoot"),
    ("P1: the device-plugins directory in a non-root pod with a uid 0 container",
     request("CREATE", "pods", (lambda p: (p["spec"]["containers"][0]["securityContext"].update(runAsUser=0), p)[1])(
         host_path_pod(NODE, "/var/lib/kubelet/device-plugins")), ns=NODE),
     "device-plugins directory only", "c.securityContext.runAsUser"),
    ("P1: the device-plugins directory in a pod that names no uid",
     request("CREATE", "pods", (lambda p: (p["spec"]["securityContext"].pop("runAsUser"), p)[1])(
         host_path_pod(NODE, "/var/lib/kubelet/device-plugins")), ns=NODE),
     "device-plugins directory only", "object.spec.securityContext.runAsUser"),
    ("P3: a run namespace created with the DRA admin-access label",
     request("CREATE", "namespaces", relabelled(NODE, **{"resource.kubernetes.io/admin-access": "true"})),
     "no label but", "labels"),
    ("P3: a run namespace created with a PodNodeSelector annotation",
     request("CREATE", "namespaces", {**MAIN, "metadata": {**MAIN["metadata"], "annotations": {
         "gpuconform.dev/heartbeat": "2026-12-04T10:11:12Z",
         "scheduler.alpha.kubernetes.io/node-selector": "node-role.kubernetes.io/control-plane="}}}),
     "no label but", "annotations"),
    ("P3: a run namespace patched with another annotation",
     request("UPDATE", "namespaces", {**MAIN, "metadata": {**MAIN["metadata"], "annotations": {
         "scheduler.alpha.kubernetes.io/node-selector": "x=y"}}}, MAIN),
     "gpuconform.dev/ended annotations", "oldObject.metadata.annotations"),
    ("P3: an admin-access claim stored (not a dry run)",
     request("CREATE", "resourceclaims", pods.claim("c", MAIN["metadata"]["name"], RUN, "gpu.nvidia.com", 1,
                                                     admin_access=True), ns=MAIN), "DRA admin access", "dryRun"),
    ("P3: an admin-access claim template",
     request("CREATE", "resourceclaimtemplates", (lambda t: (
         t["spec"]["spec"]["devices"]["requests"][0]["exactly"].update(adminAccess=True), t)[1])(
         pods.claim_template("t", MAIN["metadata"]["name"], RUN, "gpu.nvidia.com", 1)), ns=MAIN),
     "DRA admin access", "exactly.adminAccess"),
    ("D: a projected ServiceAccount token volume",
     request("CREATE", "pods", pod_in(MAIN, volumes=[{"name": "t", "projected": {"sources": [
         {"serviceAccountToken": {"audience": "vault", "path": "token"}}]}}]), ns=MAIN), "use only hostPath",
     "downwardAPI"),
    ("D: an nfs volume", request("CREATE", "pods", pod_in(NODE, volumes=[{"name": "n", "nfs": {
        "server": "10.0.0.1", "path": "/"}}]), ns=NODE), "use only hostPath", "emptyDir"),
    ("D: an image volume", request("CREATE", "pods", pod_in(NODE, volumes=[{"name": "i", "image": {
        "reference": "busybox"}}]), ns=NODE), "use only hostPath", "hostPath"),
    ("D: a key-less Exists toleration (every taint, the control plane's too)",
     request("CREATE", "pods", pod_in(MAIN, tolerations=[{"operator": "Exists"}]), ns=MAIN), "tolerate only",
     "tolerationKeys"),
    ("D: a control-plane toleration",
     request("CREATE", "pods", pod_in(MAIN, tolerations=[{"key": "node-role.kubernetes.io/control-plane",
                                                          "operator": "Exists", "effect": "NoSchedule"}]), ns=MAIN),
     "tolerate only", "t.key"),
    ("D: a RuntimeClass not in the parameter",
     request("CREATE", "pods", pod_in(MAIN, runtimeClassName="runc-privileged"), ns=MAIN), "name no RuntimeClass",
     "runtimeClassName"),
    ("D: system-node-critical", request("CREATE", "pods", pod_in(MAIN, priorityClassName="system-node-critical"),
                                        ns=MAIN), "name no PriorityClass", "priorityClassName"),
    ("D: AppArmor Unconfined", request("CREATE", "pods", pod_in(MAIN, securityContext={
        **pod_in(MAIN)["spec"]["securityContext"], "appArmorProfile": {"type": "Unconfined"}}), ns=MAIN),
     "no SELinux options", "appArmorProfile"),
    ("D: SELinux spc_t on a container", request("CREATE", "pods", with_container(NODE, seLinuxOptions={
        "type": "spc_t"}), ns=NODE), "no SELinux options", "seLinuxOptions"),
    ("D: exec into a pod", request("CONNECT", "pods", {"kind": "PodExecOptions", "command": ["sh"]}, ns=MAIN,
                                   sub="exec"), "no subresource", "subResource"),
    ("D: an ephemeral container added", request("UPDATE", "pods", pod_in(MAIN), pod_in(MAIN), ns=MAIN,
                                                sub="ephemeralcontainers"), "no subresource", "subResource"),
    ("D: exec through the node proxy (a websocket GET)",
     request("CONNECT", "nodes", {"kind": "NodeProxyOptions", "path": "/exec/kube-system/etcd-0/etcd"},
             sub="proxy"), "no subresource", "object.path"),
    ("D: the kubelet's pod list through the node proxy",
     request("CONNECT", "nodes", {"kind": "NodeProxyOptions", "path": "/pods"}, sub="proxy"), "no subresource",
     "object.path"),
    ("P3: an admin-access claim in the v1beta1 shape",
     request("CREATE", "resourceclaims", {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
                                          "metadata": {"name": "c", "namespace": MAIN["metadata"]["name"]},
                                          "spec": {"devices": {"requests": [{
                                              "name": "gpu", "deviceClassName": "gpu.nvidia.com",
                                              "allocationMode": "All", "adminAccess": True}]}}}, ns=MAIN),
     "DRA admin access", "r.adminAccess"),
]


def allowed_requests() -> list[tuple[str, dict]]:
    beat = relabelled(MAIN)
    beat["metadata"]["annotations"] = {"gpuconform.dev/heartbeat": "2026-12-04T10:11:12Z"}
    # the run refreshes the run-long pod's heartbeat annotation after the scheduler has set spec.nodeName
    held = pods.run_long_pod("access-n1", MAIN["metadata"]["name"], RUN, "access", "n1", bed_config(), "nvidia.com/gpu")
    held["spec"]["nodeName"] = "n1"
    beat_pod = copy.deepcopy(held)
    beat_pod["metadata"].setdefault("annotations", {})["gpuconform.dev/heartbeat"] = "2026-12-04T10:11:42Z"
    out = [("create the run namespace", request("CREATE", "namespaces", MAIN)),
           ("create the -node namespace", request("CREATE", "namespaces", NODE)),
           ("heartbeat patch", request("UPDATE", "namespaces", beat, MAIN)),
           ("delete the run namespace", request("DELETE", "namespaces", old=MAIN)),
           ("delete the -node namespace", request("DELETE", "namespaces", old=NODE)),
           ("delete a suite pod", request("DELETE", "pods", old=pod_in(MAIN), ns=MAIN)),
           ("a DRA node's claim template in the run namespace", request(
               "CREATE", "resourceclaimtemplates", pods.claim_template(
                   "gpuconform-1x-gpu-nvidia-com", MAIN["metadata"]["name"], RUN, "gpu.nvidia.com", 1), ns=MAIN)),
           ("a DRA node's shared claim in the run namespace", request(
               "CREATE", "resourceclaims", pods.claim("shared-gpu-node-dra", MAIN["metadata"]["name"], RUN,
                                                      "gpu.nvidia.com", 1), ns=MAIN)),
           ("heartbeat patch of a scheduled run-long pod", request("UPDATE", "pods", beat_pod, held, ns=MAIN)),
           ("its reads bound to itself in the run namespace", request(
               "CREATE", "rolebindings", run_binding(MAIN["metadata"]["name"], RUN, SA_SUBJECT), ns=MAIN)),
           ("its reads bound to itself in the -node namespace", request(
               "CREATE", "rolebindings", run_binding(NODE["metadata"]["name"], RUN, SA_SUBJECT), ns=NODE)),
           ("the kubelet's metrics through the node proxy", request(
               "CONNECT", "nodes", {"kind": "NodeProxyOptions", "path": "/metrics"}, sub="proxy")),
           ("the kubelet's configz through the node proxy", request(
               "CONNECT", "nodes", {"kind": "NodeProxyOptions", "path": "/configz"}, sub="proxy")),
           ("the API server's own not-ready toleration", request("CREATE", "pods", pod_in(MAIN, tolerations=[
               *pod_in(MAIN)["spec"]["tolerations"], {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                                      "effect": "NoExecute", "tolerationSeconds": 300}]), ns=MAIN)),
           ("another user's privileged pod (not this policy's business)",
            request("CREATE", "pods", with_container(KUBE_SYSTEM, privileged=True), ns=KUBE_SYSTEM,
                    user="kubernetes-admin"))]
    ended = relabelled(MAIN)
    ended["metadata"]["annotations"] = {"gpuconform.dev/heartbeat": "2026-12-04T10:11:12Z",
                                        "gpuconform.dev/ended": "2026-12-04T10:20:00Z"}
    out += [("ended stamp patch", request("UPDATE", "namespaces", ended, beat)),
            ("the admin-access trial (a server-side dry run)", request(
                "CREATE", "resourceclaims", pods.claim("gpuconform-admin-access-x", MAIN["metadata"]["name"], RUN,
                                                        "gpu.nvidia.com", 1, admin_access=True), ns=MAIN,
                dry_run=True))]
    for label, cfg, param in (("bed", bed_config(), params(**BED_PARAMS)),
                              ("default", default_config_with_image(), params(rootImages=DEFAULT_PROBE_IMAGE))):
        for p in suite_pods(cfg):
            ns = NODE if p["metadata"]["namespace"].endswith("-node") else MAIN
            out.append((f"{label} config: {p['metadata']['name']}", request("CREATE", "pods", p, ns=ns, param=param)))
    # where a node's runtime cannot mount recursively read-only and the parameter allows IfPossible
    weak = params(recursiveReadOnly="IfPossible", **BED_PARAMS)
    node = NODE["metadata"]["name"]
    for p in (pods.socket_probe_pod("socket-n1", node, RUN, "n1", bed_config(), 60, recursive="IfPossible"),
              pods.node_probe_pod("nodeprobe-hw-n1", node, RUN, "n1", bed_config(), 60, recursive="IfPossible")):
        out.append((f"IfPossible parameter: {p['metadata']['name']}", request("CREATE", "pods", p, ns=NODE,
                                                                             param=weak)))
    out.append(("a DRA node's node probe (no checkpoint mount)", request(
        "CREATE", "pods", pods.node_probe_pod("nodeprobe-dra-n1", node, RUN, "n1", bed_config(), 60,
                                              checkpoint=False), ns=NODE)))
    return out


# ---------------------------------------------------------------- evaluation with cel-python

def refusals(policy: dict, req: dict) -> list[str]:
    """The messages of the validations that refuse `req` ([] = admitted); an expression that errors refuses."""
    import celpy
    from celpy import celtypes

    spec = policy["spec"]
    res, sub = req["request"]["resource"]["resource"], req["request"].get("subResource") or ""
    if not any((f"{res}/{sub}" if sub else res) in rule["resources"] or (sub and f"{res}/*" in rule["resources"])
               and req["request"]["operation"] in rule["operations"]
               for rule in spec["matchConstraints"]["resourceRules"]):
        return []
    env = celpy.Environment()

    def run(expr: str, act: dict) -> Any:
        return env.program(env.compile(expr)).evaluate(act)

    act: dict = {k: celpy.json_to_cel(v) for k, v in req.items()}
    for cond in spec.get("matchConditions", []):
        if not bool(run(cond["expression"], act)):
            return []
    variables: dict = {}
    for var in spec.get("variables", []):
        try:
            value = run(var["expression"], {**act, "variables": celtypes.MapType(variables)})
            # cel-python 0.5 returns a concatenation as a Python str, without CEL's string methods (contains)
            variables[celtypes.StringType(var["name"])] = (
                celtypes.StringType(value) if isinstance(value, str) and not isinstance(value, celtypes.StringType)
                else value)
        except celpy.CELEvalError:
            pass  # like the API server: an error only where a validation uses it
    act["variables"] = celtypes.MapType(variables)
    out = []
    for v in spec["validations"]:
        try:
            ok = run(v["expression"], act)
        except celpy.CELEvalError as e:
            ok = celtypes.BoolType(False)
            v = {**v, "message": f"{v.get('message') or v['messageExpression']} (error: {e})"}
        if not isinstance(ok, celtypes.BoolType):  # an error value evaluates without raising in some paths
            ok = celtypes.BoolType(False)
        if not bool(ok):
            out.append(" ".join((v.get("message") or v["messageExpression"]).split()))
    return out


def test_shipped_binding_denies_for_the_suites_serviceaccount_only():
    policy, binding = shipped()
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"],
                               "paramRef": {"name": "gpuconform-policy", "namespace": "gpuconform-system",
                                            "parameterNotFoundAction": "Deny"}}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    cm = shipped_params()
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == ("gpuconform-policy", "gpuconform-system")
    assert cm["data"] == {"kubeletDir": gconfig.DEFAULTS["nodeProbe"]["kubeletDir"].rstrip("/"),
                          "sysfsPath": gconfig.DEFAULTS["nodeProbe"]["sysfsPath"], "recursiveReadOnly": "Enabled",
                          "tolerationKeys": ",".join(t["key"] for t in gconfig.DEFAULTS["tolerations"]),
                          "runtimeClassNames": "nvidia", "priorityClassNames": "", "rootImages": ""}
    (cond,) = policy["spec"]["matchConditions"]
    assert cond["expression"] == f"request.userInfo.username == '{SA}'"
    rbac = [d for d in yaml.safe_load_all((ROOT / "manifests" / "rbac.yaml").read_text()) if d]
    sa = next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]
    assert SA == f"system:serviceaccount:{sa['namespace']}:{sa['name']}"
    writes = {r for d in rbac if d["kind"] == "ClusterRole" for rule in d["rules"] for r in rule["resources"]
              if set(rule["verbs"]) & {"create", "update", "patch", "delete", "deletecollection"}}
    assert writes <= {r for rule in policy["spec"]["matchConstraints"]["resourceRules"] for r in rule["resources"]}, \
        "every resource the ServiceAccount may write must be under the policy"


@pytest.mark.parametrize("case", MISUSES, ids=[m[0] for m in MISUSES])
def test_each_misuse_of_the_token_is_refused_by_the_validation_on_its_field(case):
    pytest.importorskip("celpy", reason="cel-python not installed (pip install -e '.[dev]')")
    _, req, rule, _ = case
    refused = refusals(shipped()[0], req)
    assert refused, "admitted"
    assert any(rule in m for m in refused), refused


@pytest.mark.parametrize("case", allowed_requests(), ids=lambda c: c[0])
def test_what_the_suite_itself_sends_is_admitted(case):
    pytest.importorskip("celpy", reason="cel-python not installed (pip install -e '.[dev]')")
    assert refusals(shipped()[0], case[1]) == []


@pytest.mark.parametrize("case", MISUSES, ids=[m[0] for m in MISUSES])
def test_each_misuse_has_a_validation_naming_its_field(case):
    """Structural (no CEL needed): the validation meant to refuse the misuse exists and reads the field, directly
    or through a variable it uses."""
    _, _, rule, field = case
    spec = shipped()[0]["spec"]
    (v,) = [v for v in spec["validations"] if rule in " ".join((v.get("message") or v["messageExpression"]).split())]
    text = v["expression"]
    for var in spec["variables"]:  # a variable the validation uses stands for its expression
        if f"variables.{var['name']}" in text:
            text += " " + var["expression"]
    for var in spec["variables"]:  # one level deeper: variables used by those variables
        if f"variables.{var['name']}" in text:
            text += " " + var["expression"]
    assert field in text, f"the validation {rule!r} does not read {field!r}"


HOST_PATHS = [("/var/lib/kubelet", True), ("/var/lib/k0s/kubelet", True),
              ("/var/snap/microk8s/common/var/lib/kubelet", True), ("/kubelet", True), ("/", False), ("/etc", False),
              ("/root", False), ("/var/lib/kubelet/..", False)]
SYSFS = [("/sys", True), ("/var/lib/gpu-sim/sys", True), ("/", False), ("/proc/sys", False), ("/etc", False),
         ("/sys/../etc/sys", False)]


@pytest.mark.parametrize("kubelet,ok", HOST_PATHS)
def test_policy_and_config_agree_on_the_kubelet_dir(kubelet, ok):
    """What the config accepts for nodeProbe.kubeletDir the policy admits as its kubeletDir parameter (the probes'
    mounts below it are admitted), and what the config refuses the policy refuses too, even where an
    administrator writes it into the parameter (a config check is no defence against someone holding the token)."""
    pytest.importorskip("celpy", reason="cel-python not installed (pip install -e '.[dev]')")
    assert gconfig.kubelet_dir_ok(kubelet) is ok
    param = params(kubeletDir=kubelet.rstrip("/") or "/", **BED_PARAMS)
    for sub, root in (("pod-resources", True), ("plugins_registry", True), ("device-plugins", False)):
        refused = refusals(shipped()[0], request("CREATE", "pods", host_path_pod(
            NODE, f"{kubelet.rstrip('/')}/{sub}", root=root), ns=NODE, param=param))
        assert (refused == []) is ok, (sub, refused)


@pytest.mark.parametrize("sysfs,ok", SYSFS)
def test_policy_and_config_agree_on_sysfs(sysfs, ok):
    pytest.importorskip("celpy", reason="cel-python not installed (pip install -e '.[dev]')")
    assert gconfig.sysfs_path_ok(sysfs) is ok
    assert (refusals(shipped()[0], request("CREATE", "pods", host_path_pod(NODE, sysfs, root=True), ns=NODE,
                                           param=params(sysfsPath=sysfs, rootImages=BED_PROBE_IMAGE))) == []) is ok


def test_without_its_parameter_the_policy_admits_no_host_path():
    """An empty parameter object (the ConfigMap's data removed): no hostPath is admitted. (A missing ConfigMap
    refuses every request: the binding's parameterNotFoundAction is Deny.)"""
    pytest.importorskip("celpy", reason="cel-python not installed (pip install -e '.[dev]')")
    empty = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpuconform-policy"}}
    assert refusals(shipped()[0], request("CREATE", "pods", host_path_pod(NODE, "/sys", root=True), ns=NODE,
                                          param=empty))


# ---------------------------------------------------------------- reports leave the Job without the token

SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def job_pod() -> dict:
    job = yaml.safe_load((ROOT / "manifests" / "suite-job.yaml").read_text())
    return job["spec"]["template"]


def test_only_the_suite_container_holds_the_token_and_reports_are_fetched_from_one_without_it():
    tpl = job_pod()
    spec = tpl["spec"]
    assert spec["automountServiceAccountToken"] is False
    ctrs = {c["name"]: c for c in spec["containers"] + spec.get("initContainers", [])}
    token_vols = {v["name"] for v in spec["volumes"]
                  if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))}
    holders = {n for n, c in ctrs.items() for m in c.get("volumeMounts", []) if m["name"] in token_vols}
    assert holders == {"suite"} and all(m["mountPath"] == SA_PATH for m in ctrs["suite"]["volumeMounts"]
                                        if m["name"] in token_vols)
    fetch = tpl["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"]
    assert fetch == "reports" and fetch not in holders
    sidecar = ctrs[fetch]
    assert sidecar["restartPolicy"] == "Always" and sidecar["command"] == ["gpuconform-job", "--hold"]
    assert [m["mountPath"] for m in sidecar["volumeMounts"]] == ["/reports"]
    assert sidecar["image"] == ctrs["suite"]["image"]


def test_the_readme_fetches_reports_only_from_the_tokenless_container():
    text = (ROOT / "manifests" / "README.md").read_text()
    cmds = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("kubectl cp", "kubectl exec"))]
    assert cmds and all("-c reports" in c for c in cmds), cmds
