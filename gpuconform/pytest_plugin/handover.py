"""Findings become pytest outcomes: a reason code's outcome class decides fail (Violation), error
(EnvironmentProblem) or skip."""

from __future__ import annotations

from typing import Iterable

import pytest

from gpuconform import verdicts
from gpuconform.reasons import EnvironmentProblem, Violation, lookup, skip_reason


class Skip(pytest.skip.Exception):  # type: ignore[misc,name-defined]
    """A skip that carries its reason code (the results read it here, not back out of the text)."""

    def __init__(self, code: str, message: str):
        super().__init__(skip_reason(code, message))
        self.code = lookup(code).code


def hand_over(findings: Iterable[verdicts.Finding]) -> None:
    """Raises the first finding's outcome; returns when there is none."""
    __tracebackhide__ = True
    for f in findings:
        raise_for(f.code, f.message)


def raise_for(code: str, message: str) -> None:
    """Raises the outcome a reason code stands for."""
    __tracebackhide__ = True
    outcome = lookup(code).outcome
    if outcome == "fail":
        raise Violation(code, message)
    if outcome == "error":
        raise EnvironmentProblem(code, message)
    raise Skip(code, message)
