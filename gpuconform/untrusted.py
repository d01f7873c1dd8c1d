"""Text the cluster wrote (events, termination messages, logs; any tenant can write some of it), made safe to show
in a terminal, a CI log, JUnit and the HTML report: `clean` escapes control characters and bidi overrides and
defuses `##vso[` and `##[`; `quoted`/`continued` prefix every line so none starts a CI command. Idempotent. The
threats and their sources: docs/security.md, "Cluster text on its way out"."""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates, and
# lone surrogates (what surrogateescape makes of invalid UTF-8 bytes)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}
_AZURE = "##vso["
# GitHub's legacy form `##[add-mask]x`, `##[stop-commands]t`: actions/runner `ActionCommand.TryParse` finds it with
# `message.IndexOf("##[")`, anywhere in a line, so a line prefix does not defuse it (review 2026-12b, O1)
_GITHUB_LEGACY = "##["
PREFIX = "| "  # before each line of cluster text (evidence, logs): never blank, never `:`


def _escape(m: re.Match) -> str:
    ch = m.group()
    o = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{o - 0xDC00:02x}"
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def clean(text: str | bytes | None, keep_newlines: bool = True) -> str:
    """`text` with every control character (but newline and tab, unless `keep_newlines` is False) written as a
    visible escape, invalid UTF-8 as `\\xNN`, CRLF as LF, `##vso[` as `**vso[` and `##[` as `**[`."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    text = text.replace("\r\n", "\n")
    if keep_newlines:
        text = _UNSAFE.sub(_escape, text)
    else:
        text = re.sub(f"{_UNSAFE.pattern}|[\n\t]", _escape, text)
    # one pass each leaves none: occurrences of `##[` cannot overlap, and neither rewrite makes a `#`
    return text.replace(_AZURE, "**vso[").replace(_GITHUB_LEGACY, "**[")


def one_line(text: str | bytes | None) -> str:
    """`clean` with newlines and tabs escaped too: for one-line outputs (live progress lines, table cells)."""
    return clean(text, keep_newlines=False)


def quoted(text: str | bytes | None, prefix: str = PREFIX) -> str:
    """`clean`, then `prefix` before every line: for blocks of cluster text (evidence sections, logs)."""
    return "\n".join(prefix + line for line in clean(text).split("\n"))


def continued(text: str | bytes | None, prefix: str = "  " + PREFIX) -> str:
    """`clean`, with `prefix` before every line after the first: for a message whose first line the suite writes
    after its own marker (a verdict's "[CODE] ", a live line's time stamp)."""
    first, *rest = clean(text).split("\n")
    return "\n".join([first, *(prefix + line for line in rest)])
