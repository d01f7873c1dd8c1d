"""The pytest11 entry point (pyproject.toml): all that an installed gpuconform adds to every pytest run in its
environment. It adds the `--gpuconform-*` options and does nothing else until the run asks for gpuconform; then it
loads the suite's plugin (gpuconform.pytest_plugin.plugin, which brings the `check` fixture) and its markers.

A run asks for gpuconform (the plugin is *active*) when it
1. gives any `--gpuconform-*` option (command line, PYTEST_ADDOPTS, or an ini file's addopts);
2. has GPUCONFORM_CONFIG set, non-empty;
3. loads the plugin itself: `-p gpuconform.pytest_plugin.plugin`, PYTEST_PLUGINS, a root conftest's
   `pytest_plugins`: whatever registered it before pytest_configure;
4. collects the checks: an argument (or testpaths entry) that is the package gpuconform.checks, a module in it or
   a package above it (with --pyargs), or a path inside the checks' directory: the installed package's or, in a
   checkout, tests/ (`pytest tests ...`, `pytest tests/allocation/test_counts.py`). A directory above them (a
   project root holding a virtualenv) is not asking.
Anything else leaves the run as it would be without gpuconform: no hook of the plugin runs, no fixture or marker is
added, and nothing beyond this module and the options' (no Kubernetes client) is imported.
`-p no:gpuconform.pytest_plugin.entry` switches the entry point off; the plugin can still be named with -p.

The entry point's name is this module's name, so that pytest, asked for the module by name (the plugin's
`pytest_plugins`, a checkout's conftest.py), finds it registered and does not register it a second time."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import gpuconform
from gpuconform.config import CONFIG_FILE_ENV

from . import options, scrub

PLUGIN_MODULE = "gpuconform.pytest_plugin.plugin"
CHECKS_PACKAGE = "gpuconform.checks"
OPTION_PREFIX = "gpuconform_"  # the dest of every --gpuconform-* option (options.add)

# The markers the checks carry (registered when active, so a run from any directory, without this repository's
# pyproject.toml, accepts them under --strict-markers).
MARKERS = (
    "node_probe: uses the optional privileged hostPath probe (needs a privileged namespace); deselect with "
    "-m 'not node_probe'",
    "gpus(n, then=None): GPUs the check holds on its node (an int, or 'all' for every free one; then='all': it later "
    "calls check.take_every_gpu); gpuconform/pytest_plugin/scheduler.py never overlaps checks beyond the node's "
    "free GPUs",
    "at_run_end: the check starts once its node's other checks are done (it judges what happened during the run); "
    "gpuconform/pytest_plugin/scheduler.py",
    "spans_run: the check starts first on its node and holds a device until the node's other checks are done; "
    "gpuconform/pytest_plugin/scheduler.py",
    "gpu_operator: checks the GPU operator's validation; deselected unless operator.namespace is set",
    "rollout: the rollout rehearsal; deselected unless rollout.mode is set; starts before any other check of its "
    "node and runs there alone (gpuconform/pytest_plugin/scheduler.py)",
)

_ACTIVE = pytest.StashKey[str]()  # why the run is active ("" when inert), decided once per run
_DEFAULTS: dict[str, object] = {}  # each --gpuconform-* option's dest and default: given = differs from it


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add(parser)
    _DEFAULTS.update((k, v) for k, v in vars(parser.parse_known_args([])).items() if k.startswith(OPTION_PREFIX))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not active(config):
        return
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    config.pluginmanager.import_plugin(PLUGIN_MODULE)  # its pytest_configure runs now (historic hook)


@pytest.hookimpl(optionalhook=True)  # pytest-metadata's (the HTML report's environment table): it may call it
def pytest_metadata(metadata: dict, config: pytest.Config) -> None:  # before the plugin is registered
    if active(config):
        scrub.scrub_metadata(metadata)


def active(config: pytest.Config) -> bool:
    return bool(reason_active(config))


def reason_active(config: pytest.Config) -> str:
    """Why this run asks for gpuconform (the module docstring's rules, in order), "" when it does not."""
    why = config.stash.get(_ACTIVE, None)
    if why is None:
        why = config.stash[_ACTIVE] = _decide(config)
    return why


def _decide(config: pytest.Config) -> str:
    given = sorted(k for k, default in _DEFAULTS.items() if getattr(config.option, k, default) != default)
    if given:
        return "--" + given[0].replace("_", "-")
    if os.environ.get(CONFIG_FILE_ENV):
        return CONFIG_FILE_ENV
    if config.pluginmanager.has_plugin(PLUGIN_MODULE):
        return PLUGIN_MODULE
    arg = _arg_naming_checks(config)
    return f"collects the checks ({arg})" if arg else ""


def _arg_naming_checks(config: pytest.Config) -> str | None:
    dirs: list[Path] | None = None
    for arg in config.args:
        target = str(arg).split("::", 1)[0]
        if config.option.pyargs and (target == CHECKS_PACKAGE or target.startswith(CHECKS_PACKAGE + ".")
                                     or CHECKS_PACKAGE.startswith(target + ".")):  # --pyargs gpuconform
            return str(arg)
        try:  # an argument may be no path at all (a very long option value, a module name)
            path = Path(config.invocation_params.dir, target).resolve(strict=True)
        except (OSError, ValueError):
            continue
        dirs = checks_dirs() if dirs is None else dirs
        if any(path == d or d in path.parents for d in dirs):
            return str(arg)
    return None


def checks_dirs() -> list[Path]:
    """Where the checks are: the package gpuconform.checks (installed, or a checkout's editable install: tests/),
    and a checkout's tests/ beside gpuconform/ (a checkout on PYTHONPATH, as the local suite image runs it)."""
    dirs: list[Path] = []
    try:
        spec = importlib.util.find_spec(CHECKS_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        dirs += [Path(p).resolve() for p in spec.submodule_search_locations]
    root = Path(gpuconform.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "tests" / "__init__.py").is_file():
        dirs.append(root / "tests")
    return dirs
