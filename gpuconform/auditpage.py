"""HTML fragments for the pytest-html audit report, built from the JSON summary (gpuconform.summary/v1).

Pure functions returning strings: inline HTML tables and SVG plots, no I/O and no third-party renderers.
Every piece of dynamic text goes through html.escape. Put STYLE into the page once; the fragments use
its `gc-` classes.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any, Iterable

from gpuconform import reasons

OUTCOMES = ("passed", "failed", "error", "skipped")
# Worst first: the outcome a matrix cell shows when several results share a (check, node).
_SEVERITY = {"failed": 0, "error": 1, "passed": 2, "skipped": 3}

STYLE = """<style>
.gc-table{border-collapse:collapse;font:12px/1.4 sans-serif;margin:6px 0;color:#222}
.gc-table th,.gc-table td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
.gc-table th{background:#f2f2f2}
.gc-passed{background:#d4edda;color:#155724}
.gc-failed{background:#f8d7da;color:#721c24}
.gc-error{background:#fde2c4;color:#7a3e00}
.gc-skipped{background:#e9ecef;color:#495057}
.gc-none{background:#fff;color:#999}
.gc-reason{display:block;font:10px monospace}
.gc-node{white-space:nowrap}
.gc-pool{display:block;font-weight:normal;font-size:10px;color:#555}
.gc-group th,.gc-total th{font-style:italic}
.gc-group-names td{border-top:none;font-size:11px}
.gc-names{margin:2px 0;max-width:120ch}
.gc-legend{caption-side:bottom;text-align:left;font-size:11px;color:#555;padding-top:4px}
.gc-note{font:12px sans-serif;color:#666;font-style:italic}
.gc-config{font:11px monospace;background:#f8f8f8;padding:6px;border:1px solid #ddd}
.gc-check{min-width:4.5em;max-width:8em;white-space:normal;font-weight:normal}
.gc-verdict{font:bold 15px sans-serif;padding:6px 10px;margin:6px 0;border:1px solid #ccc}
.gc-paths{font:12px sans-serif;margin:2px 0}
.gc-warning{font:12px sans-serif;margin:2px 0;padding:3px 8px;background:#fff4e5;border-left:3px solid #ff7f0e}
</style>"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def seconds(value: Any) -> str:
    """A duration in seconds, short: 0.0004, 1, 12.5, +Inf; 'n/a' for None."""
    if value is None or isinstance(value, bool):
        return "n/a"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return f"{v:.3g}"


def _finite(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def _note(text: str) -> str:
    return f'<p class="gc-note">{_e(text)}</p>'


# ---------------------------------------------------------------- outcome matrix and pool summary

def outcome_counts(results: list[dict]) -> dict[str, int]:
    """Results per outcome; the four standard outcomes are always present."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        outcome = str(r.get("outcome"))
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def worst(outcomes: Iterable[str]) -> str:
    """The outcome to show for several results: failed > error > passed > skipped."""
    return min(outcomes, key=lambda o: _SEVERITY.get(o, -1), default="none")


ALL_POOL = "all"  # the one pool when the summary names none
_CLUSTER = "cluster"  # the matrix row of results that belong to no node
_TITLE_MAX = 400  # characters of a message kept in a cell's title; the full text is in the test's row below
# Words of a check's name written as an auditor reads them (check_title)
_WORDS = {"gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "cpus": "CPUs", "pci": "PCI", "numa": "NUMA", "mig": "MIG",
          "cuda": "CUDA", "dra": "DRA"}


def _natural(name: str) -> list:
    """Sort key that puts gpu-node-2 before gpu-node-10."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name) if t]


def _not_checked(r: dict) -> bool:
    return r.get("outcome") == "skipped" and reasons.is_not_checked(r.get("reason"))


def _rank(rs: list[dict]) -> int:
    """0: a node with a failure, 1: with an error, 2: another non-pass (a skip that costs certification),
    3: every result passed or is 'not checked' (also a node without results)."""
    outcomes = {r.get("outcome") for r in rs if not (r.get("outcome") == "passed" or _not_checked(r))}
    return 0 if "failed" in outcomes else 1 if "error" in outcomes else 2 if outcomes else 3


def _by_node(results: list[dict], nodes: list[str]) -> dict[str | None, list[dict]]:
    """Results per node: the listed GPU nodes first (also those without results), then any other node, then
    None for results that belong to no node."""
    out: dict[str | None, list[dict]] = {n: [] for n in nodes}
    for r in results:
        out.setdefault(r.get("node"), []).append(r)
    if None in out:
        out[None] = out.pop(None)
    return out


def _pool_of(pools: dict[str, str] | None) -> Any:
    if pools is None:
        return lambda node: ALL_POOL
    return lambda node: str(pools.get(node) or "unknown")


def check_title(check: str) -> str:
    """A check's test function name as words, whole: test_pods_see_exactly_the_gpus_they_request -> "Pods see
    exactly the GPUs they request" (the matrix's column headers; the function's name is their title)."""
    words = [_WORDS.get(w, w) for w in check.removeprefix("test_").split("_") if w]
    if not words:
        return check
    return " ".join([words[0][:1].upper() + words[0][1:], *words[1:]])


def _title(text: str) -> str:
    text = text if len(text) <= _TITLE_MAX else text[:_TITLE_MAX - 1] + "\u2026"
    return _e(text).replace("\n", "&#10;")  # a line break that survives attribute normalisation


def _cell(rs: list[dict]) -> str:
    if not rs:
        return '<td class="gc-none">&#8211;</td>'
    outcome = worst(r.get("outcome", "") for r in rs)
    css = f"gc-{outcome}" if outcome in OUTCOMES else "gc-none"
    codes = list(dict.fromkeys(r["reason"] for r in rs if r.get("reason")))
    text = _e(outcome) + (f" ({len(rs)})" if len(rs) > 1 else "")
    text += "".join(f'<span class="gc-reason">{_e(c)}</span>' for c in codes)
    if all(r.get("outcome") == "passed" for r in rs):
        return f'<td class="{css}">{text}</td>'  # a pass needs no message: keeps the page small at scale
    if len(rs) == 1:
        title = rs[0].get("message") or ""
    else:
        title = "\n".join(f"{r.get('outcome')}: {r.get('message') or ''}" for r in rs)
    return f'<td class="{css}" title="{_title(title)}">{text}</td>'


def _group_cell(cells: list[list[dict]]) -> str:
    """One cell of a collapsed row: every node's results of this check passed, or are all 'not checked', or
    none has a result."""
    rs = [r for c in cells for r in c]
    if not rs:
        return '<td class="gc-none">&#8211;</td>'
    if all(r.get("outcome") == "passed" for r in rs):
        return '<td class="gc-passed">passed</td>'
    messages = list(dict.fromkeys(str(r.get("message") or "") for r in rs if r.get("outcome") != "passed"))
    more = f"\n(and {len(messages) - 3} other messages)" if len(messages) > 3 else ""
    return (f'<td class="gc-skipped" title="{_title(chr(10).join(messages[:3]) + more)}">skipped'
            f'<span class="gc-reason">{_e(reasons.NOT_CHECKED)}</span></td>')


def matrix_html(results: list[dict], nodes: list[str], pools: dict[str, str] | None = None) -> str:
    """<table id="gc-matrix">: one row per node, one column per check (short headers, full names in the legend).

    Nodes with a failure come first, then those with an error, then those with another non-pass, each by name;
    a row named 'cluster' holds the results of no node. Nodes whose results all passed (or are 'not checked')
    are collapsed into one row per pool and pattern, with their names listed below it. Cells show the worst
    outcome and the reason codes; only non-passed cells carry their message (title). `pools` maps node names
    to a pool description (shown under each node name); without it every node is in pool 'all'.
    """
    if not results:
        return _note("no results")
    checks = list(dict.fromkeys(r.get("check") or r.get("test", "?") for r in results))
    pool_of = _pool_of(pools)
    full, groups = [], {}
    for node, rs in _by_node(results, nodes).items():
        cells = {c: [] for c in checks}
        for r in rs:
            cells[r.get("check") or r.get("test", "?")].append(r)
        rank = _rank(rs)
        if node is None or rank < 3:
            full.append((rank, _natural(node or _CLUSTER), node, cells))
        else:
            state = tuple("none" if not c else "passed" if all(r.get("outcome") == "passed" for r in c)
                          else "not checked" for c in cells.values())
            groups.setdefault((pool_of(node), state), []).append((node, cells))
    ncol = len(checks) + 1
    rows = []
    for _, _, node, cells in sorted(full, key=lambda t: t[:2]):
        if node is None:
            head = f'<th class="gc-node" title="results that belong to no node">{_CLUSTER}</th>'
        else:
            pool = f'<span class="gc-pool">{_e(pool_of(node))}</span>' if pools is not None else ""
            head = f'<th class="gc-node">{_e(node)}{pool}</th>'
        rows.append(f"<tr>{head}{''.join(_cell(cells[c]) for c in checks)}</tr>")
    for (pool, state), members in sorted(groups.items(), key=lambda g: (_natural(g[0][0]), -len(g[1]))):
        names = sorted((n for n, _ in members), key=_natural)
        seen = set(state) - {"none"}  # a check a node has no result for is no finding
        what = "no results" if not seen else "all passed" if seen == {"passed"} else "all passed or not checked"
        label = f"{len(names)} node{'s' if len(names) != 1 else ''}, {what}"
        pool_line = f'<span class="gc-pool">{_e(pool)}</span>' if pools is not None else ""
        tds = "".join(_group_cell([cells[c] for _, cells in members]) for c in checks)
        rows.append(f'<tr class="gc-group"><th class="gc-node">{_e(label)}{pool_line}</th>{tds}</tr>'
                    f'<tr class="gc-group-names"><td colspan="{ncol}"><details><summary>{_e(label)}: names'
                    f'</summary><p class="gc-names">{_e(", ".join(names))}</p></details></td></tr>')
    head = "".join(f'<th class="gc-check" title="{_e(c)}">{_e(check_title(c))}</th>' for c in checks)
    legend = "".join(f"<li>{_e(check_title(c))}: <code>{_e(c)}</code></li>" for c in checks)
    return (f'<table id="gc-matrix" class="gc-table"><caption class="gc-legend">A column per check, a cell per node: '
            "the worst outcome of the check there and its reason codes (hover a cell for the message). "
            f"<details><summary>the checks' test functions</summary><ul>{legend}</ul></details></caption>"
            f"<thead><tr><th>node</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


_POOL_COLUMNS = (("nodes", "GPU nodes in the pool"),
                 ("certified", "every check passed (or is not checked)"),
                 ("with a failure", "nodes with at least one failed result"),
                 ("with an error", "nodes with at least one error"),
                 ("skipped only", "no failure or error, but a skip that costs certification"),
                 *((o, f"{o} results") for o in OUTCOMES))


def pool_summary_html(results: list[dict], nodes: list[str], certified: list[str] | None = None,
                      pools: dict[str, str] | None = None) -> str:
    """<table id="gc-pools">: per GPU pool, its nodes, how many are certified, have a failure, an error or only
    skips, and its results per outcome; a 'cluster' row for results of no node and a total when there are
    several rows. `certified` is the summary's certified_nodes (worked out from the results when None)."""
    by_node = _by_node(results, nodes)
    if certified is None:
        certified = [n for n, rs in by_node.items() if n is not None
                     and reasons.certified([(r.get("outcome"), r.get("reason")) for r in rs])]
    cert = set(certified)
    pool_of = _pool_of(pools)
    rows: dict[str, list[int]] = {}
    for node, rs in by_node.items():
        if node is None:
            continue
        counts = outcome_counts(rs)
        outcomes = {r.get("outcome") for r in rs}
        row = rows.setdefault(pool_of(node), [0] * len(_POOL_COLUMNS))
        flags = [1, node in cert, "failed" in outcomes, "error" in outcomes,
                 node not in cert and "skipped" in outcomes and not outcomes & {"failed", "error"}]
        for i, v in enumerate([*map(int, flags), *(counts[o] for o in OUTCOMES)]):
            row[i] += v
    if not rows and None not in by_node:
        return _note("no GPU nodes and no results")
    body = [(pool, row) for pool, row in sorted(rows.items(), key=lambda kv: _natural(kv[0]))]
    if None in by_node:
        counts = outcome_counts(by_node[None])
        body.append((None, [None] * 5 + [counts[o] for o in OUTCOMES]))
    trs = []
    for pool, row in body:
        name = f"<i>{_CLUSTER}</i> (results of no node)" if pool is None else _e(pool)
        trs.append(f"<tr><th>{name}</th>{''.join(_count_cell(i, v) for i, v in enumerate(row))}</tr>")
    if len(body) > 1:
        total = [sum(r[i] or 0 for _, r in body) for i in range(len(_POOL_COLUMNS))]
        trs.append(f"<tr class=\"gc-total\"><th>total</th>{''.join(_count_cell(i, v) for i, v in enumerate(total))}</tr>")
    head = "".join(f'<th title="{_e(tip)}">{_e(name)}</th>' for name, tip in _POOL_COLUMNS)
    return (f'<table id="gc-pools" class="gc-table"><thead><tr><th>GPU pool</th>{head}</tr></thead>'
            f"<tbody>{''.join(trs)}</tbody></table>")


LEFT_OUT_SHOWN = 50  # left-out nodes drawn in the header; all of them are in the summary's left_out_nodes


def left_out_html(left_out: dict[str, dict], titles: dict[str, str], limit: int = LEFT_OUT_SHOWN) -> str:
    """<table id="gc-left-out">: the GPU-looking nodes the run did not certify (summary `left_out_nodes`: name ->
    {why, reason[, path, evidence]}), grouped by why (`titles`: why -> heading), the first `limit` drawn."""
    if not left_out:
        return _note("no GPU-looking node was left out")
    trs = []
    for why in sorted({v.get("why", "") for v in left_out.values()}, key=lambda w: list(titles).index(w)
                      if w in titles else len(titles)):
        names = sorted((n for n, v in left_out.items() if v.get("why") == why), key=_natural)
        trs.append(f'<tr class="gc-group"><th colspan="3">{_e(titles.get(why, why))}: {len(names)} node'
                   f'{"s" if len(names) != 1 else ""}</th></tr>')
        for n in names[:limit]:
            v = left_out[n]
            what = v.get("evidence") or ""
            trs.append(f'<tr><td class="gc-node">{_e(n)}</td><td>{_e(v.get("reason", ""))}</td>'
                       f'<td>{_e((v.get("path") + ": " if v.get("path") else "") + what)}</td></tr>')
        if len(names) > limit:
            trs.append(f'<tr><td colspan="3" class="gc-note">... and {len(names) - limit} more (all in the JSON '
                       "summary's left_out_nodes)</td></tr>")
    return ('<table id="gc-left-out" class="gc-table"><thead><tr><th>node</th><th>why</th>'
            f"<th>allocation path: evidence</th></tr></thead><tbody>{''.join(trs)}</tbody></table>")


_COUNT_CSS = {1: "gc-passed", 2: "gc-failed", 3: "gc-error", 4: "gc-skipped", 6: "gc-failed", 7: "gc-error", 8: "gc-skipped"}


def _count_cell(i: int, v: int | None) -> str:
    if v is None:
        return '<td class="gc-none">&#8211;</td>'
    css = _COUNT_CSS.get(i) if v else None
    return f'<td class="{css}">{v}</td>' if css else f"<td>{v}</td>"


# pytest-html draws its results table with JavaScript, one row per test, at about a millisecond a row: 12,000
# rows (1,000 nodes x 12 checks) take over 10 s. Above this many results the page opens with the passed rows
# (and, if what is left is still above it, the skipped rows) not drawn; ticking the outcome in pytest-html's
# filter draws them. Failures and errors are always drawn, and every row's data stays in the page.
ROWS_DRAWN_UP_TO = 1000
# pytest-html's filter names (its possibleFilters), in its order.
_HTML_OUTCOMES = ("passed", "skipped", "failed", "error", "xfailed", "xpassed", "rerun")
# Runs before pytest-html's script, which reads its filter from the address (?visible=...): unless the address
# already says what to show, it shows VISIBLE.
_FILTER_SCRIPT = ("<script>(() => {{ const u = new URL(location.href); if (!u.searchParams.has('visible')) {{ "
                  "u.searchParams.set('visible', '{visible}'); history.replaceState(history.state, '', u.href) }} }})()"
                  "</script>")


def undrawn_rows_html(counts: dict[str, int], limit: int = ROWS_DRAWN_UP_TO) -> str:
    """Above `limit` results (`counts` from outcome_counts): the script that opens the page with the passed (and
    if need be the skipped) rows not drawn, and a note saying so; else nothing."""
    total = sum(counts.values())
    if total <= limit:
        return ""
    hidden = [o for o in ("passed", "skipped") if counts.get(o)]
    if "skipped" in hidden and total - counts.get("passed", 0) <= limit:
        hidden.remove("skipped")
    if not hidden:
        return ""
    visible = ",".join(o for o in _HTML_OUTCOMES if o not in hidden)
    what = " and ".join(f"{counts[o]} {o}" for o in hidden)
    ticks = " and ".join(o.capitalize() for o in hidden)
    return _FILTER_SCRIPT.format(visible=visible) + (
        f'<p id="gc-undrawn" class="gc-note">{_e(what)} results are not drawn in the results table when the page '
        f"opens; tick {_e(ticks)} below to draw them (slow at this size). The matrix above lists every node.</p>")


# ---------------------------------------------------------------- latency plots

_SVG_NS = "http://www.w3.org/2000/svg"
_COLOURS = {"start": "#1f77b4", "schedule": "#ff7f0e"}
_THRESHOLD = re.compile(r"^(schedule|start)P(\d+)$")


def _pods(latency: list[dict]) -> list[dict]:
    return [p for node in latency for p in node.get("pods") or []]


def _ticks(vmax: float, target: int = 5) -> list[float]:
    """Round tick values from 0 to at least vmax (1, 2 or 5 times a power of ten apart)."""
    if not vmax > 0 or not math.isfinite(vmax):
        vmax = 1.0
    raw = vmax / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
    return [i * step for i in range(math.ceil(vmax / step - 1e-9) + 1)]


def _x_axis(ticks: list[float], x0: float, x1: float, y: float, label: str) -> str:
    span = ticks[-1] or 1.0
    parts = [f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#333"/>']
    for t in ticks:
        x = x0 + (x1 - x0) * t / span
        parts.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#333"/>'
                     f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle">{_e(seconds(t))}</text>')
    parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{y + 30}" text-anchor="middle">{_e(label)}</text>')
    return "".join(parts)


def _svg(id_: str, width: int, height: int, title: str, body: str) -> str:
    return (f'<svg xmlns="{_SVG_NS}" id="{id_}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{_e(title)}" font-family="sans-serif" font-size="11">'
            f"<title>{_e(title)}</title>{body}</svg>")


def latency_cdf_svg(latency: list[dict], thresholds: dict[str, float]) -> str:
    """<svg id="gc-latency-cdf">: empirical CDFs of start_s and schedule_s over all pods, with threshold lines."""
    pods = _pods(latency)
    series = {ph: sorted(_finite(p.get(f"{ph}_s") for p in pods)) for ph in ("start", "schedule")}
    if not any(series.values()):
        return _note("no latency samples: no CDF plot")
    lines = sorted((float(v), k, m.group(1)) for k, v in thresholds.items()
                   if (m := _THRESHOLD.match(k)) and _finite([v]))
    w, h, left, right, top, bottom = 640, 320, 52, 150, 14, 50
    x1, y1 = w - right, h - bottom
    ticks = _ticks(max([v for s in series.values() for v in s] + [v for v, _, _ in lines]))
    span = ticks[-1]

    def sx(v: float) -> float:
        return left + (x1 - left) * min(v, span) / span

    def sy(f: float) -> float:
        return y1 - (y1 - top) * f

    parts = [f'<rect x="{left}" y="{top}" width="{x1 - left}" height="{y1 - top}" fill="none" stroke="#ddd"/>']
    for f in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line x1="{left - 4}" y1="{sy(f):.1f}" x2="{x1}" y2="{sy(f):.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{sy(f) + 4:.1f}" text-anchor="end">{f:g}</text>')
    parts.append(f'<text x="12" y="{(top + y1) / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {(top + y1) / 2:.1f})">fraction of pods</text>')
    parts.append(_x_axis(ticks, left, x1, y1, "seconds since pod creation"))
    for ph, values in series.items():
        if not values:
            continue
        pts = [(sx(0), sy(0))]
        for i, v in enumerate(values):
            pts += [(sx(v), sy(i / len(values))), (sx(v), sy((i + 1) / len(values)))]
        pts.append((x1, sy(1)))
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        parts.append(f'<polyline class="gc-cdf-{ph}" points="{path}" fill="none" stroke="{_COLOURS[ph]}" '
                     f'stroke-width="2"><title>{_e(ph)}: n={len(values)}</title></polyline>')
    for i, (v, name, phase) in enumerate(lines):
        x, colour = sx(v), _COLOURS[phase]
        anchor, dx = ("end", -3) if x > (left + x1) / 2 else ("start", 3)
        parts.append(f'<line class="gc-threshold" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{y1}" stroke="{colour}" '
                     f'stroke-dasharray="5,3"/><text x="{x + dx:.1f}" y="{top + 12 + 12 * i}" '
                     f'text-anchor="{anchor}" fill="{colour}" stroke="#fff" stroke-width="3" paint-order="stroke">'
                     f"{_e(name)} {_e(seconds(v))} s</text>")
    legend = [(f"{ph} (n={len(v)})" if v else f"{ph} (no samples)", _COLOURS[ph], "") for ph, v in series.items()]
    legend += [("threshold", "#666", ' stroke-dasharray="5,3"')] if lines else []
    for i, (text, colour, dash) in enumerate(legend):
        y = top + 10 + 16 * i
        parts.append(f'<line x1="{x1 + 12}" y1="{y}" x2="{x1 + 32}" y2="{y}" stroke="{colour}" stroke-width="2"'
                     f'{dash}/><text x="{x1 + 36}" y="{y + 4}">{_e(text)}</text>')
    return _svg("gc-latency-cdf", w, h, "pod latency CDF (server timestamps)", "".join(parts))


_PHASES = (("create\u2192scheduled", "#9467bd"), ("scheduled\u2192started", "#2ca02c"))


def phase_breakdown_svg(latency: list[dict]) -> str:
    """<svg id="gc-latency-phases">: one stacked bar per pod, create→scheduled then scheduled→started."""
    bars = []
    for node in latency:
        for p in node.get("pods") or []:
            sched, start = (_finite([p.get(k)]) for k in ("schedule_s", "start_s"))
            if not sched and not start:
                continue
            a = sched[0] if sched else 0.0
            b = max(start[0] - a, 0.0) if start else 0.0
            tip = (f"{p.get('pod')} on {node.get('node')}: scheduled {seconds(p.get('schedule_s'))} s, "
                   f"started {seconds(p.get('start_s'))} s after creation")
            bars.append((str(p.get("pod")), a, b, tip))
    if not bars:
        return _note("no latency samples: no phase breakdown")
    row, left, right, top, bottom, w = 18, 180, 20, 30, 44, 640
    h = top + row * len(bars) + bottom
    x1, y_axis = w - right, top + row * len(bars)
    ticks = _ticks(max(a + b for _, a, b, _ in bars))

    def sx(v: float) -> float:
        return left + (x1 - left) * min(v, ticks[-1]) / ticks[-1]

    parts = []
    for i, (name, colour) in enumerate(_PHASES):
        x = left + 170 * i
        parts.append(f'<rect x="{x}" y="8" width="12" height="10" fill="{colour}"/>'
                     f'<text x="{x + 16}" y="17">{_e(name)}</text>')
    for i, (pod, a, b, tip) in enumerate(bars):
        y = top + row * i
        label = pod if len(pod) <= 28 else pod[:27] + "\u2026"
        parts.append(f'<g><title>{_e(tip)}</title>'
                     f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{_e(label)}</text>'
                     f'<rect x="{left}" y="{y + 3}" width="{sx(a) - left:.1f}" height="12" fill="{_PHASES[0][1]}"/>'
                     f'<rect x="{sx(a):.1f}" y="{y + 3}" width="{sx(a + b) - sx(a):.1f}" height="12" '
                     f'fill="{_PHASES[1][1]}"/></g>')
    parts.append(_x_axis(ticks, left, x1, y_axis, "seconds since pod creation"))
    return _svg("gc-latency-phases", w, h, "pod latency by phase (server timestamps)", "".join(parts))


# ---------------------------------------------------------------- percentile table

def _limits(phase: str, thresholds: dict[str, float]) -> list[tuple[str, str, float]]:
    """(threshold name, summary key, seconds) for every threshold on this phase, e.g. startP99 -> p99."""
    out = []
    for name, v in thresholds.items():
        m = re.fullmatch(rf"{phase}P(\d+)", name)
        if m and _finite([v]):
            out.append((name, "p99_bucket_le_s" if phase == "allocate" else f"p{m.group(1)}", float(v)))
    return out


def _verdict(stats: dict, limits: list[tuple[str, str, float]]) -> str:
    if not limits:
        return "no threshold"
    over, unknown = [], []
    for name, key, limit in limits:
        v = stats.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            unknown.append(name)
        elif v > limit:
            over.append(f"{name} exceeded")
    return "; ".join(over + [f"{n} not evaluated" for n in unknown]) or "within"


def percentile_table_html(latency: list[dict], thresholds: dict[str, float]) -> str:
    """<table id="gc-percentiles">: per node and phase, n/p50/p95/p99/max, thresholds, verdict and note."""
    if not latency:
        return _note("no latency samples")
    rows = []
    for node in latency:
        for phase in ("schedule", "start", "allocate"):
            stats = node.get(phase)
            limits = _limits(phase, thresholds)
            limit_text = ", ".join(f"{n} \u2264 {seconds(v)} s" for n, _, v in limits) or "none"
            lead = f"<td>{_e(node.get('node'))}</td><td>{_e(phase)}</td>"
            if not isinstance(stats, dict):
                why = stats if isinstance(stats, str) else "no samples"
                rows.append(f'<tr class="gc-none">{lead}<td colspan="5">&#8211;</td><td>{_e(limit_text)}</td>'
                            f"<td>not evaluated</td><td>{_e(why)}</td></tr>")
                continue
            verdict = _verdict(stats, limits)
            css = {"within": "gc-passed"}.get(verdict, "gc-failed" if "exceeded" in verdict else "gc-none")
            if phase == "allocate":
                values = ["n/a", "n/a", "\u2264 " + seconds(stats.get("p99_bucket_le_s")), "n/a"]
                note = (f"mean {seconds(stats.get('mean_s'))} s; p99 is the upper bound of a kubelet histogram "
                        "bucket")
            else:
                values = [seconds(stats.get(k)) for k in ("p50", "p95", "p99", "max")]
                note = stats.get("note") or ""
            n = stats.get("n")
            cols = "".join(f"<td>{_e(v)}</td>" for v in [n if n is not None else "n/a", *values])
            rows.append(f'<tr class="{css}">{lead}{cols}<td>{_e(limit_text)}</td><td>{_e(verdict)}</td>'
                        f"<td>{_e(note)}</td></tr>")
    head = "".join(f"<th>{c}</th>" for c in ("node", "phase", "n", "p50 s", "p95 s", "p99 s", "max s", "threshold",
                                             "verdict", "note"))
    return (f'<table id="gc-percentiles" class="gc-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


# ---------------------------------------------------------------- environment

_PLAIN = re.compile(r"^[A-Za-z0-9_./<>+][A-Za-z0-9_./<>@+=, -]*$")
_YAML_WORDS = re.compile(r"^(null|~|true|false|yes|no|on|off|[-+]?[0-9.]+(e[-+]?\d+)?)$", re.IGNORECASE)


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if v == {}:
        return "{}"
    if v == []:
        return "[]"
    s = str(v)
    return s if _PLAIN.match(s) and not _YAML_WORDS.match(s) and s == s.strip() else json.dumps(s)


def yamlish(obj: Any, indent: int = 0) -> list[str]:
    """Block-style YAML lines for nested dicts and lists (strings quoted only when needed)."""
    pad = "  " * indent
    if isinstance(obj, dict) and obj:
        lines = []
        for k, v in obj.items():
            if isinstance(v, (dict, list, tuple)) and v:
                lines += [f"{pad}{_scalar(k)}:", *yamlish(v, indent + 1)]
            else:
                lines.append(f"{pad}{_scalar(k)}: {_scalar(v)}")
        return lines
    if isinstance(obj, (list, tuple)) and obj:
        lines = []
        for item in obj:
            sub = yamlish(item, indent + 1)
            lines += [f"{pad}- {sub[0].lstrip()}", *sub[1:]]
        return lines
    return [pad + _scalar(obj)]


def environment_html(fingerprint: dict, config: dict) -> str:
    """<section id="gc-environment">: the cluster's fingerprint table (#gc-fingerprint), a place for the test
    runner's own environment table (#gc-runner: the report moves pytest-html's there), and last the config as YAML
    (#gc-config).

    The caller passes an already redacted config (gpuconform/redaction.py).
    """
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e('n/a' if v is None else v)}</td></tr>" for k, v in fingerprint.items())
    table = (f'<table id="gc-fingerprint" class="gc-table"><tbody>{rows}</tbody></table>' if rows
             else _note("no environment fingerprint"))
    text = "\n".join(yamlish(config))
    return (f'<section id="gc-environment"><h3>Environment</h3>{table}<div id="gc-runner"></div>'
            f'<h3>Effective config (secrets redacted)</h3><pre id="gc-config" class="gc-config">{_e(text)}</pre>'
            "</section>")


def verdict_html(summary: dict, meaning: str) -> str:
    """<p id="gc-verdict">: the run's verdict in one line, for the top of the report: PASS only when the run exited
    0 (every check passed and the coverage gate holds), with its GPU nodes certified and the exit status's
    `meaning`; and <p class="gc-paths">: the GPU nodes by allocation path (device plugin, DRA)."""
    status = summary.get("exit_status")
    nodes, certified = summary.get("gpu_nodes"), summary.get("certified_nodes")
    cov = summary.get("coverage") or {}
    word = "PASS" if status == 0 else "FAIL"
    text = f"Verdict: {word}"
    if nodes is not None and certified is not None:
        text += (f": {len(certified)} of {len(nodes)} GPU node{'s' if len(nodes) != 1 else ''} certified"
                 + (f" (coverage gate {cov['gate']})" if cov.get("gate") is not None else ""))
    text += f"; exit status {status}: {meaning}"
    out = f'<p id="gc-verdict" class="gc-verdict gc-{"passed" if word == "PASS" else "failed"}">{_e(text)}</p>'
    paths = (summary.get("environment") or {}).get("allocation paths (GPU nodes)")
    if paths:
        out += f'<p class="gc-paths">GPU nodes by allocation path (device plugin, DRA driver): {_e(paths)}</p>'
    for w in warnings(summary):
        out += f'<p class="gc-warning">Warning: {_e(w)}</p>'
    return out


def warnings(summary: dict) -> list[str]:
    """What an auditor should know about how the run was set up: plugin.namespace left empty, the run's
    credentials not caged by the admission policy (the pre-flight's dry run was admitted)."""
    out = []
    plugin = (summary.get("config") or {}).get("plugin")
    if isinstance(plugin, dict) and "namespace" in plugin and not plugin.get("namespace"):
        out.append("plugin.namespace is not set: a DaemonSet's pod in any namespace that mounts the kubelet's plugin "
                   "directory is judged as the plugin; set it to the namespace(s) where admins install the device "
                   "plugin and DRA driver, where tenants cannot create pods")
    policy = str((summary.get("environment") or {}).get("admission policy") or "")
    if policy.startswith("not in force"):
        out.append(f"the admission policy gpuconform-writes is {policy}")
    return out


# ---------------------------------------------------------------- the rollout rehearsal's timeline

_POD_STATE = {"Ready": "#2ca02c", "not Ready": "#ff7f0e", "ending": "#999"}
_PROBE = {"ran": "#2ca02c", "rejected": "#d62728"}


def rollout_timeline_svg(rollouts: list[dict]) -> str:
    """<svg id="gc-rollout-timeline">: per rehearsed node, over the seconds of its rollout: the windows (no plugin pod
    serving, or fewer devices offered) shaded red, one lane per plugin pod coloured by its state, the devices offered
    as a step line, and each probe pod as a dot (green ran, red rejected by the kubelet, grey otherwise)."""
    drawn = [r for r in rollouts if r.get("timeline")]
    if not drawn:
        return _note("no rollout rehearsal in this run: no timeline")
    w, left, right, lane, gap = 720, 150, 20, 14, 34
    x1 = w - right
    parts, y = [], 8
    for r in drawn:
        rows = r["timeline"]
        ts = [float(row.get("t") or 0) for row in rows]
        ticks = _ticks(max(ts) if ts else 1.0)
        span = ticks[-1] or 1.0

        def sx(t: float) -> float:
            return left + (x1 - left) * min(max(t, 0.0), span) / span

        names = list(dict.fromkeys(n for row in rows for n in _pod_names(row)))
        top = y + 16
        dev_top, dev_h = top + lane * len(names) + 6, 40
        bottom = dev_top + dev_h
        parts.append(f'<text x="4" y="{y + 10}" font-weight="bold">{_e(r.get("node"))}: {_e(r.get("daemonset"))} '
                     f'({_e(r.get("mode"))}), window {_e(seconds(r.get("window_s")))} s</text>')
        for i, row in enumerate(rows):  # the windows, sample to next sample
            if row.get("down"):
                end = ts[i + 1] if i + 1 < len(ts) else ts[i] + 1
                parts.append(f'<rect class="gc-rollout-down" x="{sx(ts[i]):.1f}" y="{top}" '
                             f'width="{max(sx(end) - sx(ts[i]), 1):.1f}" height="{bottom - top}" fill="#fdd"/>')
        for k, name in enumerate(names):
            ly = top + lane * k
            parts.append(f'<text x="{left - 4}" y="{ly + 10}" text-anchor="end">{_e(name if len(name) <= 26 else "…" + name[-25:])}</text>')
            for i, row in enumerate(rows):
                state = _pod_names(row).get(name)
                if state is None:
                    continue
                end = ts[i + 1] if i + 1 < len(ts) else ts[i] + 1
                parts.append(f'<rect x="{sx(ts[i]):.1f}" y="{ly + 2}" width="{max(sx(end) - sx(ts[i]), 1):.1f}" '
                             f'height="{lane - 4}" fill="{_POD_STATE.get(state, "#ccc")}"><title>{_e(name)} '
                             f'{_e(state)} at {_e(seconds(ts[i]))} s</title></rect>')
        most = max([int(row["offered"]) for row in rows if isinstance(row.get("offered"), int)] + [1])
        pts = [(sx(ts[i]), dev_top + dev_h * (1 - row["offered"] / most)) for i, row in enumerate(rows)
               if isinstance(row.get("offered"), int)]
        if pts:
            step = [pts[0]] + [q for a, b in zip(pts, pts[1:]) for q in ((b[0], a[1]), b)]
            parts.append(f'<polyline class="gc-rollout-offered" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in step)}"'
                         f' fill="none" stroke="#1f77b4" stroke-width="2"/>')
        parts.append(f'<text x="{left - 4}" y="{dev_top + 12}" text-anchor="end">devices offered (max {most})</text>')
        for i, row in enumerate(rows):
            for probe in filter(None, (row.get("probes") or "").split(", ")):
                outcome = probe.split(": ", 1)[-1].split(" ", 1)[0]
                parts.append(f'<circle cx="{sx(ts[i]):.1f}" cy="{bottom - 4}" r="4" fill="{_PROBE.get(outcome, "#999")}">'
                             f"<title>{_e(probe)}</title></circle>")
        parts.append(_x_axis(ticks, left, x1, bottom + 4, "seconds into the rollout"))
        y = bottom + 4 + gap + 12
    legend = ("red shade: no plugin pod serving the node, or fewer devices offered; blue: devices offered",
              "lanes: plugin pods (green Ready, orange not Ready, grey ending); dots: probe pods (green ran, red "
              "rejected by the kubelet)")
    for i, line in enumerate(legend):
        parts.append(f'<text x="4" y="{y + 14 * i}">{_e(line)}</text>')
    return _svg("gc-rollout-timeline", w, int(y + 14 * len(legend)), "rollout rehearsal timeline", "".join(parts))


def _pod_names(row: dict) -> dict[str, str]:
    """A timeline row's plugin pods: name -> state (from "name (state), ...")."""
    out = {}
    for part in filter(None, (row.get("plugin pods") or "").split(", ")):
        if part != "none" and part.endswith(")") and " (" in part:
            name, state = part[:-1].split(" (", 1)
            out[name] = state
    return out
