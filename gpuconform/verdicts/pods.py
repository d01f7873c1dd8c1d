"""Pod verdicts: why a suite pod did not do what was asked (not scheduled, image, injection, sandbox, CUDA,
deadline), from its status and events, and a pod creation refused for a reason that is a verdict."""

from __future__ import annotations

import re

from .common import Finding

IMAGE_WAITING = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
# Why a container could not be created or started, as the kubelet reports it: waiting with one of these reasons
# (kubelet pkg/kubelet/container/sync_result.go), or terminated with StartError (containerd, when the runtime
# fails after the task was created, e.g. a prestart hook) or ContainerCannotRun.
NOT_CREATED = {"CreateContainerError", "CreateContainerConfigError", "RunContainerError"}
NOT_STARTED = {"StartError", "ContainerCannotRun"}
# The runtime's words when it cannot inject a device, lower-cased: containerd/CRI-O "CDI device injection failed:
# unresolvable CDI devices nvidia.com/gpu=..."; the NVIDIA runtime's prestart hook ("error running hook #0: ...
# nvidia-container-cli: initialization error ..."); the runtime binary missing ('exec: "nvidia-container-runtime":
# executable file not found'); any message about a device.
INJECTION_WORDS = ("cdi", "nvidia-container", "error running hook", "prestart hook", "device")
# The API server's RuntimeClass admission plugin refuses a pod naming a RuntimeClass that does not exist
# (kubernetes plugin/pkg/admission/runtimeclass/admission.go: 'pod rejected: RuntimeClass "x" not found').
_NO_RUNTIME_CLASS = re.compile(r'RuntimeClass "[^"]*" not found')


# The kubelet's event when the runtime cannot set up a pod's sandbox (kubernetes pkg/kubelet/events/event.go
# FailedCreatePodSandBox: "Failed to create pod sandbox: <the CRI error>"). A RuntimeClass whose handler the node's
# runtime lacks (the NVIDIA toolkit not installed or not configured there) says so: containerd 'no runtime for
# "nvidia" is configured' (internal/cri/server, getRuntime / getSandboxRuntime), CRI-O 'failed to find runtime
# handler nvidia from runtime list ...' (internal/config, ValidateRuntimeHandler). The pod stays ContainerCreating
# with no word in its status, so only the events tell.
SANDBOX_FAILED = "FailedCreatePodSandBox"
_NO_HANDLER = re.compile(r'no runtime for "[^"]*" is configured|runtime handler', re.I)


# The kubelet's event when a DRA driver's NodePrepareResources fails for a pod's claims (kubernetes v1.37.2
# pkg/kubelet/kuberuntime/kuberuntime_manager.go:1726: FailedPrepareDynamicResources, "Failed to prepare dynamic
# resources: <the driver's error>"): the pod stays ContainerCreating, its status silent.
PREPARE_FAILED = "FailedPrepareDynamicResources"
# Only the driver's own failures are a verdict: its NodePrepareResources call failed or returned an error for a
# claim, or no driver of that name is registered (manager.go:245-469 wraps them as "NodePrepareResources...", and
# the plugin lookup's "DRA driver %s is not registered"). The kubelet's other prepare errors pass with a retry:
# "fetch ResourceClaim ...: ... no relationship found between node ..." is the node authorizer's graph not yet
# knowing a just-made claim (seen on the bed), "is being unprepared" a claim still being released.
_DRIVER_FAILED = re.compile(r"NodePrepareResources|is not registered")
# The scheduler's words for a node whose DRA devices cannot satisfy a pod's claims (kubernetes v1.37.2
# pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:1095).
_NO_CLAIM_FIT = re.compile(r"cannot allocate all claims")


def injection_failure(text: str) -> bool:
    """Whether a runtime's error message is about injecting devices (CDI, the NVIDIA hook or runtime)."""
    low = text.lower()
    return any(w in low for w in INJECTION_WORDS)


# The admission policy's refusals (manifests/rbac-policy.yaml): a host mount that is not recursively read-only; the
# node probe's image not listed by digest in its parameter rootImages
_RRO_REFUSED = re.compile(r"mounts host paths read-only with recursiveReadOnly Enabled")
_ROOT_IMAGE_REFUSED = re.compile(r"only with an image named by digest in\s+the policy parameter rootImages")


def creation_refused(name: str, node: str, message: str, rro_if_possible: bool = False) -> Finding | None:
    """A pod create refused because the RuntimeClass it names does not exist: the cluster cannot run GPU pods the
    configured way (FAIL-F12-INJECTION-FAILED), not an API outage. A host reader that mounts `rro_if_possible`
    (its node's runtime cannot mount recursively read-only) refused by the admission policy, which requires it:
    NOTCHECKED-OPTIONAL, the host read is not made on that node (the policy keeps its guarantee; the node's
    runtime is what lacks the feature)."""
    if _NO_RUNTIME_CLASS.search(message):
        return Finding("FAIL-F12-INJECTION-FAILED", f"pod {name} for {node} refused by the API server: {message} "
                          "(runtimeClassName in the config names a RuntimeClass the cluster lacks)")
    if rro_if_possible and _RRO_REFUSED.search(message):
        return Finding("NOTCHECKED-OPTIONAL", f"{node}: its container runtime reports no recursive read-only mounts "
                       "(status.runtimeHandlers[].features.recursiveReadOnlyMounts: containerd before 2.0, CRI-O "
                       "before 1.30) and the admission policy gpuconform-writes requires them for host paths, so "
                       f"pod {name} may not read the node: not checked here. Upgrade the node's runtime, or set the "
                       "policy parameter recursiveReadOnly to IfPossible (ConfigMap gpuconform-policy) to accept "
                       "read-only mounts whose submounts stay writable")
    if _ROOT_IMAGE_REFUSED.search(message):
        return Finding("NOTCHECKED-OPTIONAL", f"{node}: the admission policy gpuconform-writes runs the node probe "
                       f"(pod {name}, uid 0) only with an image its parameter rootImages lists by digest, and it does "
                       "not list images.nodeProbe: the node's own records are not read. Name images.nodeProbe by "
                       "digest (<repo>@sha256:<digest>) and put the same reference in rootImages (ConfigMap "
                       "gpuconform-policy)")
    return None


def classify(pod: dict, events: list[dict], free_on_node: int | None = None) -> Finding | None:
    """Why a test pod is not Running/Succeeded, as a reason code; None when nothing is wrong (yet)."""
    st = pod.get("status", {})
    name, node = pod["metadata"]["name"], pod.get("spec", {}).get("nodeSelector", {}).get("kubernetes.io/hostname", "?")
    reason, message = st.get("reason") or "", st.get("message") or ""
    if st.get("phase") == "Failed" and reason == "UnexpectedAdmissionError":
        return Finding("FAIL-F05-UNEXPECTED-ADMISSION", f"pod {name} on {node} rejected by the kubelet: "
                          f"UnexpectedAdmissionError: {message}")
    if st.get("phase") == "Failed" and reason == "TopologyAffinityError":
        return Finding("FAIL-F06-TOPOLOGY-AFFINITY", f"pod {name} on {node} rejected by the kubelet: "
                          f"TopologyAffinityError: {message}")
    for cs in st.get("containerStatuses", []) or []:
        w = (cs.get("state") or {}).get("waiting") or {}
        if w.get("reason") in IMAGE_WAITING:
            return Finding("ERROR-F14-IMAGE-PULL", f"pod {name} on {node}: image {cs.get('image')} could not be "
                              f"pulled ({w['reason']}: {(w.get('message') or '')[:300]})")
        t = (cs.get("state") or {}).get("terminated") or {}
        for why, text in ((w.get("reason"), w.get("message")), (t.get("reason"), t.get("message"))):
            if why in NOT_CREATED or why in NOT_STARTED:
                text = text or ""
                code = "FAIL-F12-INJECTION-FAILED" if injection_failure(text) else "ERROR-API"
                return Finding(code, f"pod {name} on {node}: container {cs.get('name')} {why}: {text[:500]}")
    sandbox = [e for e in events if e.get("reason") == SANDBOX_FAILED and _NO_HANDLER.search(_note(e))]
    if st.get("phase") == "Pending" and sandbox:
        return Finding("FAIL-F12-INJECTION-FAILED", f"pod {name} on {node}: the runtime has no handler for its "
                          f"RuntimeClass {pod.get('spec', {}).get('runtimeClassName')!r}: {_note(sandbox[-1])[:500]}")
    prep = [e for e in events if e.get("reason") == PREPARE_FAILED and _DRIVER_FAILED.search(_note(e))]
    if st.get("phase") == "Pending" and prep:
        return Finding("FAIL-DRA-PREPARE-FAILED", f"pod {name} on {node}: the kubelet could not prepare its "
                          f"ResourceClaims (the DRA driver's NodePrepareResources): {_note(prep[-1])[:500]}")
    if st.get("phase") == "Pending":
        sched = [e for e in events if e.get("reason") == "FailedScheduling"]
        text = _note(sched[-1]) if sched else ""
        for c in st.get("conditions", []) or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                text = c["message"]
        if text:
            # "Insufficient" first: the message lists every node, and other nodes' taints must not hide a busy GPU.
            short = re.findall(r"Insufficient ([a-z0-9./-]+)", text)
            if _NO_CLAIM_FIT.search(text):  # the DRA path's "no free GPU"
                short.append("resource.k8s.io/devices")
            if short and not any("/" in r for r in short):  # cpu, memory, pods: the node is full, not its GPUs
                return Finding("SKIP-F07-BUSY", f"pod {name} not scheduled on {node}: other pods hold the node's "
                                  f"{', '.join(sorted(set(short)))} ({text})")
            if short:
                if free_on_node:
                    return Finding("FAIL-F07-NOT-SCHEDULABLE", f"pod {name} not scheduled on {node} although "
                                      f"{free_on_node} GPU(s) looked free: {text}")
                return Finding("SKIP-F07-BUSY", f"pod {name} not scheduled on {node}: no free GPU ({text})")
            if re.search(r"untolerated taint", text):
                return Finding("ERROR-F15-UNTOLERATED-TAINT", f"pod {name} not scheduled on {node}: {text}")
            return Finding("FAIL-F07-NOT-SCHEDULABLE", f"pod {name} not scheduled on {node}: {text}")
    if st.get("phase") == "Failed" and reason:
        return Finding("ERROR-API", f"pod {name} on {node} failed: {reason}: {message}")
    return None


def _note(event: dict) -> str:
    """An event's text: core/v1 `message`, events.k8s.io/v1 `note`."""
    return event.get("message") or event.get("note") or ""
