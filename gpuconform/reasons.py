"""The reason codes, one table: every non-pass carries a code whose prefix says its outcome class: FAIL- (the
cluster is wrong: the test fails), ERROR- (no verdict is possible: the test errors), SKIP- (not applicable now,
with evidence) and NOTCHECKED- (an optional feature off: skipped without costing the node its certification).
Codes are part of the JSON summary's schema: never rename one, add new ones. Each row keeps the code it had before
this scheme as its alias, accepted everywhere and written beside the code in the summary until the next release.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import untrusted

# prefix -> (pytest outcome, class)
CLASSES = {"FAIL": ("fail", "fail"), "ERROR": ("error", "error"), "SKIP": ("skip", "skip"),
           "NOTCHECKED": ("skip", "not checked")}


@dataclass(frozen=True)
class Reason:
    code: str
    alias: str  # the code before the outcome-prefix scheme, accepted until the next release ("" for codes added since)
    title: str
    hint: str

    @property
    def outcome(self) -> str:
        """pytest's outcome: fail | error | skip (from the code's prefix)."""
        return CLASSES[self.code.split("-", 1)[0]][0]

    @property
    def klass(self) -> str:
        """fail | error | skip | not checked (from the code's prefix)."""
        return CLASSES[self.code.split("-", 1)[0]][1]


_R = [
    Reason("FAIL-F01-NOT-REGISTERED", "GPU-F01-NOT-REGISTERED", "device plugin not registered with the kubelet",
           "Check the plugin pod log for registration errors (socket path, 'context deadline exceeded'); with "
           "failOnInitError=false a Running plugin pod can still be unregistered."),
    Reason("FAIL-F02-CAPACITY-ZERO", "GPU-F02-CAPACITY-ZERO", "GPU capacity is 0 (or allocatable missing) on a GPU node",
           "The plugin lost its registration (often after a kubelet restart). Restart the plugin pod and check "
           "that it re-registers on kubelet.sock re-creation."),
    Reason("FAIL-F03-UNHEALTHY-DEVICES", "GPU-F03-UNHEALTHY-DEVICES", "devices reported Unhealthy (capacity > allocatable; "
           "on a DRA node: devices its driver tainted NoSchedule/NoExecute)",
           "Inspect the plugin log and `dmesg` for XID errors on the named devices; drain and reset the GPU."),
    Reason("FAIL-F04-OVERADVERTISED", "GPU-F04-OVERADVERTISED", "more GPUs advertised than the hardware has",
           "Compare the plugin's config (replicas, MIG strategy) with GFD labels; remove stale resource keys."),
    Reason("FAIL-F04-UNDERADVERTISED", "GPU-F04-UNDERADVERTISED", "fewer GPUs advertised than the hardware has",
           "Check the plugin log for devices that failed to initialise and for a wrong MIG/sharing config."),
    Reason("FAIL-F04-STALE-RESOURCE", "GPU-F04-STALE-RESOURCE", "a GPU resource key is advertised that the configuration does not expect",
           "A previous plugin config (MIG or shared resource names) left capacity behind; restart the kubelet "
           "or remove the key from node status after fixing the plugin config."),
    Reason("FAIL-F04-LABEL-HARDWARE-MISMATCH", "GPU-F04-LABEL-HARDWARE-MISMATCH", "the node's GPU labels disagree with its PCI hardware",
           "The labels (GPU Feature Discovery) and the plugin count GPUs the PCI bus no longer shows, or miss some "
           "it shows: check dmesg for 'fallen off the bus' / XID 79, reseat or replace the GPU, then restart GFD "
           "and the plugin."),
    Reason("FAIL-F05-UNEXPECTED-ADMISSION", "GPU-F05-UNEXPECTED-ADMISSION", "kubelet rejected a GPU pod with UnexpectedAdmissionError",
           "The kubelet could not allocate devices the scheduler thought were free (plugin Allocate failed or "
           "devices went unhealthy). Check the plugin log around the pod's start time."),
    Reason("FAIL-F06-TOPOLOGY-AFFINITY", "GPU-F06-TOPOLOGY-AFFINITY", "kubelet rejected a Guaranteed GPU pod with TopologyAffinityError",
           "Under single-numa-node the plugin must report devices on a NUMA node that also has free CPUs; "
           "check device topology in the plugin and the node's NUMA layout."),
    Reason("SKIP-F06-FRAGMENTED", "GPU-F06-FRAGMENTED", "free GPUs are split across NUMA nodes",
           "Not a conformance failure: rerun when the node is less busy, or drain it for the check."),
    Reason("FAIL-F07-NOT-SCHEDULABLE", "GPU-F07-NOT-SCHEDULABLE", "a GPU pod stayed Pending although the node advertises free GPUs",
           "Read the FailedScheduling event; check that the resource is advertised and the node is schedulable."),
    Reason("SKIP-F07-BUSY", "GPU-F07-BUSY", "no free GPU on the node", "Rerun when GPUs are free or raise the coverage gate."),
    Reason("FAIL-F08-PLUGIN-CRASHLOOP", "GPU-F08-PLUGIN-CRASHLOOP", "device plugin pod is crash-looping",
           "Read the last termination message and the previous container log of the plugin pod."),
    Reason("FAIL-F08-PLUGIN-NOT-READY", "GPU-F08-PLUGIN-NOT-READY", "device plugin pod missing or not Ready on a GPU node",
           "Check the DaemonSet's node selector/tolerations and the pod's events."),
    Reason("FAIL-F09-MIG-MISMATCH", "GPU-F09-MIG-MISMATCH", "MIG strategy or profiles differ from what the node advertises",
           "Align the plugin's migStrategy with the MIG manager's config and the expected profiles."),
    Reason("FAIL-F10-SHARING-MISMATCH", "GPU-F10-SHARING-MISMATCH", "time-slicing/MPS sharing config not applied as labelled",
           "The advertised count must be GPUs x replicas; check the plugin's sharing config and the resource name."),
    Reason("FAIL-F11-REGISTRATION-UNSTABLE", "GPU-F11-REGISTRATION-UNSTABLE", "plugin re-registered or allocatable changed during the run",
           "A kubelet or plugin restart happened while the suite ran; check both logs."),
    Reason("FAIL-F12-DEVICE-NOT-INJECTED", "GPU-F12-DEVICE-NOT-INJECTED", "pod was granted GPUs but sees fewer (or none)",
           "The runtime did not inject the devices (stale kubelet checkpoint, container toolkit missing, "
           "deviceListStrategy mismatch). Restart the plugin and check the container runtime's NVIDIA hook/CDI."),
    Reason("FAIL-F12-INJECTION-FAILED", "GPU-F12-INJECTION-FAILED", "the container runtime could not inject the allocated devices",
           "The runtime's message says which part: a CDI device it cannot resolve (regenerate the CDI spec: "
           "nvidia-ctk cdi generate), the NVIDIA runtime or hook missing on the node, a RuntimeClass the "
           "cluster lacks (runtimeClassName in the config: empty on GPU operator v25.10.0+ CDI installs and with "
           "its NRI plugin, which creates none; `nvidia` on older or CDI-off operator installs), or a RuntimeClass "
           "handler the node's runtime lacks (nvidia-ctk runtime configure, then restart the runtime)."),
    Reason("FAIL-F12-ACCESS-LOST", "GPU-F12-ACCESS-LOST", "a pod lost access to its GPU while it ran",
           "Containers lose their device access when the runtime's device cgroup rules are reset, typically by "
           "`systemctl daemon-reload` on nodes where systemd manages the containers' cgroups (NVIDIA container "
           "toolkit: use CDI or the nvidia-ctk system create-dev-char-symlinks workaround); restart the pods."),
    Reason("FAIL-F13-CUDA-FAILURE", "GPU-F13-CUDA-FAILURE", "CUDA workload failed on an allocated GPU",
           "See the mapped cause; typical fixes: upgrade the driver, start Fabric Manager, reset the GPU."),
    Reason("ERROR-F14-IMAGE-PULL", "GPU-F14-IMAGE-PULL", "test image could not be pulled",
           "Mirror the images to a reachable registry and set images.* (and pullSecrets) in the config."),
    Reason("ERROR-F15-UNTOLERATED-TAINT", "GPU-F15-UNTOLERATED-TAINT", "test pod not scheduled because of a taint it does not tolerate",
           "Add the node's taint to `tolerations` in the config, or exclude the node."),
    Reason("FAIL-LATENCY-THRESHOLD", "GPU-LATENCY-THRESHOLD", "allocation/start latency above the configured threshold",
           "Look at the slowest pods' phases: scheduling (scheduler), allocate (plugin Allocate RPC), start (runtime)."),
    # inputs others write (clocks, events, labels), issue 29: a skewed clock or malformed data is not a pass
    Reason("ERROR-CLOCK-SKEW", "", "a clock is more than 1 s off the API server's: the latency it stamps cannot be judged",
           "The message names the clock (the node's kubelet or the scheduler), the pod and its timestamps: a "
           "container that started before its pod was created, or ended after the API server stored its status. "
           "Sync the clock (chrony or systemd-timesyncd: `chronyc tracking`, `timedatectl`) and rerun; the "
           "phases are never clamped, so a node behind does not pass and one ahead does not fail falsely."),
    Reason("ERROR-MALFORMED-DATA", "", "data the check reads from the cluster is malformed: no verdict, no certification",
           "The message names the source and the value: a node's GPU count label (GFD, NFD, the AMD labeller), the "
           "kubelet's /metrics or configz, a probe's cpulist. Fix what writes it (or set nodes.expectedGpus for the "
           "count) and rerun. Unlike NOTCHECKED-OPTIONAL (a source the operator chose not to provide), malformed "
           "data costs the node its certification: whoever can write a label must not be able to certify a node."),
    Reason("FAIL-TOPOLOGY-POLICY", "GPU-TOPOLOGY-POLICY", "kubelet topology/CPU manager policy differs from the expected one",
           "Set topologyManagerPolicy/cpuManagerPolicy in the kubelet config and restart it (remove "
           "cpu_manager_state when changing the CPU manager policy)."),
    Reason("FAIL-NUMA-MISALIGNED", "GPU-NUMA-MISALIGNED", "a Guaranteed GPU pod got CPUs and GPUs on different NUMA nodes",
           "Topology manager must be single-numa-node with cpuManagerPolicy static; check the plugin's topology."),
    Reason("SKIP-NUMA-NA", "GPU-NUMA-NA", "the GPU reports no NUMA affinity (numa_node = -1)",
           "Typical in VMs: alignment cannot be checked on this node."),
    Reason("FAIL-NUMA-MISREPORTED", "GPU-NUMA-MISREPORTED", "the plugin reports devices on other NUMA nodes than the hardware's",
           "The kubelet aligns CPUs with the NUMA node the plugin reports: a wrong one gives misaligned pods. "
           "Compare the plugin's device topology with /sys/bus/pci/devices/<bdf>/numa_node and fix the plugin."),
    Reason("FAIL-KUBELET-RECORD-MISMATCH", "GPU-KUBELET-RECORD-MISMATCH", "the kubelet's device record disagrees with the node or the pod",
           "The kubelet's PodResources API is its own record of which device each container holds: a container "
           "that sees other devices, or an allocatable list that differs from node status, means the plugin "
           "injects other devices than it was asked for or the kubelet's state is stale; restart the plugin and "
           "inspect the kubelet checkpoint."),
    Reason("FAIL-ISOLATION", "GPU-ISOLATION", "a pod sees GPUs it did not request",
           "The runtime exposes GPUs to containers that did not ask for them: NVIDIA_VISIBLE_DEVICES=all (set by "
           "CUDA base images) is honoured in unprivileged containers while the NVIDIA container toolkit's "
           "accept-nvidia-visible-devices-envvar-when-unprivileged is true (its default); set it to false and run "
           "the plugin with deviceListStrategy volume-mounts or cdi-cri. Privileged pods see every GPU by design. "
           "On a CDI install (GPU operator v25.10.0 and later) every NVIDIA RuntimeClass (`nvidia`, `nvidia-cdi`, "
           "`nvidia-legacy`) does this: the message then names runtimeClassName as the cause; leave it empty."),
    Reason("FAIL-DOUBLE-ALLOCATION", "GPU-DOUBLE-ALLOCATION", "the same device was handed to two pods at once",
           "The plugin or kubelet checkpoint is inconsistent; restart the plugin and inspect the checkpoint."),
    Reason("ERROR-API", "ENV-API", "Kubernetes API call failed (server unreachable, timed out, or an HTTP error)",
           "The message names the call and the cause. Unreachable (refused, DNS, connect timeout): check the "
           "server address of the kubeconfig context, the network path and proxy. TLS: check the CA and server "
           "name. 429/5xx after retries: API Priority and Fairness or an overloaded server. 403 'refused by "
           "admission': Pod Security, quota or a webhook rejected the object."),
    Reason("ERROR-AUTH", "ENV-AUTH", "the API server rejected the credentials (401)",
           "The token expired or the kubeconfig user is wrong: refresh the credentials (re-login, exec plugin, "
           "service account token), check the context's user (`kubectl config view --minify`) and run again."),
    Reason("ERROR-RBAC", "ENV-RBAC", "missing permission", "Apply manifests/rbac.yaml or grant the listed verbs."),
    Reason("ERROR-TIMEOUT", "ENV-TIMEOUT", "timed out waiting without a terminal state",
           "The cluster is slow or stuck; raise timeouts.* only after reading the last state shown."),
    Reason("NOTCHECKED-OPTIONAL", "ENV-NOT-CHECKED", "check needs an optional permission or probe that is disabled",
           "Grant nodes/metrics and nodes/configz (manifests/rbac.yaml; the kubelets' port reachable from the runner, "
           "their serving certificates signed by kubelet.caFile) or enable the node probe to cover this check."),
    Reason("ERROR-OPERATOR-NOT-READY", "ENV-OPERATOR-NOT-READY", "the GPU operator's validation has not passed on this node",
           "Results on this node are not meaningful until the operator's validator pod is Ready: read its init "
           "container logs (driver, toolkit, cuda, plugin validation) in the operator namespace."),
    Reason("SKIP-NODE-NOT-READY", "ENV-NODE-NOT-READY", "GPU node is NotReady or cordoned", "Fix or uncordon the node, then rerun."),
    # The DRA path (a DRA driver serves the node's GPUs through ResourceClaims; gpuconform/nodemode.py, docs/dra.md)
    Reason("FAIL-DRA-NO-SLICES", "", "the node's GPU DRA driver publishes no ResourceSlice for it",
           "Check the driver's kubelet-plugin pod on the node (its log: publishing ResourceSlices, RBAC on "
           "resourceslices) and that the node carries the label its DaemonSet selects."),
    Reason("FAIL-DRA-POOL-INCOMPLETE", "", "a DRA pool of the node is incomplete or inconsistent",
           "A pool's slices must all be present (spec.pool.resourceSliceCount) at one generation; the driver is "
           "mid-update or lost a slice: read its log, restart its kubelet-plugin pod."),
    Reason("FAIL-GPU-OFFERED-TWICE", "", "a device plugin and a GPU DRA driver both offer the node's GPUs",
           "Serve each node's GPUs by one of them: turn the device plugin off on DRA nodes (the GPU operator's "
           "nvidia.com/gpu.deploy.device-plugin label) or keep the DRA driver's kubelet plugin off device-plugin "
           "nodes (its nodeSelector); NVIDIA's chart refuses both without gpuResourcesEnabledOverride."),
    Reason("FAIL-DRA-NOT-REGISTERED", "", "the DRA driver's kubelet plugin is not registered with the kubelet",
           "The kubelet has no registration socket of the driver in its plugins_registry directory: check the "
           "kubelet-plugin pod's mounts (the kubelet's root dir) and its log for registration errors."),
    Reason("FAIL-DRA-PREPARE-FAILED", "", "the DRA driver failed to prepare a pod's ResourceClaims",
           "The kubelet's NodePrepareResources call to the driver failed (event FailedPrepareDynamicResources); "
           "the message quotes the driver's error: check its kubelet-plugin pod's log on the node."),
    Reason("FAIL-DRA-WRONG-DEVICE", "", "a container sees other devices than its ResourceClaim was allocated",
           "The driver's CDI spec (or whatever it injects) does not match the claim's allocation: the pod may use "
           "a device the scheduler gave to another claim. Check the driver's prepare step and its CDI specs."),
    Reason("FAIL-DRA-DOUBLE-INJECTION", "", "one device was injected into the containers of two claims",
           "Two pods whose claims were allocated different devices see the same GPU: the driver injects the wrong "
           "device for at least one of them. Check the driver's prepare step and its CDI specs."),
    Reason("FAIL-DRA-TAINTED-DEVICE-ALLOCATED", "", "a device tainted out of service was allocated to a claim",
           "The driver tainted the device NoSchedule or NoExecute (it is unhealthy or being drained), yet the "
           "scheduler allocated it to a claim that tolerates no taint. kube-scheduler honours device taints only "
           "with its DRADeviceTaints feature gate (on by default since 1.36): check its --feature-gates."),
    Reason("FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE", "", "a device its driver reports Unhealthy stays in service",
           "The driver tells the kubelet the device is Unhealthy (pod status allocatedResourcesStatus), but its "
           "ResourceSlice has no NoSchedule/NoExecute taint on it, so new claims still get it. The driver should taint "
           "what it reports unhealthy; meanwhile an admin can add a DeviceTaintRule."),
    Reason("FAIL-DRA-MIG-AND-PARENT-ALLOCATED", "", "a MIG device was allocated while its parent GPU was",
           "The GPU and its MIG devices must draw on one counter set (ResourceSlice sharedCounters, each device's "
           "consumesCounters: partitionable devices, KEP-4815) so that the scheduler never hands out both. Check "
           "the driver's slices for the counters, and that kube-scheduler runs with DRAPartitionableDevices."),
    Reason("FAIL-DRA-CLAIM-NOT-DEALLOCATED", "", "a ResourceClaim stays allocated after its pods ended",
           "Nothing released the claim: kube-controller-manager's resourceclaim-controller removes ended pods from "
           "status.reservedFor and clears status.allocation. Check that it runs (--controllers) and its log."),
    Reason("FAIL-DRA-ADMIN-ACCESS-GRANTED", "", "a ResourceClaim got admin access in a namespace not labelled for it",
           "Admin access shows a claim's pods every device of the class, also those allocated to others: only a "
           "namespace labelled resource.kubernetes.io/admin-access=true may ask it. Find what labels namespaces "
           "(mutating policies, webhooks, namespace templates) or why the API server does not enforce the label."),
    Reason("NOTCHECKED-DRA-NO-MIG", "", "the node's DRA driver publishes no MIG device beside its parent GPU",
           "Nothing to pair: the driver publishes whole GPUs only, or GPUs in MIG mode as their MIG devices only "
           "(then a MIG device and its parent cannot both be asked for)."),
    Reason("NOTCHECKED-DRA-PATH", "", "check not made on the DRA path yet",
           "The node's GPUs are served by a DRA driver; this check is made on device-plugin nodes only so far "
           "(docs/dra.md lists what is checked on each path)."),
    # the rollout rehearsal (rollout.mode; docs/rollout.md)
    Reason("FAIL-ROLLOUT-ACCESS-LOST", "", "a pod holding a GPU lost or changed its devices during the rollout",
           "The new plugin or driver version, or what rolled out with it (the container toolkit, a kubelet "
           "restart, a daemon-reload), reset the running containers' device access or re-registered the devices "
           "under other IDs: running GPU workloads break on every node this reaches. Roll the components out "
           "separately and check the new version's device IDs and the runtime's device rules."),
    Reason("FAIL-ROLLOUT-ADMISSION", "", "the kubelet rejected GPU pods while a plugin pod served the node",
           "A plugin pod was Ready and the node offered its devices, yet the kubelet could not allocate (Allocate or "
           "GetPreferredAllocation failing: read the plugin log at the times named). Two plugin pods on one node "
           "(a DaemonSet with maxSurge) can remove each other's socket: NVIDIA's plugin must not surge."),
    Reason("FAIL-ROLLOUT-DEVICES-REASSIGNED", "", "after the rollout the kubelet gave a new pod a GPU that a running "
           "pod held", "The new version registers (or publishes) the same GPUs under other device IDs (for NVIDIA's "
           "plugin, a changed deviceIDStrategy: uuid -> index): the kubelet's record of the running pods names the "
           "old IDs, so it counts their GPUs free and allocates them again. Keep device IDs stable across versions, "
           "or drain the node before rolling out a change of IDs."),
    Reason("FAIL-ROLLOUT-KUBELET-RESTART", "", "the kubelet restarted while the plugin rolled out on the node",
           "Something rolled out with the plugin restarted the node agent under running GPU pods (a toolkit or "
           "driver change that restarts the kubelet or the container runtime: NVIDIA/gpu-operator#596). Roll such "
           "changes separately from the plugin, on drained nodes."),
    Reason("FAIL-ROLLOUT-WINDOW", "", "no plugin pod served the node, or it offered fewer GPUs, for longer than "
           "thresholds.rolloutWindow",
           "The kubelet rejects, for good, every GPU pod it admits while no plugin serves its resource "
           "(kubernetes/kubernetes#109595): shorten the hand-over (the new image pre-pulled, no slow init, a fast "
           "registration), or read the new pod's log and events for what delayed it."),
    Reason("FAIL-ROLLOUT-STUCK", "", "the rollout did not complete on the node: no new plugin pod Ready, or the "
           "devices not offered again, within rollout.timeout",
           "Read the new pod's events and last termination message (a crash-looping new version stops the "
           "DaemonSet's rollout there); roll back before it reaches more nodes."),
    Reason("FAIL-DRA-SLICES-WIPED", "", "the DRA driver's ResourceSlices for the node were gone during its upgrade",
           "The old driver pod removed its slices before the new one published them. Do not delete slices on "
           "shutdown: the kubelet keeps a driver's slices for 30 s after it disconnects and keeps them if it "
           "registers again (k8s.io/dynamic-resource-allocation v0.37.2). For a hand-over with no gap, run the "
           "driver with kubeletplugin.RollingUpdate(pod UID) and updateStrategy maxSurge 1, maxUnavailable 0 "
           "(seamless upgrade, kubernetes PR #129832)."),
    Reason("ERROR-ROLLOUT-NOT-SEEN", "", "no rollout happened while the rehearsal held the node",
           "In rollout.mode=observe the suite waits for the DaemonSet's generation to change: start the upgrade "
           "once the run says it is holding the node, raise rollout.timeout, or use rollout.mode=restart. A "
           "DaemonSet with updateStrategy OnDelete does not roll its pods on a change."),
]
REASONS: dict[str, Reason] = {r.code: r for r in _R}
ALIASES: dict[str, str] = {r.alias: r.code for r in _R if r.alias}  # old code -> code (codes added since have none)


def canonical(code: str | None) -> str | None:
    """The code for `code` or its old alias; None for None or an unknown code."""
    if code is None:
        return None
    return code if code in REASONS else ALIASES.get(code)


def lookup(code: str) -> Reason:
    """The Reason of a code or its old alias; KeyError for an unknown code."""
    known = canonical(code)
    if known is None:
        raise KeyError(f"unknown reason code {code}")
    return REASONS[known]


def legacy(code: str | None) -> str | None:
    """The old alias of a code (the summary writes it beside the code until the next release)."""
    return (REASONS[code].alias or None) if code in REASONS else None


class Verdict(Exception):
    """Base for verdict exceptions: a code, a message naming node and observed/expected values, evidence."""

    outcome = "fail"

    def __init__(self, code: str, message: str, evidence: dict | None = None):
        known = canonical(code)
        if known is None:
            raise ValueError(f"unknown reason code {code}")
        # cluster text (event and termination messages, output tails) is cleaned here, where every verdict passes
        self.code, self.message, self.evidence = known, untrusted.clean(message), evidence or {}
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
    known = canonical(code)
    if known is None:
        raise ValueError(f"unknown reason code {code}")
    return f"[{known}] {untrusted.continued(message)}"


def code_of(text: str) -> str | None:
    """Recovers a reason code from a rendered verdict or skip text."""
    if text.startswith("[") and "]" in text:
        return canonical(text[1:text.index("]")])
    return None


# Skips that do not cost a node its certification: an optional feature the operator chose not to grant or
# enable (shown as "not checked" in the report and summary). Every other non-pass does.
NOT_CHECKED = "NOTCHECKED-OPTIONAL"


def is_not_checked(code: str | None) -> bool:
    """A "not checked" code (NOTCHECKED- prefix, aliases included): the node keeps its certification."""
    return (canonical(code) or "").startswith("NOTCHECKED-")


def certified(results: list[tuple[str, str | None]]) -> bool:
    """A node is certified when at least one check passed and every other result is a pass or "not checked" (a
    NOTCHECKED- code). `results` are (outcome, reason code) pairs of that node's checks."""
    passed = any(o == "passed" for o, _ in results)
    return passed and all(o == "passed" or (o == "skipped" and is_not_checked(code)) for o, code in results)
