"""What counts as a secret in an environment, and a scrubbed copy of one (docs/architecture.md §6).

The single place that decides which environment variables may reach a process that
agentkit starts for a model (run_command today; the sandbox, workers and MCP servers
later). A variable is dropped when its NAME or its VALUE looks secret:

* Name (case-insensitive, split into words at ``_``, ``-`` and ``.``): a word
  ``SECRET(S)``, ``PASSWORD(S)``, ``PASSWD``, ``PASSPHRASE``, ``TOKEN(S)``,
  ``CREDENTIAL(S)``, ``CREDS``, ``PAT``, ``APIKEY``, ``ACCESSKEY``, ``SECRETKEY``,
  ``PRIVATEKEY``, ``AUTHORIZATION``, ``COOKIE(S)`` anywhere; ``KEY``, ``PASS``, ``PWD``
  or ``AUTH`` as the last word (``OPENAI_KEY``, ``DB_PASS``, ``MYSQL_PWD``,
  ``NPM_CONFIG__AUTH``); ``ACCESS_KEY_ID``. Deliberately kept: ``PWD``/``OLDPWD`` (the
  working folder), ``SSH_AUTH_SOCK`` (a socket path, not a secret), ``GPG_KEY_ID``
  and other ``KEY`` words not at the end, ``KEYBOARD``/``TOKENIZER`` (other words).
* Value: a URL whose user part carries a password (``postgres://u:pw@h/db``) or a
  token; a well-known key shape anywhere in it (``sk-…``, ``ghp_…``, ``github_pat_…``,
  ``glpat-…``, ``xox[abposr]-…``, ``AKIA…``/``ASIA…``, ``AIza…``, ``hf_…``, ``npm_…``,
  ``sk_live_…``, a JWT, a PEM private key); or a single long high-entropy token
  (32+ characters of base64/base62 mixing upper case, lower case and digits).
  Plain hexadecimal strings and UUIDs are NOT secret by value alone (commit SHAs,
  ``INVOCATION_ID``...): under a secret-looking name they are still dropped.

Settings ``command_env_passthrough`` (kept although they look secret) and
``command_env_drop`` (always dropped) take names or shell-style patterns (``*``, ``?``),
matched case-insensitively. The endpoint's own key (``OPENAI_API_KEY``,
``AGENTKIT_API_KEY``, and any variable holding a value of ``hidden_values``) and the
Ray cluster's token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``) are dropped even
when passed through. ``OTEL_EXPORTER_OTLP_HEADERS`` and its per-signal forms
(``OTEL_EXPORTER_OTLP_TRACES_HEADERS``...) count as secret names: they carry the
collector's credentials.

The same rules scrub free text (:func:`scrub_text`, for message content on trace
spans): key shapes, URL passwords, the hidden values, long random tokens and the
values of ``NAME=value`` / ``"name": "value"`` pairs whose name looks secret become
``[REDACTED]``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

__all__ = [
    "ALWAYS_HIDDEN",
    "CLUSTER_CREDENTIALS",
    "REDACTED",
    "is_secret_name",
    "is_secret_value",
    "is_secret_var",
    "scrub_env",
    "scrub_text",
]

ALWAYS_HIDDEN = frozenset({"OPENAI_API_KEY", "AGENTKIT_API_KEY"})
"""Names never passed to a command, whatever ``passthrough`` says (the endpoint's key)."""

CLUSTER_CREDENTIALS = frozenset({"RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"})
"""The Ray cluster's credential (token authentication): never passed to a command,
whatever ``passthrough`` says (``RAY_*`` for ``RAY_ADDRESS`` must not carry it along).
Unlike :data:`ALWAYS_HIDDEN` they stay in this process's environment: the agent's
process connects to the cluster with them, and Ray's nodes have their own."""

_ANY_WORD = frozenset({
    "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "TOKEN", "TOKENS",
    "CREDENTIAL", "CREDENTIALS", "CREDS", "PAT", "APIKEY", "ACCESSKEY", "SECRETKEY",
    "PRIVATEKEY", "AUTHORIZATION", "COOKIE", "COOKIES",
})  # fmt: skip
_LAST_WORD = frozenset({"KEY", "PASS", "PWD", "AUTH"})
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
_WORD_SPLIT = re.compile(r"[_.\-]+")

# Known key shapes, found anywhere in a value (not inside a longer word).
_KEY_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{20,}"  # OpenAI, Anthropic (sk-ant-...), DeepSeek
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|AIza[A-Za-z0-9_\-]{35}"  # Google API keys
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|npm_[A-Za-z0-9]{36}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"  # JWT
    r")"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
# scheme://user:password@host or scheme://token@host
_URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/@\s]+)@")
_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]{32,}")
_HEX_OR_UUID = re.compile(r"[0-9a-fA-F\-]+")
_MIN_HIDDEN = 8  # shorter hidden values ("k", "x" for local servers) would match anything
_MIN_ENTROPY = 4.0  # bits per character; random base62 of 32+ chars is ~4.6-5.0


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(token: str) -> bool:
    if _HEX_OR_UUID.fullmatch(token):
        return False  # SHAs, UUIDs, machine ids: identifiers far more often than keys
    mixed = (
        any(c.isupper() for c in token)
        and any(c.islower() for c in token)
        and any(c.isdigit() for c in token)
    )
    return mixed and _entropy(token) >= _MIN_ENTROPY


def is_secret_name(name: str) -> bool:
    """Return True when the variable NAME alone marks a secret (rules in the module doc)."""
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    if upper.startswith("OTEL_EXPORTER_OTLP_") and upper.endswith("HEADERS"):
        return True
    words = [w for w in _WORD_SPLIT.split(upper) if w]
    if not words:
        return False
    return (
        any(w in _ANY_WORD for w in words)
        or words[-1] in _LAST_WORD
        or "ACCESS_KEY_ID" in "_".join(words)
    )


def is_secret_value(value: str) -> bool:
    """Return True when ``value`` holds a credential (rules in the module doc).

    Args:
        value: an environment value, any length.
    """
    if _KEY_SHAPES.search(value):
        return True
    for match in _URL_USERINFO.finditer(value):
        user, _, password = match.group(1).partition(":")
        if password or _looks_random(user):
            return True
    stripped = value.strip()
    if stripped.startswith(("/", "./", "~")):
        return False  # a path, however random its folder names look
    return bool(_TOKEN.fullmatch(stripped)) and _looks_random(stripped)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    upper = name.upper()
    return any(fnmatchcase(upper, p.strip().upper()) for p in patterns if p.strip())


def is_secret_var(
    name: str,
    value: str = "",
    *,
    passthrough: Iterable[str] = (),
    drop: Iterable[str] = (),
    hidden_values: Iterable[str | None] = (),
) -> bool:
    """Return True when the variable ``name=value`` must not reach a command.

    Args:
        name: variable name.
        value: its value ("" checks the name only).
        passthrough: names or patterns kept although they look secret
            (``Settings.command_env_passthrough``); never beats :data:`ALWAYS_HIDDEN`
            nor ``hidden_values``.
        drop: names or patterns always dropped (``Settings.command_env_drop``).
        hidden_values: values that must never appear (the endpoint's API key); a
            variable containing one is dropped. Entries shorter than 8 characters
            (placeholders such as "x" for local servers) and None are ignored.
    """
    upper = name.upper()
    if upper in ALWAYS_HIDDEN or upper in CLUSTER_CREDENTIALS or _matches(name, drop):
        return True
    if value and any(h and len(h) >= _MIN_HIDDEN and h in value for h in hidden_values):
        return True
    if _matches(name, passthrough):
        return False
    return is_secret_name(name) or (bool(value) and is_secret_value(value))


def scrub_env(
    env: Mapping[str, str],
    *,
    passthrough: Iterable[str] = (),
    drop: Iterable[str] = (),
    hidden_values: Iterable[str | None] = (),
) -> dict[str, str]:
    """Return a copy of ``env`` without the variables :func:`is_secret_var` rejects.

    Args:
        env: the environment to copy (e.g. ``os.environ``); not modified.
        passthrough, drop, hidden_values: as for :func:`is_secret_var`.

    Returns:
        A new ``{name: value}`` dict, in ``env``'s order.
    """
    keep, deny, hidden = list(passthrough), list(drop), [h for h in hidden_values if h]
    return {
        name: value
        for name, value in env.items()
        if not is_secret_var(name, value, passthrough=keep, drop=deny, hidden_values=hidden)
    }


REDACTED = "[REDACTED]"
"""What :func:`scrub_text` puts in place of a secret."""

# NAME=value (shell, .env, `env` output) and "name": "value" (JSON, YAML-ish).
_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_.\-]*)=([^\s'\"]+)")
_QUOTED_PAIR = re.compile(r"([\"']?)([A-Za-z_][A-Za-z0-9_.\-]*)\1(\s*:\s*)([\"'])([^\"'\n]+)\4")


def _scrub_pair(match: re.Match[str]) -> str:
    quote, name, colon, q2, value = match.groups()
    if not is_secret_name(name):
        return match.group(0)
    return f"{quote}{name}{quote}{colon}{q2}{REDACTED}{q2}"


def _scrub_userinfo(match: re.Match[str]) -> str:
    user, _, password = match.group(1).partition(":")
    if password:
        return match.group(0).replace(f":{password}@", f":{REDACTED}@", 1)
    if _looks_random(user):
        return match.group(0).replace(f"{user}@", f"{REDACTED}@", 1)
    return match.group(0)


def _scrub_token(match: re.Match[str]) -> str:
    token = match.group(0)
    return REDACTED if _looks_random(token) else token


def scrub_text(text: str, hidden_values: Iterable[str | None] = ()) -> str:
    """Return ``text`` with what looks secret replaced by :data:`REDACTED`.

    Args:
        text: any text (a message, a tool's output, a command line).
        hidden_values: values that must never appear (the endpoint's API key);
            entries shorter than 8 characters and None are ignored.

    Replaced: every occurrence of a hidden value; the key shapes of
    :func:`is_secret_value` (``sk-...``, ``ghp_...``, JWTs, PEM private-key headers...);
    the password (or token) in a URL's user part; a 32+ character high-entropy token;
    the value in ``NAME=value`` and ``"name": "value"`` when the name looks secret
    (:func:`is_secret_name`: ``DB_PASSWORD=hunter2``, ``"api_key": "x"``).
    """
    for hidden in hidden_values:
        if hidden and len(hidden) >= _MIN_HIDDEN:
            text = text.replace(hidden, REDACTED)
    text = _KEY_SHAPES.sub(REDACTED, text)
    text = _URL_USERINFO.sub(_scrub_userinfo, text)
    text = _ASSIGNMENT.sub(
        lambda m: f"{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0), text
    )
    text = _QUOTED_PAIR.sub(_scrub_pair, text)
    return _TOKEN.sub(_scrub_token, text)
