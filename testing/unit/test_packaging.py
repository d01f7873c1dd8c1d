"""The wheel's make-up, from pyproject.toml and the tree (docs/install.md): every package of gpuconform and every
check is in it, the checks are built from tests/ (not copied), nothing but `gpuconform` is a top-level package (the
PyPI `fixtures` library and any project's `tests` stay theirs), and the plugin's entry point is the module pytest
is also asked for by name, so it is never registered twice."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
CHECKS = "gpuconform.checks"


def _source_dir(package: str) -> Path:
    """Where setuptools takes `package` from (the package-dir mapping, else its dotted path)."""
    mapping = SETUPTOOLS.get("package-dir", {})
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in mapping:
            return ROOT / mapping[".".join(parts[:n])] / Path(*parts[n:])
    return ROOT / Path(*parts)


def _python_dirs(top: Path) -> set[Path]:
    return {p.parent for p in top.rglob("*.py") if "__pycache__" not in p.parts}


def test_every_listed_package_is_a_package_and_only_gpuconform_is_top_level():
    packages = SETUPTOOLS["packages"]
    assert {p.split(".")[0] for p in packages} == {"gpuconform"}, packages
    for p in packages:
        assert (_source_dir(p) / "__init__.py").is_file(), f"{p}: no {_source_dir(p).relative_to(ROOT)}/__init__.py"


def test_no_module_is_left_out_of_the_wheel():
    """Every directory of Python files under gpuconform/ and tests/ is a listed package (a new one must be listed
    in pyproject.toml, or the installed suite lacks it)."""
    listed = {_source_dir(p) for p in SETUPTOOLS["packages"]}
    missing = sorted(str(d.relative_to(ROOT)) for d in _python_dirs(ROOT / "gpuconform") | _python_dirs(ROOT / "tests")
                     if d not in listed)
    assert not missing, f"not in pyproject.toml's [tool.setuptools] packages: {missing}"


def test_the_checks_are_built_from_tests():
    assert SETUPTOOLS["package-dir"] == {CHECKS: "tests"}
    areas = {d.name for d in (ROOT / "tests").iterdir() if d.is_dir() and any(d.glob("test_*.py"))}
    assert areas == {"registration", "allocation", "topology", "latency"}
    assert {f"{CHECKS}.{a}" for a in areas} | {CHECKS} <= set(SETUPTOOLS["packages"])


def test_the_fixture_package_is_gpuconforms_own():
    assert not (ROOT / "fixtures").exists(), "the fixtures are gpuconform.fixtures (PyPI has a `fixtures` library)"
    assert "gpuconform.fixtures" in SETUPTOOLS["packages"]


def test_the_entry_point_is_named_after_its_module_and_loads_the_plugin_and_fixture_when_asked():
    eps = PYPROJECT["project"]["entry-points"]["pytest11"]
    assert eps == {"gpuconform.pytest_plugin.entry": "gpuconform.pytest_plugin.entry"}
    entry = importlib.import_module("gpuconform.pytest_plugin.entry")
    plugin = importlib.import_module(entry.PLUGIN_MODULE)
    assert plugin.pytest_plugins == ["gpuconform.pytest_plugin.entry", "gpuconform.fixtures.check"]
    assert not hasattr(plugin, "pytest_addoption"), "the options are the entry module's (added once)"
    conftest = (ROOT / "conftest.py").read_text()
    assert 'pytest_plugins = ["gpuconform.pytest_plugin.entry"]' in conftest
    assert "Framework :: Pytest" in PYPROJECT["project"]["classifiers"]


def test_the_checks_markers_are_the_plugins_and_the_checks_use_no_other():
    import re

    entry = importlib.import_module("gpuconform.pytest_plugin.entry")
    ours = {m.split(":")[0].split("(")[0] for m in entry.MARKERS}
    used = {m for p in (ROOT / "tests").rglob("test_*.py") for m in re.findall(r"pytest\.mark\.(\w+)", p.read_text())}
    builtin = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}
    assert used - builtin <= ours, sorted(used - builtin - ours)


def test_checks_dirs_finds_a_checkouts_tests():
    entry = importlib.import_module("gpuconform.pytest_plugin.entry")
    assert (ROOT / "tests").resolve() in entry.checks_dirs()
