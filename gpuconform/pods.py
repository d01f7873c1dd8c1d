"""Pod manifests for the suite's probes, and the classification of a pod that did not do what we asked.

Manifests are plain dicts (what `kubectl apply` would take), built from the effective config so images,
pull policy, pull secrets and tolerations are always the user's. Every pod: restartPolicy Never,
activeDeadlineSeconds (so a SIGKILLed runner still frees the GPUs), the run labels, and a `restricted`
Pod Security context unless it is the optional privileged node probe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .config import Config, view
from .timing import POD_ACTIVE_DEADLINE_S, POD_TERMINATION_GRACE_S

PART_OF = "app.kubernetes.io/part-of"
SUITE = "gpuconform"
RUN_LABEL = "gpuconform.dev/run"
CHECK_LABEL = "gpuconform.dev/check"

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


def pod(name: str, namespace: str, run_id: str, check: str, node: str, cfg: Config | dict, *, image: str,
        gpus: int, resource: str = "", command: list[str] | None = None, guaranteed_cpus: int = 0,
        deadline: float = POD_ACTIVE_DEADLINE_S, container: str = "probe") -> dict:
    """A short-lived test pod pinned to `node` through the scheduler (nodeSelector, so scheduling is measured).
    `resource` is the node's own GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb, ...)."""
    cfg = view(cfg)
    res: dict = {}
    limits: dict = {}
    if gpus:
        if not resource:
            raise ValueError(f"pod {name}: {gpus} GPU(s) requested without naming the node's GPU resource")
        limits[resource] = str(gpus)
    if guaranteed_cpus:
        limits.update({"cpu": str(guaranteed_cpus), "memory": "64Mi"})
        res["requests"] = dict(limits)
    else:
        res["requests"] = {"cpu": "10m", "memory": "16Mi"}
    if limits:
        res["limits"] = limits
    ctr = {"name": container, "image": image, "imagePullPolicy": cfg.get("images.pullPolicy"),
           "resources": res, "securityContext": RESTRICTED_CTR}
    if command:
        ctr["command"] = command
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
    if cfg.get("images.pullSecrets"):
        spec["imagePullSecrets"] = [{"name": s} for s in cfg.get("images.pullSecrets")]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels(run_id, check)}, "spec": spec}


def probe_pod(name: str, namespace: str, run_id: str, check: str, node: str, cfg: Config | dict, gpus: int,
              guaranteed_cpus: int = 0, deadline: float = POD_ACTIVE_DEADLINE_S, resource: str = "") -> dict:
    return pod(name, namespace, run_id, check, node, cfg, image=view(cfg).get("images.probe"), gpus=gpus,
               resource=resource, command=["sh", "-c", PROBE_SCRIPT], guaranteed_cpus=guaranteed_cpus,
               deadline=deadline)


def vector_add_pod(name: str, namespace: str, run_id: str, node: str, cfg: Config | dict, deadline: float,
                   resource: str) -> dict:
    """The CUDA sample with its own default command, so any vectoradd image can be substituted."""
    return pod(name, namespace, run_id, "vector-add", node, cfg, image=view(cfg).get("images.vectorAdd"), gpus=1,
               resource=resource, deadline=deadline, container="vectoradd")


def socket_probe_pod(name: str, namespace: str, run_id: str, node: str, cfg: Config | dict,
                     deadline: float) -> dict:
    """Privileged-namespace probe listing the kubelet's device-plugins dir through a read-only hostPath."""
    p = pod(name, namespace, run_id, "plugin-socket", node, cfg, image=view(cfg).get("images.probe"), gpus=0,
            command=["sh", "-c", "ls -la /device-plugins/"], deadline=deadline)
    spec = p["spec"]
    spec["securityContext"] = {}
    spec["containers"][0]["securityContext"] = {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
    spec["containers"][0]["volumeMounts"] = [{"name": "dp", "mountPath": "/device-plugins", "readOnly": True}]
    spec["volumes"] = [{"name": "dp", "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}}]
    return p


# ------------------------------------------------------------------ classification

@dataclass(frozen=True)
class PodProblem:
    code: str
    message: str


IMAGE_WAITING = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}


def classify(pod: dict, events: list[dict], free_on_node: int | None = None) -> PodProblem | None:
    """Why a test pod is not Running/Succeeded, as a reason code; None when nothing is wrong (yet)."""
    st = pod.get("status", {})
    name, node = pod["metadata"]["name"], pod.get("spec", {}).get("nodeSelector", {}).get("kubernetes.io/hostname", "?")
    reason, message = st.get("reason") or "", st.get("message") or ""
    if st.get("phase") == "Failed" and reason == "UnexpectedAdmissionError":
        return PodProblem("GPU-F05-UNEXPECTED-ADMISSION", f"pod {name} on {node} rejected by the kubelet: "
                          f"UnexpectedAdmissionError: {message}")
    if st.get("phase") == "Failed" and reason == "TopologyAffinityError":
        return PodProblem("GPU-F06-TOPOLOGY-AFFINITY", f"pod {name} on {node} rejected by the kubelet: "
                          f"TopologyAffinityError: {message}")
    for cs in st.get("containerStatuses", []) or []:
        w = (cs.get("state") or {}).get("waiting") or {}
        if w.get("reason") in IMAGE_WAITING:
            return PodProblem("GPU-F14-IMAGE-PULL", f"pod {name} on {node}: image {cs.get('image')} could not be "
                              f"pulled ({w['reason']}: {(w.get('message') or '')[:300]})")
        if w.get("reason") in ("CreateContainerError", "CreateContainerConfigError", "RunContainerError"):
            return PodProblem("GPU-F12-DEVICE-NOT-INJECTED" if "device" in (w.get("message") or "").lower()
                              else "ENV-API", f"pod {name} on {node}: {w['reason']}: {(w.get('message') or '')[:300]}")
    if st.get("phase") == "Pending":
        sched = [e for e in events if e.get("reason") == "FailedScheduling"]
        text = (sched[-1].get("message") or sched[-1].get("note") or "") if sched else ""
        for c in st.get("conditions", []) or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                text = c["message"]
        if text:
            # "Insufficient" first: the message lists every node, and other nodes' taints must not hide a busy GPU.
            if re.search(r"Insufficient [a-z0-9./-]+", text):
                if free_on_node:
                    return PodProblem("GPU-F07-NOT-SCHEDULABLE", f"pod {name} not scheduled on {node} although "
                                      f"{free_on_node} GPU(s) looked free: {text}")
                return PodProblem("GPU-F07-BUSY", f"pod {name} not scheduled on {node}: no free GPU ({text})")
            if re.search(r"untolerated taint", text):
                return PodProblem("GPU-F15-UNTOLERATED-TAINT", f"pod {name} not scheduled on {node}: {text}")
            return PodProblem("GPU-F07-NOT-SCHEDULABLE", f"pod {name} not scheduled on {node}: {text}")
    if st.get("phase") == "Failed" and reason:
        return PodProblem("ENV-API", f"pod {name} on {node} failed: {reason}: {message}")
    return None


def needs_events(pod: dict) -> bool:
    """Whether `classify` needs the pod's events: it is unscheduled and its PodScheduled condition says no why."""
    st = pod.get("status", {})
    if st.get("phase") != "Pending":
        return False
    cond = next((c for c in st.get("conditions", []) or [] if c.get("type") == "PodScheduled"), None)
    return cond is not None and cond.get("status") == "False" and not cond.get("message")


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
