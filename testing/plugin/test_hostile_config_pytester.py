"""Hostile config and baseline files through a child pytest (issue 18): each is a usage error, exit 4, with one
line naming the file and no traceback, before any cluster call (the kubeconfig points at a file that does not
exist, so an accidental cluster call would fail loudly)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]

ALIAS_BOMB = ("tolerations:\n"
              "- &a {key: a, operator: Exists, effect: [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]}\n"
              "- &b {key: b, operator: Exists, effect: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]}\n"
              "- &c {key: c, operator: Exists, effect: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]}\n"
              "- &d {key: d, operator: Exists, effect: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]}\n"
              "- {key: e, operator: Exists, effect: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]}\n")


@pytest.fixture
def child(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("KUBECONFIG", str(pytester.path / "no-such-kubeconfig"))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_never="def test_never():\n    raise SystemExit('collected although the input is bad')\n")

    def runpytest(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider", *args, timeout=60)

    return runpytest


def _one_line_exit_4(res: pytest.RunResult, marker: str, path: Path, fragment: str) -> None:
    assert res.ret == 4, res.stdout.str() + res.stderr.str()
    lines = [ln for ln in res.stderr.lines if marker in ln]
    assert len(lines) == 1 and str(path) in lines[0] and fragment in lines[0], res.stderr.str()
    out = res.stdout.str() + res.stderr.str()
    assert "Traceback" not in out and "collected although" not in out and "pre-flight" not in out


@pytest.mark.parametrize("content, fragment", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "is not UTF-8 text"),
    ("tolerations: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 20 levels"),
    (ALIAS_BOMB, "anchors and aliases"),
    ("thresholds:\n  startP99: .nan\n", "'thresholds.startP99' must be a duration"),
    ("timeouts:\n  podStart: .inf\n", "'timeouts.podStart' must be a duration"),
    ("tolerations:\n- key: nvidia.com/gpu\n  operator: exists\n", "operator must be Exists or Equal"),
], ids=["binary", "deep-nesting", "alias-bomb", "nan", "inf", "toleration"])
def test_a_hostile_config_file_is_one_line_and_exit_4(pytester: pytest.Pytester, child, content, fragment):
    path = pytester.path / "gpuconform.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _one_line_exit_4(child("--gpuconform-config", str(path)), "gpuconform config:", path, fragment)


def test_a_directory_as_the_config_is_one_line_and_exit_4(pytester: pytest.Pytester, child, monkeypatch):
    path = pytester.path / "conf.d"
    path.mkdir()
    monkeypatch.setenv("GPUCONFORM_CONFIG", str(path))  # the variable names it, as in the in-cluster Job
    _one_line_exit_4(child(), "gpuconform config:", path, "is a directory")


def test_a_baseline_missing_a_field_is_one_line_and_exit_4(pytester: pytest.Pytester, child):
    path = pytester.path / "base.json"
    path.write_text(json.dumps({"schema": "gpuconform.summary/v1",
                                "results": [{"check": "test_a", "node": "gpu-a", "outcome": "passed"}]}))
    _one_line_exit_4(child("--gpuconform-baseline", str(path)), "--gpuconform-baseline", path,
                     "not a usable summary: results[0]: no 'test'")
