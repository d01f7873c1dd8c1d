"""End-to-end: the conformance suite against the local test bed, healthy and broken on purpose.

For the healthy cluster every check must pass. For each fault the bed can inject (localcluster/faulttable.py, the
bed's one fault table), the intended check must report the intended reason code, and every other check must either
pass or report one of the codes that fault legitimately causes elsewhere (listed per fault in the table) - nothing
else. The matrix is printed (fault -> check -> reason -> detected) and written to reports/fault-matrix.txt.

Needs the local cluster (`make cluster-up`); skipped with a reason when it is not running.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
from bedtools import KUBECONFIG, MATRIX_OUT, bed, run_suite  # bedtools puts localcluster/ on sys.path
from faulttable import DEVICE_PLUGIN_FAULTS, DRA_FAULTS, Expect

from gpuconform import catalog
from gpuconform.reasons import REASONS


pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]

# The rows and what the suite must say under each come from the bed's fault table (localcluster/faulttable.py, one
# row per fault: its node, stack, what it breaks, how it is made, the check -> reason code it must give and the codes
# other checks may report because of the same fault). Rows without expectations (foreign-namespace: judged by
# test_cleanup_foreign.py) are not run here.
# The device-plugin node's rows run without the DRA node; the DRA rows (issue 17: faults of the bed's DRA node,
# `cluster.py dra fault NAME`: its simulated driver, kube-controller-manager, kube-scheduler, admission, or API
# objects beside it) are judged on that node's checks only (their -k selection; a row's node may be another one:
# offered-twice is judged on gpu-node-0), with the DRA node brought up for them in its default shape (the GPU
# operator's DRA stack: plain dra, its admin-access operands running) and removed after them (dra_node below).
MATRIX: dict[str, Expect] = {f.name: f.expect for f in DEVICE_PLUGIN_FAULTS.values() if f.expect}
DRA_MATRIX: dict[str, Expect] = {f.name: f.expect for f in DRA_FAULTS.values() if f.expect}
# The node a DRA row's checks are judged on
DRA_ROW_NODE = {f.name: f.node for f in DRA_FAULTS.values()}
# A DRA-node result that is no finding: a check not made on that path yet
DRA_NOT_MADE = "NOTCHECKED-DRA-PATH"


def test_healthy_cluster_passes_every_check_and_leaves_nothing_behind(tmp_path):
    bed("fault-clear")
    rc, s = run_suite(tmp_path)
    bad = [r for r in s["results"] if r["outcome"] != "passed"]
    assert not bad, json.dumps(bad, indent=1)
    assert rc == 0 and s["exit_status"] == 0
    assert s["certified_nodes"] == s["gpu_nodes"] and s["gpu_nodes"]
    assert_nothing_left_behind()


def assert_nothing_left_behind() -> None:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(KUBECONFIG)))
    left = [ns.metadata.name for ns in api.list_namespace(label_selector="app.kubernetes.io/part-of=gpuconform").items
            if ns.status.phase != "Terminating"]
    assert not left, f"namespaces left behind: {left}"


_matrix_rows: list[str] = []
FAULT_W = max(map(len, [*MATRIX, *(f"dra {f}" for f in DRA_MATRIX)]))  # the fault column fits the longest name
CHECK_W = max(len(c.name) for c in catalog.CHECKS)  # and the check column the longest check
CODE_W = max(len(c) for c in REASONS)  # and the code column the longest code


@pytest.mark.faults
@pytest.mark.parametrize("fault", list(MATRIX))
def test_fault_is_detected_by_its_check_with_its_reason_code(fault, tmp_path):
    expect = MATRIX[fault]
    expected, allowed = expect.checks, expect.also
    bed("fault", fault)
    junit = tmp_path / "junit.xml"
    try:
        rc, s = run_suite(tmp_path, "--junitxml", str(junit), *(("-k", expect.select) if expect.select else ()),
                          *expect.args)
    finally:
        bed("fault-clear")
    by_check = {r["check"]: r for r in s["results"]}
    problems = []
    for check, code in expected.items():  # code None: the check must pass (a fault it must not mistake)
        r = by_check.get(check)
        got = r and r["reason"]
        detected = (got == code and r["outcome"] != "passed") if code else bool(r) and r["outcome"] == "passed"
        _matrix_rows.append(f"{fault:{FAULT_W}} {check:{CHECK_W}} {code or 'passes':{CODE_W}} "
                            f"{('detected' if code else 'passed') if detected else 'MISSED: ' + str(got)}")
        if not detected:
            problems.append(f"{check}: expected {code}, got {r['outcome'] if r else 'not run'} {got} "
                            f"{r['message'] if r else ''}")
    for r in s["results"]:
        if r["check"] in expected or r["outcome"] == "passed":
            continue
        if r["reason"] not in allowed:
            problems.append(f"misfire: {r['check']} {r['outcome']} {r['reason']}: {r['message'][:300]}")
    if expect.named:
        prop, text = expect.named
        values = [p.get("value", "") for p in ElementTree.parse(junit).iter("property") if p.get("name") == prop]
        if not any(text in v for v in values):
            problems.append(f"no JUnit property {prop} names {text!r} (found {values})")
    assert rc == expect.exit, f"exit {rc} on a broken cluster (expected {expect.exit})"
    assert not problems, "\n".join(problems)


@pytest.mark.faults
@pytest.mark.parametrize("fault", list(DRA_MATRIX))
def test_dra_fault_is_detected_on_the_dra_node_with_its_code(fault, dra_node, tmp_path):
    expect = DRA_MATRIX[fault]
    select, expected, allowed = expect.select, expect.checks, expect.also
    node = DRA_ROW_NODE[fault]
    bed("dra", "fault", fault)
    try:
        rc, s = run_suite(tmp_path, "-k", select, *expect.args)
    finally:
        bed("dra", "fault")
    got = {r["check"]: r for r in s["results"] if r["node"] == node}
    problems = []
    for check, code in expected.items():
        r = got.get(check)
        detected = bool(r) and r["reason"] == code and r["outcome"] == "failed" and node in r["message"]
        _matrix_rows.append(f"{'dra ' + fault:{FAULT_W}} {check:{CHECK_W}} {code:{CODE_W}} "
                            f"{'detected' if detected else 'MISSED: ' + str(r and r['reason'])}")
        if not detected:
            problems.append(f"{check}: expected {code}, got {r['outcome'] if r else 'not run'} {r and r['reason']} "
                            f"{r['message'] if r else ''}")
    for r in s["results"]:
        if r["check"] in expected or r["outcome"] == "passed" or r["reason"] == DRA_NOT_MADE:
            continue
        if r["node"] != node or r["reason"] not in allowed:
            problems.append(f"misfire: {r['node']} {r['check']} {r['outcome']} {r['reason']}: {r['message'][:300]}")
    assert rc == 1 and node not in s["certified_nodes"], f"exit {rc}, certified {s['certified_nodes']}"
    assert not problems, "\n".join(problems)


def test_a_healthy_rollout_rehearsal_passes_on_both_paths_and_the_checks_after_it_judge_the_new_version(dra_node,
                                                                                                        tmp_path):
    """The rehearsal (--gpuconform-rollout restart) on the healthy bed: NVIDIA's plugin and the seamless DRA driver
    each restarted while held, then every other check on the new pods; nothing fails and both nodes certify (after
    the DRA rows, so that the device-plugin rows run without the DRA node)."""
    bed("dra", "fault")
    rc, s = run_suite(tmp_path, "--gpuconform-rollout", "restart")
    bad = [r for r in s["results"] if r["outcome"] != "passed" and r["reason"] != DRA_NOT_MADE]
    assert not bad, json.dumps(bad, indent=1)
    assert rc == 0 and sorted(s["certified_nodes"]) == sorted(s["gpu_nodes"]) and len(s["gpu_nodes"]) == 2
    assert sorted(f["node"] for f in s["rollout"]) == sorted(s["gpu_nodes"])
    assert all(f["completed"] and f["held_rounds"] > 0 for f in s["rollout"]), s["rollout"]
    assert_nothing_left_behind()


def teardown_module(module):
    if _matrix_rows:
        text = f"{'fault':{FAULT_W}} {'check':{CHECK_W}} {'reason code':{CODE_W}} result\n" + "\n".join(_matrix_rows) + "\n"
        MATRIX_OUT.parent.mkdir(exist_ok=True)
        MATRIX_OUT.write_text(text)  # conftest.py prints it in the terminal summary
