"""docs: the generated reference pages are committed and current, and cover every config key and reason code."""

from __future__ import annotations

import re
import textwrap

import pytest

from gpuconform import config as gconfig, docs
from gpuconform.presets import PRESETS
from gpuconform.reasons import REASONS


def test_committed_docs_are_current():
    bad = docs.stale(docs.DOCS_DIR)
    assert not bad, (f"{', '.join(p.name for p in bad)} in docs/ differ from what the code generates: "
                     "run `make docs` (python -m gpuconform.docs) and commit the result")


def test_every_config_key_appears_with_default_and_environment_variable():
    text = docs.config_reference()
    for key, default in gconfig._flatten(gconfig.DEFAULTS).items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{key}` |")), None)
        assert row is not None, key
        assert f"`{gconfig.env_name(key)}`" in row
        assert docs._cell(docs._value(default)) in row


def test_config_reference_states_the_precedence_and_every_preset():
    text = docs.config_reference()
    assert "defaults < preset < config file < environment < `--gpuconform-set`" in text
    for name in PRESETS:
        assert f"| `{name}` |" in text


def test_every_reason_code_appears_with_outcome_and_hint():
    text = docs.reason_reference()
    for code, r in REASONS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{code}` |")), None)
        assert row is not None, code
        assert f"| {r.outcome} |" in row
        assert docs._prose(r.hint) in row


@pytest.mark.parametrize("render", [docs.config_reference, docs.reason_reference])
def test_tables_keep_their_columns(render):
    """Pipes in comments, hints or defaults are escaped, so no row gains or loses a cell."""
    width = None
    for line in render().splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        width = width or cells
        assert cells == width, line


def test_comments_are_attached_to_the_key_they_describe():
    source = textwrap.dedent('''
        # not about a key
        DEFAULTS = {
            "a": 1,  # about a
            "s": {"x": 1, "y": 2},  # about s, not x or y
            "t": {  # about t
                "u": "5s",
                "v": [1, 2],  # about v
            },
            # about w,
            # two lines
            "w": {"z": 0},
            # detached by the blank line below

            "q": True,
        }
        ''')
    assert docs.default_comments(source) == {"a": "about a", "s": "about s, not x or y", "t": "about t",
                                              "t.v": "about v", "w": "about w, two lines"}


def test_comments_of_the_real_config():
    c = docs.default_comments(open(gconfig.__file__).read())
    assert c["nodes.exclude"].startswith("label selector of nodes to leave alone")
    assert c["sharing"].startswith("auto = from each node's GFD labels")
    assert c["thresholds"].startswith("latency thresholds")
    assert c["baseline"].startswith("--gpuconform-baseline FILE")
    assert set(c) <= set(gconfig._flatten(gconfig.DEFAULTS)) | set(gconfig.DEFAULTS)


def test_validation_rules_resolve_literal_loops_and_drop_run_time_values():
    source = textwrap.dedent('''
        def _check(cfg):
            if cfg.get("a") not in ("x", "y"):
                raise bad("a", f"must be x|y, got {cfg.get('a')!r}")
            for key in ("b", "c"):
                raise bad(key, f"must be a selector, got {cfg.get(key)!r}")
            for key, lo in (("d", 1), ("e", 0)):
                raise bad(key, f"must be an integer >= {lo}, got 0")
            for k, v in cfg.get("m").items():
                raise bad("m", f"pool {k!r}: bad")
            raise bad("m", "must be a mapping")
        ''')
    assert docs.validation_rules(source) == {"a": ["must be x|y"], "b": ["must be a selector"],
                                             "c": ["must be a selector"], "d": ["must be an integer >= 1"],
                                             "e": ["must be an integer >= 0"], "m": ["must be a mapping"]}


def test_check_mode_names_the_stale_file(tmp_path, capsys):
    assert docs.main(["--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert docs.main(["--check", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""
    (tmp_path / docs.REASONS_DOC).write_text("edited by hand\n")
    assert docs.main(["--check", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and docs.REASONS_DOC in out[0] and docs.CONFIG_DOC not in out[0]


def test_a_new_key_or_reason_code_makes_the_committed_docs_stale(monkeypatch):
    monkeypatch.setitem(gconfig.DEFAULTS, "newKey", 1)
    assert [p.name for p in docs.stale(docs.DOCS_DIR)] == [docs.CONFIG_DOC]
    monkeypatch.delitem(gconfig.DEFAULTS, "newKey")
    monkeypatch.setitem(REASONS, "GPU-NEW", REASONS["ENV-API"])
    assert [p.name for p in docs.stale(docs.DOCS_DIR)] == [docs.REASONS_DOC]
