"""The process's known secrets, scrubbed out of error texts (docs/tracing.md §3).

One job: every error text built from an outside reply (a model server's refusal, a
web page, an MCP server, a sub-agent's failure across the pipe) goes through
:func:`scrub_error` where the error is made, so no later surface (stderr, ``run
--json``, the conversation file, a trace's status and exception event) can show a
secret. :class:`agentkit.errors.LLMError` calls it on its message.

Known secrets are:

* every endpoint key this process was given (:func:`remember`, called by
  ``LLMClient``), with the ``command_env_drop`` patterns of its settings;
* the value of every environment variable that :mod:`agentkit.process.secrets`
  treats as secret (by name or value, or matched by a remembered ``command_env_drop``
  pattern), ``OPENAI_API_KEY``/``AGENTKIT_API_KEY`` included;
* each header value of ``OTEL_EXPORTER_OTLP_HEADERS`` and its per-signal forms
  (URL-decoded; for ``Bearer xyz`` also ``xyz``).

The length rule: only secrets of :data:`MIN_SECRET_CHARS` (8) characters or more are
scrubbed. A shorter value ("x", "k", "test" as a local server's placeholder key)
would turn every such letter or word of a message into a mask, and protects nothing.

Each known secret is replaced by ``[REDACTED]`` as written, URL-encoded (``%2F``,
``+``), and inside a base64 run that decodes to text containing it (a gateway echoing
``Authorization: Basic base64(user:key)``). Well-known key shapes (``sk-…``, ``ghp_…``,
JWTs...) and a URL's password are replaced too, known or not. Name/value pairs and
random-looking tokens are NOT: an error saying ``max_tokens=5000`` or quoting a
request id must stay readable.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote

from agentkit.process.secrets import _KEY_SHAPES, REDACTED, _scrub_userinfo, is_secret_var

__all__ = ["MIN_SECRET_CHARS", "known_secrets", "remember", "scrub_error"]

MIN_SECRET_CHARS = 8
"""Secrets shorter than this are not scrubbed (placeholders such as "x")."""
_MAX_REMEMBERED = 256  # distinct keys of one process; more is a leak of its own
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{12,}={0,2}")
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/@\s]+)@")

_lock = threading.Lock()
_keys: dict[str, None] = {}  # insertion-ordered set
_drop: dict[str, None] = {}


def remember(*values: str | None, drop: Iterable[str] = ()) -> None:
    """Add endpoint keys (and ``command_env_drop`` patterns) to this process's secrets.

    Args:
        values: secrets; None and values shorter than :data:`MIN_SECRET_CHARS` are
            ignored. At most 256 distinct ones are kept (the first ones).
        drop: variable names or shell patterns whose values are secret
            (``Settings.command_env_drop``).
    """
    with _lock:
        for value in values:
            if value and len(value) >= MIN_SECRET_CHARS and len(_keys) < _MAX_REMEMBERED:
                _keys.setdefault(value, None)
        for pattern in drop:
            if pattern.strip() and len(_drop) < _MAX_REMEMBERED:
                _drop.setdefault(pattern.strip(), None)


def _header_values(value: str) -> list[str]:
    """The secrets of an ``OTEL_EXPORTER_OTLP_HEADERS`` value (``k=v,k2=v2``)."""
    found = []
    for item in value.split(","):
        _, _, raw = item.partition("=")
        decoded = unquote(raw.strip())
        found.append(decoded)
        scheme, _, token = decoded.partition(" ")
        if token and scheme.isalpha():
            found.append(token.strip())  # "Bearer xyz": the token alone
    return found


def known_secrets(extra: Iterable[str | None] = ()) -> list[str]:
    """Every known secret of :data:`MIN_SECRET_CHARS` or more characters, longest first.

    Args:
        extra: more values to hide this time (e.g. a settings object's key).

    Reads ``os.environ`` on each call (the environment may change).
    """
    with _lock:
        found = set(_keys)
        drop = list(_drop)
    found.update(v for v in extra if v)
    for name, value in list(os.environ.items()):
        if not value or not is_secret_var(name, value, drop=drop):
            continue
        found.add(value)
        upper = name.upper()
        if upper.startswith("OTEL_EXPORTER_OTLP_") and upper.endswith("HEADERS"):
            found.update(_header_values(value))
    return sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)


def _spellings(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret)}


def _decoded(run: str) -> str:
    """The text a base64 run decodes to ("" when it does not)."""
    body = run.rstrip("=")
    for alphabet in (None, b"-_"):
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alphabet)
        except (binascii.Error, ValueError):
            continue
        return raw.decode("utf-8", "replace")
    return ""


def scrub_error(text: str, extra: Iterable[str | None] = ()) -> str:
    """Return an error text with every known secret replaced by ``[REDACTED]``.

    Args:
        text: the error text (any length; a stack trace too).
        extra: more values to hide (see :func:`known_secrets`).

    Returns:
        ``text`` with each known secret replaced as written, URL-encoded and inside a
        base64 run that contains it; with key shapes (``sk-…``...) and URL passwords
        replaced too. Other text is unchanged.
    """
    if not text:
        return text
    secrets = known_secrets(extra)
    for secret in secrets:
        for spelling in _spellings(secret):
            if spelling in text:
                text = text.replace(spelling, REDACTED)
    if secrets:

        def _run(match: re.Match[str]) -> str:
            decoded = _decoded(match.group(0))
            return REDACTED if decoded and any(s in decoded for s in secrets) else match.group(0)

        text = _BASE64_RUN.sub(_run, text)
    text = _KEY_SHAPES.sub(REDACTED, text)
    return _URL_USERINFO.sub(_scrub_userinfo, text)
