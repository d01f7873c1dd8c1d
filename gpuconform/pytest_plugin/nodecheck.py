"""NodeCheck: one check on one GPU node, after the Kubernetes e2e framework's Framework + PodClient. It holds the
node, the run's namespace and id, the typed config, the evidence and the pods it made; its verbs say whether they
wait. `make` is the one factory (the `check` fixture and the scheduler both use it); `close` collects a failed
check's evidence, then deletes its pods."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Iterable, Protocol

import pytest

from gpuconform import counts, discovery, dradevices, nodemode, nodes, pods, probes, timing, verdicts
from gpuconform.allocpath import AllocationPath
from gpuconform.verdicts import rollout
from gpuconform.reasons import EnvironmentProblem, Violation

from .evidence import Evidence
from . import paths
from . import rollout as rollout_io
from .handover import hand_over, raise_for
from .livelog import log
from .podwait import wait_for_pods
from .run import Run


class Turn(Protocol):
    """What the scheduler lets a running check wait for (scheduler.py); `Alone` where checks run one at a time."""

    def take_every_gpu(self) -> None: ...

    def wait_for_rest_of_node(self) -> None: ...


class Alone:
    """pytest's own loop runs one check at a time: nothing to wait for."""

    def take_every_gpu(self) -> None:
        pass

    def wait_for_rest_of_node(self) -> None:
        pass


def make(run: Run, node: str, test: str, turn: Turn | None = None) -> "NodeCheck":
    """The one factory: a check `test` (its pytest node id) on `node`."""
    return NodeCheck(run, node, test, turn or Alone())


def is_failure(exc: BaseException | None) -> bool:
    """A failed check (not a skip or an environment error): its pods may be kept for inspection."""
    return isinstance(exc, (Violation, AssertionError)) or type(exc).__name__ == "Failed"


class NodeCheck:
    def __init__(self, run: Run, node: str, test: str, turn: Turn):
        self.run, self.node, self.test, self.turn = run, node, test, turn
        self.cfg, self.run_id = run.cfg, run.run_id
        self.timeouts = run.cfg.timeouts
        self.evidence = Evidence(run, node, test)
        self.properties: list[tuple[str, Any]] = []  # user properties (JUnit XML, the report)
        self.measurements: dict[str, Any] = {}  # figures the summary keeps (latency samples)
        self.exc: BaseException | None = None  # how the body ended (set by whoever ran it)
        self._pods: dict[str, str] = {}  # pod name -> namespace, in creation order
        self._first: dict[str, str] = {}  # pod name -> its first container (whose log `log` reads)
        self._claims: list[tuple[str, str]] = []  # (namespace, name) of the ResourceClaims it made
        self._closed = False

    # ------------------------------------------------------------ the node (reads, no waiting)

    @property
    def gpu(self) -> nodes.GpuNode:
        return self.run.inventory.node(self.node)

    @property
    def resource(self) -> str:
        return self.gpu.resource

    @property
    def facts(self) -> AllocationPath:
        """The node's allocation path as facts (gpuconform/allocpath.py)."""
        return self.gpu.allocation

    @property
    def path(self) -> paths.DevicePluginPath:
        """The path-specific steps of this check on its node (paths.py): what the node's allocation path reads."""
        return paths.for_check(self)

    def on_its_path(self) -> None:
        """Not checked (NOTCHECKED-DRA-PATH) where the check is not made on the node's path (catalog.py)."""
        why = self.facts.not_made(self.test.split("::")[-1].split("[")[0])
        if why:
            hand_over([verdicts.Finding("NOTCHECKED-DRA-PATH", f"{self.node}: GPUs served by the DRA driver "
                                        f"{self.facts.driver}; {why}")])

    def resource_slices(self) -> list[dict]:
        """The ResourceSlices naming this node now (one field-selected LIST)."""
        return self.run.inventory.resource_slices(self.node)

    def settled_slices(self) -> tuple[list[dict], float]:
        """The node's ResourceSlices once every pool of its GPU driver is complete, or as they are after
        timing.POOL_SETTLE_S (a republish is seen incomplete for a moment); and the seconds waited."""
        start = time.monotonic()
        while True:
            slices = self.resource_slices()
            pools = dradevices.pools(self.facts.driver, slices)
            waited = time.monotonic() - start
            if all(p["have"] == p["want"] for p in pools.values()) or waited >= timing.POOL_SETTLE_S \
                    or self.run.cancelled.is_set():
                return slices, waited
            time.sleep(timing.POOL_READ_EVERY_S)

    def offered_twice(self, node_obj: dict, resources: list[str]) -> tuple[list[verdicts.Finding], dict]:
        """On a device-plugin node: whether a GPU DRA driver publishes its GPUs as well (verdicts.dra
        offered_twice_findings), from the slice watch (no request); where the slices are not watched, not checked
        (said in the evidence)."""
        slices = self.run.inventory.watched_slices(self.node)
        if slices is None:
            return [], {"not checked": "ResourceSlices are not watched (list/watch resourceslices not granted)"}
        found: list[verdicts.Finding] = []
        ev: dict = {}
        for driver in nodemode.GPU_DRA_DRIVERS.get(self.cfg.get("vendor"), ()):
            f, e = verdicts.dra.offered_twice_findings(node_obj, resources, driver, slices)
            found, ev = found + f, {**ev, **e}
        return found, ev

    def taint_rules(self) -> list[dict]:
        """The cluster's DeviceTaintRules now (from the inventory's watch; [] where not readable)."""
        return self.run.inventory.taint_rules()

    def _claim(self, gpus: int) -> str:
        """Where pods ask by claim, the run's ResourceClaimTemplate for `gpus` devices of the node's class; else ''."""
        if not (self.facts.by_claim and gpus):
            return ""
        return self.run.spaces.ensure_claim_template(self.namespace(), self.facts.device_class, gpus)

    def node_object(self) -> dict:
        return self.run.inventory.refresh_node(self.node)

    def expectation(self, node_obj: dict | None = None) -> counts.Expectation:
        return self.run.inventory.expectation(self.node, node_obj)

    def workload_expectation(self) -> counts.Expectation:
        """What one device the workload checks ask for is (Expectation.unit, per_device): on the device-plugin path
        the node's labels say; on a DRA node it is one device of its DeviceClass for one claim, a MIG device where
        that is a MIG class (GPUs in MIG mode) and a whole GPU otherwise, whatever MIG or sharing labels the node
        carries (they describe no resource a claim asks for)."""
        exp, f = self.expectation(), self.facts
        if not f.by_claim:
            return exp
        return dataclasses.replace(exp, mig_strategy="single" if f.mig else "none", replicas=1, mig_replicas={},
                                   mig_profiles={}, whole_gpus_too=False)

    def plugin(self) -> discovery.Found:
        return self.run.inventory.find_plugin(self.node)

    def pods_on_node(self) -> list[dict]:
        return self.run.inventory.pods_on_node(self.node)

    def granted(self, permission: str) -> bool:
        return self.run.optional.get(permission, False)

    def kubelet_config(self, required: bool = False) -> dict | None:
        """The kubelet's configz (None where it cannot be read; NOTCHECKED-OPTIONAL saying why when `required`)."""
        return self._kubelet("configz", self.run.kubelet.config(self.node), required)

    def kubelet_metrics(self, required: bool = False) -> list | None:
        """The kubelet's /metrics samples (None where they cannot be read; NOTCHECKED-OPTIONAL saying why when
        `required`)."""
        return self._kubelet("metrics", self.run.kubelet.metrics(self.node), required)

    def _kubelet(self, path: str, got: Any, required: bool) -> Any:
        how = self.run.kubelet.how_read(self.node, path)
        self.note(f"kubelet {path}", how)  # how it was read (the kubelet's port, the node proxy) or why not
        if required:
            self.needs(got is not None, f"kubelet {path} not checked: {how.removeprefix('not read: ')}")
        return got

    # ------------------------------------------------------------ outcomes (raise or return)

    def hand_over(self, findings: Iterable[verdicts.Finding]) -> None:
        __tracebackhide__ = True
        hand_over(findings)

    def needs(self, ok: bool, why: str) -> None:
        """Not checked (NOTCHECKED-OPTIONAL, with `why`) unless `ok`."""
        hand_over(verdicts.not_checked(ok, why))

    def needs_nvidia_tooling(self, what: str) -> None:
        """Not checked on other vendors: the check's in-pod evidence comes from NVIDIA tooling."""
        hand_over(verdicts.nvidia_tooling(self.cfg.get("vendor"), what))

    def needs_usable_node(self) -> None:
        """Skipped (SKIP-NODE-NOT-READY) on a NotReady or cordoned node."""
        hand_over(verdicts.unusable(self.gpu, 0))

    def needs_free_gpus(self, need: int, beside_run_long: bool = False) -> int:
        """Skipped on a NotReady or cordoned node, or one with fewer than `need` free devices (SKIP-F07-BUSY).
        Returns the free count; `beside_run_long`: with the devices of the suite's own run-long pods counted as
        free (they hold a device but no exclusive CPU: they fragment nothing)."""
        hand_over(verdicts.unusable(self.gpu, need))
        node, on_node = self.node_object(), self.pods_on_node()
        hand_over(verdicts.busy(self.gpu, self.run.inventory.free_among(self.node, on_node, node), need))
        if not beside_run_long:
            return self.run.inventory.free_among(self.node, on_node, node)
        return self.run.inventory.free_among(self.node, on_node, node,
                                             ignore=[p for p in on_node if pods.is_run_long(p, self.run_id)])

    def freed_since(self, free: int, ours: list[str]) -> int:
        """Devices released since the node had `free` free by pods other than the run's pods `ours` (counted free):
        another team's churn during a burst."""
        node, on_node = self.node_object(), self.pods_on_node()
        mine = [p for p in on_node if p["metadata"]["name"] in ours
                and (p["metadata"].get("labels") or {}).get(pods.RUN_LABEL) == self.run_id]
        return max(0, self.run.inventory.free_among(self.node, on_node, node, ignore=mine) - free)

    def note(self, key: str, value: Any) -> None:
        """Evidence, shown when the check fails."""
        self.evidence.note(key, value)

    def record(self, key: str, value: Any) -> None:
        """A user property on the check's result, also on a pass (the audit trail)."""
        self.properties.append((key, value))

    def measure(self, key: str, value: Any) -> None:
        """A figure the run's summary keeps (the latency sample)."""
        self.measurements[key] = value

    # ------------------------------------------------------------ pods (no waiting)

    def namespace(self, privileged: bool = False) -> str:
        return self.run.spaces.ensure(privileged)

    def pod_name(self, *tag: object) -> str:
        return pods.pod_name(*tag, self.node)

    def probe_pod(self, tag: str, role: str, gpus: int, **kw: Any) -> dict:
        """The probe (pods.probe_pod) on this node in the run's namespace, bounded by timeouts.podComplete."""
        kw.setdefault("deadline", self.timeouts.pod_complete)
        if gpus:
            kw.setdefault("resource", self.resource)
            kw.setdefault("claim_template", self._claim(gpus))
        return pods.probe_pod(self.pod_name(tag), self.namespace(), self.run_id, role, self.node, self.cfg, gpus, **kw)

    def vector_add_pod(self) -> dict:
        """The CUDA sample for one GPU. On dra-extended-resource it requests the extended resource name, as the
        workloads that never name a claim do (the scheduler makes the claim: KEP-5004), not a claim template."""
        extended = self.facts.resource if self.facts.by_claim else ""
        return pods.vector_add_pod(self.pod_name("vectoradd"), self.namespace(), self.run_id, self.node, self.cfg,
                                   self.timeouts.pod_complete, extended or self.resource,
                                   "" if extended else self._claim(1))

    def run_long_pod(self, tag: str, role: str) -> dict:
        return pods.run_long_pod(self.pod_name(tag), self.namespace(), self.run_id, role, self.node, self.cfg,
                                 self.resource, claim_template=self._claim(1))

    def socket_probe_pod(self) -> dict:
        return pods.socket_probe_pod(self.pod_name("socket"), self.namespace(privileged=True), self.run_id,
                                     self.node, self.cfg, self.timeouts.pod_complete,
                                     self.facts.registry_dir, recursive=self.host_mounts())

    def has_checkpoint(self) -> bool:
        """Whether the kubelet keeps a device checkpoint here for the node probe to mount (a single-file hostPath of
        type File, which a missing file leaves Pending for good): a device plugin's node whose kubelet holds a device
        of its resource (it writes the checkpoint with every device list a plugin sends it). Not on a DRA node, nor
        where the resource is absent or 0 (never registered since the kubelet's state was wiped): there the probe
        reports no checkpoint."""
        if self.facts.by_claim:
            return False
        node = self.node_object()
        return any((counts.advertised(node, r)[0] or 0) > 0 for r in self.expectation(node).resources)

    def host_mounts(self) -> str:
        """How the host readers mount on this node: recursively read-only where its runtime reports it can
        (pods.recursive_read_only), noted in the evidence where it cannot."""
        mode = pods.recursive_read_only(self.node_object())
        if mode != pods.RRO_ENABLED:
            self.note("host path mounts", "the node's runtime reports no recursiveReadOnlyMounts "
                      "(status.runtimeHandlers): mounted read-only, submounts not (recursiveReadOnly IfPossible)")
        return mode

    def start(self, manifest: dict) -> str:
        """Creates the pod (this check's: deleted when it ends, shown in its evidence) and returns its name. A
        creation refused for a reason that is a verdict (no RuntimeClass) raises it."""
        self.run.hung.raise_if_hung(self.node)
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            self.run.spaces.create_pod(manifest)
        except EnvironmentProblem as e:
            refused = verdicts.creation_refused(name, self.node, e.message, pods.mounts_if_possible(manifest))
            if refused is None:
                raise
            raise_for(refused.code, refused.message)
        self._pods[name] = ns
        self._first[name] = manifest["spec"]["containers"][0]["name"]
        self.evidence.pod(ns, name, self._first[name])
        return name

    def claims_of(self, name: str) -> list[dict]:
        """The ResourceClaims of one of this check's pods as they are now (the names its status records,
        status.resourceClaimStatuses and extendedResourceClaimStatus; one GET each): a DRA pod's allocation, as the scheduler wrote it."""
        return self.claims_of_pod(self.pod_state(name) or {}, self._pods[name])

    def claims_of_pod(self, obj: dict, namespace: str = "") -> list[dict]:
        """claims_of for a pod object of the run (its namespace is one of the run's: the suite reads claims there
        only)."""
        ns, status = namespace or (obj.get("metadata") or {}).get("namespace", ""), obj.get("status") or {}
        refs = [r.get("resourceClaimName") for r in status.get("resourceClaimStatuses") or []]
        # the claim the scheduler made for an extended resource a DRA driver serves (KEP-5004; k8s.io/api v0.37.2
        # core/v1 PodExtendedResourceClaimStatus)
        refs.append((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"))
        return [c for c in (self.run.spaces.read_claim(ns, r) for r in refs if r) if c is not None]

    def run_pods_on_node(self) -> dict[str, dict]:
        """The run's own pods on the node now, every check's (one field-selected LIST): name -> pod object. Only
        those in the run's namespaces: another team's pod may copy the run's label, not its namespace."""
        mine = set(self.run.spaces.names)
        return {p["metadata"]["name"]: p for p in self.pods_on_node()
                if (p.get("metadata") or {}).get("namespace") in mine
                and ((p.get("metadata") or {}).get("labels") or {}).get(pods.RUN_LABEL) == self.run_id}

    def shared_claim(self, tag: str, gpus: int = 1, device_class: str = "", selector: str = "") -> str:
        """A ResourceClaim for `gpus` devices of the node's DeviceClass (or `device_class`; devices satisfying the
        CEL `selector`, if any) that this check's pods name (probe_pod(..., claim_name=...)); deleted when the
        check ends. Returns its name."""
        ns, name = self.namespace(), self.pod_name(tag)
        self.run.spaces.create_claim(ns, device_class or self.facts.device_class, gpus, name, selector)
        self._claims.append((ns, name))
        return name

    def claim(self, name: str) -> dict | None:
        """One of this check's claims as it is now (None: deleted)."""
        return self.run.spaces.read_claim(self.namespace(), name)

    def admin_access_trial(self) -> tuple[dict, dict[str, str]]:
        """The API server's answer to a ResourceClaim asking admin access to the node's DeviceClass in the run's
        namespace (a server-side dry run; once per run and class: namespaces.py admin_access_trial), and that
        namespace's labels as stored."""
        ns = self.namespace()
        return self.run.spaces.admin_access_trial(ns, self.facts.device_class), self.run.spaces.labels.get(ns, {})

    def end(self, *names: str) -> None:
        """Deletes these pods of the check now (they end; their devices are to be released)."""
        for name in names:
            self.run.spaces.delete_pod(self._pods[name], name)

    def wait_claim(self, name: str, until: Callable[[dict | None], bool], within_s: float) -> tuple[dict | None, float]:
        """The claim once `until` holds for it (None: deleted), or as it is after `within_s`; and the seconds waited."""
        start = time.monotonic()
        while True:
            c = self.claim(name)
            waited = time.monotonic() - start
            if until(c) or waited >= within_s or self.run.cancelled.is_set():
                return c, waited
            time.sleep(timing.CLAIM_POLL_S)

    def log(self, name: str, tail: int | None = None, container: str | None = None) -> str:
        """A pod's log: its first container's, or `container`'s."""
        return self.run.spaces.pod_log(self._pods[name], name, container=container or self._first[name], tail=tail)

    def plugin_logs(self, tail: int, timestamps: bool = False) -> list[str] | None:
        """The logs of the node's plugin or driver pods (evidence: which devices it marked unhealthy, and when);
        None, noted, where they may not be read: the suite reads other namespaces' logs only where an administrator
        granted it (manifests/rbac-plugin-logs.yaml)."""
        pods_ = self.plugin().pods
        logs = [self.run.spaces.readable_log(p["metadata"]["namespace"], p["metadata"]["name"], tail, timestamps)
                for p in pods_]
        if None in logs:
            self.note("plugin log", "not readable: " + ", ".join(
                f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p, t in zip(pods_, logs) if t is None)
                + " (manifests/rbac-plugin-logs.yaml grants it in the plugin's namespace)")
            return None
        return logs  # type: ignore[return-value]

    def pod_state(self, name: str) -> dict | None:
        """The pod as the run's pod watch last saw it."""
        return self.run.spaces.pod_watch(self._pods[name]).get(name)

    def events(self, name: str) -> list[dict]:
        return self.run.spaces.events_for(self._pods[name], name)

    # ------------------------------------------------------------ verbs that wait

    def wait_running(self, *names: str, allow: tuple[str, ...] = ()) -> dict[str, dict]:
        """Until every pod is Running or done (timeouts.podStart); a pod's known problem raises its verdict
        unless its code is in `allow`."""
        return self._wait(names, "running", "pod_start", allow)

    def wait_done(self, *names: str, allow: tuple[str, ...] = ()) -> dict[str, dict]:
        """Until every pod has ended (timeouts.podComplete)."""
        return self._wait(names, "done", "pod_complete", allow)

    def run_to_completion(self, manifest: dict, allow: tuple[str, ...] = ()) -> tuple[str, dict]:
        """start + wait_done for one pod: its name and final state."""
        name = self.start(manifest)
        return name, self.wait_done(name, allow=allow)[name]

    def _wait(self, names: tuple[str, ...], until: str, timeout: str, allow: tuple[str, ...]) -> dict[str, dict]:
        if not names:
            return {}
        spaces = {self._pods[n] for n in names}
        if len(spaces) != 1:
            raise ValueError(f"one wait covers pods of one namespace, got {sorted(spaces)}")
        return wait_for_pods(self.run, self.node, spaces.pop(), list(names), until, timeout, allow, self.test)

    def log_until(self, name: str, until: Callable[[str], bool] = lambda text: "== end ==" in text,
                  tail: int | None = None, deadline_s: float = timing.LOG_READ_TIMEOUT_S,
                  every_s: float = timing.LOG_READ_EVERY_S) -> str:
        """A Running probe prints, then sleeps: its log (its last `tail` lines) once `until` holds (by default the
        end marker), or as it is after `deadline_s`, read every `every_s`."""
        end = time.monotonic() + deadline_s
        while True:
            text = self.log(name, tail=tail)
            if until(text) or time.monotonic() > end:
                return text
            time.sleep(every_s)

    def round_after(self, name: str, tail: int) -> tuple[int, str] | None:
        """The first complete round of the repeating probe `name` that began after this call (probes.begun: by
        the rounds' numbers, not by a clock), as (number, text); None where none came: the pod ended (an image
        whose probe cannot repeat, its time up) or printed none within the log-read timeout. Reads its last `tail`
        lines only: a repeating probe's log grows all run. The pod must have started (its log readable)."""
        seen = probes.begun(self.log(name, tail=tail))

        def new_round(text: str) -> bool:
            return any(n > seen for n, _ in probes.rounds(text)) or pods.is_terminal(self.pod_state(name) or {})

        text = self.log_until(name, new_round, tail=tail, every_s=timing.ROUND_READ_EVERY_S)
        return next(((n, body) for n, body in probes.rounds(text) if n > seen), None)

    def start_probe(self, tag: str, every_s: float) -> str:
        """Starts the node probe here repeating its report every `every_s` (pods.node_probe_pod) and returns the
        pod's name; read it with probe_round_after."""
        hand_over(self.probe_off())
        return self.start(pods.node_probe_pod(self.pod_name("nodeprobe", tag), self.namespace(privileged=True),
                                              self.run_id, self.node, self.cfg, timing.RUN_HOLD_DEADLINE_S,
                                              recursive=self.host_mounts(), checkpoint=self.has_checkpoint(),
                                              every_s=every_s))

    def probe_round_after(self, name: str) -> dict | None:
        """The report of the repeating node probe `name`'s first round that began after this call; None where it
        gave none (round_after)."""
        self.wait_running(name)
        got = self.round_after(name, tail=timing.PROBE_ROUND_TAIL_LINES)
        if got is None:
            return None
        self.note("node probe report", f"round {got[0]}: {got[1].strip()[:2000]}")
        return verdicts.probe_report(got[1])[0]

    def probe(self, tag: str, required: bool = True) -> dict:
        """Runs the node probe (gpuconform/nodeprobe.py) here and returns its report. Not checked when the probe
        may not run or printed no report; `required=False`: a missing report gives {} instead."""
        hand_over(self.probe_off())  # before any namespace is made
        ns = self.namespace(privileged=True)
        name, _ = self.run_to_completion(pods.node_probe_pod(self.pod_name("nodeprobe", tag), ns, self.run_id,
                                                             self.node, self.cfg, self.timeouts.pod_complete,
                                                             recursive=self.host_mounts(),
                                                             checkpoint=self.has_checkpoint()))
        text = self.log(name)
        report, problems = verdicts.probe_report(text)
        self.note("node probe report", report or text[-2000:])
        if report and not (report.get("pci") or {}).get("error"):
            self.run.pci_seen[self.node] = report["pci"]
        if not required:
            return report or {}
        hand_over(problems)
        return report  # type: ignore[return-value]

    def pci_report(self, tag: str) -> dict:
        """A node probe report holding the node's PCI tree: the one a check of this run already read (the hardware
        does not change within a run: one probe pod fewer), else a new probe's (`tag`)."""
        hand_over(self.probe_off())
        seen = self.run.pci_seen.get(self.node)
        if seen is not None:
            self.note("PCI tree", "as the node probe of an earlier check of this run read it")
            return {"pci": seen}
        return self.probe(tag)

    def probe_off(self) -> list[verdicts.Finding]:
        """Not checked when the node probe may not run: nodeProbe.enabled is off, or images.nodeProbe is not set
        (fail closed: no default image runs as root beside the kubelet's sockets)."""
        return (verdicts.not_checked(self.cfg.get("nodeProbe.enabled"), "nodeProbe.enabled is false: the kubelet's "
                                     "record and the PCI hardware are not checked")
                or verdicts.not_checked(bool(self.cfg.get("images.nodeProbe")), pods.NODE_PROBE_IMAGE_UNSET))

    def node_status_caught_up(self, agrees: Callable[[dict], bool]) -> tuple[dict, float]:
        """The node object once `agrees(node object)`, or as it is after one kubelet node-status period and 5 s of
        slack, and the seconds waited. The node watch serves the polls: no requests while it is healthy."""
        obj = self.node_object()
        if agrees(obj):
            return obj, 0.0
        limit = verdicts.status_update_s(self.kubelet_config()) + 5.0
        log(f"{self.node}: the node object disagrees with the kubelet's record; waiting up to {limit:.0f}s for its "
            "next node status update")
        start = time.monotonic()
        while time.monotonic() - start < limit:
            time.sleep(0.5)
            obj = self.node_object()
            if agrees(obj):
                break
        return obj, time.monotonic() - start

    def take_every_gpu(self) -> None:
        """From now on this check needs every free device of the node: waits until the node's other GPU checks
        are done (latency: single samples beside other checks, then its burst alone)."""
        self.turn.take_every_gpu()

    def rehearse_rollout(self) -> "rollout.Rollout":
        """The rollout rehearsal on this node (gpuconform/pytest_plugin/rollout.py): what it saw."""
        return rollout_io.Rehearsal(self).run()

    def wait_for_rest_of_node(self) -> None:
        """Returns once every other check on the node is done (a spans_run check)."""
        self.turn.wait_for_rest_of_node()

    # ------------------------------------------------------------ the end

    def close(self) -> None:
        """Once: a failed or erred check's evidence is collected while its pods exist, then the pods are deleted
        (a failed check's stay for inspection under keepNamespaceOnFailure)."""
        if self._closed:
            return
        self._closed = True
        if self.exc is not None and not isinstance(self.exc, pytest.skip.Exception):
            self.evidence.collect()
        if bool(self.cfg.get("keepNamespaceOnFailure")) and is_failure(self.exc):
            return
        for name, ns in self._pods.items():
            try:
                self.run.spaces.delete_pod(ns, name)
            except Exception:  # noqa: BLE001 - the namespace deletion at the end removes it anyway
                pass
        for ns, name in self._claims:
            try:
                self.run.spaces.delete_claim(ns, name)
            except Exception:  # noqa: BLE001 - likewise
                pass
