"""The CNCF Kubernetes AI Conformance evidence files (`--gpuconform-ai-conformance DIR`): `e2e.log` and `junit.xml`
in the layout the program's submissions use, written from the run's summary beside the suite's own report, JUnit
XML and JSON summary.

What the program asks (read at cncf/k8s-ai-conformance: instructions.md at commit 95aee79e1e77, "Hybrid
Verification & Automated Tests (v1.37+)"; docs/AIConformance-1.37.yaml at 287b44f07bb5; a v1.37 submission,
v1.37/gke/PRODUCT.yaml at c9ad16034f7e with its junit.xml and e2e.log at 56532b2fcc4e; more in
docs/ai-conformance.md): from Kubernetes v1.37 a submission directory `v1.37/<dir>/` may hold `e2e.log` (the raw
test log) and `junit.xml` (or results.json), and a requirement's `evidence` links a testcase of that file by its
name after `#`: `file://v1.37/<dir>/junit.xml#TestSecureAcceleratorAccess` (the upstream suite's Go test; gotestsum
writes `<testsuites><testsuite name=PKG><testcase classname=PKG name=TEST time=S/>`, one testcase per test).

Here each requirement id the run gave evidence for (a result whose `ai_conformance` names it: catalog.ai_conformance,
dra_support only on DRA nodes of clusters whose checklist has it) is one `<testcase name="<requirement id>">`, so a
submission links `junit.xml#secure_accelerator_access`. The testcase names the checks and nodes behind it (one
`result` property per check and node, naming the test as the suite's own JUnit XML and HTML report do, and a
readable list in `<system-out>`). Its status follows the node certification rule (reasons.certified): `<failure>`
when a result behind it failed, `<error>` when one errored, `<skipped>` when one was skipped for a reason that costs
certification or none passed, else passed; "not checked" skips (NOTCHECKED-*) are listed and cost nothing.
"""

from __future__ import annotations

import calendar
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gpuconform import catalog, reasons, redaction, untrusted

E2E_LOG, JUNIT_XML = "e2e.log", "junit.xml"
CLASSNAME = "gpuconform"  # the testsuite's name and each testcase's classname (gotestsum: the Go package)
# What XML 1.0 cannot carry (a control character in cluster text would make the file unparsable)
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(value: Any) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _minor(summary: dict) -> int | None:
    return catalog.minor_of(str(summary.get("server_version") or ""))


def _seconds(iso: Any) -> float | None:
    try:
        return calendar.timegm(time.strptime(str(iso), "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return None


def by_requirement(results: list[dict]) -> dict[str, list[dict]]:
    """Requirement id -> the results that give evidence for it, in AI_CONFORMANCE's order (ids the run gave no
    evidence for are absent; an id the catalog does not know comes last)."""
    out: dict[str, list[dict]] = {}
    for r in results:
        for req in r.get("ai_conformance") or ():
            out.setdefault(req, []).append(r)
    order = {req: i for i, req in enumerate(catalog.AI_CONFORMANCE)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def status(results: list[dict]) -> tuple[str, str]:
    """(passed | failed | error | skipped, why) of one requirement from the results behind it: the node
    certification rule over them (reasons.certified)."""
    counted = [r for r in results if not (r.get("outcome") == "skipped" and reasons.is_not_checked(r.get("reason")))]

    def which(outcome: str) -> list[dict]:
        return [r for r in counted if r.get("outcome") == outcome]

    def named(rs: list[dict]) -> str:
        shown = "; ".join(f"{r.get('check')} on {r.get('node') or 'the cluster'}"
                          + (f" [{r['reason']}]" if r.get("reason") else "") for r in rs[:5])
        return shown + (f"; and {len(rs) - 5} more" if len(rs) > 5 else "")

    n = len(results)
    for outcome in ("failed", "error"):
        if which(outcome):
            return outcome, f"{len(which(outcome))} of {n} results {outcome}: {named(which(outcome))}"
    if which("skipped"):
        return "skipped", (f"{len(which('skipped'))} of {n} results skipped for a reason that costs certification, "
                           f"so the evidence is incomplete: {named(which('skipped'))}")
    if not which("passed"):
        return "skipped", f"no result passed ({n} not checked)"
    return "passed", f"{len(which('passed'))} of {n} results passed" + (
        f", {n - len(which('passed'))} not checked" if n > len(which("passed")) else "")


def _result_line(r: dict, pools: dict) -> str:
    node = r.get("node")
    pool = pools.get(node) if node else None
    text = (f"{str(r.get('outcome', '?')).upper():8} {r.get('check')} on {node or 'the cluster'}"
            + (f" ({pool})" if pool else "") + f", {r.get('duration_s', 0)} s")
    if r.get("reason"):  # a skip's message starts with its code already
        message = str(r.get("message") or "").removeprefix(f"[{r['reason']}]").strip()
        text += f": [{r['reason']}] {untrusted.one_line(message)}"
    return text + f"\n    test: {r.get('test')}"


def junit_xml(summary: dict) -> str:
    """junit.xml: one testsuite `gpuconform`, one testcase per requirement id the run gave evidence for."""
    groups = by_requirement(summary.get("results") or [])
    pools = summary.get("node_pools") or {}
    counts = {"failed": 0, "error": 0, "skipped": 0}
    cases = []
    for req, rs in groups.items():
        outcome, why = status(rs)
        counts[outcome] = counts.get(outcome, 0) + 1
        case = ET.Element("testcase", classname=CLASSNAME, name=_x(req),
                          time=f"{sum(float(r.get('duration_s') or 0) for r in rs):.3f}")
        props = ET.SubElement(case, "properties")
        checks = list(dict.fromkeys(str(r.get("check")) for r in rs))
        nodes = list(dict.fromkeys(str(r.get("node")) for r in rs if r.get("node")))
        ET.SubElement(props, "property", name="checks", value=_x(", ".join(checks)))
        ET.SubElement(props, "property", name="nodes", value=_x(", ".join(nodes)))
        for r in rs:
            ET.SubElement(props, "property", name="result", value=_x(
                f"{r.get('test')}: {r.get('outcome')}" + (f" [{r['reason']}]" if r.get("reason") else "")))
        if outcome != "passed":
            tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[outcome]
            bad = [r for r in rs if r.get("outcome") == outcome and not reasons.is_not_checked(r.get("reason"))]
            el = ET.SubElement(case, tag, message=_x(why))
            if bad and bad[0].get("reason"):
                el.set("type", _x(bad[0]["reason"]))
            if tag != "skipped":
                el.text = _x("\n".join(_result_line(r, pools) for r in bad))
        out = ET.SubElement(case, "system-out")
        out.text = _x(f"{req}: {why}; the checks and nodes behind it:\n"
                      + "\n".join(_result_line(r, pools) for r in rs) + "\n")
        cases.append(case)
    start, end = _seconds(summary.get("started")), _seconds(summary.get("finished"))
    wall = f"{max(end - start, 0):.3f}" if start is not None and end is not None else "0"
    attrs = {"tests": str(len(cases)), "failures": str(counts["failed"]), "errors": str(counts["error"])}
    root = ET.Element("testsuites", **attrs, time=wall)
    suite = ET.SubElement(root, "testsuite", name=CLASSNAME, **attrs, skipped=str(counts["skipped"]), time=wall,
                          timestamp=_x(summary.get("started") or ""))
    props = ET.SubElement(suite, "properties")
    minor = _minor(summary)
    for k, v in (("suite_version", summary.get("suite_version")), ("run_id", summary.get("run_id")),
                 ("server_version", summary.get("server_version")),
                 ("checklist", f"AIConformance-1.{minor}" if minor is not None else None),
                 ("gpu_nodes", len(summary.get("gpu_nodes") or [])),
                 ("certified_nodes", len(summary.get("certified_nodes") or [])),
                 ("exit_status", summary.get("exit_status"))):
        if v is not None:
            ET.SubElement(props, "property", name=k, value=_x(v))
    suite.extend(cases)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def e2e_log(summary: dict, progress: list[str] = ()) -> str:
    """e2e.log: what ran, the run's progress lines as they were logged, every result in the order it came, and per
    requirement id a `=== RUN` / `--- PASS|FAIL|SKIP` block (the shape of `go test -v`, which the program's own
    e2e.log is) naming the results behind it; the last line is PASS when the run exited 0 and no requirement
    failed, else FAIL."""
    from .options import exit_meaning

    results = summary.get("results") or []
    pools = summary.get("node_pools") or {}
    minor = _minor(summary)
    nodes, certified = summary.get("gpu_nodes") or [], summary.get("certified_nodes") or []
    lines = [f"gpuconform {summary.get('suite_version', '?')}: GPU device-plugin and DRA driver conformance, "
             "evidence for the CNCF Kubernetes AI Conformance program",
             f"run {summary.get('run_id', '-')} against Kubernetes {summary.get('server_version', '?')}"
             + (f" (checklist AIConformance-1.{minor})" if minor is not None else "")
             + f", {summary.get('started', '?')} to {summary.get('finished', '?')}",
             f"exit status {summary.get('exit_status', '?')}: {exit_meaning(summary.get('exit_status'))}",
             f"GPU nodes: {len(nodes)}, certified {len(certified)}"]
    lines += [f"  {n}: {pools.get(n, '?')}" + ("" if n in certified else " (not certified)") for n in nodes]
    lines += ["", "# progress: the run's live log"]
    lines += [redaction.scrub(untrusted.clean(p)) for p in progress] or ["(none kept)"]
    lines += ["", f"# results: {len(results)}, in the order they came"]
    lines += [_result_line(r, pools) for r in results]
    lines += ["", "# AI Conformance requirements: one `=== RUN` block each, as junit.xml has one testcase each"]
    worst = "PASS"
    for req, rs in by_requirement(results).items():
        outcome, why = status(rs)
        word = {"passed": "PASS", "failed": "FAIL", "error": "FAIL", "skipped": "SKIP"}[outcome]
        worst = "FAIL" if word == "FAIL" else worst
        lines.append(f"=== RUN   {req}")
        lines += [f"    {r.get('outcome')}: {r.get('check')} on {r.get('node') or 'the cluster'}"
                  + (f" [{r['reason']}]" if r.get("reason") else "") for r in rs]
        lines.append(f"--- {word}: {req} ({sum(float(r.get('duration_s') or 0) for r in rs):.2f}s)")
        lines.append(f"    {why}")
    if not by_requirement(results):
        lines.append("(no result gave evidence for a requirement)")
    lines.append("PASS" if worst == "PASS" and summary.get("exit_status") == 0 else "FAIL")
    return "\n".join(_x(line) for line in lines) + "\n"


def write(directory: str, summary: dict, progress: list[str] = ()) -> list[Path]:
    """Writes e2e.log and junit.xml into `directory` (made if need be); returns their paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    log, xml = out / E2E_LOG, out / JUNIT_XML
    log.write_text(e2e_log(summary, progress), encoding="utf-8")
    xml.write_text(junit_xml(summary), encoding="utf-8")
    return [log, xml]
