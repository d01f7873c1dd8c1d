"""Shows the fault matrix (fault -> check -> reason code -> detected) and the run time per bed shape in pytest's
terminal summary; starts the end-to-end session on the bed without its DRA node."""

from __future__ import annotations

import json
import time

import pytest
from bedtools import KUBECONFIG, MATRIX_OUT, SHAPES_OUT, STATE, bed

_T0 = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for title, path in (("gpuconform fault matrix", MATRIX_OUT), ("gpuconform bed shapes (profile x layout)", SHAPES_OUT)):
        if path.exists() and path.stat().st_mtime >= _T0:
            terminalreporter.section(title)
            terminalreporter.write(path.read_text())


@pytest.fixture(scope="session", autouse=True)
def bed_without_its_dra_node():
    """The end-to-end modules expect the bed's device-plugin node and kwok nodes only; `make demo` and `make bench`
    leave the DRA node (localcluster/dranode.py) up, so it goes first. The modules that need it (test_dra.py, the
    fault matrix's DRA rows) bring it up and remove it themselves."""
    state = STATE / "state.json"
    if KUBECONFIG.exists() and state.exists() and json.loads(state.read_text()).get("dra"):
        bed("dra", "down")


@pytest.fixture(scope="module")
def dra_node():
    """The bed's DRA node (localcluster/dranode.py) up for one module, removed at its end."""
    bed("dra", "up")
    try:
        yield
    finally:
        bed("dra", "down")
