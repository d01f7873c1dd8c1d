"""Waiting on a check's pods: re-judged on every change the run's shared pod watch reports (gpuconform/waits.py
decides; this only reads and acts), a live line while it takes long, one timeout per hung node."""

from __future__ import annotations

import time

from gpuconform import kube, pods, timing, verdicts, waits
from gpuconform.config import Timeouts
from gpuconform.reasons import EnvironmentProblem

from .handover import raise_for
from .livelog import log
from .run import Run


def wait_for_pods(run: Run, node: str, namespace: str, names: list[str], until: str, timeout: str,
                  allow: tuple[str, ...] = (), who: str = "a check") -> dict[str, dict]:
    """Waits until every pod is Running/done (`until`="running") or done ("done") within the timeouts attribute
    `timeout` ("pod_start", "pod_complete"), and returns their states. A pod that ends in a known problem raises
    its verdict (unless its code is in `allow`); a timeout raises ERROR-TIMEOUT with each pod's last state and marks
    the node hung (`who`, the check, is named to its later checks)."""
    run.hung.raise_if_hung(node)
    watch = run.spaces.pod_watch(namespace)
    seconds, key = getattr(run.cfg.timeouts, timeout), Timeouts.key(timeout)
    spec = waits.Spec(tuple(names), until, seconds, allow)
    progress = waits.Progress(time.monotonic())
    next_note = progress.started + timing.PROGRESS_EVERY_S
    events = _EventReader(run)

    def classify(p: dict) -> verdicts.Finding | None:
        evs = events.of(p)
        problem = verdicts.classify(p, evs)
        if problem and problem.code == "SKIP-F07-BUSY" and node in run.inventory.node_objs:
            problem = verdicts.classify(p, evs, run.inventory.free_gpus(node))  # busy, or refused although free?
        return problem

    while True:
        watch.raise_if_failed(f"watching the run's pods in {namespace}")  # ERROR-AUTH / ERROR-RBAC / ERROR-API
        if run.cancelled.is_set():
            raise EnvironmentProblem("ERROR-TIMEOUT", "the run is ending (interrupted or stopped): wait abandoned")
        version = watch.version  # read before the snapshot: a change after it wakes `changed` at once
        states, gone = watch.snapshot(spec.names)
        now = time.monotonic()
        d = waits.step(spec, progress, states, gone, now, classify)
        if d.kind in ("done", "allowed"):
            return states  # type: ignore[return-value]
        if d.kind in ("problem", "deleted"):
            raise_for(d.problem.code, d.problem.message)  # type: ignore[union-attr]
        pending = waits.waiting_on(spec, states)
        if d.kind == "timeout":
            if not watch.healthy and watch.error is not None:  # the states are stale: the API is the problem
                raise kube.api_error(watch.error, f"watching the run's pods in {namespace} (pods not {until} "
                                                  f"after {seconds:.0f}s, {key})")
            msg = (f"timed out after {seconds:.0f}s ({key}) waiting for pods to be {until}; last states: "
                   + "; ".join(f"{n}: {kube.describe(states.get(n))}" for n in names))
            run.hung.mark(node, f"{who}: {msg}")
            raise EnvironmentProblem("ERROR-TIMEOUT", msg)
        if now >= next_note:  # a live line every PROGRESS_EVERY_S of waiting, none for quick pods (quiet CI logs)
            log(f"{node}: {len(pending)} pod(s) not {until} after {now - progress.started:.0f}s (limit "
                f"{seconds:.0f}s, {key}): {pending[0]}: {kube.describe(states.get(pending[0]))}"
                + (f" (+{len(pending) - 1} more)" if len(pending) > 1 else ""))
            next_note = now + timing.PROGRESS_EVERY_S
        wake = min(d.wake_at or now + timing.CANCEL_CHECK_S, next_note, now + timing.CANCEL_CHECK_S)
        watch.changed(version, wake - now)


class _EventReader:
    """The events a pod's classification needs: an unscheduled pod's at once; a pod stuck creating its sandbox's
    after SANDBOX_EVENTS_EVERY_S, re-read at most that often; none otherwise (first seen counts as a read of none)."""

    def __init__(self, run: Run):
        self.run = run
        self.sandbox: dict[str, tuple[float, list[dict]]] = {}  # pod -> (when its events were last read, them)

    def of(self, p: dict) -> list[dict]:
        ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
        if pods.needs_events(p):
            return self.run.spaces.events_for(ns, name)
        if not pods.creating(p):
            self.sandbox.pop(name, None)
            return []
        t = time.monotonic()
        at, evs = self.sandbox.setdefault(name, (t, []))
        if t - at >= timing.SANDBOX_EVENTS_EVERY_S:
            evs = self.run.spaces.events_for(ns, name)
            self.sandbox[name] = (t, evs)
        return evs
