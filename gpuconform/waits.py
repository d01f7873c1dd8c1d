"""The pod wait engine as a pure step function: (what we wait for, pod states, clock) -> wait / done / stop.

Every wait in a run reads one shared pod watch; the caller re-evaluates `step` whenever the watch reports a
change (or at `Decision.wake_at`), so one watch serves any number of concurrent waits and no wait polls the
API. The function takes the pod states, the clock and a `classify` callable (verdicts.classify with the node's
events and free count fetched lazily by the caller) and returns a decision; it never sleeps or calls the API,
so it is unit-tested with recorded pod objects.

Timing rules (the Kubernetes e2e framework keeps its poll and grace constants in one place too):
- The scheduler's verdict is final at once when the caller allowed it: a pod the caller expects to stay
  Pending (burst's pod N+1) is judged as soon as PodScheduled=False/Unschedulable appears, not at a timeout.
- Any other problem seen on a Pending pod (unschedulable, image pull, container create error) gets
  PENDING_GRACE_S to clear, because the scheduler and kubelet retry; a terminal pod is judged at once.
- A pod that was seen and then disappears (deleted during the wait) ends the wait at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .pods import TERMINAL_PHASES, is_running_or_terminal, is_terminal
from .verdicts.common import Finding
from .timing import PENDING_GRACE_S


@dataclass(frozen=True)
class Spec:
    names: tuple[str, ...]
    until: str  # "running": Running or terminal; "done": terminal
    timeout_s: float
    allow: tuple[str, ...] = ()  # reason codes the caller handles itself (the wait returns the states)
    grace_s: float = PENDING_GRACE_S

    def satisfied(self, pod: dict) -> bool:
        return (is_running_or_terminal if self.until == "running" else is_terminal)(pod)


@dataclass
class Progress:
    """What a wait remembers between steps (owned by the caller, updated by `step`)."""

    started: float
    problem_since: dict[str, float] = field(default_factory=dict)  # pod -> when its current problem was first seen


@dataclass(frozen=True)
class Decision:
    kind: str  # "wait" | "done" | "allowed" | "problem" | "deleted" | "timeout"
    problem: Finding | None = None
    wake_at: float | None = None  # re-evaluate by then even if the watch reports nothing ("wait" only)

    @property
    def final(self) -> bool:
        return self.kind != "wait"


def step(spec: Spec, progress: Progress, states: dict[str, dict | None], gone: set[str], now: float,
         classify: Callable[[dict], Finding | None]) -> Decision:
    """One evaluation of a wait. `states`: each awaited pod's latest object (None: not seen yet); `gone`: pods
    seen earlier and deleted since."""
    deadline = progress.started + spec.timeout_s
    wake = deadline
    for name in spec.names:
        if name in gone:
            return Decision("deleted", Finding("ERROR-API", f"pod {name} was deleted during the wait (by someone "
                                                  "else: the suite deletes its pods only after a check)"))
        p = states.get(name)
        if p is None:
            continue
        phase = p.get("status", {}).get("phase")
        if phase not in TERMINAL_PHASES and phase != "Pending":
            progress.problem_since.pop(name, None)
            continue
        problem = classify(p)
        if problem is None:
            progress.problem_since.pop(name, None)
            continue
        if problem.code in spec.allow:
            return Decision("allowed", problem)
        if phase in TERMINAL_PHASES:
            return Decision("problem", problem)
        since = progress.problem_since.setdefault(name, now)
        if now - since >= spec.grace_s:
            return Decision("problem", problem)
        wake = min(wake, since + spec.grace_s)
    if all((p := states.get(n)) is not None and spec.satisfied(p) for n in spec.names):
        return Decision("done")
    if now >= deadline:
        return Decision("timeout")
    return Decision("wait", wake_at=wake)


def waiting_on(spec: Spec, states: dict[str, dict | None]) -> list[str]:
    """The awaited pods not there yet, in order (for progress lines and timeout messages)."""
    return [n for n in spec.names if (p := states.get(n)) is None or not spec.satisfied(p)]
