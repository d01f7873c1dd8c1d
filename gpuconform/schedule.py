"""The least time a GPU node's checks can take, from a run's own pod timeline (the summary's `pods`; `make bench`).

Checks that hold every GPU of their node never overlap there (gpuconform/pytest_plugin/scheduler.py), so a node needs at least
the sum, over those checks, of their slowest pod's lifetime (server-side creation to the end the timeline
records), and the run's cleanup comes after all of them. Timestamps have 1 s resolution.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import ALL_GPU_PODS


@dataclass(frozen=True)
class Part:
    check: str  # pod label of the check
    pod: str  # its slowest pod
    seconds: float
    ended: bool  # False: the timeline has no end for the pod (deleted while running), counted to its last timestamp


@dataclass(frozen=True)
class Bound:
    node: str
    parts: tuple[Part, ...]
    cleanup_s: float

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.parts) + self.cleanup_s


def lifetime(pod: dict) -> tuple[float, bool]:
    """(seconds from creation to the pod's end, whether the timeline records that end): its containers' finish, or
    else when the watch saw it deleted (a pod deleted while running holds its device until then); without either,
    to the last timestamp it has (so still a lower bound)."""
    times = [pod.get(k) for k in ("finished", "gone", "started", "scheduled", "created")]
    end = next((t for t in times if t is not None), pod["created"])
    return max(end - pod["created"], 0.0), pod.get("finished") is not None or pod.get("gone") is not None


def lower_bound(pods: list[dict], cleanup_s: float, exclusive: dict[str, str] = ALL_GPU_PODS) -> Bound:
    """The node with the largest bound (nodes run their checks at the same time); pods are summary `pods` rows,
    `exclusive` maps the pod label of each check holding every GPU to the name prefix of its pods doing so."""
    slowest: dict[str, dict[str, Part]] = {}  # node -> check -> its slowest pod
    for p in pods:
        prefix = exclusive.get(p.get("check") or "")
        if prefix is None or not p["pod"].startswith(prefix) or not p.get("node"):
            continue
        part = Part(p["check"], p["pod"], *lifetime(p))
        mine = slowest.setdefault(p["node"], {})
        if p["check"] not in mine or part.seconds > mine[p["check"]].seconds:
            mine[p["check"]] = part
    order = list(exclusive)
    bounds = [Bound(node, tuple(sorted(parts.values(), key=lambda x: order.index(x.check))), cleanup_s)
              for node, parts in sorted(slowest.items())]
    return max(bounds, key=lambda b: b.seconds, default=Bound("", (), cleanup_s))
