"""The results: each check's report gets its node, reason code, message, MUST statement and the CNCF AI
Conformance requirements it gives evidence for as user properties (so JUnit XML carries them), environment errors
show as errors, and one row per check and node is kept for the summary."""

from __future__ import annotations

from typing import Any

import pytest

from gpuconform import reasons
from gpuconform.reasons import Verdict, code_of


class Results:
    """One row per check and node (test, check, node, outcome, reason, message, duration_s) from pytest's reports,
    and the figures the checks measured."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.measured: list[dict] = []  # each check's measurements (NodeCheck.measure), in result order
        self.failed = False  # a check failed: keepNamespaceOnFailure keeps the namespaces

    def add(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.failed:
            self.failed = True
        if report.when == "call" or (report.when == "setup" and not report.passed):
            props = dict(report.user_properties)
            outcome = props.get("outcome") or ("error" if report.when == "setup" and report.failed else report.outcome)
            msg = props.get("message", "")
            if not msg and isinstance(report.longrepr, tuple):
                msg = str(report.longrepr[2]).removeprefix("Skipped: ")
            check = report.nodeid.split("::")[-1].split("[")[0]
            self.rows.append({"test": report.nodeid, "check": check, "node": props.get("node"), "outcome": outcome,
                              "reason": props.get("reason"), "message": msg, "duration_s": round(report.duration, 3),
                              "ai_conformance": [r for r in str(props.get("ai_conformance") or "").split(", ")
                                                 if r]})
        if report.when == "call" and getattr(report, "measurements", None):
            self.measured.append(report.measurements)

    def latency(self) -> list[dict]:
        """The latency samples the checks measured, in result order."""
        return [m["latency"] for m in self.measured if m.get("latency")]

    def rollouts(self) -> list[dict]:
        """The rollout rehearsal's figures, one per node, in result order."""
        return [m["rollout"] for m in self.measured if m.get("rollout")]


def properties(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport,
               requirements: list[str] = ()) -> list[tuple[str, Any]]:
    """The outcome, reason code, message, MUST statement and AI Conformance `requirements` (catalog.ai_conformance
    for the check on its node) of one phase's report; rewrites a verdict's report to its rendered text (the
    traceback adds nothing for auditors)."""
    exc = call.excinfo.value if call.excinfo else None
    code = None
    props: list[tuple[str, Any]] = []
    if exc is not None and report.when == "call" and not report.skipped:
        props.append(("message", exc.message if isinstance(exc, Verdict)
                      else call.excinfo.exconly().splitlines()[0][:500]))
    if isinstance(exc, Verdict):
        code = exc.code
        report.longrepr = exc.render()
        if exc.outcome == "error":
            props.append(("outcome", "error"))
    elif report.skipped:  # the check's own skip carries its code; a marker's skip (no GPU node) says it in text
        code = getattr(exc, "code", None) or (code_of(str(report.longrepr[2]).removeprefix("Skipped: "))
                                              if isinstance(report.longrepr, tuple) else None)
    if code:
        props.append(("reason", code))
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    if report.when == "call" and "MUST:" in doc:
        props.append(("must", " ".join(doc.split("MUST:", 1)[1].split())))
    if report.when == "call" and requirements:  # what an auditor files the result as evidence for
        props.append(("ai_conformance", ", ".join(requirements)))
    return props


def status(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """An environment problem raised in the call phase shows as an error, not a failure."""
    if report.when == "call" and report.failed and ("outcome", "error") in report.user_properties:
        return "error", "E", "ERROR"
    return None


def certified_nodes(rows: list[dict], node_names: list[str]) -> list[str]:
    per_node: dict[str, list[tuple[str, str | None]]] = {n: [] for n in node_names}
    for r in rows:
        if r["node"] in per_node:
            per_node[r["node"]].append((r["outcome"], r["reason"]))
    return [n for n, outs in per_node.items() if reasons.certified(outs)]
