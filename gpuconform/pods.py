"""Pod manifests for the suite's probes, and small readers of pod state (why a pod failed: verdicts/pods.py).

Manifests are plain dicts (what `kubectl apply` would take), built from the effective config so images,
pull policy, pull secrets and tolerations are always the user's. Every pod: restartPolicy Never,
activeDeadlineSeconds (so a SIGKILLed runner still frees the GPUs), the run labels, and a `restricted`
Pod Security context unless it is the optional privileged node probe.
"""

from __future__ import annotations

import copy
import math
import sys
from typing import Any

from . import vendors
from .config import Config, view
from .timing import (POD_ACTIVE_DEADLINE_S, POD_TERMINATION_GRACE_S, RUN_HOLD_DEADLINE_S, RUN_HOLD_EVERY_S,
                     RUN_HOLD_STALE_S)

PART_OF = "app.kubernetes.io/part-of"
SUITE = "gpuconform"
RUN_LABEL = "gpuconform.dev/run"
CHECK_LABEL = "gpuconform.dev/check"
# how many devices the pod holds of its own (its extended-resource request, or the count of the claim made for it
# alone); absent on pods holding none or sharing a named claim. Read back by the run's pod timeline, for the
# schedule's lower bound (gpuconform/schedule.py), never for a verdict
DEVICES_LABEL = "gpuconform.dev/devices"
# The run's heartbeat annotation (an RFC 3339 time): on its namespaces, read by `make cleanup`
# (gpuconform/cleanup.py), and on its run-long pods, read by the pod itself (run_long_pod).
HEARTBEAT = "gpuconform.dev/heartbeat"

RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                  "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CTR = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

# What the probe prints: sections parsed by probes.sections(). Device nodes are counted from /dev (works without
# nvidia-smi); nvidia-smi is what the NVIDIA runtime injects; NUMA comes from sysfs, else from `topo -m`.
PROBE_SCRIPT = r"""
echo "== env =="; echo "NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES:-<unset>}"
echo "== dev =="; for d in /dev/nvidia[0-9]*; do [ -e "$d" ] && echo "$d"; done; true
echo "== nvidia-smi -L =="; nvidia-smi -L 2>&1 || true
echo "== query =="; nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv 2>&1 || true
echo "== topo =="; nvidia-smi topo -m 2>&1 || true
echo "== pci numa =="
nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null | while read -r bus; do
  b=$(echo "$bus" | sed 's/^0000//' | tr 'A-F' 'a-f'); f=/sys/bus/pci/devices/$b/numa_node
  [ -r "$f" ] && echo "$bus $(cat "$f")"
done; true
echo "== cpus =="; grep Cpus_allowed_list /proc/self/status
for n in /sys/devices/system/node/node[0-9]*; do [ -r "$n/cpulist" ] && echo "== numa ${n##*node} ==" && cat "$n/cpulist"; done
echo "== end =="
""".strip()


NAME_MAX = 63  # a pod's hostname is its name, and a hostname label holds at most 63 characters


def pod_name(*parts: object) -> str:
    """A test pod's name: `parts` joined by '-' (prefix first, node last), cut to NAME_MAX characters and never
    ending in '-' or '.' (which the API server rejects), e.g. pod_name("burst", 3, node) -> "burst-3-<node>"."""
    return "-".join(str(p) for p in parts)[:NAME_MAX].rstrip("-.")


def labels(run_id: str, check: str) -> dict[str, str]:
    return {PART_OF: SUITE, RUN_LABEL: run_id, CHECK_LABEL: check}


CLAIM = "gpus"  # the pod's resourceClaims entry (and the container's resources.claims) on the DRA path


def claim_template_name(device_class: str, count: int) -> str:
    return f"gpuconform-{count}x-" + "".join(ch if ch.isalnum() else "-" for ch in device_class.lower())[:40].strip("-")


def claim_template(name: str, namespace: str, run_id: str, device_class: str, count: int) -> dict:
    """A ResourceClaimTemplate (resource.k8s.io/v1) for `count` devices of `device_class`: what a DRA node's checks
    request instead of an extended resource (one request, `exactly` a count; KEP-4381 structured parameters)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "labels": {PART_OF: SUITE, RUN_LABEL: run_id}},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                            "count": count}}]}}}}


def claim(name: str, namespace: str, run_id: str, device_class: str, count: int, admin_access: bool = False,
          selector: str = "") -> dict:
    """A ResourceClaim (resource.k8s.io/v1) for `count` devices of `device_class`, made by the suite itself so that
    several pods can name it (spec.resourceClaims[].resourceClaimName): one allocation, shared. `admin_access`:
    the request asks for admin access (DeviceRequest.exactly.adminAccess), which only a namespace labelled
    resource.kubernetes.io/admin-access=true may (sent as a dry run only: verdicts/dra.py admin_access_findings).
    `selector`: a CEL expression the devices must satisfy (DeviceSelector.cel), built by the suite from values it
    checked (verdicts/dra.py parent_selector)."""
    t = claim_template(name, namespace, run_id, device_class, count)
    spec = t["spec"]["spec"]
    if admin_access:
        spec["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    if selector:
        spec["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": t["metadata"], "spec": spec}


def pod(name: str, namespace: str, run_id: str, check: str, node: str, cfg: Config | dict, *, image: str,
        gpus: int, resource: str = "", command: list[str] | None = None, guaranteed_cpus: int = 0,
        deadline: float = POD_ACTIVE_DEADLINE_S, container: str = "probe", env: dict[str, str] | None = None,
        best_effort: bool = False, claim_template: str = "", claim_name: str = "") -> dict:
    """A short-lived test pod pinned to `node` through the scheduler (nodeSelector, so scheduling is measured).
    `resource` is the node's own GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb, ...).
    It names the configured `runtimeClassName` (the runtime that injects GPUs on many clusters), GPU or not: where
    the NVIDIA runtime is the default, every pod runs under it, and isolation is judged as workloads meet it.
    `best_effort`: no CPU or memory request (pods that sit beside the others, holding nothing a Guaranteed probe
    needs: the run-long pod, the host readers). `claim_template`: on a DRA node the GPUs come from a
    ResourceClaim made from this template (the pod's own claim), not from `resource`; `claim_name`: from that
    ResourceClaim, which other pods may name too."""
    cfg = view(cfg)
    res: dict = {}
    limits: dict = {}
    if gpus and (claim_template or claim_name):
        res["claims"] = [{"name": CLAIM}]
    elif gpus:
        if not resource:
            raise ValueError(f"pod {name}: {gpus} GPU(s) requested without naming the node's GPU resource")
        limits[resource] = str(gpus)
    if guaranteed_cpus:
        limits.update({"cpu": str(guaranteed_cpus), "memory": "64Mi"})
        res["requests"] = dict(limits)
    elif not best_effort:
        res["requests"] = {"cpu": "10m", "memory": "16Mi"}
    if limits:
        res["limits"] = limits
    ctr = {"name": container, "image": image, "imagePullPolicy": cfg.get("images.pullPolicy"),
           "resources": res, "securityContext": RESTRICTED_CTR}
    if command:
        ctr["command"] = command
    if env:
        ctr["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": int(deadline),
        "terminationGracePeriodSeconds": POD_TERMINATION_GRACE_S,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": cfg.get("tolerations"),
        "securityContext": RESTRICTED_POD,
        "containers": [ctr],
    }
    if gpus and claim_name:
        spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimName": claim_name}]
    elif gpus and claim_template:
        spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": claim_template}]
    if cfg.get("runtimeClassName"):
        spec["runtimeClassName"] = cfg.get("runtimeClassName")
    if cfg.get("images.pullSecrets"):
        spec["imagePullSecrets"] = [{"name": s} for s in cfg.get("images.pullSecrets")]
    meta = labels(run_id, check)
    if gpus and not claim_name:
        meta[DEVICES_LABEL] = str(gpus)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": meta}, "spec": spec}


ROUND = "round"  # the section that starts each round of a repeating probe (the round number)


SIDECAR = "sidecar"  # the probe's second container, which asks for no GPU (probe_pod sidecar=True)


def probe_pod(name: str, namespace: str, run_id: str, check: str, node: str, cfg: Config | dict, gpus: int,
              guaranteed_cpus: int = 0, deadline: float = POD_ACTIVE_DEADLINE_S, resource: str = "",
              env: dict[str, str] | None = None, hold_s: int = 0, best_effort: bool = False,
              claim_template: str = "", claim_name: str = "", sidecar: bool = False) -> dict:
    """The probe: prints PROBE_SCRIPT's sections, then (hold_s) sleeps holding its devices. `sidecar`: a second
    container (SIDECAR) prints the same sections without asking for a GPU (no resource limit, no claim named in
    its resources.claims): what a container of a GPU pod that asks for none sees (the AI Conformance test's
    MultiContainerIsolationTest, kubernetes-sigs/ai-conformance test/ai_conformance_test.go)."""
    script = PROBE_SCRIPT + (f"\nsleep {hold_s}" if hold_s else "")
    p = pod(name, namespace, run_id, check, node, cfg, image=view(cfg).get("images.probe"), gpus=gpus,
            resource=resource, command=["sh", "-c", script], guaranteed_cpus=guaranteed_cpus,
            deadline=deadline, env=env, best_effort=best_effort, claim_template=claim_template,
            claim_name=claim_name)
    if sidecar:
        first = p["spec"]["containers"][0]
        side = {k: v for k, v in first.items() if k != "resources"}
        side["name"] = SIDECAR
        side["resources"] = {k: {r: q for r, q in v.items() if r in ("cpu", "memory")}
                             for k, v in (first.get("resources") or {}).items() if k in ("requests", "limits")}
        p["spec"]["containers"].append(side)
    return p


# The run-long pod's view of its own heartbeat annotation: a downwardAPI volume file, which the kubelet rewrites
# when the pod's annotations change (upstream conformance test "DownwardAPI volume, update annotations",
# test/e2e/common/storage/downwardapi_volume.go, since v1.9; it allows the kubelet's sync period, about a minute,
# to pass on a change). No API access and no token in the pod: it sees only its own metadata.
HEARTBEAT_DIR = "/gpuconform"
HEARTBEAT_FILE = HEARTBEAT_DIR + "/heartbeat"
ORPHANED = "orphaned"  # the section a run-long pod prints before it exits because its run's heartbeat stopped


def run_long_script(every_s: float, stale_s: int, beat_file: str = HEARTBEAT_FILE) -> str:
    """POSIX sh: PROBE_SCRIPT's sections in numbered rounds (`== round ==`) every `every_s`, holding the devices
    between them, until the heartbeat file has not changed for more than `stale_s` by the container's own clock
    (the runner's clock never enters: only a change counts), then `== orphaned ==` and exit 0, freeing them."""
    return (f'beat={beat_file}; last=$(cat "$beat" 2>/dev/null); seen=$(date +%s); i=0\n'
            f'while :; do i=$((i+1)); echo "== {ROUND} =="; echo "$i"\n{PROBE_SCRIPT}\n'
            f'now=$(date +%s); b=$(cat "$beat" 2>/dev/null)\n'
            f'if [ "$b" != "$last" ]; then last=$b; seen=$now; fi\n'
            f'if [ $((now - seen)) -gt {int(stale_s)} ]; then echo "== {ORPHANED} =="; '
            f'echo "no heartbeat from the run for $((now - seen))s (limit {int(stale_s)}s): its runner is gone; '
            f'exiting to free the device"; exit 0; fi\n'
            f'sleep {float(every_s):g} 2>/dev/null || sleep {max(1, math.ceil(every_s))}; done')


def run_long_pod(name: str, namespace: str, run_id: str, check: str, node: str, cfg: Config | dict, resource: str,
                 gpus: int = 1, every_s: float = RUN_HOLD_EVERY_S, stale_s: int = RUN_HOLD_STALE_S,
                 deadline: float = RUN_HOLD_DEADLINE_S, claim_template: str = "") -> dict:
    """A probe that holds `gpus` devices for the whole run, repeating its device check every `every_s` (the
    lost-access check), best effort (it holds no CPU a Guaranteed probe needs). A SIGKILLed runner must not
    leave it holding a GPU until `deadline`: it carries the heartbeat annotation, which the run refreshes every
    HEARTBEAT_EVERY_S while it lives (gpuconform/pytest_plugin/namespaces.py create_pod stamps it and registers the pod), sees it
    through a downwardAPI volume, and exits once it has not changed for `stale_s` (run_long_script).
    activeDeadlineSeconds stays the hard limit. `claim_template`: on a DRA node, its devices from a claim made
    from that template."""
    p = pod(name, namespace, run_id, check, node, cfg, image=view(cfg).get("images.probe"), gpus=gpus,
            resource=resource, command=["sh", "-c", run_long_script(every_s, stale_s)], deadline=deadline,
            best_effort=True, claim_template=claim_template)
    p["metadata"]["annotations"] = {HEARTBEAT: ""}  # stamped at create (gpuconform/pytest_plugin/namespaces.py create_pod)
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "heartbeat", "mountPath": HEARTBEAT_DIR, "readOnly": True}]
    p["spec"]["volumes"] = [{"name": "heartbeat", "downwardAPI": {"items": [{
        "path": HEARTBEAT_FILE.rsplit("/", 1)[1], "fieldRef": {"fieldPath": f"metadata.annotations['{HEARTBEAT}']"}}]}}]
    return p


def is_run_long(p: dict, run_id: str) -> bool:
    """A run-long pod (run_long_pod) of run `run_id`: it carries the run's label and the heartbeat annotation."""
    meta = p.get("metadata") or {}
    return (meta.get("labels") or {}).get(RUN_LABEL) == run_id and HEARTBEAT in (meta.get("annotations") or {})


def vector_add_pod(name: str, namespace: str, run_id: str, node: str, cfg: Config | dict, deadline: float,
                   resource: str, claim_template: str = "") -> dict:
    """The CUDA sample with its own default command, so any vectoradd image can be substituted."""
    return pod(name, namespace, run_id, "vector-add", node, cfg, image=view(cfg).get("images.vectorAdd"), gpus=1,
               resource=resource, deadline=deadline, container="vectoradd",
               claim_template=claim_template)


# The host readers' pod securityContext. seccomp RuntimeDefault is kept (Pod Security `privileged` does not ask
# for it, but nothing these readers do needs a syscall it blocks). Non-root unless the read needs root.
HOST_READER_POD = {**RESTRICTED_POD}
HOST_READER_ROOT_POD = {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
                        "seccompProfile": {"type": "RuntimeDefault"}}
HOST_READER_CTR = {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                   "capabilities": {"drop": ["ALL"]}}
NODE_PROBE_IMAGE_UNSET = ("node probe image not set (images.nodeProbe): the suite pulls no image of unknown origin "
                          "to run as root beside the kubelet's sockets; build manifests/Dockerfile, push it to your "
                          "registry and name it there")


# How a host reader's hostPaths are mounted (volumeMounts[].recursiveReadOnly, KEP-3857: alpha 1.30, beta and on
# by default 1.31, GA 1.33). `Enabled`: every submount below the path read-only too (/sys has cgroupfs, debugfs,
# ...), which a plain readOnly bind leaves writable to uid 0 by file mode; the kubelet fails the container where
# the runtime cannot. `IfPossible`: a plain readOnly mount there. The admission policy (manifests/rbac-policy.yaml)
# requires Enabled unless its recursiveReadOnly parameter says IfPossible.
RRO_ENABLED, RRO_IF_POSSIBLE = "Enabled", "IfPossible"
CHECKPOINT_FILE = "device-plugins/kubelet_internal_checkpoint"  # the kubelet's device-manager checkpoint


def recursive_read_only(node_obj: dict | None, handler: str = "") -> str:
    """How a host reader on this node mounts its hostPaths: RRO_ENABLED where the node's runtime handler (`handler`;
    "" is the default one, which the host readers use: they name no RuntimeClass) reports
    `features.recursiveReadOnlyMounts` in status.runtimeHandlers (kubelets since 1.30 publish it), else
    RRO_IF_POSSIBLE (containerd before 2.0 reports no handlers)."""
    for h in ((node_obj or {}).get("status") or {}).get("runtimeHandlers") or []:
        if (h.get("name") or "") == handler and ((h.get("features") or {}).get("recursiveReadOnlyMounts") is True):
            return RRO_ENABLED
    return RRO_IF_POSSIBLE


def mounts_if_possible(p: dict) -> bool:
    """Whether a container of pod manifest `p` mounts a volume recursively read-only only if possible (a host
    reader on a node whose runtime cannot: recursive_read_only)."""
    return any(m.get("recursiveReadOnly") == RRO_IF_POSSIBLE
               for c in (p.get("spec") or {}).get("containers") or [] for m in c.get("volumeMounts") or [])


def _host_reader(p: dict, mounts: dict[str, tuple[str, str, str]], run_as_root: bool = False,
                 recursive: str = RRO_ENABLED) -> dict:
    """Turns a test pod into a privileged-namespace reader of host paths: read-only hostPath mounts
    {name: (host path, mount path, hostPath type)}, a read-only root filesystem, no capabilities, seccomp
    RuntimeDefault, no RuntimeClass (it needs no devices, and a missing GPU runtime must not hide the node's
    evidence). `run_as_root` for reading root-owned sockets (uid 0 without capabilities: only the owner's permission
    bits). The hostPath type is Directory or File, never empty or ...OrCreate: a missing path fails the mount
    instead of being created on the host. `recursive`: recursiveReadOnly (RRO_ENABLED, or RRO_IF_POSSIBLE where the
    node's runtime cannot: recursive_read_only); it needs `readOnly: true` and no mountPropagation."""
    if recursive not in (RRO_ENABLED, RRO_IF_POSSIBLE):
        raise ValueError(f"recursiveReadOnly {recursive!r}: {RRO_ENABLED} or {RRO_IF_POSSIBLE}")
    spec = p["spec"]
    spec["securityContext"] = copy.deepcopy(HOST_READER_ROOT_POD if run_as_root else HOST_READER_POD)
    spec.pop("runtimeClassName", None)
    ctr = spec["containers"][0]
    ctr["securityContext"] = copy.deepcopy(HOST_READER_CTR)
    ctr["volumeMounts"] = [{"name": n, "mountPath": m, "readOnly": True, "recursiveReadOnly": recursive}
                           for n, (_, m, _) in mounts.items()]
    spec["volumes"] = [{"name": n, "hostPath": {"path": h, "type": kind}} for n, (h, _, kind) in mounts.items()]
    return p


def _kubelet_dir(cfg: Config) -> str:
    return cfg.get("nodeProbe.kubeletDir").rstrip("/")


def socket_probe_pod(name: str, namespace: str, run_id: str, node: str, cfg: Config | dict,
                     deadline: float, kubelet_subdir: str = "device-plugins", recursive: str = RRO_ENABLED) -> dict:
    """Privileged-namespace probe listing the kubelet's device-plugins dir (or `kubelet_subdir`: plugins_registry on
    a DRA node) through a read-only hostPath. Runs as a non-root user: listing a directory needs its r and x bits,
    which the kubelet's 0755 device-plugins directory gives others; and a non-root process cannot connect() to the
    root-owned sockets in it (connect needs write permission on the socket file, unix(7)), so this probe cannot talk
    to the kubelet's Registration service or a plugin (the admission policy admits a device-plugins mount only in
    such a pod). The kubelet makes plugins_registry 0750 (kubernetes v1.37.2 pkg/kubelet/kubelet.go setupDataDirs:
    MkdirAll(getPluginsRegistrationDir(), 0750)): its listing runs with the root group as a supplementary group,
    whose r-x lists the directory while the drivers' root-owned sockets (0755 under the usual umask) still give
    the group no write, so no connect(). No uid 0 here: only the node probe runs as root."""
    cfg = view(cfg)
    p = pod(name, namespace, run_id, "plugin-socket", node, cfg, image=cfg.get("images.probe"), gpus=0,
            command=["sh", "-c", f"ls -la /{kubelet_subdir}/"], deadline=deadline, best_effort=True)
    p = _host_reader(p, {"dp": (_kubelet_dir(cfg) + "/" + kubelet_subdir, "/" + kubelet_subdir, "Directory")},
                     recursive=recursive)
    if kubelet_subdir != "device-plugins":
        p["spec"]["securityContext"]["supplementalGroups"] = [0]
    return p


def node_probe_pod(name: str, namespace: str, run_id: str, node: str, cfg: Config | dict, deadline: float,
                   recursive: str = RRO_ENABLED, checkpoint: bool = True, every_s: float = 0.0) -> dict:
    """The node probe (gpuconform/nodeprobe.py in the suite's own image): reads the kubelet's PodResources API
    (List, GetAllocatableResources), its device checkpoint and the host's PCI tree through read-only hostPaths,
    and prints one JSON report. Runs as uid 0 without capabilities: connect() on a unix socket needs write
    permission on the socket file (unix(7)), and the kubelet creates pod-resources/kubelet.sock as root with its
    umask (srwxr-xr-x under the usual 022), so no other uid or group can call the PodResources API; the checkpoint
    is root's 0600 file. Mounts the pod-resources directory, the checkpoint alone (a single-file hostPath: the
    device-plugins directory with kubelet.sock in it is never in a root pod) and sysfs. `checkpoint` False: no
    checkpoint mount (a DRA node, where no device plugin ever made one: a missing File fails the mount). `every_s`:
    it repeats its report (without the PCI tree) in rounds every `every_s` until `deadline` is near (nodeprobe
    --every). Refuses to build without images.nodeProbe (no default)."""
    cfg = view(cfg)
    image = cfg.get("images.nodeProbe")
    if not image:
        raise ValueError(NODE_PROBE_IMAGE_UNSET)
    kubelet = _kubelet_dir(cfg)
    cmd = ["python3", "-m", "gpuconform.nodeprobe", "--pod-resources", "/kubelet/pod-resources/kubelet.sock",
           "--device-plugins", "/kubelet/device-plugins", "--sysfs", "/host/sys",
           "--vendor", vendors.PCI_VENDOR.get(cfg.get("vendor"), vendors.PCI_VENDOR[vendors.NVIDIA])]
    if every_s:
        cmd += ["--every", f"{every_s:g}", "--for", f"{max(deadline - 60, every_s):g}"]
    p = pod(name, namespace, run_id, "node-probe", node, cfg, image=image, gpus=0,
            command=cmd, deadline=deadline, container="nodeprobe", best_effort=True)
    sysfs = cfg.get("nodeProbe.sysfsPath").rstrip("/") or "/"
    mounts = {"pod-resources": (kubelet + "/pod-resources", "/kubelet/pod-resources", "Directory")}
    if checkpoint:
        mounts["checkpoint"] = (kubelet + "/" + CHECKPOINT_FILE, "/kubelet/" + CHECKPOINT_FILE, "File")
    mounts["sys"] = (sysfs, "/host/sys", "Directory")
    return _host_reader(p, mounts, run_as_root=True, recursive=recursive)


def needs_events(pod: dict) -> bool:
    """Whether `classify` needs the pod's events: it is unscheduled and its PodScheduled condition says no why."""
    st = pod.get("status", {})
    if st.get("phase") != "Pending":
        return False
    cond = next((c for c in st.get("conditions", []) or [] if c.get("type") == "PodScheduled"), None)
    return cond is not None and cond.get("status") == "False" and not cond.get("message")


def creating(pod: dict) -> bool:
    """Whether a pod is scheduled but none of its containers has been created yet (sandbox set-up: its status
    says nothing about why it takes long; the kubelet's FailedCreatePodSandBox events do)."""
    st = pod.get("status", {})
    if st.get("phase") != "Pending" or not pod.get("spec", {}).get("nodeName"):
        return False
    return all(((cs.get("state") or {}).get("waiting") or {}).get("reason") == "ContainerCreating"
               for cs in st.get("containerStatuses", []) or [])


def exit_code(pod: dict) -> int | None:
    for cs in pod.get("status", {}).get("containerStatuses", []) or []:
        t = (cs.get("state") or {}).get("terminated")
        if t is not None:
            return t.get("exitCode")
    return None


# A terminal pod: it has stopped for good (restartPolicy Never), so it holds no device and its verdict is final.
# The one spelling of it: the predicate, the phases, and the field selector that asks the API for the others.
TERMINAL_PHASES = ("Succeeded", "Failed")
NON_TERMINAL_SELECTOR = ",".join(f"status.phase!={p}" for p in TERMINAL_PHASES)


def is_terminal(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") in TERMINAL_PHASES


def is_running_or_terminal(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") == "Running" or is_terminal(pod)


# What discovery keeps of a pod that is not a plugin candidate (not a DaemonSet's): what its readers read, and no
# more. At real pod density (40 pods a node, 1,000 nodes) whole pods as dicts (managedFields, env, probes,
# statuses, the service-account token volume) would not fit the Job's memory. The readers of these pods
# (inventory.discover, the only place that holds them): its grouping by spec.nodeName;
# discovery.find_plugin_pods: metadata name, namespace, labels, ownerReferences (kind, name, controller), the
# containers' names, hostPath volumes and the container mounts of them (look-alikes); nodes.describe_nodes
# (counts.free_gpus, pod_request): status.phase and the containers' and init containers' limits and requests of
# the GPU resource, an extended resource (its name has a domain: a '/'; cpu, memory and the other native
# resources never do). Also kept, absent on an ordinary pod: deletionTimestamp and the claims (what holds a DRA
# device), the containers' images. Repeated strings (namespace, node, image, labels, resource names) are interned:
# 40 pods of a node, or the replicas of a workload, hold each once.
_SLIM_META = ("name", "deletionTimestamp")
_SLIM_OWNER = ("kind", "name", "controller")
_SLIM_SPEC = ("nodeName", "resourceClaims")
_SLIM_STATUS = ("phase", "resourceClaimStatuses", "extendedResourceClaimStatus")


def _s(v: Any) -> Any:
    return sys.intern(v) if type(v) is str else v


def _extended(resources: dict) -> dict:
    """A container's limits and requests of extended resources (a '/' in the name) only; {} where it has none."""
    out = {}
    for k in ("limits", "requests"):
        got = {_s(r): _s(q) for r, q in (resources.get(k) or {}).items() if "/" in r}
        if got:
            out[k] = got
    return out


def _slim_container(c: dict, host_volumes: set) -> dict:
    out = {k: _s(c[k]) for k in ("name", "image") if k in c}
    res = _extended(c.get("resources") or {})
    if res:
        out["resources"] = res
    mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") in host_volumes]
    if mounts:
        out["volumeMounts"] = mounts
    return out


def slim(p: dict) -> dict:
    """`p` as discovery keeps it: whole for a DaemonSet's pod (a plugin or driver candidate: its args, env and
    statuses are read) but its managedFields, else only what the readers above read (no managedFields, env,
    command, probes, statuses, cpu/memory resources, or volumes but hostPath ones)."""
    meta = p.get("metadata") or {}
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return {**p, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    spec, status = p.get("spec") or {}, p.get("status") or {}
    out_meta = {k: meta[k] for k in _SLIM_META if k in meta}
    if "namespace" in meta:
        out_meta["namespace"] = _s(meta["namespace"])
    if meta.get("labels"):
        out_meta["labels"] = {_s(k): _s(v) for k, v in meta["labels"].items()}
    if meta.get("ownerReferences"):
        out_meta["ownerReferences"] = [{k: _s(o[k]) for k in _SLIM_OWNER if k in o} for o in meta["ownerReferences"]]
    out_spec = {k: _s(spec[k]) for k in _SLIM_SPEC if k in spec}
    host = [v for v in spec.get("volumes") or [] if v.get("hostPath")]
    if host:
        out_spec["volumes"] = host
    names = {v.get("name") for v in host}
    for key in ("containers", "initContainers"):
        if key in spec:
            out_spec[key] = [_slim_container(c, names) for c in spec[key] or []]
    return {"metadata": out_meta, "spec": out_spec,
            "status": {k: _s(status[k]) for k in _SLIM_STATUS if k in status}}
