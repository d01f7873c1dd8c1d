"""The least time a GPU node's checks can take, from a run's own pod timeline (the summary's `pods`; `make bench`).

Two checks that each hold every device of their node that the run can use overlap neither each other nor any
device held for another check (the scheduler's rules), so a node needs at least the sum of such checks' spans:
from the first of a check's pods seen to the last one's device freed (its containers ended, or, deleted while
running, the pod gone). Such a check is
- one that always takes every free device of its node (catalog.EXCLUSIVE: the burst, NUMA, latency checks), or
- one whose pods held, at once, every device the run held at its peak on that node, less those held throughout its
  span by run-long pods (checks not in the bound): e.g. the isolation check's two devices on a 3-device node where
  the access check holds one for the whole run, which no single-device sample of the latency check can run beside.
  Counted only where its span overlapped none of the others counted, so the sum never exceeds the run's time.
Devices held are the pods' `devices` (pods.DEVICES_LABEL; a pod that never started held none). The run's cleanup
comes after them. Times are the runner's, from the run's pod watch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import EXCLUSIVE


TAKES_ALL = "takes every free device"  # a catalog.EXCLUSIVE check
HELD_ALL = "held every device the run could use here"  # any other check that did, beside the run-long pods


@dataclass(frozen=True)
class Part:
    check: str  # the pods' gpuconform.dev/check label
    first: str  # the first pod seen
    last: str  # the pod that freed its device last
    seconds: float
    why: str = TAKES_ALL  # or HELD_ALL


@dataclass(frozen=True)
class Bound:
    node: str
    parts: tuple[Part, ...]
    cleanup_s: float

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.parts) + self.cleanup_s


def freed(pod: dict) -> float | None:
    """When the pod's device was free again: its containers ended, else it was gone; None if neither was seen."""
    return pod.get("ended") or pod.get("gone")


def held(pod: dict) -> int:
    """Devices the pod held: its `devices` once it started (a pod that never ran held none)."""
    return int(pod.get("devices") or 0) if pod.get("started") is not None else 0


def peak(pods: list[dict]) -> int:
    """The most devices `pods` held at once over their [seen, freed] intervals."""
    edges = sorted([(p["seen"], 1, held(p)) for p in pods] + [(freed(p), 0, -held(p)) for p in pods])
    most = now = 0
    for _, _, d in edges:  # at equal times a release (0) sorts before a take (1)
        now += d
        most = max(most, now)
    return most


def _part(check: str, mine: list[dict], why: str) -> Part:
    first, last = min(mine, key=lambda p: p["seen"]), max(mine, key=freed)  # type: ignore[arg-type]
    return Part(check, first["pod"], last["pod"], max(freed(last) - first["seen"], 0.0), why)  # type: ignore[operator]


def node_parts(pods: list[dict], exclusive: tuple[str, ...] = EXCLUSIVE) -> list[Part]:
    """One node's checks that no other such check can overlap (module docstring), ordered by their first pod."""
    by_check: dict[str, list[dict]] = {}
    for p in pods:
        by_check.setdefault(p["check"], []).append(p)
    most = peak(pods)
    spans = {check: (min(p["seen"] for p in mine), max(freed(p) for p in mine)) for check, mine in by_check.items()}
    parts = [_part(check, mine, TAKES_ALL) for check, mine in by_check.items() if check in exclusive]
    taken = [spans[p.check] for p in parts]
    for check, mine in by_check.items():
        if check in exclusive:
            continue
        start, end = spans[check]
        # devices held all through its span by pods of checks that are not in the bound (the run-long pods)
        throughout = sum(held(p) for p in pods if p["check"] not in exclusive and p["check"] != check
                         and p["seen"] <= start and freed(p) >= end)  # type: ignore[operator]
        own = peak(mine)
        # and, in this run, beside none of the others counted: the sum stays within the wall time
        if most and own and own + throughout >= most and all(end <= s or start >= e for s, e in taken):
            parts.append(_part(check, mine, HELD_ALL))
            taken.append((start, end))
    return sorted(parts, key=lambda part: spans[part.check][0])


def node_bounds(pods: list[dict], cleanup_s: float, exclusive: tuple[str, ...] = EXCLUSIVE) -> list[Bound]:
    """Each node's bound, by node name; `pods` are summary `pods` rows."""
    by_node: dict[str, list[dict]] = {}
    for p in pods:
        if p.get("check") and p.get("node") and p.get("seen") and freed(p):
            by_node.setdefault(p["node"], []).append(p)
    return [Bound(node, tuple(parts), cleanup_s) for node, mine in sorted(by_node.items())
            if (parts := node_parts(mine, exclusive))]


def lower_bound(pods: list[dict], cleanup_s: float, exclusive: tuple[str, ...] = EXCLUSIVE) -> Bound:
    """The node with the largest bound (nodes run their checks at the same time)."""
    return max(node_bounds(pods, cleanup_s, exclusive), key=lambda b: b.seconds, default=Bound("", (), cleanup_s))
