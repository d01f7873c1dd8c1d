"""Before/after comparison of two JSON summaries (gpuconform.summary/v1): outcome counts, per-check status
changes and per node+phase latency percentiles, with the regressions a CI gate can fail on.

A latency percentile regresses only when it grew by more than `latencyRelative` AND by more than
`latencyAbsolute` seconds: creation and start timestamps have 1 s resolution, so small values jump by whole
seconds. A check regresses when it passed before and does not pass now; up to `allowNewFailures` of those are
tolerated. Nodes present in only one summary are listed, not compared; but a node the baseline certified that this
run saw and left out (`left_out_nodes`: excluded, not selected, or not applicable by a label its node, GFD, NFD or the
operator can write) is always a regression (issue 29, review T4): a label must not take a certified node out of the
gate unnoticed. A node gone from the cluster is listed only.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuconform.config import Config
from gpuconform.auditpage import OUTCOMES, outcome_counts, seconds

SCHEMA = "gpuconform.summary/v1"
_DEFAULTS = Config({})  # the schema's defaults (gpuconform/config.py)
DEFAULT_TOLERANCE: dict[str, float] = {"latencyRelative": _DEFAULTS.get("baseline.latencyRelative"),
                                       "latencyAbsolute": _DEFAULTS.seconds("baseline.latencyAbsolute"),
                                       "allowNewFailures": _DEFAULTS.get("baseline.allowNewFailures")}
PERCENTILES = ("p50", "p95", "p99", "max")
# allocate comes from a kubelet histogram: only the p99 bucket bound is comparable.
_PHASE_KEYS = {"schedule": {p: p for p in PERCENTILES}, "start": {p: p for p in PERCENTILES},
               "allocate": {"p99": "p99_bucket_le_s"}}

@dataclass(frozen=True)
class StatusChange:
    test: str
    check: str
    node: str | None
    before: str | None  # None: not in that summary
    after: str | None
    reason: str | None = None  # the current reason code

    @property
    def kind(self) -> str:
        if self.before is None:
            return "new"
        if self.after is None:
            return "removed"
        if self.before == "passed":
            return "regression"
        return "fixed" if self.after == "passed" else "changed"

    def line(self) -> str:
        where = self.node or "cluster"
        why = f" ({self.reason})" if self.reason and self.after not in (None, "passed") else ""
        return f"{self.check} on {where}: {self.before or 'absent'} -> {self.after or 'absent'}{why}"


@dataclass(frozen=True)
class LatencyDelta:
    node: str
    phase: str
    percentile: str
    before: float
    after: float
    regression: bool

    def line(self) -> str:
        return (f"{self.node} {self.phase} {self.percentile}: {seconds(self.before)} s -> {seconds(self.after)} s "
                f"({_signed(self.after - self.before)} s)")


@dataclass
class Comparison:
    previous_run: str | None
    current_run: str | None
    tolerance: dict[str, float]
    counts: dict[str, dict[str, int]]  # outcome -> {"before", "after", "delta"}
    changes: list[StatusChange] = field(default_factory=list)
    latency: list[LatencyDelta] = field(default_factory=list)
    nodes_only_previous: list[str] = field(default_factory=list)
    nodes_only_current: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be compared, and why
    # nodes the baseline certified that this run did not judge, each "node: why" (always regressions)
    certified_left_out: list[str] = field(default_factory=list)

    @property
    def new_failures(self) -> list[StatusChange]:
        return [c for c in self.changes if c.kind == "regression"]

    @property
    def regressions(self) -> list[str]:
        """One line per regression: latency ones always, check ones when more than allowNewFailures."""
        out = [f"latency {d.line()}" for d in self.latency if d.regression]
        out += [f"node {line}" for line in self.certified_left_out]
        failures = self.new_failures
        if len(failures) > self.tolerance["allowNewFailures"]:
            out += [f"check {c.line()}" for c in failures]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable (non-finite seconds become the string '+Inf'), for the summary's 'baseline' key."""
        return _jsonable({
            "previous_run_id": self.previous_run, "current_run_id": self.current_run,
            "tolerance": self.tolerance, "counts": self.counts,
            "status_changes": [{**asdict(c), "kind": c.kind} for c in self.changes],
            "latency": [asdict(d) for d in self.latency],
            "nodes_only_previous": self.nodes_only_previous, "nodes_only_current": self.nodes_only_current,
            "notes": self.notes, "new_failures": len(self.new_failures), "regressions": self.regressions,
            "certified_left_out": self.certified_left_out,
        })


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return seconds(obj)
    return obj


def _signed(v: float) -> str:
    return ("+" if v > 0 and math.isfinite(v) else "") + seconds(v)


def _percent(fraction: Any) -> str:
    return f"{fraction * 100:g}%" if _number(fraction) is not None else str(fraction)


def problems(summary: Any) -> list[str]:
    """What keeps `summary` from being compared, one line each naming the field (e.g. "results[3]: no 'test'"):
    the fields compare() reads, checked before the run so a hand-edited or truncated baseline is a usage error at
    the start (gpuconform/pytest_plugin/options.py), not a crash at the session's end that leaves no summary or report."""
    if not isinstance(summary, dict):
        return [f"a JSON {type(summary).__name__}, not a summary object"]
    if summary.get("schema") != SCHEMA:
        return [f"schema {summary.get('schema')!r}, expected {SCHEMA!r}"]
    out: list[str] = []
    for key, item_keys in (("results", {"test": (str,), "node": (str, type(None)), "outcome": (str, type(None))}),
                           ("latency", {"node": (str,)})):
        rows = summary.get(key)
        if rows is None:
            continue
        if not isinstance(rows, list):
            out.append(f"{key}: a {type(rows).__name__}, expected a list")
            continue
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                out.append(f"{key}[{i}]: a {type(row).__name__}, expected an object")
                continue
            for field_, types in item_keys.items():
                required = str in types and type(None) not in types
                if field_ not in row and required:
                    out.append(f"{key}[{i}]: no {field_!r}")
                elif field_ in row and not isinstance(row[field_], types):
                    out.append(f"{key}[{i}].{field_}: {row[field_]!r} is not a string")
    for key in ("gpu_nodes", "certified_nodes"):
        nodes = summary.get(key)
        if nodes is not None and not (isinstance(nodes, list) and all(isinstance(n, str) for n in nodes)):
            out.append(f"{key}: expected a list of node names")
    left = summary.get("left_out_nodes")
    if left is not None and not (isinstance(left, dict) and all(isinstance(v, dict) for v in left.values())):
        out.append("left_out_nodes: expected an object of node name -> {why, reason}")
    return out


def _check_schema(summary: dict, which: str) -> None:
    found = problems(summary)
    if found:
        raise ValueError(f"{which} summary: {found[0]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))


def _nodes(summary: dict) -> set[str]:
    names = set(summary.get("gpu_nodes") or [])
    names |= {r["node"] for r in summary.get("results") or [] if r.get("node") is not None}
    return names | {n["node"] for n in summary.get("latency") or [] if n.get("node") is not None}


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _regressed(before: float, after: float, tol: dict[str, float]) -> bool:
    if after == before:  # also +Inf -> +Inf
        return False
    return after > before * (1 + tol["latencyRelative"]) and after - before > tol["latencyAbsolute"]


def compare(previous: dict, current: dict, tolerance: dict | None = None) -> Comparison:
    """Compares two summaries; raises ValueError when either is not a gpuconform.summary/v1 document."""
    _check_schema(previous, "previous")
    _check_schema(current, "current")
    tol = {**DEFAULT_TOLERANCE, **(tolerance or {})}
    before_counts = outcome_counts(previous.get("results") or [])
    after_counts = outcome_counts(current.get("results") or [])
    keys = list(OUTCOMES) + sorted((set(before_counts) | set(after_counts)) - set(OUTCOMES))
    counts = {k: {"before": before_counts.get(k, 0), "after": after_counts.get(k, 0),
                  "delta": after_counts.get(k, 0) - before_counts.get(k, 0)} for k in keys}
    prev_nodes, cur_nodes = _nodes(previous), _nodes(current)
    both = prev_nodes & cur_nodes
    cmp = Comparison(previous.get("run_id"), current.get("run_id"), tol, counts,
                     nodes_only_previous=sorted(prev_nodes - cur_nodes),
                     nodes_only_current=sorted(cur_nodes - prev_nodes))

    old = {r["test"]: r for r in previous.get("results") or [] if r.get("node") is None or r["node"] in both}
    new = {r["test"]: r for r in current.get("results") or [] if r.get("node") is None or r["node"] in both}
    for test in list(old) + [t for t in new if t not in old]:
        a, b = old.get(test), new.get(test)
        before = a.get("outcome") if a else None
        after = b.get("outcome") if b else None
        if before != after:
            r = b or a or {}
            cmp.changes.append(StatusChange(test, r.get("check") or test, r.get("node"), before, after,
                                            b.get("reason") if b else None))

    prev_lat = {n["node"]: n for n in previous.get("latency") or []}
    cur_lat = {n["node"]: n for n in current.get("latency") or []}
    for node in sorted(set(prev_lat) & set(cur_lat)):
        for phase, keys_ in _PHASE_KEYS.items():
            p, c = prev_lat[node].get(phase), cur_lat[node].get(phase)
            if not isinstance(p, dict) or not isinstance(c, dict):
                if p is not None or c is not None:
                    cmp.notes.append(f"{node} {phase}: not compared (previous: {_state(p)}, current: {_state(c)})")
                continue
            for name, key in keys_.items():
                x, y = _number(p.get(key)), _number(c.get(key))
                if x is not None and y is not None:
                    cmp.latency.append(LatencyDelta(node, phase, name, x, y, _regressed(x, y, tol)))
    # the rollout rehearsal's figures (rollout.mode), where both runs rehearsed the node: a release whose rollout
    # disrupts the node for longer regresses as a latency does
    prev_roll = {n.get("node"): n for n in previous.get("rollout") or []}
    cur_roll = {n.get("node"): n for n in current.get("rollout") or []}
    for node in sorted(set(prev_roll) & set(cur_roll) - {None}):
        for name, key in (("window", "window_s"), ("hand-over", "handover_s")):
            x, y = _number(prev_roll[node].get(key)), _number(cur_roll[node].get(key))
            if x is not None and y is not None:
                cmp.latency.append(LatencyDelta(node, "rollout", name, x, y, _regressed(x, y, tol)))
    for node in sorted(set(prev_lat) ^ set(cur_lat)):
        if node in both:
            side = "current" if node in cur_lat else "previous"
            cmp.notes.append(f"{node}: latency measured only in the {side} run")
    cmp.certified_left_out = certified_left_out(previous, current)
    return cmp


def certified_left_out(previous: dict, current: dict) -> list[str]:
    """The nodes `previous` certified that `current` left out (its `left_out_nodes`), each as "node: certified in
    the baseline, left out now (why: reason)". A node judged now and not certified shows in the check changes; a
    node `current` did not see at all, in nodes_only_previous."""
    judged = set(current.get("gpu_nodes") or []) | {r["node"] for r in current.get("results") or []
                                                    if r.get("node") is not None}
    left = current.get("left_out_nodes") or {}
    return [f"{node}: certified in the baseline, left out now ({left[node].get('why') or '?'}: "
            f"{left[node].get('reason') or 'no reason given'})"
            for node in sorted(set(previous.get("certified_nodes") or []) - judged) if isinstance(left.get(node), dict)]


def _state(stats: Any) -> str:
    return "measured" if isinstance(stats, dict) else str(stats) if stats else "no samples"


def _esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def render_html(comparison: Comparison) -> str:
    """<table id="gc-baseline">: outcome counts, status changes and latency deltas, regressions highlighted."""
    c = comparison
    regs = c.regressions
    head = (f"<p>Baseline: run {_esc(c.previous_run or '?')} \u2192 run {_esc(c.current_run or '?')}; "
            f"{len(regs)} regression(s); new failures {len(c.new_failures)} "
            f"(allowed {_esc(c.tolerance['allowNewFailures'])}); a latency percentile regresses when it grows by "
            f"more than {_esc(_percent(c.tolerance['latencyRelative']))} and more than "
            f"{_esc(seconds(c.tolerance['latencyAbsolute']))} s</p>")
    lost = {line.split(":", 1)[0] for line in c.certified_left_out}  # node names hold no ':'; listed in regs
    items = [*regs, *(f"node {n}: only in the previous run, not compared" for n in c.nodes_only_previous
                      if n not in lost),
             *(f"node {n}: only in the current run, not compared" for n in c.nodes_only_current), *c.notes]
    listing = "<ul>" + "".join(f"<li>{_esc(i)}</li>" for i in items) + "</ul>" if items else ""
    rows = ['<tr><th colspan="5">outcome counts</th></tr>']
    for outcome, n in c.counts.items():
        rows.append(f"<tr><td>{_esc(outcome)}</td><td></td><td>{n['before']}</td><td>{n['after']}</td>"
                    f"<td>{n['delta']:+d}</td></tr>")
    if c.changes:
        rows.append('<tr><th colspan="5">status changes</th></tr>')
    for s in c.changes:
        css = {"regression": "gc-failed", "fixed": "gc-passed"}.get(s.kind, "gc-none")
        rows.append(f'<tr class="{css}"><td>{_esc(s.check)}</td><td>{_esc(s.node or "cluster")}</td>'
                    f"<td>{_esc(s.before or 'absent')}</td><td>{_esc(s.after or 'absent')}</td>"
                    f"<td>{_esc(s.kind)}{_esc(' ' + s.reason) if s.reason else ''}</td></tr>")
    if c.latency:
        rows.append('<tr><th colspan="5">latency (seconds)</th></tr>')
    for d in c.latency:
        css = "gc-failed" if d.regression else "gc-none"
        rows.append(f'<tr class="{css}"><td>{_esc(d.phase)} {_esc(d.percentile)}</td><td>{_esc(d.node)}</td>'
                    f"<td>{_esc(seconds(d.before))}</td><td>{_esc(seconds(d.after))}</td>"
                    f"<td>{_esc(_signed(d.after - d.before))}{' regression' if d.regression else ''}</td></tr>")
    table = (f'<table id="gc-baseline" class="gc-table"><thead><tr><th>what</th><th>node</th><th>before</th>'
             f"<th>after</th><th>change</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return head + listing + table
