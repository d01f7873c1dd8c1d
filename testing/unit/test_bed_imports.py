"""The bed's Python (localcluster/*.py) imports as a layered graph: every import at module top, never inside a
function or class (where it used to hide an import circle), and no module reaching itself through its imports.
bed.py is the base, which imports none of the others; cluster.py is the entry (`python3 localcluster/cluster.py`),
which none of the others imports."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

LOCALCLUSTER = Path(__file__).resolve().parents[2] / "localcluster"
MODULES = {p.stem: p for p in sorted(LOCALCLUSTER.glob("*.py"))}


def _tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name.split(".")[0] for a in node.names]
    return [node.module.split(".")[0]] if node.module and not node.level else []


def local_imports(name: str) -> set[str]:
    """The bed modules `name` imports (anywhere in it)."""
    return {m for n in ast.walk(_tree(name)) if isinstance(n, (ast.Import, ast.ImportFrom))
            for m in _imported(n) if m in MODULES}


def test_the_bed_has_the_modules_this_test_knows():
    assert {"bed", "cluster", "faults", "faulttable", "dranode", "gpunode", "shapes", "nvidia"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_import_is_at_module_top(name):
    tree = _tree(name)
    top = {id(n) for n in tree.body}
    nested = [f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
              if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top]
    assert not nested, f"localcluster/{name}.py imports below module level: {nested}"


def test_the_module_graph_has_no_cycle():
    graph = {name: local_imports(name) for name in MODULES}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle among localcluster modules: {' -> '.join(e.args[1])}")
    assert set(order) == set(MODULES)


def test_bed_is_the_base_and_cluster_the_entry():
    assert local_imports("bed") == set()
    assert not [name for name in MODULES if "cluster" in local_imports(name)]
    assert local_imports("faulttable") <= {"bed"}  # the table: no cluster I/O, importable by the end-to-end tests
