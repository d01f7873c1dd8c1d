"""The least time a GPU node's checks can take, from a run's own pod timeline (the summary's `pods`; `make bench`).

A check that holds every GPU of its node at some point (catalog.EXCLUSIVE) overlaps no other such check there, nor
any device held for one (the scheduler's rules), so a node needs at least the sum of those checks' spans: from the
first of a check's pods seen to the last one's device freed (its containers ended, or, deleted while running, the
pod gone). The run's cleanup comes after them. Times are the runner's, from the run's pod watch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import EXCLUSIVE


@dataclass(frozen=True)
class Part:
    check: str  # the pods' gpuconform.dev/check label
    first: str  # the first pod seen
    last: str  # the pod that freed its device last
    seconds: float


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


def lower_bound(pods: list[dict], cleanup_s: float, exclusive: tuple[str, ...] = EXCLUSIVE) -> Bound:
    """The node with the largest bound (nodes run their checks at the same time); `pods` are summary `pods` rows."""
    spans: dict[str, dict[str, list[dict]]] = {}  # node -> check -> its pods with both times
    for p in pods:
        if p.get("check") in exclusive and p.get("node") and p.get("seen") and freed(p):
            spans.setdefault(p["node"], {}).setdefault(p["check"], []).append(p)
    bounds = []
    for node, checks in sorted(spans.items()):
        parts = []
        for check in exclusive:
            mine = checks.get(check)
            if mine:
                first, last = min(mine, key=lambda p: p["seen"]), max(mine, key=freed)  # type: ignore[arg-type]
                parts.append(Part(check, first["pod"], last["pod"], max(freed(last) - first["seen"], 0.0)))  # type: ignore[operator]
        bounds.append(Bound(node, tuple(parts), cleanup_s))
    return max(bounds, key=lambda b: b.seconds, default=Bound("", (), cleanup_s))
