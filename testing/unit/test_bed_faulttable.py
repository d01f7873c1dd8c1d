"""The bed's fault table (localcluster/faulttable.py): each row names a node, stack or shape, profile and layout the
bed has, steps the code that makes it knows, and checks and reason codes the suite has; the end-to-end fault matrix
(testing/e2e/test_fault_matrix.py) runs every row with expectations."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from gpuconform import catalog
from gpuconform.reasons import REASONS

LOCALCLUSTER = Path(__file__).resolve().parents[2] / "localcluster"
sys.path.insert(0, str(LOCALCLUSTER))
import bed  # noqa: E402
import dranode  # noqa: E402
import faults  # noqa: E402
import faulttable as ft  # noqa: E402
import shapes  # noqa: E402
import sharedfault  # noqa: E402

ROWS = {f.name: f for f in ft.TABLE}


def test_one_table_holds_both_nodes_faults_under_unique_names():
    assert len(ROWS) == len(ft.TABLE) == len(ft.DEVICE_PLUGIN_FAULTS) + len(ft.DRA_FAULTS)
    assert {f.bed for f in ft.DEVICE_PLUGIN_FAULTS.values()} == {ft.DEVICE_PLUGIN}
    assert {f.bed for f in ft.DRA_FAULTS.values()} == {ft.DRA}
    assert faults.FAULTS is ft.DEVICE_PLUGIN_FAULTS


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_row_names_what_it_breaks_where_and_how(name):
    f = ROWS[name]
    assert f.breaks and f.how
    assert f.node in (bed.NODE_NAME, bed.DRA_NODE, ft.CLUSTER)
    if f.bed == ft.DEVICE_PLUGIN:
        assert f.row and f.profile in shapes.PROFILES and f.layout in ("", *shapes.LAYOUTS)
        assert f.stack in ("", *shapes.STACKS) and ft.STACKS == shapes.STACKS
        assert all(type(s) in ft.DEVICE_PLUGIN_STEPS for s in f.how)
        assert f.stack == "sim" or not any(s.sim_only for s in f.how)
        assert f.counts is None or len(f.counts) in (0, 2)
    else:
        assert f.stack in dranode.SHAPES and all(type(s) in ft.DRA_STEPS for s in f.how)


@pytest.mark.parametrize("name", [n for n, f in sorted(ROWS.items()) if f.expect])
def test_a_row_expects_checks_and_codes_the_suite_has(name):
    expect = ROWS[name].expect
    checks = {c.name for c in catalog.CHECKS}
    assert expect.checks and set(expect.checks) <= checks
    assert {c for c in expect.checks.values() if c} <= set(REASONS)
    assert set(expect.also) <= set(REASONS)
    assert expect.exit in (0, 1, 6)


def test_only_the_cleanup_row_is_judged_outside_the_fault_matrix():
    assert [n for n, f in ROWS.items() if f.expect is None] == ["foreign-namespace"]
    assert ROWS["foreign-namespace"].node == ft.CLUSTER and faults.FOREIGN_NAMESPACES


def test_the_dra_rows_are_judged_on_the_dra_node_but_offered_twice():
    assert {n for n, f in ft.DRA_FAULTS.items() if f.node != bed.DRA_NODE} == {"offered-twice"}
    assert ft.DRA_FAULTS["offered-twice"].node == bed.NODE_NAME == ft.GPU_NODE
    assert dranode.NODE == bed.DRA_NODE and all(f.expect.select for f in ft.DRA_FAULTS.values())


def test_the_dra_steps_name_what_the_driver_and_dranode_know():
    go = (LOCALCLUSTER / "images" / "internal" / "dra" / "dra.go").read_text()
    known = set(re.findall(r'"([a-z-]+)": &f\.', go))  # ParseFaults: the driver's GPU_SIM_DRA_FAULTS names
    knobs = {s.knob for f in ft.DRA_FAULTS.values() for s in f.how if isinstance(s, ft.DraDriver)}
    assert knobs and knobs <= known
    assert set(dranode.HEALTH_KNOBS) <= knobs
    assert {s.name for f in ft.DRA_FAULTS.values() for s in f.how if isinstance(s, ft.ApiObject)} == \
        set(dranode.API_OBJECTS)


def test_the_double_assigned_row_names_the_tenants_namespace():
    assert f"{sharedfault.NS}/tenant-b" in ROWS["double-assigned"].breaks


def test_a_malformed_row_is_refused_at_import():
    with pytest.raises(ValueError, match="need stack sim"):
        ft.Fault("x", ft.DEVICE_PLUGIN, ft.GPU_NODE, "breaks", (ft.SimPlugin({"crashAtStart": True}),), None)
    with pytest.raises(ValueError, match="one of each kind"):
        ft.Fault("x", ft.DRA, ft.DRA_NODE, "breaks", (ft.SimPlugin(),), None)
    with pytest.raises(ValueError, match="one of each kind"):
        ft.Fault("x", ft.DEVICE_PLUGIN, ft.GPU_NODE, "breaks", (ft.HogGpus(1), ft.HogGpus(2)), None)
