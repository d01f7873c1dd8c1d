"""The rollout rehearsal's I/O (rollout.mode; docs/rollout.md): on one node, hold a pod on every free device but
one, start or wait for the rollout of the DaemonSet that runs the node's plugin (or DRA driver), and read the node
twice a second until a new plugin pod is Ready there and the node offers its devices again, sending a small GPU
pod at the last device every rollout.probeEvery and one more once the rollout has passed the node (each must run
on a GPU no held pod has); the kubelet's start time is read before and after, and the held pods' records after.
What it read becomes a `Rollout`; the verdict is gpuconform/verdicts/rollout.py's.

`restart` rolls a DaemonSet once for every node it runs on: the first node held waits (up to ROLLOUT_GATE_S) for
the others of the run to be held too (`Gate`), then restarts it as `kubectl rollout restart` does."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable

from gpuconform import kube, latency, probes, verdicts
from gpuconform.cleanup import parse_time
from gpuconform.discovery import controller_of
from gpuconform.nodes import condition
from gpuconform.probes import exclusive_ids
from gpuconform.timing import PROGRESS_EVERY_S
from gpuconform.verdicts.allocation import Seen
from gpuconform.verdicts.common import Finding
from gpuconform.verdicts.rollout import ENDING, NOT_READY, READY, Held, Probe, Rollout, Sample, probe_outcome

from .handover import hand_over
from .livelog import log

if TYPE_CHECKING:
    from .nodecheck import NodeCheck

# How long a held node waits for the run's other rehearsed nodes to be held before a `restart` begins (nodes beyond
# limits.concurrency start later: they report that the rollout passed them before they were held).
ROLLOUT_GATE_S = 120.0
# kubectl rollout restart's annotation (k8s.io/kubectl pkg/polymorphichelpers/objectrestarter.go)
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
SAMPLE_EVERY_S = 0.5  # a DRA driver without seamless upgrade leaves the node without slices for ~2 s


class Gate:
    """Starts each DaemonSet's restart once, when every rehearsed node of the run is held (or gone), or after a
    bound. One per run."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.expected = 0
        self.arrived: set[str] = set()
        self.started: set[str] = set()

    def expect(self, nodes: int) -> None:
        with self.cond:
            self.expected = nodes

    def leave(self, node: str) -> None:
        """The node's rehearsal ended (or never got as far as holding its devices)."""
        with self.cond:
            self.arrived.add(node)
            self.cond.notify_all()

    def arrive(self, key: str, node: str, start: Callable[[], None], wait_s: float,
               cancelled: threading.Event) -> bool:
        """`node` is held: waits for the others, then runs `start` once per `key`. False: `key`'s rollout had
        already started before this node was held."""
        with self.cond:
            if key in self.started:
                return False
            self.arrived.add(node)
            self.cond.notify_all()
            self.cond.wait_for(lambda: key in self.started or len(self.arrived) >= self.expected
                               or cancelled.is_set(), timeout=wait_s)
            if key not in self.started:
                start()
                self.started.add(key)
                self.cond.notify_all()
            return True


def _ready(pod: dict) -> bool:
    return condition(pod, "Ready") == "True"


def _state(pod: dict) -> str:
    return ENDING if (pod.get("metadata") or {}).get("deletionTimestamp") else READY if _ready(pod) else NOT_READY


def _ready_at(pod: dict) -> datetime | None:
    c = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    return parse_time(c.get("lastTransitionTime")) if c and c.get("status") == "True" else None


def _asked_to_end(pod: dict) -> datetime | None:
    """When the pod's deletion was asked for: its deletionTimestamp is that moment plus the grace period."""
    m = pod.get("metadata") or {}
    d = parse_time(m.get("deletionTimestamp"))
    return d - timedelta(seconds=m.get("deletionGracePeriodSeconds") or 0) if d else None


class Rehearsal:
    """One node's rehearsal (NodeCheck.rehearse_rollout)."""

    def __init__(self, check: "NodeCheck"):
        self.c = check
        self.cfg = check.cfg
        self.mode = self.cfg.get("rollout.mode")
        self.timeout = self.cfg.seconds("rollout.timeout")
        self.every = self.cfg.seconds("rollout.probeEvery")
        self.deleted: dict[str, datetime] = {}  # old plugin pod -> when its deletion was asked for

    # ------------------------------------------------------------ reads

    def daemonset(self) -> dict:
        """The DaemonSet to roll: rollout.daemonSet, else the one owning the node's plugin pod."""
        c, named = self.c, self.cfg.get("rollout.daemonSet")
        if named:
            ns, name = named.split("/")
        else:
            found = c.plugin()
            owners = [(p["metadata"]["namespace"], controller_of(p).get("name")) for p in found.pods
                      if controller_of(p).get("kind") == "DaemonSet"]
            hand_over([] if owners else [Finding("FAIL-F08-PLUGIN-NOT-READY", (
                f"{c.node}: no plugin pod owned by a DaemonSet on the node ({found.why or 'none found'}): nothing to "
                f"roll; name one with rollout.daemonSet"))])
            ns, name = owners[0]
        return self.daemonset_now(ns, name)

    def daemonset_now(self, ns: str, name: str) -> dict:
        c = self.c
        with kube.calling(f"reading DaemonSet {ns}/{name}"):
            return kube.to_dict(c.run.cluster.api, c.run.cluster.apps.read_namespaced_daemon_set(
                name, ns, _request_timeout=c.run.cluster.request_timeout))

    def plugin_pods(self, uid: str) -> list[dict]:
        return [p for p in self.c.pods_on_node() if controller_of(p).get("uid") == uid]

    def kubelet_started(self) -> float | None:
        """The kubelet's process start time from its /metrics (None where the kubelet cannot be read): read before
        and after the rollout, it tells whether the kubelet restarted meanwhile."""
        samples = self.c.run.kubelet.metrics(self.c.node)
        return None if samples is None else verdicts.kubelet_started(samples)

    def in_service(self) -> int | None:
        """Devices the node offers in service now (path.offered: capacity or published, less out of service)."""
        o = self.c.path.offered(at_end=False)
        return None if o.count is None else o.count - o.out_of_service

    # ------------------------------------------------------------ acts

    def restart(self, ns: str, name: str) -> None:
        c = self.c
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        log(f"rollout: restarting DaemonSet {ns}/{name} (as kubectl rollout restart)")
        with kube.calling(f"restarting DaemonSet {ns}/{name} (rollout.mode=restart needs "
                          f"manifests/rbac-rollout.yaml)"):
            c.run.cluster.apps.patch_namespaced_daemon_set(
                name, ns, {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}},
                _request_timeout=c.run.cluster.request_timeout)

    def note_deletions(self, r: Rollout, pods: list[dict]) -> None:
        for p in pods:
            if p["metadata"]["name"] in r.old_pods and (d := _asked_to_end(p)):
                self.deleted.setdefault(p["metadata"]["name"], d)

    def wait_for_change(self, r: Rollout, uid: str, ns: str, name: str, generation: int) -> bool:
        """observe: until the DaemonSet's generation moves on (rollout.timeout); progress lines meanwhile."""
        c, t0 = self.c, time.monotonic()
        nxt = t0
        while time.monotonic() - t0 < self.timeout and not c.run.cancelled.is_set():
            self.note_deletions(r, self.plugin_pods(uid))
            with kube.calling(f"reading DaemonSet {ns}/{name}"):
                ds = c.run.cluster.apps.read_namespaced_daemon_set(name, ns,
                                                                   _request_timeout=c.run.cluster.request_timeout)
            if (ds.metadata.generation or 0) != generation:
                return True
            if time.monotonic() >= nxt:
                log(f"{c.node}: holding its GPUs, waiting for DaemonSet {ns}/{name} to change (generation "
                    f"{generation}): start the upgrade now ({time.monotonic() - t0:.0f}s of "
                    f"{self.timeout:.0f}s)")
                nxt = time.monotonic() + PROGRESS_EVERY_S
            c.run.cancelled.wait(SAMPLE_EVERY_S)  # the rollout's first moments are its window's
        return False

    # ------------------------------------------------------------ the rehearsal

    def run(self) -> Rollout:
        """The rehearsal (the scheduler tells the Gate when the check ends, however it ends)."""
        c = self.c
        ds = self.daemonset()
        ns, name, uid = ds["metadata"]["namespace"], ds["metadata"]["name"], ds["metadata"]["uid"]
        key = f"{ns}/{name}"
        free = c.needs_free_gpus(1)
        hold = free - 1 if free >= 2 else free  # the last device takes the probe pods
        held = [c.start(c.run_long_pod(f"hold{i}", "rollout")) for i in range(hold)]
        c.wait_running(*held)
        for h in held:
            c.log_until(h, until=lambda text: bool(probes.rounds(text)))
        old = self.plugin_pods(uid)
        r = Rollout(c.node, key, self.mode, self.in_service(), tuple(p["metadata"]["name"] for p in old))
        c.note("before the rollout", {"daemonset": key, "generation": ds["metadata"].get("generation"),
                                      "updateStrategy": (ds.get("spec") or {}).get("updateStrategy"),
                                      "plugin pods": list(r.old_pods), "devices in service": r.before,
                                      "held pods": held, "probe pods": "one at a time" if free >= 2 else "none"})
        log(f"{c.node}: holding {hold} GPU(s) for the rollout rehearsal of DaemonSet {key} ({self.mode})")
        started = self.kubelet_started()
        if self.mode == "restart":
            fresh = c.run.rollout_gate.arrive(key, c.node, lambda: self.restart(ns, name), ROLLOUT_GATE_S,
                                              c.run.cancelled)
            if not fresh:
                r.seen = False
                hand_over([Finding("ERROR-ROLLOUT-NOT-SEEN", f"{c.node}: the restart of DaemonSet {key} had begun "
                                   f"before this node's devices were held (more rehearsed nodes than "
                                   f"limits.concurrency {self.cfg.get('limits.concurrency')})")])
        else:
            generation = self.daemonset_now(ns, name)["metadata"].get("generation") or 0
            if generation != ds["metadata"].get("generation"):  # it changed while the node was being held
                hand_over([Finding("ERROR-ROLLOUT-NOT-SEEN", f"{c.node}: DaemonSet {key} changed (generation "
                                   f"{ds['metadata'].get('generation')} -> {generation}) before this node's devices "
                                   f"were held: start the upgrade once the run says it is holding the node")])
            if not self.wait_for_change(r, uid, ns, name, generation):
                r.seen = False
                return r
        self.watch(r, uid, probe=free >= 2)
        r.held = [self.held(h) for h in held]
        r.kubelet_started = (started, self.kubelet_started())
        r.records, r.offered_ids = c.path.held_records(held) or (None, None)
        # the node's other checks judge the new version: the kubelet counters they compare with (registrations,
        # its start time) are read again, now that the rollout has passed the node
        c.run.kubelet.read_start_counters([c.node], lambda _: True, lambda n: c.run.inventory.expectations[n].resources)
        return r

    def watch(self, r: Rollout, uid: str, probe: bool) -> None:
        """Samples the node until the rollout has passed it (a new plugin pod Ready, no old one left, the devices
        in service again, then one node-status period more: a device plugin's node posts a change late), or
        rollout.timeout."""
        c = self.c
        t0 = time.monotonic()
        settle = (verdicts.status_update_s(c.kubelet_config()) if not c.facts.by_claim else 2.0) + 2.0
        passed_at: float | None = None
        live: tuple[str, float] | None = None
        next_probe, n, nxt_log = 0.0, 0, t0 + PROGRESS_EVERY_S
        after = False  # the probe pod that meets the new version, once the rollout has passed the node
        while not c.run.cancelled.is_set():
            t = time.monotonic() - t0
            pods = self.plugin_pods(uid)
            self.note_deletions(r, pods)
            offered = self.in_service()
            r.samples.append(Sample(round(t, 1), offered, tuple((p["metadata"]["name"], _state(p)) for p in pods),
                                    c.path.slices_now()))
            new = [p for p in pods if p["metadata"]["name"] not in r.old_pods and _ready(p)]
            if new and not r.new_pod:
                r.new_pod = new[0]["metadata"]["name"]
                # from the old pod's deletion; none with an old pod still serving (a surge: no hand-over gap); an
                # old pod that ended between two samples left no deletion time, and then (no surge: the new pod is
                # made once the old one is gone) from the new one's creation
                ready, gone = _ready_at(new[0]), min(self.deleted.values(), default=None)
                if not gone and any(p["metadata"]["name"] in r.old_pods for p in pods):
                    r.handover_s, r.handover_from = 0.0, "old pod still serving"
                else:
                    r.handover_from = "old pod asked to end" if gone else "new pod created"
                    gone = gone or parse_time(new[0]["metadata"].get("creationTimestamp"))
                    r.handover_s = (ready - gone).total_seconds() if ready and gone else None
            fresh = [p for p in pods if p["metadata"]["name"] not in r.old_pods]
            r.new_pod_state = kube.describe(fresh[-1]) if fresh else ""
            back = r.before is None or (offered is not None and offered >= r.before)
            if new and back and not any(p["metadata"]["name"] in r.old_pods for p in pods):
                passed_at = passed_at if passed_at is not None else t
            else:
                passed_at = None
            out_of_time = t > self.timeout
            r.timed_out = out_of_time and passed_at is None
            closing = out_of_time or (passed_at is not None and t - passed_at >= settle)
            if probe:  # while it rolls, then one more once it has passed the node (none once out of time)
                was = n
                live, next_probe, n = self.probe_step(r, live, t, next_probe, n, t0,
                                                      start=not out_of_time and (passed_at is None or not after),
                                                      now=passed_at is not None, stop=out_of_time)
                after = after or (passed_at is not None and n > was)
            if closing and live is None:
                break
            if time.monotonic() >= nxt_log:
                shown = ", ".join(f"{a} ({b})" for a, b in r.samples[-1].plugin_pods)
                log(f"{c.node}: rollout {t:.0f}s: {offered} device(s) in service (before: {r.before}), plugin pods "
                    f"{shown or 'none'}")
                nxt_log = time.monotonic() + PROGRESS_EVERY_S
            c.run.cancelled.wait(SAMPLE_EVERY_S)

    def probe_step(self, r: Rollout, live: tuple[str, float] | None, t: float, next_probe: float, n: int,
                   t0: float, start: bool, now: bool, stop: bool) -> tuple[tuple[str, float] | None, float, int]:
        """One probe pod at a time: record the live one once it has an outcome (one that ran: once it has printed
        its device check and ended), or as pending when the rehearsal ran out of time (and end it); start the next
        when its time has come (or `now`) and `start`."""
        c = self.c
        if live is not None:
            name, created = live
            state = c.pod_state(name) or {}
            outcome, reason, message = probe_outcome(state)
            ended = (state.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if (outcome != "pending" and (outcome != "ran" or ended)) or stop:
                gpus = exclusive_ids(Seen.from_log(name, 1, c.log(name)).gpus) if outcome == "ran" else []
                r.probes.append(Probe(name, round(created, 1), outcome, reason, message, self.pending_s(state),
                                      tuple(sorted(set(gpus)))))
                c.end(name)
                live = None
        if live is None and (t >= next_probe or now) and start:
            n += 1
            live = (c.start(c.probe_pod(f"roll{n}", "rollout", 1)), round(time.monotonic() - t0, 1))
            next_probe = t + self.every
        return live, next_probe, n

    @staticmethod
    def pending_s(pod: dict) -> float | None:
        """Creation to the container's start, from the pod's own timestamps (latency.pod_times): the API server's
        clock to the node's, so a node clock behind the server's gives a negative figure, shown as it is, never
        clamped (the latency check names such skew: ERROR-CLOCK-SKEW)."""
        if not (pod.get("metadata") or {}).get("creationTimestamp"):
            return None
        return latency.pod_times(pod, []).phase("start")

    def held(self, name: str) -> Held:
        c = self.c
        rounds = tuple((n, Seen.from_log(name, 1, text)) for n, text in probes.rounds(c.log(name)))
        state = c.pod_state(name) or {}
        return Held(name, rounds, (state.get("status") or {}).get("phase") == "Running"
                    and not (state.get("metadata") or {}).get("deletionTimestamp"))
