"""The pytest11 entry point (gpuconform/pytest_plugin/entry.py) in a child pytest: installed, gpuconform leaves a
run that does not ask for it as it was (outcomes, output, fixtures, markers, no Kubernetes client imported), and
each way of asking (docs/install.md, "When the plugin is active") loads the plugin and its `check` fixture.

The child loads the entry module with `-p gpuconform.pytest_plugin.entry`, as an installed entry point registers it
(the same name: where the entry point is installed too, pytest registers it once). No child reaches a cluster: the
kubeconfig points at a file that does not exist.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from gpuconform import __version__

pytest_plugins = ["pytester"]  # in the module: pytest refuses pytest_plugins in a non-root conftest

REPO = Path(__file__).resolve().parents[2]
ENTRY = "gpuconform.pytest_plugin.entry"

# Another project's tests: its own fixture named `check`, a marker the checks also use, and what it must not see.
OTHER_PROJECT = '''
import sys

import pytest


@pytest.fixture
def check():
    return "mine"


def test_its_own_check_fixture(check):
    assert check == "mine"


@pytest.mark.gpus(1)
def test_a_marker_named_like_ours():
    pass


def test_nothing_of_the_suite_is_loaded(request):
    assert "kubernetes" not in sys.modules and "gpuconform.pytest_plugin.plugin" not in sys.modules
    assert not request.config.pluginmanager.has_plugin("gpuconform.pytest_plugin.plugin")
    assert not request.config.pluginmanager.has_plugin("gpuconform.fixtures.check")


def test_skipped():
    pytest.skip("its own reason")


def test_failing():
    assert 1 == 2
'''

ASKS = '''
from gpuconform.pytest_plugin.entry import reason_active
from gpuconform.pytest_plugin.plugin import conformance


def test_active(request):
    print("ACTIVE BY", reason_active(request.config))
    assert conformance(request.config) is not None
    assert request.config.pluginmanager.has_plugin("gpuconform.fixtures.check")  # the `check` fixture
'''


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "no-such-kubeconfig"))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\n")  # the child's rootdir is its tmp dir, away from the repo's conftest.py

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=120)

    return run


def _normalised(res: pytest.RunResult) -> list[str]:
    """The child's output without what differs from run to run (times) or by the plugins list itself."""
    return [re.sub(r" in \d+\.\d+s", " in Ns", ln) for ln in res.outlines if not ln.startswith("plugins:")]


def test_installed_but_not_asked_the_run_is_as_without_it(pytester: pytest.Pytester, child):
    pytester.makepyfile(test_other=OTHER_PROJECT)
    with_it = child("-p", ENTRY, "-rA")
    without = child("-p", f"no:{ENTRY}", "-rA")
    with_it.assert_outcomes(passed=3, skipped=1, failed=1, warnings=1)  # the warning: pytest.mark.gpus unknown
    assert _normalised(with_it) == _normalised(without)
    assert not [ln for ln in with_it.outlines if "gpuconform" in ln and not ln.startswith("plugins:")]


def test_installed_it_adds_its_options_to_help(child):
    res = child("-p", ENTRY, "--help")
    res.stdout.fnmatch_lines(["*--gpuconform-config=FILE*", "*--gpuconform-set=KEY=VALUE*"])


def test_asked_the_check_fixture_comes_with_the_plugin(child):
    res = child("-p", ENTRY, "--gpuconform-run-id", "pytester", "--fixtures")
    res.stdout.fnmatch_lines(["check -- *gpuconform*fixtures*check.py*"])


@pytest.mark.parametrize("how", ["--gpuconform-set", "--gpuconform-run-id", "PYTEST_ADDOPTS", "GPUCONFORM_CONFIG",
                                 "-p plugin"])
def test_each_way_of_asking_loads_the_plugin_and_its_fixture(pytester: pytest.Pytester, child, monkeypatch, how):
    pytester.makepyfile(test_asks=ASKS)
    args: list[str] = []
    if how == "--gpuconform-set":
        args = ["--gpuconform-set", "thresholds.startP99=8s"]
    elif how == "--gpuconform-run-id":
        args = ["--gpuconform-run-id", "pytester"]
    elif how == "PYTEST_ADDOPTS":
        monkeypatch.setenv("PYTEST_ADDOPTS", "--gpuconform-context=elsewhere")
    elif how == "GPUCONFORM_CONFIG":
        monkeypatch.setenv("GPUCONFORM_CONFIG", str(pytester.makefile(".yaml", cfg="thresholds:\n  startP99: 8s\n")))
    else:
        args = ["-p", "gpuconform.pytest_plugin.plugin"]
    res = child("-p", ENTRY, "-s", *args)
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines([f"gpuconform {__version__}: vendor *", "*ACTIVE BY *"])
    expected = {"--gpuconform-set": "--gpuconform-set", "--gpuconform-run-id": "--gpuconform-run-id",
                "PYTEST_ADDOPTS": "--gpuconform-context", "GPUCONFORM_CONFIG": "GPUCONFORM_CONFIG",
                "-p plugin": "gpuconform.pytest_plugin.plugin"}[how]
    assert f"ACTIVE BY {expected}" in res.stdout.str()


def test_the_plugin_named_outright_is_registered_once_beside_the_entry_point(child, pytester: pytest.Pytester):
    """-p plugin registers the entry module through the plugin's pytest_plugins; -p entry (or the installed entry
    point) then finds it registered under the same name: no 'Plugin already registered' error."""
    pytester.makepyfile(test_asks=ASKS)
    res = child("-p", "gpuconform.pytest_plugin.plugin", "-p", ENTRY)
    res.assert_outcomes(passed=1)


def test_collecting_the_checks_asks_for_it(child):
    """The checks' directory as an argument (a checkout's tests/) is asking: the run starts (pre-flight fails on the
    missing kubeconfig, exit 7) instead of erroring on a missing `check` fixture."""
    res = child("-p", ENTRY, str(REPO / "tests" / "latency"), "--collect-only", "-q")
    assert res.ret == 7, res.stdout.str() + res.stderr.str()
    assert "gpuconform pre-flight failed" in res.stdout.str() + res.stderr.str()
    assert "fixture 'check' not found" not in res.stdout.str()


@pytest.mark.skipif(importlib.util.find_spec("gpuconform.checks") is None,
                    reason="gpuconform is not installed here (gpuconform.checks exists only installed: pip install -e .)")
def test_collecting_the_checks_package_asks_for_it(child):
    res = child("-p", ENTRY, "--pyargs", "gpuconform.checks.latency", "--collect-only", "-q")
    assert res.ret == 7, res.stdout.str() + res.stderr.str()
    assert "gpuconform pre-flight failed" in res.stdout.str() + res.stderr.str()
