"""Shows the fault matrix (fault -> check -> reason code -> detected) and the run time per bed shape in pytest's
terminal summary."""

from __future__ import annotations

import time

from bedtools import MATRIX_OUT, SHAPES_OUT

_T0 = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for title, path in (("gpuconform fault matrix", MATRIX_OUT), ("gpuconform bed shapes (profile x layout)", SHAPES_OUT)):
        if path.exists() and path.stat().st_mtime >= _T0:
            terminalreporter.section(title)
            terminalreporter.write(path.read_text())
