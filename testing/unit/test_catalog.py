"""gpuconform/catalog.py lists exactly the checks in tests/, read from their source (no cluster, no collection)."""

from __future__ import annotations

import ast
from pathlib import Path

from gpuconform import catalog

TESTS = Path(__file__).resolve().parents[2] / "tests"


def _marker(dec: ast.expr) -> tuple[str, ast.Call | None] | None:
    """('gpus', the call) for @pytest.mark.gpus(...), ('at_run_end', None) for @pytest.mark.at_run_end."""
    call = dec if isinstance(dec, ast.Call) else None
    node = call.func if call else dec
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
        return node.attr, call
    return None


def checks_in_tests() -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        for fn in ast.parse(path.read_text()).body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_"):
                assert fn.name not in found, f"{fn.name} defined twice"
                found[fn.name] = fn
    return found


def takes_every_gpu(fn: ast.FunctionDef) -> bool:
    """@pytest.mark.gpus("all"), or gpus(n, then="all")."""
    for dec in fn.decorator_list:
        m = _marker(dec)
        if m and m[0] == "gpus" and m[1] is not None:
            values = [*m[1].args, *(k.value for k in m[1].keywords if k.arg == "then")]
            if any(isinstance(v, ast.Constant) and v.value == "all" for v in values):
                return True
    return False


def test_the_table_is_the_checks_in_tests():
    found = checks_in_tests()
    assert len(catalog.NAMES) == len(set(catalog.NAMES))
    assert set(catalog.NAMES) == set(found)
    for name, fn in found.items():  # each takes one argument: its NodeCheck (once per GPU node)
        assert [a.arg for a in fn.args.args] == ["check"], name


def test_the_checks_holding_every_gpu_are_those_marked_so():
    found = checks_in_tests()
    assert {c.name for c in catalog.CHECKS if c.exclusive} == {n for n, fn in found.items() if takes_every_gpu(fn)}
    plugin = TESTS.parent / "gpuconform" / "pytest_plugin"
    steps = ast.Module(body=[*ast.parse((plugin / "paths.py").read_text()).body,  # the path steps, the rehearsal's
                             *ast.parse((plugin / "rollout.py").read_text()).body], type_ignores=[])
    for c in catalog.CHECKS:
        if c.exclusive:  # the pod label is the one the check's body (or the path step it calls) gives its pods
            strings = {s.value for s in ast.walk(found[c.name]) if isinstance(s, ast.Constant)}
            calls = {n.attr for n in ast.walk(found[c.name]) if isinstance(n, ast.Attribute)}
            strings |= {s.value for f in ast.walk(steps) if isinstance(f, ast.FunctionDef) and f.name in calls
                        for s in ast.walk(f) if isinstance(s, ast.Constant)}
            assert c.exclusive in strings, c.name
    assert catalog.EXCLUSIVE == ("rollout", "burst", "mig-parent", "numa", "latency")


def test_start_counters_name_catalogued_checks():
    assert catalog.START_COUNTERS and catalog.START_COUNTERS <= set(catalog.NAMES)


def test_each_check_names_known_ai_conformance_requirements():
    """The CNCF AI Conformance ids an auditor files results under (cncf/k8s-ai-conformance docs/AIConformance-1.35.md)."""
    for c in catalog.CHECKS:
        assert set(c.ai_conformance) <= set(catalog.AI_CONFORMANCE), c.name
    isolation = "test_pods_see_exactly_the_gpus_they_request"
    # dra_support: results on DRA nodes of clusters whose checklist has it (1.33-1.35), never on device-plugin nodes
    assert catalog.ai_conformance(isolation, dra_node=True, minor=35) == ["secure_accelerator_access", "dra_support"]
    assert catalog.ai_conformance(isolation, dra_node=True, minor=37) == ["secure_accelerator_access"]
    assert catalog.ai_conformance(isolation, dra_node=False, minor=34) == ["secure_accelerator_access"]
    assert catalog.ai_conformance(isolation) == ["secure_accelerator_access"]
    assert [catalog.minor_of(v) for v in ("v1.37.2", "v1.35.0-gke.1", "2.0", "x")] == [37, 35, None, None]
    assert "gpu_sharing" in catalog.ai_conformance("test_advertised_gpus_match_the_hardware")
    assert catalog.ai_conformance("test_not_a_check") == []
    covered = {r for c in catalog.CHECKS for r in c.ai_conformance}
    assert covered == set(catalog.AI_CONFORMANCE)
    assert all(catalog.DRA in c.ai_conformance for c in catalog.CHECKS if c.dra)  # made on DRA nodes too (1.33-1.35)
