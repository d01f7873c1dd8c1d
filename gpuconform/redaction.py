"""The one redaction rule: everything the suite writes (report, summary, JUnit properties, metadata, exception text,
log records) goes through `redact`, which hides secret-looking keys' values, the configured pull secrets, and
credentials in text (bearer/basic, JWTs, URL credentials, GitHub/GitLab tokens, secrets met at run time).
Idempotent. What it covers and why: docs/security.md."""

from __future__ import annotations

import copy
import logging
import re
import threading
from typing import Any, Iterable

REDACTED = "<redacted>"
SECRET_KEYS = ("token", "password", "secret", "key", "cert", "credential")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_LONG_FORMS = {"certificate": "cert", "passwd": "password"}
_REFERENCE_WORDS = {"name", "names", "ref", "refs"}  # secretName, secretKeyRef: point at a Secret, hold no value

_TEXT = (
    # Authorization header values (the client's header_params, a curl line in a log)
    (re.compile(r"(?i)\b(bearer|basic)(\s+)(?!<redacted>)[A-Za-z0-9._~+/=-]+"), rf"\1\2{REDACTED}"),
    # JWTs: ServiceAccount tokens, OIDC id tokens (header.payload.signature, the header base64 of '{"')
    (re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*"), REDACTED),
    # userinfo of a URL: https://user:token@host, https://token@host (RFC 3986 authority)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)(?!<redacted>@)[^/\s@'\"<>]+@"), rf"\1{REDACTED}@"),
    # GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_) and GitLab (glpat-) tokens, wherever they appear
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,})"), REDACTED),
    # token=..., password: ..., "apiKey": "..." in free text (an exec plugin's stderr, an exception message)
    (re.compile(r"(?i)(?<![\w.])(token|password|passwd|secret|api[_-]?key|client[_-]?secret)(\"?'?\s*[:=]\s*\"?'?)"
                r"(?!<redacted>)[^\s\"',;&]+"), rf"\1\2{REDACTED}"),
)

_known: set[str] = set()  # secret values met at run time, longest first when replaced
_lock = threading.Lock()
_MIN_KNOWN = 8  # shorter values would redact ordinary words


def remember(value: str | None) -> None:
    """Adds a secret value (and, for "Bearer <token>", the token alone) to those scrubbed from all text."""
    if not value:
        return
    parts = {value, value.split()[-1]} if value.split() else {value}
    with _lock:
        _known.update(p for p in parts if len(p) >= _MIN_KNOWN and p != REDACTED)


def forget_all() -> None:
    """Drops the remembered values (tests; a new session)."""
    with _lock:
        _known.clear()


def scrub(text: str) -> str:
    """`text` with remembered secrets and every credential-looking string replaced by <redacted>."""
    if not text:
        return text
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for v in known:
        text = text.replace(v, REDACTED)
    for pattern, repl in _TEXT:
        text = pattern.sub(repl, text)
    return text


def is_secret_key(key: str, secret_keys: Iterable[str] = SECRET_KEYS) -> bool:
    """Whole-word match on camelCase/snake_case/kebab-case words (plurals and 'certificate' included).

    Kept: a bare 'key'/'keys' (a label or taint key, e.g. tolerations[].key) and keys that name or reference a
    Secret (…Name, …Ref). Pull-secret lists (pullSecrets, imagePullSecrets) are redacted whole: the config
    reference promises it.
    """
    words = [w.lower() for w in _WORD.findall(str(key))]
    roots = {s.lower() for s in secret_keys}
    if not words or words in (["key"], ["keys"]) or words[-1] in _REFERENCE_WORDS:
        return False
    for w in words:
        w = w[:-1] if w.endswith("s") and len(w) > 3 else w
        if _LONG_FORMS.get(w, w) in roots:
            return True
    return False


def redact(obj: Any, secret_keys: Iterable[str] = SECRET_KEYS) -> Any:
    """A deep copy of `obj` with the value of every secret-looking key set to <redacted> (each item, for a list)
    and all text scrubbed. `secret_keys=()` scrubs text only: for records whose keys are names (the JSON
    summary, keyed by node names among others)."""
    keys = tuple(secret_keys)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if keys and is_secret_key(k, keys):
                out[k] = [REDACTED for _ in v] if isinstance(v, (list, tuple)) else REDACTED
            else:
                out[k] = redact(v, keys)
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v, keys) for v in obj)
    if isinstance(obj, str):
        return scrub(obj)
    return copy.deepcopy(obj)


class RedactSecrets(logging.Filter):
    """The rule on log records: the suite's API log and the root logger, where the kubernetes client writes an
    exec credential plugin's failure with the plugin's stderr (kube_config.py `logging.error(str(e))`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = scrub(msg)
        if clean != msg or record.args:
            record.msg, record.args = clean, None
        return True
