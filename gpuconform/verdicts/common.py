"""The Finding every verdict returns, and the decisions every check area shares: whether a check can run here at
all (the skips), and how findings that belong to one verdict are folded into one."""

from __future__ import annotations

from dataclasses import dataclass

from ..nodes import GpuNode


@dataclass(frozen=True)
class Finding:
    """One reason a check does not pass: its reason code and a message naming the node and what was seen."""

    code: str
    message: str


def not_checked(enabled: bool, why: str) -> list[Finding]:
    """NOTCHECKED-OPTIONAL when an optional permission or probe the check needs is off (`why` says which)."""
    return [] if enabled else [Finding("NOTCHECKED-OPTIONAL", why)]


def nvidia_tooling(vendor: str, what: str) -> list[Finding]:
    """NOTCHECKED-OPTIONAL on other vendors for a check whose in-pod evidence (`what`) comes from NVIDIA tools."""
    if vendor == "nvidia":
        return []
    return [Finding("NOTCHECKED-OPTIONAL", f"vendor {vendor}: {what} relies on NVIDIA tooling; not checked")]


def unusable(node: GpuNode, need: int) -> list[Finding]:
    """SKIP-NODE-NOT-READY (NotReady or cordoned) or SKIP-F07-BUSY (fewer free devices than `need` when the run
    started), from what discovery saw; nothing when the node can take the check's pods."""
    why = node.skip_reason(need)
    return [Finding(*why)] if why else []


def busy(node: GpuNode, free: int, need: int) -> list[Finding]:
    """SKIP-F07-BUSY when the node has fewer free devices of its GPU resource than the check needs right now."""
    if free >= need:
        return []
    usable = f" ({node.allocation.free_means})" if node.allocation.free_means else ""
    return [Finding("SKIP-F07-BUSY", f"{node.name} has {free} free {node.resource} now{usable}, the check needs {need}")]


def folded(findings: list[Finding]) -> list[Finding]:
    """One finding for one verdict: the first one's code, the others appended to its message ("also [CODE] ...")."""
    if not findings:
        return []
    first, rest = findings[0], findings[1:]
    return [Finding(first.code, first.message + "".join(f"\n  also [{f.code}] {f.message}" for f in rest))]
