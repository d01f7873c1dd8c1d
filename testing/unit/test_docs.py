"""docs: the generated reference pages are committed and current, and cover every config field (from the schema in
gpuconform/config.py) and reason code."""

from __future__ import annotations

import dataclasses
import re

import pytest

from gpuconform import config as gconfig, docs
from gpuconform.presets import PRESETS
from gpuconform.reasons import REASONS


def test_committed_docs_are_current():
    bad = docs.stale(docs.DOCS_DIR)
    assert not bad, (f"{', '.join(p.name for p in bad)} in docs/ differ from what the code generates: "
                     "run `make docs` (python -m gpuconform.docs) and commit the result")


def _row(text: str, first_cell: str) -> str | None:
    return next((line for line in text.splitlines() if line.startswith(f"| `{first_cell}` |")), None)


def test_the_reference_lists_every_field_with_default_type_environment_doc_and_rule():
    text = docs.config_reference()
    for f in gconfig.FIELDS:
        row = _row(text, f.key)
        assert row is not None, f.key
        assert f"`{f.env}`" in row
        assert docs._cell(docs._value(f.default)) in row
        assert docs._cell(f.kind.name) in row
        assert docs._prose(f.doc) in row
        assert docs._prose(f.kind.rule) in row
    rows = [line for line in text.splitlines() if line.startswith("| `") and "`GPUCONFORM_" in line
            and line.split("|")[1].strip().strip("`") in gconfig.BY_KEY]
    assert len(rows) == len(gconfig.FIELDS)  # each field once


def test_cross_field_rules_appear_with_their_key():
    text = docs.config_reference()
    for rule in gconfig.CROSS_RULES:
        assert docs._prose(rule.message) in _row(text, rule.key)


def test_every_variable_outside_the_schema_is_listed():
    text = docs.config_reference()
    for name in gconfig.OUTSIDE_ENV:
        assert _row(text, name) is not None, name


def test_section_texts_come_from_the_schema():
    text = docs.config_reference()
    for section, doc in gconfig.SECTIONS.items():
        if section and doc:
            assert f"### `{section}`\n\n{docs._prose(doc)}\n" in text


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
        assert f"| {r.klass} |" in row and (f"| `{r.alias}` |" if r.alias else "| - |") in row
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
    monkeypatch.setattr(gconfig, "FIELDS", gconfig.FIELDS + (gconfig.Field("newKey", gconfig.Int(), 1, "new"),))
    assert [p.name for p in docs.stale(docs.DOCS_DIR)] == [docs.CONFIG_DOC]
    monkeypatch.undo()
    monkeypatch.setattr(gconfig, "FIELDS", tuple(dataclasses.replace(f, doc="changed") if f.key == "burst.samples"
                                                 else f for f in gconfig.FIELDS))
    assert [p.name for p in docs.stale(docs.DOCS_DIR)] == [docs.CONFIG_DOC]
    monkeypatch.undo()
    monkeypatch.setitem(REASONS, "GPU-NEW", REASONS["ERROR-API"])
    assert [p.name for p in docs.stale(docs.DOCS_DIR)] == [docs.REASONS_DOC]
