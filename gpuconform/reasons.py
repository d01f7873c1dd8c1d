"""Stable reason codes and the verdict exceptions that carry them.

Every non-pass carries a code from REASONS. Codes are part of the JSON summary's schema: never rename one;
add new ones instead. `Violation` = the cluster is wrong (test fails); `EnvironmentProblem` = no verdict is
possible (test errors); `pytest.skip` with `skip_reason()` = not applicable, with evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import untrusted


@dataclass(frozen=True)
class Reason:
    code: str
    outcome: str  # fail | error | skip
    title: str
    hint: str


_R = [
    Reason("GPU-F01-NOT-REGISTERED", "fail", "device plugin not registered with the kubelet",
           "Check the plugin pod log for registration errors (socket path, 'context deadline exceeded'); with "
           "failOnInitError=false a Running plugin pod can still be unregistered."),
    Reason("GPU-F02-CAPACITY-ZERO", "fail", "GPU capacity is 0 (or allocatable missing) on a GPU node",
           "The plugin lost its registration (often after a kubelet restart). Restart the plugin pod and check "
           "that it re-registers on kubelet.sock re-creation."),
    Reason("GPU-F03-UNHEALTHY-DEVICES", "fail", "devices reported Unhealthy (capacity > allocatable)",
           "Inspect the plugin log and `dmesg` for XID errors on the named devices; drain and reset the GPU."),
    Reason("GPU-F04-OVERADVERTISED", "fail", "more GPUs advertised than the hardware has",
           "Compare the plugin's config (replicas, MIG strategy) with GFD labels; remove stale resource keys."),
    Reason("GPU-F04-UNDERADVERTISED", "fail", "fewer GPUs advertised than the hardware has",
           "Check the plugin log for devices that failed to initialise and for a wrong MIG/sharing config."),
    Reason("GPU-F04-STALE-RESOURCE", "fail", "a GPU resource key is advertised that the configuration does not expect",
           "A previous plugin config (MIG or shared resource names) left capacity behind; restart the kubelet "
           "or remove the key from node status after fixing the plugin config."),
    Reason("GPU-F04-LABEL-HARDWARE-MISMATCH", "fail", "the node's GPU labels disagree with its PCI hardware",
           "The labels (GPU Feature Discovery) and the plugin count GPUs the PCI bus no longer shows, or miss some "
           "it shows: check dmesg for 'fallen off the bus' / XID 79, reseat or replace the GPU, then restart GFD "
           "and the plugin."),
    Reason("GPU-F05-UNEXPECTED-ADMISSION", "fail", "kubelet rejected a GPU pod with UnexpectedAdmissionError",
           "The kubelet could not allocate devices the scheduler thought were free (plugin Allocate failed or "
           "devices went unhealthy). Check the plugin log around the pod's start time."),
    Reason("GPU-F06-TOPOLOGY-AFFINITY", "fail", "kubelet rejected a Guaranteed GPU pod with TopologyAffinityError",
           "Under single-numa-node the plugin must report devices on a NUMA node that also has free CPUs; "
           "check device topology in the plugin and the node's NUMA layout."),
    Reason("GPU-F06-FRAGMENTED", "skip", "free GPUs are split across NUMA nodes",
           "Not a conformance failure: rerun when the node is less busy, or drain it for the check."),
    Reason("GPU-F07-NOT-SCHEDULABLE", "fail", "a GPU pod stayed Pending although the node advertises free GPUs",
           "Read the FailedScheduling event; check that the resource is advertised and the node is schedulable."),
    Reason("GPU-F07-BUSY", "skip", "no free GPU on the node", "Rerun when GPUs are free or raise the coverage gate."),
    Reason("GPU-F08-PLUGIN-CRASHLOOP", "fail", "device plugin pod is crash-looping",
           "Read the last termination message and the previous container log of the plugin pod."),
    Reason("GPU-F08-PLUGIN-NOT-READY", "fail", "device plugin pod missing or not Ready on a GPU node",
           "Check the DaemonSet's node selector/tolerations and the pod's events."),
    Reason("GPU-F09-MIG-MISMATCH", "fail", "MIG strategy or profiles differ from what the node advertises",
           "Align the plugin's migStrategy with the MIG manager's config and the expected profiles."),
    Reason("GPU-F10-SHARING-MISMATCH", "fail", "time-slicing/MPS sharing config not applied as labelled",
           "The advertised count must be GPUs x replicas; check the plugin's sharing config and the resource name."),
    Reason("GPU-F11-REGISTRATION-UNSTABLE", "fail", "plugin re-registered or allocatable changed during the run",
           "A kubelet or plugin restart happened while the suite ran; check both logs."),
    Reason("GPU-F12-DEVICE-NOT-INJECTED", "fail", "pod was granted GPUs but sees fewer (or none)",
           "The runtime did not inject the devices (stale kubelet checkpoint, container toolkit missing, "
           "deviceListStrategy mismatch). Restart the plugin and check the container runtime's NVIDIA hook/CDI."),
    Reason("GPU-F12-INJECTION-FAILED", "fail", "the container runtime could not inject the allocated devices",
           "The runtime's message says which part: a CDI device it cannot resolve (regenerate the CDI spec: "
           "nvidia-ctk cdi generate), the NVIDIA runtime or hook missing on the node, a RuntimeClass the "
           "cluster lacks (runtimeClassName in the config: empty on GPU operator v25.10.0+ CDI installs and with "
           "its NRI plugin, which creates none; `nvidia` on older or CDI-off operator installs), or a RuntimeClass "
           "handler the node's runtime lacks (nvidia-ctk runtime configure, then restart the runtime)."),
    Reason("GPU-F12-ACCESS-LOST", "fail", "a pod lost access to its GPU while it ran",
           "Containers lose their device access when the runtime's device cgroup rules are reset, typically by "
           "`systemctl daemon-reload` on nodes where systemd manages the containers' cgroups (NVIDIA container "
           "toolkit: use CDI or the nvidia-ctk system create-dev-char-symlinks workaround); restart the pods."),
    Reason("GPU-F13-CUDA-FAILURE", "fail", "CUDA workload failed on an allocated GPU",
           "See the mapped cause; typical fixes: upgrade the driver, start Fabric Manager, reset the GPU."),
    Reason("GPU-F14-IMAGE-PULL", "error", "test image could not be pulled",
           "Mirror the images to a reachable registry and set images.* (and pullSecrets) in the config."),
    Reason("GPU-F15-UNTOLERATED-TAINT", "error", "test pod not scheduled because of a taint it does not tolerate",
           "Add the node's taint to `tolerations` in the config, or exclude the node."),
    Reason("GPU-LATENCY-THRESHOLD", "fail", "allocation/start latency above the configured threshold",
           "Look at the slowest pods' phases: scheduling (scheduler), allocate (plugin Allocate RPC), start (runtime)."),
    Reason("GPU-TOPOLOGY-POLICY", "fail", "kubelet topology/CPU manager policy differs from the expected one",
           "Set topologyManagerPolicy/cpuManagerPolicy in the kubelet config and restart it (remove "
           "cpu_manager_state when changing the CPU manager policy)."),
    Reason("GPU-NUMA-MISALIGNED", "fail", "a Guaranteed GPU pod got CPUs and GPUs on different NUMA nodes",
           "Topology manager must be single-numa-node with cpuManagerPolicy static; check the plugin's topology."),
    Reason("GPU-NUMA-NA", "skip", "the GPU reports no NUMA affinity (numa_node = -1)",
           "Typical in VMs: alignment cannot be checked on this node."),
    Reason("GPU-NUMA-MISREPORTED", "fail", "the plugin reports devices on other NUMA nodes than the hardware's",
           "The kubelet aligns CPUs with the NUMA node the plugin reports: a wrong one gives misaligned pods. "
           "Compare the plugin's device topology with /sys/bus/pci/devices/<bdf>/numa_node and fix the plugin."),
    Reason("GPU-KUBELET-RECORD-MISMATCH", "fail", "the kubelet's device record disagrees with the node or the pod",
           "The kubelet's PodResources API is its own record of which device each container holds: a container "
           "that sees other devices, or an allocatable list that differs from node status, means the plugin "
           "injects other devices than it was asked for or the kubelet's state is stale; restart the plugin and "
           "inspect the kubelet checkpoint."),
    Reason("GPU-ISOLATION", "fail", "a pod sees GPUs it did not request",
           "The runtime exposes GPUs to containers that did not ask for them: NVIDIA_VISIBLE_DEVICES=all (set by "
           "CUDA base images) is honoured in unprivileged containers while the NVIDIA container toolkit's "
           "accept-nvidia-visible-devices-envvar-when-unprivileged is true (its default); set it to false and run "
           "the plugin with deviceListStrategy volume-mounts or cdi-cri. Privileged pods see every GPU by design. "
           "On a CDI install (GPU operator v25.10.0 and later) every NVIDIA RuntimeClass (`nvidia`, `nvidia-cdi`, "
           "`nvidia-legacy`) does this: the message then names runtimeClassName as the cause; leave it empty."),
    Reason("GPU-DOUBLE-ALLOCATION", "fail", "the same device was handed to two pods at once",
           "The plugin or kubelet checkpoint is inconsistent; restart the plugin and inspect the checkpoint."),
    Reason("ENV-API", "error", "Kubernetes API call failed (server unreachable, timed out, or an HTTP error)",
           "The message names the call and the cause. Unreachable (refused, DNS, connect timeout): check the "
           "server address of the kubeconfig context, the network path and proxy. TLS: check the CA and server "
           "name. 429/5xx after retries: API Priority and Fairness or an overloaded server. 403 'refused by "
           "admission': Pod Security, quota or a webhook rejected the object."),
    Reason("ENV-AUTH", "error", "the API server rejected the credentials (401)",
           "The token expired or the kubeconfig user is wrong: refresh the credentials (re-login, exec plugin, "
           "service account token), check the context's user (`kubectl config view --minify`) and run again."),
    Reason("ENV-RBAC", "error", "missing permission", "Apply manifests/rbac.yaml or grant the listed verbs."),
    Reason("ENV-TIMEOUT", "error", "timed out waiting without a terminal state",
           "The cluster is slow or stuck; raise timeouts.* only after reading the last state shown."),
    Reason("ENV-NOT-CHECKED", "skip", "check needs an optional permission or probe that is disabled",
           "Grant nodes/proxy (metrics, configz) or enable the node probe to cover this check."),
    Reason("ENV-OPERATOR-NOT-READY", "error", "the GPU operator's validation has not passed on this node",
           "Results on this node are not meaningful until the operator's validator pod is Ready: read its init "
           "container logs (driver, toolkit, cuda, plugin validation) in the operator namespace."),
    Reason("ENV-NODE-NOT-READY", "skip", "GPU node is NotReady or cordoned", "Fix or uncordon the node, then rerun."),
]
REASONS: dict[str, Reason] = {r.code: r for r in _R}


class Verdict(Exception):
    """Base for verdict exceptions: a code, a message naming node and observed/expected values, evidence."""

    outcome = "fail"

    def __init__(self, code: str, message: str, evidence: dict | None = None):
        if code not in REASONS:
            raise ValueError(f"unknown reason code {code}")
        # cluster text (event and termination messages, output tails) is cleaned here, where every verdict passes
        self.code, self.message, self.evidence = code, untrusted.clean(message), evidence or {}
        super().__init__(self.render())

    @property
    def reason(self) -> Reason:
        return REASONS[self.code]

    def render(self) -> str:
        return f"[{self.code}] {untrusted.continued(self.message)}\n  fix: {self.reason.hint}"


class Violation(Verdict, AssertionError):
    """A conformance violation: the plugin, kubelet or cluster config is wrong. The test fails."""


class EnvironmentProblem(Verdict):
    """The environment prevents a verdict (API, RBAC, image pull, taints). The test errors."""

    outcome = "error"


def skip_reason(code: str, message: str) -> str:
    """The text passed to pytest.skip, so the JSON summary can recover the code."""
    if code not in REASONS:
        raise ValueError(f"unknown reason code {code}")
    return f"[{code}] {untrusted.continued(message)}"


def code_of(text: str) -> str | None:
    """Recovers a reason code from a rendered verdict or skip text."""
    if text.startswith("[") and "]" in text:
        code = text[1:text.index("]")]
        return code if code in REASONS else None
    return None


# Skips that do not cost a node its certification: an optional feature the operator chose not to grant or
# enable (shown as "not checked" in the report and summary). Every other non-pass does.
NOT_CHECKED = "ENV-NOT-CHECKED"


def certified(results: list[tuple[str, str | None]]) -> bool:
    """A node is certified when at least one check passed and every other result is a pass or "not checked".
    `results` are (outcome, reason code) pairs of that node's checks."""
    passed = any(o == "passed" for o, _ in results)
    return passed and all(o == "passed" or (o == "skipped" and code == NOT_CHECKED) for o, code in results)
