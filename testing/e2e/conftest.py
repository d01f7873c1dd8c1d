"""Shows the fault matrix (fault -> check -> reason code -> detected) in pytest's terminal summary."""

from __future__ import annotations

import time

from bedtools import MATRIX_OUT

_T0 = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if MATRIX_OUT.exists() and MATRIX_OUT.stat().st_mtime >= _T0:
        terminalreporter.section("gpuconform fault matrix")
        terminalreporter.write(MATRIX_OUT.read_text())
