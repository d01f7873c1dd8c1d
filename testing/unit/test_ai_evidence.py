"""The CNCF AI Conformance evidence files (gpuconform/pytest_plugin/aievidence.py, --gpuconform-ai-conformance): the
junit.xml layout (one testcase per requirement id the run gave evidence for, named as the program's evidence links
`junit.xml#<testcase>` expect, naming the checks and nodes behind it), its statuses, e2e.log, and the exit-code table
that --help, the evidence log and the README share."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuconform import catalog
from gpuconform.pytest_plugin import aievidence
from gpuconform.pytest_plugin.options import EXIT_CODES, exit_meaning

README = Path(__file__).resolve().parents[2] / "README.md"
DP, DRA_NODE = "gpu-node-0", "gpu-node-dra"
POOLS = {DP: "nvidia.com/gpu: 2 GPU(s)", DRA_NODE: "DeviceClass gpu.nvidia.com: 2 device(s)"}


def _row(check: str, node: str | None, outcome: str = "passed", reason: str | None = None, message: str = "",
         dra: bool = False, minor: int = 35) -> dict:
    return {"test": f"tests/x/test_x.py::{check}" + (f"[{node}]" if node else ""), "check": check, "node": node,
            "outcome": outcome, "reason": reason, "message": message, "duration_s": 1.5,
            "ai_conformance": catalog.ai_conformance(check, dra, minor)}


def _summary(rows: list[dict], version: str = "v1.35.2", exit_status: int = 0) -> dict:
    return {"schema": "gpuconform.summary/v1", "suite_version": "0.1.0", "run_id": "r1",
            "server_version": version, "started": "2026-12-06T20:00:00Z", "finished": "2026-12-06T20:05:30Z",
            "results": rows, "gpu_nodes": [DP, DRA_NODE], "certified_nodes": [DP, DRA_NODE], "node_pools": POOLS,
            "exit_status": exit_status}


PLUGIN_POD, SEE = "test_plugin_pod_is_ready_and_not_crash_looping", "test_pods_see_exactly_the_gpus_they_request"
BURST = "test_burst_allocates_every_free_gpu_once_and_one_more_waits"
TOPOLOGY = "test_kubelet_topology_and_cpu_manager_policies_are_as_expected"


def _cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)  # parses: the layout the program's junit.xml has (gotestsum's)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("name") == "gpuconform"
    cases = suites[0].findall("testcase")
    assert all(c.get("classname") == "gpuconform" for c in cases)
    return {c.get("name"): c for c in cases}


def _props(case: ET.Element, name: str) -> list[str]:
    return [p.get("value") for p in case.findall("properties/property") if p.get("name") == name]


def test_one_testcase_per_requirement_id_named_as_the_evidence_links_expect():
    rows = [_row(c, n, dra=n == DRA_NODE) for n in (DP, DRA_NODE) for c in (PLUGIN_POD, SEE, BURST, TOPOLOGY)]
    xml = aievidence.junit_xml(_summary(rows))
    cases = _cases(xml)
    # AI_CONFORMANCE's order; dra_support from the DRA node (1.35's checklist has it); the topology check gives none
    assert list(cases) == ["driver_runtime_management", "gpu_sharing", "secure_accelerator_access", "dra_support"]
    root = ET.fromstring(xml)
    assert root.get("tests") == "4" and root.get("failures") == "0" and root.get("errors") == "0"
    assert root.get("time") == "330.000"
    suite_props = {p.get("name"): p.get("value") for p in root.find("testsuite/properties")}
    assert suite_props["checklist"] == "AIConformance-1.35" and suite_props["exit_status"] == "0"
    sharing = cases["gpu_sharing"]
    assert _props(sharing, "checks") == [BURST] and _props(sharing, "nodes") == [f"{DP}, {DRA_NODE}"]
    assert _props(sharing, "result") == [f"tests/x/test_x.py::{BURST}[{DP}]: passed",
                                         f"tests/x/test_x.py::{BURST}[{DRA_NODE}]: passed"]
    assert [c.tag for c in sharing] == ["properties", "system-out"]  # passed: no failure, error or skipped
    out = sharing.find("system-out").text
    assert f"{BURST} on {DRA_NODE} (DeviceClass gpu.nvidia.com: 2 device(s))" in out
    dra = cases["dra_support"]
    assert _props(dra, "nodes") == [DRA_NODE] and _props(dra, "checks") == [f"{PLUGIN_POD}, {SEE}, {BURST}"]
    assert float(dra.get("time")) == 4.5


def test_dra_support_is_not_given_where_the_checklist_has_none():
    rows = [_row(c, DRA_NODE, dra=True, minor=37) for c in (PLUGIN_POD, SEE)]
    cases = _cases(aievidence.junit_xml(_summary(rows, version="v1.37.2")))
    assert list(cases) == ["driver_runtime_management", "secure_accelerator_access"]


def test_a_requirement_takes_the_worst_result_behind_it_by_the_certification_rule():
    rows = [_row(SEE, DP), _row(SEE, DRA_NODE, "failed", "FAIL-ISOLATION", "sees 2 GPUs, asked 1"),
            _row(PLUGIN_POD, DP), _row(PLUGIN_POD, DRA_NODE, "skipped", "SKIP-F07-BUSY", "no free GPU"),
            _row(BURST, DP), _row(BURST, DRA_NODE, "skipped", "NOTCHECKED-OPTIONAL", "nodes/proxy not granted")]
    xml = aievidence.junit_xml(_summary(rows, exit_status=1))
    cases = _cases(xml)
    failure = cases["secure_accelerator_access"].find("failure")
    assert failure.get("type") == "FAIL-ISOLATION"
    assert failure.get("message").startswith("1 of 4 results failed: ")
    assert "sees 2 GPUs, asked 1" in failure.text and f"[{SEE}[{DRA_NODE}]" not in failure.text
    skipped = cases["driver_runtime_management"].find("skipped")  # a skip that costs certification
    assert skipped.get("type") == "SKIP-F07-BUSY" and "evidence is incomplete" in skipped.get("message")
    # A "not checked" skip costs nothing: gpu_sharing passed on the device-plugin node's result
    assert [c.tag for c in cases["gpu_sharing"]] == ["properties", "system-out"]
    root = ET.fromstring(xml)
    assert (root.get("failures"), root.find("testsuite").get("skipped")) == ("1", "1")


def test_an_error_behind_a_requirement_is_an_error_and_no_pass_is_a_skip():
    rows = [_row(SEE, DP, "error", "ERROR-TIMEOUT", "pod not started"),
            _row(BURST, DP, "skipped", "NOTCHECKED-OPTIONAL", "not granted")]
    cases = _cases(aievidence.junit_xml(_summary(rows, exit_status=1)))
    assert cases["secure_accelerator_access"].find("error").get("type") == "ERROR-TIMEOUT"
    assert cases["gpu_sharing"].find("skipped").get("message") == "no result passed (1 not checked)"


def test_no_evidence_is_an_empty_suite_that_parses():
    cases = _cases(aievidence.junit_xml(_summary([_row(TOPOLOGY, DP)])))
    assert cases == {}


def test_cluster_text_that_xml_cannot_carry_is_replaced_and_markup_is_escaped():
    rows = [_row(SEE, DP, "failed", "FAIL-ISOLATION", "log: <b>&amp;\x1b[31m\x00 \ud800")]
    xml = aievidence.junit_xml(_summary(rows))
    text = _cases(xml)["secure_accelerator_access"].find("failure").text
    assert "<b>&amp;" in text and "\x00" not in text and "\x1b" not in text


def test_e2e_log_names_the_run_each_result_and_each_requirement():
    rows = [_row(SEE, DP), _row(SEE, DRA_NODE, "failed", "FAIL-ISOLATION", "sees 2", dra=True)]
    log = aievidence.e2e_log(_summary(rows, exit_status=1), ["[gpuconform 20:00:01] run r1: token abc"])
    lines = log.splitlines()
    assert lines[0].startswith("gpuconform 0.1.0: GPU device-plugin and DRA driver conformance")
    assert "run r1 against Kubernetes v1.35.2 (checklist AIConformance-1.35)" in lines[1]
    assert lines[2] == "exit status 1: a check failed or errored"
    assert f"  {DRA_NODE}: DeviceClass gpu.nvidia.com: 2 device(s)" in lines
    assert "[gpuconform 20:00:01] run r1: token abc" in lines
    assert f"FAILED   {SEE} on {DRA_NODE} (DeviceClass gpu.nvidia.com: 2 device(s)), 1.5 s: " \
           "[FAIL-ISOLATION] sees 2" in lines
    at = lines.index("=== RUN   secure_accelerator_access")
    assert lines[at + 1:at + 4] == [f"    passed: {SEE} on {DP}",
                                    f"    failed: {SEE} on {DRA_NODE} [FAIL-ISOLATION]",
                                    "--- FAIL: secure_accelerator_access (3.00s)"]
    assert "=== RUN   dra_support" in lines and lines[-1] == "FAIL"
    passing = aievidence.e2e_log(_summary([_row(SEE, DP)]))
    assert passing.splitlines()[-1] == "PASS" and "--- PASS: secure_accelerator_access (1.50s)" in passing
    # a skip's message carries its code already: named once
    skipped = aievidence.e2e_log(_summary([_row(BURST, DP, "skipped", "SKIP-F07-BUSY", "[SKIP-F07-BUSY] no free GPU")]))
    assert f"SKIPPED  {BURST} on {DP} (nvidia.com/gpu: 2 GPU(s)), 1.5 s: [SKIP-F07-BUSY] no free GPU" in skipped
    assert "--- SKIP: gpu_sharing (1.50s)" in skipped and skipped.splitlines()[-1] == "PASS"


def test_write_puts_both_files_in_the_directory(tmp_path):
    paths = aievidence.write(str(tmp_path / "ai"), _summary([_row(SEE, DP)]), [])
    assert [p.name for p in paths] == ["e2e.log", "junit.xml"]
    assert ET.parse(paths[1]).getroot().find("testsuite/testcase").get("name") == "secure_accelerator_access"


def test_the_readme_exit_code_table_is_the_one_help_shows():
    text = README.read_text()
    section = text[text.index("## Outcomes and exit codes"):]
    section = section[:section.index("\n## ", 1)]
    rows = re.findall(r"^\| (\d) \| (.+) \|$", section, re.M)
    assert [(int(c), t) for c, t in rows] == list(EXIT_CODES)
    assert exit_meaning(6).startswith("nothing certified") and exit_meaning(None) == "unknown"
