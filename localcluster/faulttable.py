"""The bed's faults, one table (TABLE): each row is a Fault that names

- the fault (`cluster.py fault NAME` for the device-plugin node's, faults.py; `cluster.py dra fault NAME` for the
  DRA node's, dranode.py: Fault.bed),
- the node whose checks must see it (Fault.node: the device-plugin node, the DRA node, or CLUSTER for cluster-wide
  objects) and the stack or shape it is shown on (stack, profile, layout),
- what it breaks (breaks, a short sentence; `make faults` prints it) and the failure mode it reproduces (row: Fn,
  the number in the Fnn reason codes, docs/reason-codes.md; F16: ERROR-OPERATOR-NOT-READY; or a contract line),
- how it is made (how: typed steps, one class per mechanism below, each with its parameters), and
- what the suite must say (expect: check -> reason code, and the codes other checks may legitimately give).

testing/e2e/test_fault_matrix.py reads its rows and expectations from here; faults.py and dranode.py make the
faults. faults.py and dranode.py apply a row's steps in their own fixed order, whatever order the row lists them in.
No I/O: importing this reads only the environment (bed.py: the node's name and GPU count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from bed import DRA_NODE, GPUS, IMAGES, NODE_NAME, WRONG_PLUGIN_DIR

DEVICE_PLUGIN, DRA = "device-plugin", "dra"  # Fault.bed: which part of the bed makes the fault
GPU_NODE = NODE_NAME  # the device-plugin node (gpunode.py)
CLUSTER = "cluster"  # Fault.node of a fault on cluster-wide objects, judged on no node's checks
STACKS = ("nvidia", "sim")  # the device-plugin node's plugin stacks (shapes.STACKS)


# ---------------------------------------------------------------- how a device-plugin fault is made (faults.py)

@dataclass(frozen=True)
class SimPlugin:
    """The simulated plugin restarted with these knobs (images/: `faults` its config's "faults" section, `top` keys
    of the config itself), or with `host_dir` mounted as its device-plugins directory."""
    faults: dict = field(default_factory=dict)
    top: dict = field(default_factory=dict)
    host_dir: str = ""
    sim_only: ClassVar[bool] = True  # NVIDIA's plugin has no such knobs


@dataclass(frozen=True)
class KubeletReset:
    """The kubelet restarted with its device checkpoint removed. The kubelet zeroes extended resources on
    re-registration only in some restart paths, so the node status is then written as a lost registration leaves
    it: the resource "0", or gone (drop_resource)."""
    drop_resource: bool = False
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class NodeLabels:
    """Labels written on the node, as GPU Feature Discovery would (on NVIDIA's stack GFD would put its own back)."""
    labels: dict
    sim_only: ClassVar[bool] = True


@dataclass(frozen=True)
class NodeTaint:
    taint: str  # kubectl taint's KEY=VALUE:EFFECT
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class TopologyPolicy:
    """The kubelet restarted with this topologyManagerPolicy."""
    policy: str
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class RemoveImage:
    """An image removed from containerd's store (the bed is air-gapped: it cannot be pulled)."""
    image: str
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class HogGpus:
    """Another team's pod holds this many GPUs on the node."""
    gpus: int
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class OperatorFailing:
    """The GPU operator's driver validation fails with this message (the bed's validator DaemonSet)."""
    message: str
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class RestartKubeletDuringRun:
    """The kubelet restarts (device checkpoint kept) this many seconds after the suite's first pod on the node
    (`cluster.py restart-kubelet DELAY --during-run`, started in the background)."""
    after_s: float
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class Hardware:
    """The simulated hardware rewritten: the GPUs physically on NUMA node `numa`; GPU indexes `off_bus` missing from
    its PCI tree (sysfs) only."""
    numa: int = 0
    off_bus: tuple[int, ...] = ()
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class NvidiaRuntime:
    """<GPU_SIM>/runtime.json for the nvidia runtime stand-in (runtime_sim.py), as the toolkit's config.toml."""
    settings: dict
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class DeleteRuntimeClass:
    """The RuntimeClass nvidia (gpunode.runtime_class) deleted; a bed restarted under the fault keeps it deleted."""
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class RuntimeHandler:
    """The RuntimeClass nvidia recreated with this handler, which containerd lacks."""
    handler: str
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class CompanionCrash:
    """The layout's GPU Feature Discovery DaemonSet (the bed's stand-in) crash-loops."""
    sim_only: ClassVar[bool] = True


@dataclass(frozen=True)
class DoubleAssign:
    """Two tenant pods; a stale kubelet device checkpoint gives tenant-b tenant-a's GPU (sharedfault.py)."""
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class CutAccess:
    """The suite's run-long pod of check `check` (its gpuconform.dev/check label: `access`, the held-through-the-run
    check's; `rollout`, the rehearsal's held pods) loses its GPU access this many seconds after it runs
    (`cluster.py cut-access DELAY_S CHECK`)."""
    after_s: float
    check: str = "access"
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class RollPluginDuringRun:
    """The plugin's DaemonSet gets a new pod template this many seconds after a new suite run's rehearsal holds
    the GPU node (`cluster.py roll-plugin DELAY_S CHANGE`, in the background), as a `helm upgrade` would, and
    rolls: `slow-start` (the new pod starts 20 s late: an init container, the old one already gone), `crashloop`
    (the new version exits at start: a flag it does not know), `time-slicing` (the upgrade turns on time-slicing:
    the GPUs register again as replicas, under other IDs), `kubelet-restart` (the kubelet restarts with the
    plugin's rollout)."""
    after_s: float
    change: str
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class ForeignNamespaces:
    """Other teams' namespaces labelled like the suite's (faults.FOREIGN_NAMESPACES)."""
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class SpoofPluginPod:
    """A tenant's crash-looping pod labelled like the plugin runs on the GPU node (faults.SPOOF_NS)."""
    sim_only: ClassVar[bool] = False


@dataclass(frozen=True)
class NvmlEvents:
    """Lines for the mock NVML's event file (nvidia.add_event: `xid <gpu> <code>`, `lost <gpu>`), which NVIDIA's
    plugin's health check receives; with `after_s`, during the run: that many seconds after the suite's first pod
    on the node (`cluster.py nvml-event DELAY_S LINE...`, started in the background)."""
    lines: tuple[str, ...]
    after_s: float | None = None
    sim_only: ClassVar[bool] = False


# ---------------------------------------------------------------- how a DRA fault is made (dranode.py)

@dataclass(frozen=True)
class DraDriver:
    """The DRA driver restarted with this knob of its own (GPU_SIM_DRA_FAULTS; images/internal/dra Faults); its
    slice then lists `devices` more (or fewer) GPUs than the node has."""
    knob: str
    devices: int = 0


@dataclass(frozen=True)
class SignalDriverDuringRun:
    """The DRA driver gets SIGUSR1 this many seconds after the suite's first pod on the DRA node (`cluster.py
    dra-signal DELAY_S`, started in the background): with its knob taint-on-signal it then taints its last GPU."""
    after_s: float


@dataclass(frozen=True)
class DraDriverGone:
    """The driver's DaemonSet and its slices removed (the node keeps the operator's DRA label)."""


@dataclass(frozen=True)
class ControllersOff:
    """kube-controller-manager restarted without these controllers (--controllers); the driver healthy."""
    controllers: tuple[str, ...]


@dataclass(frozen=True)
class SchedulerGates:
    """kube-scheduler restarted with these feature gates (--feature-gates)."""
    gates: str


@dataclass(frozen=True)
class AdminAccessPolicy:
    """A MutatingAdmissionPolicy (dranode.ADMIN_POLICY) that labels every namespace made from now on
    resource.kubernetes.io/admin-access=true; the driver healthy."""


@dataclass(frozen=True)
class ApiObject:
    """An API object beside a healthy driver (dranode.set_api_fault): "taint-rule" (a DeviceTaintRule) or
    "offered-twice" (a ResourceSlice of gpu.nvidia.com for the device-plugin node)."""
    name: str


DEVICE_PLUGIN_STEPS = (SimPlugin, KubeletReset, NodeLabels, NodeTaint, TopologyPolicy, RemoveImage, HogGpus,
                       OperatorFailing, RestartKubeletDuringRun, Hardware, NvidiaRuntime, DeleteRuntimeClass,
                       RuntimeHandler, CompanionCrash, DoubleAssign, CutAccess, ForeignNamespaces, SpoofPluginPod,
                       NvmlEvents, RollPluginDuringRun)
DRA_STEPS = (DraDriver, SignalDriverDuringRun, DraDriverGone, ControllersOff, SchedulerGates, AdminAccessPolicy,
             ApiObject)
S = TypeVar("S")


# ---------------------------------------------------------------- what the suite must say

@dataclass(frozen=True)
class Expect:
    """What the suite must report under a fault (testing/e2e/test_fault_matrix.py): each check in `checks` its code
    (None: the check must pass, a fault it must not mistake), every other check passes or reports one of `also`,
    and the run exits with `exit`."""
    checks: dict[str, str | None]
    also: frozenset[str] = frozenset()  # codes other checks may report because of the same fault
    exit: int = 1  # exit codes other than 1 (a check failed): skips alone certify nothing (6), nothing failed (0)
    select: str = ""  # the suite run's -k selection ("" = every check)
    named: tuple[str, str] | None = None  # (JUnit property, text it must contain): what a passing check must say
    args: tuple[str, ...] = ()  # more suite options for the row's run (the rollout rehearsal's)

    def __post_init__(self) -> None:
        object.__setattr__(self, "also", frozenset(self.also))


@dataclass(frozen=True)
class Fault:
    """One row of the table. Checked when made: its steps are of its bed's kinds, one of each at most, and a
    device-plugin fault whose steps need the simulated plugin is shown on it (stack "sim")."""
    name: str
    bed: str  # DEVICE_PLUGIN (`cluster.py fault NAME`, faults.py) or DRA (`cluster.py dra fault NAME`, dranode.py)
    node: str  # the node whose checks must see it: GPU_NODE, DRA_NODE; CLUSTER: none
    breaks: str  # what it breaks, one sentence
    how: tuple  # the steps that make it: instances of DEVICE_PLUGIN_STEPS or DRA_STEPS, at most one of each kind
    expect: Expect | None  # None: the suite's checks do not judge it (the row says what does)
    row: str = ""  # the failure mode (Fn) or contract line it reproduces
    # device-plugin faults: the plugin stack it is shown on ("nvidia": NVIDIA's own plugin reacting to what the mock
    # NVML reports; "sim": the simulated plugin, where the fault needs its knobs, its stand-in companions or labels
    # the bed writes; "" = the stack the bed was started with: the kubelet, the hardware, the runtime, other
    # tenants). DRA faults: the DRA shape its expectations hold in (dranode.SHAPES; the fault matrix runs the DRA
    # rows in the default shape).
    stack: str = ""
    profile: str = "plain"  # device-plugin: the bed profile it is shown on (shapes.py); the bed switches to it first
    layout: str = ""  # device-plugin: the plugin install layout it needs ("" = whichever the bed runs)
    # device-plugin: the node's (capacity, allocatable) to wait for before the fault counts as applied; None =
    # healthy counts, () = don't wait (the fault itself makes the counts unpredictable, e.g. a crash-looping plugin)
    counts: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        kinds = [type(s) for s in self.how]
        allowed = DEVICE_PLUGIN_STEPS if self.bed == DEVICE_PLUGIN else DRA_STEPS if self.bed == DRA else ()
        if not allowed or self.node not in (GPU_NODE, DRA_NODE, CLUSTER):
            raise ValueError(f"fault {self.name}: bed {self.bed!r}, node {self.node!r}")
        if not kinds or len(set(kinds)) != len(kinds) or not all(k in allowed for k in kinds):
            raise ValueError(f"fault {self.name}: steps {kinds} (one of each kind, of {self.bed}'s)")
        if self.bed == DEVICE_PLUGIN:
            if self.stack not in ("", *STACKS):
                raise ValueError(f"fault {self.name}: stack {self.stack!r}")
            if any(k.sim_only for k in kinds) and self.stack != "sim":
                raise ValueError(f"fault {self.name}: {[k.__name__ for k in kinds if k.sim_only]} need stack sim")
        elif (self.profile, self.layout, self.counts) != ("plain", "", None):
            raise ValueError(f"fault {self.name}: profile, layout and counts are the device-plugin node's")

    def step(self, kind: type[S]) -> S | None:
        """The row's step of that kind, None where it has none."""
        return next((s for s in self.how if isinstance(s, kind)), None)


BUSY = "SKIP-F07-BUSY"
PREPARE = "FAIL-DRA-PREPARE-FAILED"
ALL_NUMA1 = {str(i): 1 for i in range(GPUS)}


def _dp(name: str, row: str, breaks: str, *how, expect: Expect | None, node: str = GPU_NODE, **kw) -> Fault:
    return Fault(name, DEVICE_PLUGIN, node, breaks, how, expect, row, **kw)


def _dra(name: str, breaks: str, *how, expect: Expect, node: str = DRA_NODE) -> Fault:
    return Fault(name, DRA, node, breaks, how, expect, stack="operator")


# ---------------------------------------------------------------- the device-plugin node's faults

ROLLOUT = "test_plugin_rollout_keeps_running_gpu_pods_and_admits_new_ones"

# In the order the fault matrix runs them (`make faults` lists them so).
DEVICE_PLUGIN_TABLE = (
    _dp("not-registered", "F1", "plugin pod Running but never registers (failOnInitError=false style); the resource "
        "is absent from node capacity",
        SimPlugin({"neverRegister": True}), KubeletReset(drop_resource=True), stack="sim",
        expect=Expect({"test_gpu_resource_is_in_node_capacity": "FAIL-F01-NOT-REGISTERED",
                       "test_advertised_gpus_match_the_hardware": "FAIL-F01-NOT-REGISTERED",
                       "test_kubelet_counts_the_plugin_registration": "FAIL-F01-NOT-REGISTERED"}, {BUSY})),
    _dp("wrong-socket-dir", "F1", "the plugin DaemonSet mounts the wrong host directory as device-plugins: its socket "
        "is not where the kubelet looks, it never finds kubelet.sock, the pod stays Running and the resource "
        "disappears after the kubelet restarts",
        SimPlugin(host_dir=str(WRONG_PLUGIN_DIR)), KubeletReset(drop_resource=True), stack="sim",
        # its pod mounts another directory than the kubelet's device-plugins: not taken for the plugin (a
        # look-alike, named), so the node also has no plugin pod (F08)
        expect=Expect({"test_plugin_socket_exists_in_device_plugins_dir": "FAIL-F01-NOT-REGISTERED",
                       "test_gpu_resource_is_in_node_capacity": "FAIL-F01-NOT-REGISTERED"},
                      {BUSY, "FAIL-F01-NOT-REGISTERED", "FAIL-F08-PLUGIN-NOT-READY"})),
    _dp("shared-device", "isolation", "Allocate ignores the requested IDs and injects GPU 0 into every container: "
        "concurrent pods share one device",
        SimPlugin({"injectOnlyIndex": 0}), stack="sim",
        # every pod gets GPU 0: a 2-GPU pod sees one device too
        # (the kubelet record check sees it too, unless the kubelet happened to assign GPU 0 to its pod)
        expect=Expect({"test_burst_allocates_every_free_gpu_once_and_one_more_waits": "FAIL-DOUBLE-ALLOCATION"},
                      {"FAIL-F12-DEVICE-NOT-INJECTED", "FAIL-KUBELET-RECORD-MISMATCH"})),
    _dp("capacity-zero", "F2", "kubelet restarted and the plugin did not re-register: capacity/allocatable 0 while "
        "the plugin pod is Running",
        SimPlugin({"neverRegister": True}), KubeletReset(), stack="sim",
        expect=Expect({"test_gpu_resource_is_in_node_capacity": "FAIL-F02-CAPACITY-ZERO",
                       "test_advertised_gpus_match_the_hardware": "FAIL-F02-CAPACITY-ZERO"},
                      {BUSY, "FAIL-F01-NOT-REGISTERED"})),
    _dp("gpus-busy", "F7", "another workload holds every GPU on the node: GPU checks skip as busy (with evidence) "
        "and the run certifies nothing",
        HogGpus(GPUS),
        # skips, not failures: the checks that need a free GPU say so, and the run certifies nothing (exit 6)
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": BUSY,
                       "test_pods_see_exactly_the_gpus_they_request": BUSY,
                       "test_burst_allocates_every_free_gpu_once_and_one_more_waits": BUSY,
                       "test_gpu_pod_start_latency_is_under_thresholds": BUSY,
                       "test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": BUSY,
                       "test_kubelet_assigned_devices_match_what_the_pod_sees": BUSY,
                       "test_gpu_access_held_through_the_run_survives_to_its_end": BUSY}, exit=6)),
    _dp("unhealthy-device", "F3", "GPU 1 reported Unhealthy (like an XID error): capacity 4, allocatable 3",
        SimPlugin({"unhealthyDevices": [1]}), stack="sim", counts=(str(GPUS), str(GPUS - 1)),
        # the kubelet's own allocatable list counts the Unhealthy GPU too (capacity 4, 3 healthy devices listed)
        expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-F03-UNHEALTHY-DEVICES"})),
    _dp("over-advertised", "F4", "plugin advertises 2 phantom devices: 6 advertised, 4 physical",
        SimPlugin({"extraDevices": 2}), stack="sim", counts=(str(GPUS + 2), str(GPUS + 2)),
        expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F04-OVERADVERTISED"},
                      {"FAIL-F12-DEVICE-NOT-INJECTED", "FAIL-KUBELET-RECORD-MISMATCH"})),
    _dp("admission-error", "F5", "Allocate fails, so the kubelet rejects GPU pods with UnexpectedAdmissionError",
        SimPlugin({"allocateError": "simulated: device allocation failed (driver busy)"}), stack="sim",
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "FAIL-F05-UNEXPECTED-ADMISSION"},
                      {"FAIL-F05-UNEXPECTED-ADMISSION"})),
    _dp("wrong-numa", "F6", "every GPU reported on NUMA node 1, which this host lacks: single-numa-node rejects "
        "Guaranteed GPU pods with TopologyAffinityError",
        SimPlugin({"numaOverride": ALL_NUMA1}), stack="sim",
        # the plugin says NUMA 1, the PCI tree NUMA 0: the kubelet's allocatable list shows the misreport directly
        expect=Expect({"test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": "FAIL-F06-TOPOLOGY-AFFINITY",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-NUMA-MISREPORTED"},
                      {"FAIL-F06-TOPOLOGY-AFFINITY"})),
    _dp("crashloop", "F8", "plugin exits at start: CrashLoopBackOff with a termination message",
        SimPlugin({"crashAtStart": True}), stack="sim", counts=(),
        expect=Expect({"test_plugin_pod_is_ready_and_not_crash_looping": "FAIL-F08-PLUGIN-CRASHLOOP"},
                      # a crashed plugin also leaves no socket and no allocatable GPUs behind
                      {BUSY, "FAIL-F01-NOT-REGISTERED", "FAIL-F02-CAPACITY-ZERO", "FAIL-F03-UNHEALTHY-DEVICES",
                       "FAIL-F05-UNEXPECTED-ADMISSION", "FAIL-F07-NOT-SCHEDULABLE",
                       "FAIL-F11-REGISTRATION-UNSTABLE"})),
    _dp("sharing-not-applied", "F10", "GFD labels say time-slicing with 4 replicas but the plugin advertises 1 per GPU",
        NodeLabels({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"}), stack="sim",
        expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F10-SHARING-MISMATCH"})),
    _dp("not-injected", "F12", "Allocate grants devices but injects none (stale checkpoint style): the pod sees no "
        "GPU",
        SimPlugin({"skipInjection": True}), stack="sim",
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-DEVICE-NOT-INJECTED",
                       "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-DEVICE-NOT-INJECTED"},
                      {"FAIL-F12-DEVICE-NOT-INJECTED", "SKIP-NUMA-NA", "FAIL-KUBELET-RECORD-MISMATCH"})),
    _dp("old-driver", "F13", "host driver 470 is too old for the CUDA 12 workload",
        SimPlugin(top={"driverVersion": "470.82.01"}), stack="sim",
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "FAIL-F13-CUDA-FAILURE"})),
    _dp("image-missing", "F14", "the vector-add image is missing and cannot be pulled (air-gapped)",
        RemoveImage(IMAGES["vectoradd"]),
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "ERROR-F14-IMAGE-PULL"})),
    _dp("untolerated-taint", "F15", "the GPU node carries a taint the suite does not tolerate",
        NodeTaint("gpuconform.dev/maintenance=true:NoSchedule"),
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "ERROR-F15-UNTOLERATED-TAINT"},
                      {"ERROR-F15-UNTOLERATED-TAINT"})),
    _dp("slow-allocate", "latency", "Allocate sleeps 2.5 s, so pod start latency exceeds thresholds",
        SimPlugin({"allocateDelayMs": 2500}), stack="sim",
        expect=Expect({"test_gpu_pod_start_latency_is_under_thresholds": "FAIL-LATENCY-THRESHOLD"})),
    _dp("topology-policy-none", "topology", "kubelet topologyManagerPolicy is none instead of single-numa-node",
        TopologyPolicy("none"),
        expect=Expect({"test_kubelet_topology_and_cpu_manager_policies_are_as_expected": "FAIL-TOPOLOGY-POLICY"})),
    _dp("numa-misreported", "NUMA", "the GPUs sit on NUMA node 1 but the plugin reports NUMA 0 to the kubelet: "
        "single-numa-node admits a Guaranteed GPU pod with CPUs on NUMA 0, GPU on NUMA 1",
        SimPlugin({"numaOverride": {str(i): 0 for i in range(GPUS)}}), Hardware(numa=1), stack="sim",
        expect=Expect({"test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": "FAIL-NUMA-MISALIGNED",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-NUMA-MISREPORTED"})),
    _dp("kubelet-restart", "F11", "the kubelet restarts 2 s after the suite's first pod lands on the GPU node (start "
        "the suite within 5 min): the plugin must re-register while the suite runs",
        RestartKubeletDuringRun(2),
        # The restart lands while allocation tests run: pods in flight may see the registration gap.
        # The restart lands while pods run (2 s after the first): checks then may see 0 free GPUs, an admission
        # error (UnexpectedAdmissionError, or TopologyAffinityError for a pod admitted before the plugin has
        # re-registered: the device manager has no devices to give hints for), or a log read through the kubelet
        # failing while it is down (ERROR-API); the registration check, run last on the node, names the cause.
        # The record check's node probe that meets the restart reads the kubelet as it comes back: its PodResources
        # List may not yet hold a running GPU pod (FAIL-KUBELET-RECORD-MISMATCH, seen in a clean-clone CI run once
        # the scheduler's backfill moved that check into the restart's window), or, before the probe waited for
        # the socket, it was refused (NOTCHECKED-OPTIONAL).
        expect=Expect({"test_kubelet_counts_the_plugin_registration": "FAIL-F11-REGISTRATION-UNSTABLE"},
                      {BUSY, "FAIL-F02-CAPACITY-ZERO", "FAIL-F03-UNHEALTHY-DEVICES", "FAIL-F05-UNEXPECTED-ADMISSION",
                       "FAIL-F07-NOT-SCHEDULABLE", "FAIL-F06-TOPOLOGY-AFFINITY", "ERROR-TIMEOUT", "ERROR-API",
                       "FAIL-KUBELET-RECORD-MISMATCH", "NOTCHECKED-OPTIONAL"})),
    # on other shapes
    _dp("ts-shared-device", "isolation", "time-slicing node (4 replicas per GPU): Allocate injects GPU 0 into every "
        "container, so more pods share GPU 0 than it has replicas",
        SimPlugin({"injectOnlyIndex": 0}), stack="sim", profile="time-slicing",
        # time-slicing: replicas of one GPU share its UUID; more pods on GPU 0 than it has replicas is a double
        # allocation
        expect=Expect({"test_burst_allocates_every_free_gpu_once_and_one_more_waits": "FAIL-DOUBLE-ALLOCATION"},
                      {"FAIL-KUBELET-RECORD-MISMATCH"})),
    _dp("mig-not-injected", "F12", "MIG mixed node: Allocate grants the MIG device but injects no device node; the "
        "pod sees no GPU",
        SimPlugin({"skipInjection": True}), stack="sim", profile="mig-mixed",
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-DEVICE-NOT-INJECTED",
                       "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-DEVICE-NOT-INJECTED"},
                      {"FAIL-F12-DEVICE-NOT-INJECTED", "SKIP-NUMA-NA", "FAIL-KUBELET-RECORD-MISMATCH"})),
    _dp("companion-crashloop", "F8 (negative)", "Helm layout: the chart's GPU Feature Discovery DaemonSet (same "
        "app.kubernetes.io/name label as the plugin) crash-loops; the plugin is healthy and no check may fail",
        CompanionCrash(), stack="sim", layout="helm",
        # a crash-looping companion (GPU Feature Discovery, with the chart's labels) is not the plugin: all pass
        expect=Expect({"test_plugin_pod_is_ready_and_not_crash_looping": None}, exit=0)),
    _dp("spoofed-plugin-pod", "F8 (negative)", "Helm layout, healthy plugin: a tenant's pod in its own namespace "
        "carries the chart's labels (no DaemonSet owner, no device-plugins mount) and crash-loops with a hostile "
        "termination message; it is set aside, no check may fail",
        SpoofPluginPod(), layout="helm",
        # a tenant's crash-looping pod with the chart's labels (no DaemonSet owner, no device-plugins mount) is not
        # the plugin: all pass, and the plugin check names it among the look-alikes set aside (named)
        expect=Expect({"test_plugin_pod_is_ready_and_not_crash_looping": None}, exit=0,
                      named=("plugin_look_alikes",
                             "tenant-spoof/my-job (no DaemonSet owner, no device-plugins hostPath mount)"))),
    _dp("operator-not-ready", "F16", "the GPU operator's driver validation fails on the GPU node: its validator pod "
        "is stuck in Init:CrashLoopBackOff",
        OperatorFailing("driver validation failed: NVIDIA kernel module not loaded"),
        expect=Expect({"test_gpu_operator_validation_passed_on_the_node": "ERROR-OPERATOR-NOT-READY"})),
    # issue 9: the kubelet's own evidence, the hardware, the runtime
    _dp("gpu-off-bus", "hardware", "a GPU fell off the bus: GPU 3 is gone from the PCI tree while GPU Feature "
        "Discovery's labels and the plugin still say 4",
        Hardware(off_bus=(GPUS - 1,)),
        expect=Expect({"test_advertised_gpus_match_the_pci_hardware": "FAIL-F04-LABEL-HARDWARE-MISMATCH"})),
    _dp("env-exposure", "isolation", "the nvidia runtime honours NVIDIA_VISIBLE_DEVICES from unprivileged containers: "
        "a pod with NVIDIA_VISIBLE_DEVICES=all sees every GPU, with or without a GPU request",
        NvidiaRuntime({"acceptEnvvarUnprivileged": True}),
        expect=Expect({"test_pods_see_exactly_the_gpus_they_request": "FAIL-ISOLATION"})),
    _dp("runtime-class-missing", "F12", "the RuntimeClass nvidia is deleted: the API server rejects pods that name it "
        "(403, RuntimeClass \"nvidia\" not found)",
        DeleteRuntimeClass(),
        # every pod naming the missing RuntimeClass is refused at create
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-INJECTION-FAILED",
                       "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-INJECTION-FAILED"},
                      {"FAIL-F12-INJECTION-FAILED"})),
    _dp("runtime-handler-missing", "F12", "the RuntimeClass nvidia names handler nvidia-cdi, which this node's "
        "containerd lacks (the toolkit did not configure it): pods naming the class are created, and their "
        "sandboxes fail ('no runtime for \"nvidia-cdi\" is configured')",
        RuntimeHandler("nvidia-cdi"),
        # every pod naming the class is created, and its sandbox fails on the node (the kubelet's events say why)
        expect=Expect({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-INJECTION-FAILED",
                       "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-INJECTION-FAILED"},
                      {"FAIL-F12-INJECTION-FAILED"})),
    _dp("double-assigned", "isolation", "the kubelet's own record (PodResources List) assigns one GPU to two running "
        "containers: a stale device checkpoint loaded at a kubelet restart gave team-inference/tenant-b the GPU of "
        "tenant-a",
        DoubleAssign(),
        # two tenant pods hold GPUs (others' pods: the all-GPU checks run on what is left)
        expect=Expect({"test_kubelet_assigned_devices_match_what_the_pod_sees": "FAIL-DOUBLE-ALLOCATION"},
                      {BUSY, "SKIP-F06-FRAGMENTED"})),
    _dp("access-lost", "isolation", "the suite's run-long pod loses access to its GPU 3 s after it starts, as when a "
        "systemd daemon-reload resets the container's device cgroup rules",
        CutAccess(3),
        expect=Expect({"test_gpu_access_held_through_the_run_survives_to_its_end": "FAIL-F12-ACCESS-LOST"})),
    # judged by testing/e2e/test_cleanup_foreign.py (`make cleanup` against these namespaces), not by the suite
    _dp("foreign-namespace", "cleanup", "other teams' namespaces labelled like the suite's (part-of label; one a "
        "renamed copy of a run's namespace with its run label and a stale heartbeat, one stamped ended): `make "
        "cleanup`, FORCE=1 too, must leave them alone",
        ForeignNamespaces(), node=CLUSTER, expect=None),
    # issue 15: NVIDIA's own plugin (v0.19.3 internal/rm/health.go checkHealth) reacting to what NVML reports
    # through the mock
    _dp("xid-unhealthy", "F3", "NVIDIA's plugin: NVML reports Xid 48 (double-bit ECC error) on GPU 1; the plugin's "
        "health check marks it unhealthy: capacity 4, allocatable 3",
        NvmlEvents(("xid 1 48",)), stack="nvidia", counts=(str(GPUS), str(GPUS - 1)),
        expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-F03-UNHEALTHY-DEVICES"})),
    _dp("gpu-lost", "F3", "NVIDIA's plugin: GPU 2 is lost (NVML returns GPU_IS_LOST); the plugin's health check, on "
        "that error from its event wait, marks every device unhealthy: capacity 4, allocatable 0",
        NvmlEvents(("lost 2",)), stack="nvidia", counts=(str(GPUS), "0"),
        # a lost GPU makes the plugin mark every device Unhealthy: no GPU is free for the workload checks
        expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                       "test_gpu_resource_is_in_node_capacity": "FAIL-F03-UNHEALTHY-DEVICES",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, {BUSY})),
    _dp("gpu-fell-off-bus", "hardware", "NVIDIA's plugin: GPU 3 fell off the bus (Xid 79) and is gone from the PCI "
        "tree; the plugin marks it unhealthy while GFD's label still counts 4",
        NvmlEvents(("xid 3 79",)), Hardware(off_bus=(GPUS - 1,)), stack="nvidia", counts=(str(GPUS), str(GPUS - 1)),
        expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-F04-LABEL-HARDWARE-MISMATCH"})),
    # issue 30: a GPU that fails while the suite runs (the node healthy when it starts) is never certified
    _dp("xid-during-run", "F3", "NVIDIA's plugin: NVML reports Xid 48 on GPU 1 one second after the suite's first "
        "pod lands on the node: healthy when the run starts, one device Unhealthy before it ends",
        NvmlEvents(("xid 1 48",), after_s=1), stack="nvidia",
        # the run-long pod is the node's first; the vector-add keeps the run going past the Xid
        expect=Expect({"test_no_gpu_goes_out_of_service_during_the_run": "FAIL-F03-UNHEALTHY-DEVICES"},
                      select="(out_of_service or held_through or vector_add) and gpu-node-0")),
    # The rollout rehearsal (tests/allocation/test_rollout.py), NVIDIA's own plugin rolling while the suite holds
    # the node: in observe mode the bed's own "helm upgrade" (a changed pod template) lands 5 s after the held pods.
    _dp("rollout-slow-start", "rollout", "a plugin upgrade whose new pod starts 20 s after the old one stopped "
        "(maxUnavailable 1, no surge): no plugin serves the node for longer than thresholds.rolloutWindow (10 s "
        "here), and the pods placed meanwhile are rejected by the kubelet",
        RollPluginDuringRun(5, "slow-start"), stack="nvidia",
        expect=Expect({ROLLOUT: "FAIL-ROLLOUT-WINDOW"}, select="rollout and gpu-node-0",
                      args=("--gpuconform-rollout", "observe", "--gpuconform-set", "thresholds.rolloutWindow=10s"))),
    _dp("rollout-crashloop", "rollout", "a plugin upgrade whose new version exits at start: the rollout stops on "
        "the node with no plugin serving it",
        RollPluginDuringRun(5, "crashloop"), stack="nvidia",
        expect=Expect({ROLLOUT: "FAIL-ROLLOUT-STUCK"}, select="rollout and gpu-node-0",
                      args=("--gpuconform-rollout", "observe", "--gpuconform-set", "rollout.timeout=40s"))),
    _dp("rollout-ids-changed", "rollout", "a plugin upgrade that re-registers the GPUs under other device IDs "
        "(NVIDIA's plugin upgraded with time-slicing on: each GPU registers again as replicas <uuid>::<n>): the "
        "kubelet's record of the held pods names the old IDs, so it counts their GPUs free",
        RollPluginDuringRun(5, "time-slicing"), stack="nvidia",
        expect=Expect({ROLLOUT: "FAIL-ROLLOUT-DEVICES-REASSIGNED"}, select="rollout and gpu-node-0",
                      args=("--gpuconform-rollout", "observe"))),
    _dp("rollout-kubelet-restart", "rollout", "a co-rollout: something rolled out with the plugin restarts the "
        "kubelet under the running GPU pods",
        RollPluginDuringRun(5, "kubelet-restart"), stack="nvidia",
        expect=Expect({ROLLOUT: "FAIL-ROLLOUT-KUBELET-RESTART"}, select="rollout and gpu-node-0",
                      args=("--gpuconform-rollout", "observe"))),
    _dp("rollout-access-lost", "rollout", "a held pod loses its GPU while the plugin restarts, as when a toolkit "
        "rolled out with it reloads systemd and resets the containers' device rules",
        CutAccess(3, "rollout"), stack="nvidia",
        expect=Expect({ROLLOUT: "FAIL-ROLLOUT-ACCESS-LOST"}, select="rollout and gpu-node-0",
                      args=("--gpuconform-rollout", "restart"))),
)


# ---------------------------------------------------------------- the DRA node's faults

# Judged on the DRA node's checks only (select: -k dra), in the DRA node's default shape (the GPU operator's DRA
# stack: plain dra, its admin-access operands running), unless the row names another node (offered-twice).
DRA_TABLE = (
    _dra("no-register", "the driver publishes its slices but never registers with the kubelet",
         DraDriver("no-register"),
         # the kubelet cannot call an unregistered driver: every claim's prepare fails (the GPU operator's validator's
         # too, when its pod starts again); and it wipes the slices of a driver that is not registered (kubernetes
         # v1.37.2 pkg/kubelet/cm/dra/manager.go, 30 s after start), so the checks that come later find no device
         # free and no topology to check, as with driver-gone, and the devices gone during the run are seen at its end
         expect=Expect({"test_plugin_socket_exists_in_device_plugins_dir": "FAIL-DRA-NOT-REGISTERED",
                        "test_kubelet_counts_the_plugin_registration": "FAIL-DRA-NOT-REGISTERED"},
                       {PREPARE, BUSY, "FAIL-DRA-NO-SLICES", "NOTCHECKED-DRA-NO-MIG", "NOTCHECKED-OPTIONAL",
                        "ERROR-OPERATOR-NOT-READY", "FAIL-F03-UNHEALTHY-DEVICES"},
                       select="dra")),
    _dra("omit-last-device", "the driver publishes every GPU but the last: its slice does not equal the hardware",
         DraDriver("omit-last-device", devices=-1),
         # one device fewer: with the run-long pod's, a check needing two finds one free
         expect=Expect({"test_advertised_gpus_match_the_pci_hardware": "FAIL-F04-UNDERADVERTISED"}, {BUSY},
                       select="dra")),
    _dra("extra-device", "the driver publishes a device the hardware lacks",
         DraDriver("extra-device", devices=+1),
         # the scheduler may allocate the phantom device, which the driver then cannot prepare; or the burst's
         # extra pod runs on a device the others' pods left because one of them was given the phantom: the burst
         # then sees the over-advertising itself
         expect=Expect({"test_advertised_gpus_match_the_pci_hardware": "FAIL-F04-OVERADVERTISED"},
                       {PREPARE, "FAIL-F04-OVERADVERTISED"}, select="dra")),
    _dra("driver-gone", "the driver's DaemonSet and its slices removed (the node keeps the operator's DRA label)",
         DraDriverGone(),
         # no driver pod, no slice, no socket: nothing to allocate from, no topology to check
         expect=Expect({"test_gpu_resource_is_in_node_capacity": "FAIL-DRA-NO-SLICES",
                        "test_plugin_socket_exists_in_device_plugins_dir": "FAIL-DRA-NOT-REGISTERED",
                        "test_kubelet_counts_the_plugin_registration": "FAIL-DRA-NOT-REGISTERED"},
                       {BUSY, "FAIL-F08-PLUGIN-NOT-READY", "NOTCHECKED-DRA-NO-MIG", "NOTCHECKED-OPTIONAL"},
                       select="dra")),
    _dra("numa-attribute-wrong", "the driver publishes each GPU's resource.kubernetes.io/numaNode one off the NUMA node "
         "its PCI function sits on",
         DraDriver("numa-misreported"),
         # a claim aligned by matchAttribute on numaNode would get GPUs of other NUMA nodes: the PCI check and the NUMA
         # check compare the attribute with the PCI tree
         expect=Expect({"test_advertised_gpus_match_the_pci_hardware": "FAIL-NUMA-MISREPORTED",
                        "test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": "FAIL-NUMA-MISREPORTED"},
                       select="(pci_hardware or numa_node) and dra")),
    _dra("rollout-no-seamless", "the driver deletes its ResourceSlices when it stops and its DaemonSet replaces pods "
         "without surge (no seamless upgrade): a restart leaves the node with no slices for about two seconds",
         DraDriver("no-seamless-upgrade"),
         expect=Expect({ROLLOUT: "FAIL-DRA-SLICES-WIPED"}, select="rollout and dra",
                       args=("--gpuconform-rollout", "restart"))),
    _dra("taint-during-run", "the driver, healthy when the run starts, taints its last GPU out of service (as on an "
         "XID) one second after the suite's first pod lands on the DRA node",
         DraDriver("taint-on-signal"), SignalDriverDuringRun(1),
         # the run-long pod is the node's first; the vector-add keeps the run going past the taint
         expect=Expect({"test_no_gpu_goes_out_of_service_during_the_run": "FAIL-F03-UNHEALTHY-DEVICES"},
                       select="(out_of_service or held_through or vector_add) and dra")),
    _dra("pool-incomplete", "the driver publishes the pool's devices in one slice of a pool that says it has two",
         DraDriver("pool-incomplete"),
         # the scheduler allocates from complete pools only: no device is free for the workload checks
         expect=Expect({"test_gpu_resource_is_in_node_capacity": "FAIL-DRA-POOL-INCOMPLETE"}, {BUSY},
                       select="dra")),
    _dra("prepare-fails", "the driver's NodePrepareResources fails for every claim",
         DraDriver("prepare-fails"),
         # a pod whose claim cannot be prepared keeps its claim's devices allocated until its check deletes it: with
         # three such pods at once (the run-long pod among them), a check that starts then finds none free (seen in a
         # clean-clone CI run, 2026-12-07)
         expect=Expect({"test_vector_add_succeeds_through_the_plugin": PREPARE}, {PREPARE, BUSY}, select="dra")),
    _dra("wrong-device", "the driver injects the next GPU instead of the allocated one",
         DraDriver("wrong-device"),
         expect=Expect({"test_kubelet_assigned_devices_match_what_the_pod_sees": "FAIL-DRA-WRONG-DEVICE"},
                       {"FAIL-DRA-WRONG-DEVICE"}, select="dra")),
    _dra("double-inject", "the driver injects GPU 0 for every allocated device: two claims' containers share it",
         DraDriver("double-inject"),
         # GPU 0 for every claim: a 2-device claim sees one, a claim given GPU 1 sees GPU 0
         expect=Expect({"test_burst_allocates_every_free_gpu_once_and_one_more_waits": "FAIL-DRA-DOUBLE-INJECTION"},
                       {"FAIL-DRA-WRONG-DEVICE", "FAIL-F12-DEVICE-NOT-INJECTED"}, select="dra")),
    # The driver healthy, kube-controller-manager restarted without its resourceclaim controller (--controllers), so
    # nothing removes an ended pod from a claim's reservedFor or deallocates it.
    _dra("claim-controller-off", "kube-controller-manager runs without its resourceclaim-controller: no claim is "
         "deallocated after its pods, nor made from a template",
         ControllersOff(("resourceclaim-controller",)),
         # without the controller no claim is made from a template either: only the shared-claim check (its own
         # claim)
         expect=Expect({"test_a_shared_claim_gives_its_pods_one_device_and_is_released_after_them":
                        "FAIL-DRA-CLAIM-NOT-DEALLOCATED"}, select="shared_claim and dra")),
    # The driver publishes its last GPU tainted NoSchedule (gpu.nvidia.com/xid=79), as a driver that saw the GPU fall
    # off the bus (the driver's knob taint-unhealthy; it also reports the GPU Unhealthy to the kubelet).
    _dra("device-tainted", "the driver reports its last GPU Unhealthy and publishes it tainted out of service "
         "(gpu.nvidia.com/xid=79:NoSchedule)",
         DraDriver("taint-unhealthy"),
         # the last GPU tainted NoSchedule: out of service, so a check needing both devices finds one free
         expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, {BUSY},
                       select="dra")),
    # The same, and kube-scheduler restarted without device taints (DRADeviceTaints, GA but not locked in 1.37,
    # pkg/features/kube_features.go:1481; DRADeviceTaintRules depends on it), so it allocates the tainted device like
    # any other.
    _dra("taint-ignored", "the last GPU tainted out of service as in device-tainted, and kube-scheduler runs "
         "without DRADeviceTaints: it allocates the tainted device",
         DraDriver("taint-unhealthy"), SchedulerGates("DRADeviceTaints=false,DRADeviceTaintRules=false"),
         # ... and kube-scheduler without DRADeviceTaints: the burst's pods (the extra one at the latest) get it
         expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                        "test_burst_allocates_every_free_gpu_once_and_one_more_waits":
                            "FAIL-DRA-TAINTED-DEVICE-ALLOCATED"}, {BUSY}, select="dra")),
    # The driver reports its last GPU Unhealthy to the kubelet (DRAResourceHealth) but leaves it in service,
    # untainted (the driver's knob report-unhealthy).
    _dra("unhealthy-untainted", "the driver reports its last GPU Unhealthy to the kubelet and leaves it in service",
         DraDriver("report-unhealthy"),
         # the last GPU reported Unhealthy to the kubelet but left in service: a burst pod (the run-long one holds
         # the first GPU) is allocated it
         expect=Expect({"test_burst_allocates_every_free_gpu_once_and_one_more_waits":
                        "FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE"}, select="dra")),
    _dra("mig-no-counters", "the driver publishes the GPUs and their MIG devices without shared counters, in one "
         "slice: both can be allocated",
         DraDriver("mig-no-counters"),
         # the GPUs and their MIG devices published without shared counters: a GPU is allocated beside its MIG device
         expect=Expect({"test_a_mig_device_and_its_parent_gpu_are_never_both_allocated":
                        "FAIL-DRA-MIG-AND-PARENT-ALLOCATED"}, select="mig_device and dra")),
    # The driver healthy, and a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA and on by default since
    # Kubernetes 1.36) that labels every namespace made from now on resource.kubernetes.io/admin-access=true, as a
    # careless namespace template would: any tenant's claim may then ask admin access (kubernetes v1.37.2
    # pkg/registry/resource/utils.go AuthorizedForAdmin reads only that label).
    _dra("admin-access-label", "a MutatingAdmissionPolicy labels every new namespace "
         "resource.kubernetes.io/admin-access=true: any tenant's claim may ask admin access",
         AdminAccessPolicy(),
         # a MutatingAdmissionPolicy labels every new namespace (the run's too) resource.kubernetes.io/admin-access=true
         expect=Expect({"test_an_admin_access_claim_is_refused_in_a_namespace_without_the_label":
                        "FAIL-DRA-ADMIN-ACCESS-GRANTED"}, select="admin_access and dra")),
    # A cluster-scoped DeviceTaintRule (resource.k8s.io/v1 in 1.37, gate DRADeviceTaintRules GA and on; v1beta2 and
    # off by default in 1.36) that withholds the DRA node's last GPU, NoSchedule, as an admin takes a device out of
    # service: the slice is unchanged, but the rule "has the same effect as if the taint was specified directly in
    # the ResourceSlice" (k8s.io/api v0.37.2 resource/v1/types.go DeviceTaintRule).
    _dra("taint-rule", "an admin's DeviceTaintRule withholds the DRA node's last GPU (NoSchedule); the slice is "
         "unchanged",
         ApiObject("taint-rule"),
         # an admin's DeviceTaintRule (resource.k8s.io/v1) withholds the last GPU, NoSchedule; the slice is unchanged:
         # out of service as with device-tainted, so a check needing every device finds one fewer free
         expect=Expect({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, {BUSY},
                       select="dra")),
    # A ResourceSlice of gpu.nvidia.com for the device-plugin node gpu-node-0 (nodeName gpu-node-0, one pool named
    # after it, as NVIDIA's driver publishes) whose devices carry the uuids of that node's GPUs (its hardware.json,
    # the one NVML, GFD and the plugin read): both the device plugin and a GPU DRA driver offer the same GPUs, which
    # the driver's own chart refuses to install (templates/validation.yaml: "cannot be deployed alongside the
    # standard GPU device plugin"), since claims and device-plugin pods can then be handed one GPU. gpu-node-0 stays
    # a device-plugin node (it has nvidia.com/gpu capacity). Made with kubectl, deleted on clear; its kubelet would
    # also delete it when it restarts (kubernetes v1.37.2 pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go
    # wipeResourceSlices: no driver is registered there).
    _dra("offered-twice", f"a gpu.nvidia.com ResourceSlice for the device-plugin node {GPU_NODE} offers its GPUs "
         "(the same uuids) beside its device plugin",
         ApiObject("offered-twice"), node=GPU_NODE,
         # judged on gpu-node-0, which stays a device-plugin node
         expect=Expect({"test_gpu_resource_is_in_node_capacity": "FAIL-GPU-OFFERED-TWICE"},
                       select=f"{GPU_NODE} and capacity")),
)

TABLE: tuple[Fault, ...] = DEVICE_PLUGIN_TABLE + DRA_TABLE
DEVICE_PLUGIN_FAULTS: dict[str, Fault] = {f.name: f for f in DEVICE_PLUGIN_TABLE}  # `cluster.py fault NAME`
DRA_FAULTS: dict[str, Fault] = {f.name: f for f in DRA_TABLE}  # `cluster.py dra fault NAME`
if len({f.name for f in TABLE}) != len(TABLE):
    raise ValueError("fault names must be unique across the table: `fault NAME` and `dra fault NAME` share none")
