"""Cluster text on its way to the terminal, CI logs, JUnit and HTML (issue 18): control characters, invalid UTF-8
and CI workflow commands in event messages, termination messages and logs never pass raw."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from gpuconform.pytest_plugin import html_report, livelog
from gpuconform.pytest_plugin.evidence import Evidence, attach
from gpuconform import untrusted
from gpuconform.reasons import Violation, skip_reason

# What a tenant's pod can put in its termination message, its log or an event it causes (recorded hostile inputs)
HOSTILE = {
    "clear screen": "\x1b[2J\x1b[H",
    "window title (OSC)": "\x1b]0;pwned\x07",
    "NUL and BEL": "a\x00b\x07c",
    "bare CR (a new line for the Azure agent)": "ok\r##[error]forged",
    "C1 CSI": "\x9b31m",
    "bidi override": "safe\u202etxt.exe",
    "GitHub command": "line\n::error::certification revoked",
    "GitHub command after blanks": "line\n   ::add-mask::x",
    "Azure command mid-line": "note ##vso[task.setvariable variable=PATH]/tmp/evil",
    # GitHub's legacy form, acted on anywhere in a line (actions/runner `ActionCommand.TryParse`: IndexOf("##[")):
    # `add-mask` turns every later FAIL-F08 in the job log into ***, `stop-commands` mutes the workflow's annotations
    "GitHub legacy command mid-line": "ok ##[add-mask]FAIL-F08 ##[stop-commands]t",
    "GitHub legacy command, hashes run together": "x ###[error]y ####[[set-output name=a]b",
    "invalid UTF-8 (surrogateescape)": b"caf\xc3\xa9 \xff\xfe".decode("utf-8", "surrogateescape"),
}
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def starts_a_ci_command(text: str) -> bool:
    return (any(line.lstrip().startswith(("::", "##")) for line in text.split("\n")) or "##vso[" in text
            or "##[" in text)


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_clean_leaves_no_control_character_and_is_idempotent(text):
    out = untrusted.clean(text)
    assert not UNSAFE.search(out), repr(out)
    assert "##vso[" not in out and "##[" not in out
    assert untrusted.clean(out) == out
    assert "\n" not in untrusted.one_line(text) and not UNSAFE.search(untrusted.one_line(text))


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_quoted_and_continued_lines_never_start_a_ci_command(text):
    assert not starts_a_ci_command(untrusted.quoted(text))
    assert not starts_a_ci_command("[gpuconform 12:00:00] " + untrusted.continued(text))


def test_escapes_are_visible_and_structure_is_kept():
    assert untrusted.clean("\x1b[2J") == "\\x1b[2J"
    assert untrusted.clean("a\x00b\x07c") == "a\\x00b\\x07c"
    assert untrusted.clean("x\u202ey") == "x\\u202ey"
    assert untrusted.clean(b"ok \xff") == "ok \\xff"  # bytes: invalid UTF-8 kept as its byte value
    assert untrusted.clean("caf\xe9 \udcff") == "caf\xe9 \\xff"  # text decoded with surrogateescape
    assert untrusted.clean("a\r\nb\tc\rd") == "a\nb\tc\\rd"
    assert untrusted.clean("##vso[task.complete]") == "**vso[task.complete]"
    assert untrusted.clean("ok ##[add-mask]FAIL-F08") == "ok **[add-mask]FAIL-F08"  # the review's O1 repro
    assert untrusted.quoted("ok ##[add-mask]FAIL-F08 ##[stop-commands]t") == "| ok **[add-mask]FAIL-F08 **[stop-commands]t"
    assert untrusted.clean("###[x] ##vso[y]") == "#**[x] **vso[y]"
    assert untrusted.clean("a # [b] #[c] ## d") == "a # [b] #[c] ## d"  # only the command prefix is touched
    assert untrusted.one_line("a\nb") == "a\\nb"
    assert untrusted.quoted("a\n::error::x") == "| a\n| ::error::x"


def test_a_verdict_quoting_a_hostile_termination_message_renders_safely():
    v = Violation("FAIL-F08-PLUGIN-CRASHLOOP", "n: plugin pod ns/p last termination: " + "".join(HOSTILE.values()))
    assert not UNSAFE.search(v.message)  # the message keeps its lines (JSON summary, JUnit property)
    for text in (v.render(), str(v)):  # what the terminal and JUnit's <failure> show
        assert not UNSAFE.search(text), repr(text)
        assert not starts_a_ci_command(text), text
    assert v.render().startswith("[FAIL-F08-PLUGIN-CRASHLOOP] n: plugin pod ns/p")
    assert not starts_a_ci_command(skip_reason("NOTCHECKED-OPTIONAL", "x\n::error::y"))


class _Spaces:
    """Just what Evidence.collect reads: a tenant's events and logs."""

    watches: dict = {}

    def events_for(self, ns, name):
        return [{"eventTime": "2026-12-04T09:20:00Z", "type": "Warning", "reason": "BackOff",
                 "message": HOSTILE["clear screen"] + HOSTILE["GitHub command"]}]

    def pod_log(self, ns, name, ctr=None, tail=None):
        return "\n".join(HOSTILE.values())


def test_evidence_sections_are_cleaned_and_every_line_prefixed():
    ev = Evidence(SimpleNamespace(spaces=_Spaces()), None)
    ev.pod("gpuconform-r1", "vec-add")
    ev.note("termination\x1b[2J", "##vso[task.prependpath]/evil\n::warning::x")
    collected = ev.collect()
    report = SimpleNamespace(sections=[])
    attach(report, collected)
    assert [k for k, _ in report.sections] == ["evidence: events vec-add", "evidence: log vec-add",
                                               "evidence: termination\\x1b[2J"]
    for _, text in report.sections:
        assert all(line.startswith("| ") for line in text.split("\n")), text
        assert not UNSAFE.search(text) and not starts_a_ci_command(text)
    for extra in report.extras:
        assert not UNSAFE.search(extra["content"]) and "##vso[" not in extra["content"]


def test_live_lines_are_cleaned(capsys):
    livelog.set_capture(None)
    livelog.log("could not delete namespace x: " + "".join(HOSTILE.values()))
    err = capsys.readouterr().err
    assert err.startswith("[gpuconform ") and not UNSAFE.search(err.rstrip("\n"))
    assert not starts_a_ci_command(err)


def test_html_summary_values_are_escaped():
    summary = {"run_id": "r1", "exit_status": "<script>alert(1)</script>",
               "results": [{"outcome": "<img src=x onerror=alert(2)>", "node": None}],
               "coverage": {"certified_fraction": "<b>1</b>", "gate": "<i>0.5</i>"}, "gpu_nodes": [],
               "certified_nodes": []}
    from gpuconform.pytest_plugin.plugin import PLUGIN

    session = SimpleNamespace(config=SimpleNamespace(stash={PLUGIN: SimpleNamespace(summary=summary)}))
    prefix: list[str] = []
    html_report.pytest_html_results_summary(prefix, [], [], session)
    run_line = next(p for p in prefix if 'class="gc-run"' in p)
    assert "<script>" not in run_line and "<img" not in run_line and "<b>1</b>" not in run_line
    assert "&lt;i&gt;0.5&lt;/i&gt;" in run_line
    verdict = next(p for p in prefix if 'id="gc-verdict"' in p)  # the exit status leads the record
    assert "<script>" not in verdict and "&lt;script&gt;" in verdict and "&lt;i&gt;0.5&lt;/i&gt;" in verdict
