"""Classifying provider errors into LLMError kinds, and reading retry hints.

Error bodies (docs/providers.md §4.2) may be a dict, a list of dicts (Gemini),
vLLM's top-level ``{"object": "error"}``, plain text or HTML; ``code`` may be a
name, a numeric string or an int. They are normalised first, then classified by
code/type, then message, then status.
Also: which exception and response classes the installed openai/httpx use.
Every message is scrubbed of known secrets (agentkit.process.redact): by LLMError
itself, and here before a text is cut, so a cut cannot leave half a key.
"""

from __future__ import annotations

import email.utils
import html
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from agentkit.errors import ContextLengthExceeded, LLMError, LLMErrorKind
from agentkit.process.redact import scrub_error

_QUOTA_CODES = frozenset(
    ("insufficient_quota", "insufficient_balance", "billing_hard_limit_reached", "1113")
)
_FILTER_CODES = frozenset(
    (
        "content_filter",
        "data_inspection_failed",
        "content_policy_violation",
        "responsibleaipolicyviolation",
        "1301",
    )
)
_AUTH_CODES = frozenset(("invalid_api_key", "authentication_error", "permission_denied"))
_RATE_CODES = frozenset(("rate_limit_exceeded", "rate_limit_error", "resource_exhausted"))
_CONTEXT_CODES = frozenset(("context_length_exceeded", "exceed_context_size_error"))
#: Kinds worth retrying (docs/providers.md §4.2).
_RETRYABLE_KINDS = frozenset(("rate_limit", "timeout", "overloaded", "server_error"))
_CONTEXT_RE = re.compile(
    r"maximum context length|exceed_context_size_error|exceeds the available context size"
    r"|prompt is too long|input token count.*exceeds|context length exceeded"
    r"|exceeds? (?:the )?(?:model'?s? )?context (?:window|length|size)|token limit exceeded",
    re.IGNORECASE | re.DOTALL,
)
_HISTORY_5XX_RE = re.compile(r"(tool|function).?call.*(pars|json|argument)", re.I | re.S)
_HINT_RE = re.compile(
    r"(?:try again|retry) (?:in|after) (\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)?\b",
    re.IGNORECASE,
)
_RETRY_DELAY_RE = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_TAG_RE = re.compile(r"<[^>]+>")
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def normalize(body: Any, text: str = "") -> dict[str, Any]:
    """Return ``{code, type, message, status, error}`` from any error body shape.

    ``code`` and ``type`` are lower-case strings or None; ``error`` is the error object
    (a dict, possibly empty) for extra fields such as llama.cpp's ``n_ctx``.
    """
    if isinstance(body, list):
        body = next((item for item in body if isinstance(item, dict)), None)
    err: dict[str, Any] = {}
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            err = inner
        elif isinstance(inner, str):
            err = {"message": inner, "code": body.get("code"), "type": body.get("type")}
        else:
            err = body  # vLLM {"object": "error", ...}, FastAPI {"detail": ...}
    message = err.get("message") or err.get("detail") or err.get("msg")
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False) if message else ""
    if not message and not err:
        message = _text_excerpt(scrub_error(text))  # scrubbed before the cut splits a key
    metadata = err.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("raw"), str):
        raw = scrub_error(metadata["raw"])[:200]
        message = f"{message} ({metadata.get('provider_name') or 'provider'}: {raw})"
    inner_error = err.get("innererror")
    if isinstance(inner_error, dict) and inner_error.get("code"):
        err = {**err, "code": err.get("code") or inner_error["code"]}
    return {
        "code": _lower(err.get("code")),
        "type": _lower(err.get("type")),
        "status": _lower(err.get("status")),
        "inner": _lower(inner_error.get("code")) if isinstance(inner_error, dict) else None,
        "message": message.strip(),
        "error": err,
    }


def _lower(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value).strip().lower()


def _text_excerpt(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    if text[:1] == "<" or "<html" in text[:200].lower():
        title = _TITLE_RE.search(text)
        plain = title.group(1) if title else _TAG_RE.sub(" ", text)
        return "HTML error page: " + " ".join(html.unescape(plain).split())[:200]
    return " ".join(text.split())[:500]


def classify(
    status: int | None,
    body: Any,
    text: str = "",
    headers: Mapping[str, str] | None = None,
) -> LLMError:
    """Map an error reply to an LLMError (docs/providers.md §4.2; order: code/type, message, status).

    Args:
        status: the HTTP status, or None for an in-band stream error.
        body: the decoded JSON body (dict, list, or None when not JSON).
        text: the raw body text (used for plain-text and HTML bodies and hints).
        headers: response headers (for Retry-After and x-ratelimit-reset-*).

    Returns:
        The LLMError (a ContextLengthExceeded for context overflows), not raised.
    """
    info = normalize(body, text)
    code, message = info["code"], info["message"]
    numeric = int(code) if code and code.isdigit() and len(code) == 3 else None
    effective = status if status not in (None, 200) else numeric
    names = {code, info["type"], info["inner"], info["status"]} - {None}
    hint = retry_hint(headers, f"{message} {text[:2000]}")
    kind = _kind(effective, names, message)
    if not message:
        message = f"HTTP {status}" if status else "the server reported an error"
    if kind == "context_length_exceeded":
        limit, requested = _context_numbers(message, info["error"])
        return ContextLengthExceeded(
            message, status=status, limit_tokens=limit, requested_tokens=requested, code=code
        )
    retryable = kind in _RETRYABLE_KINDS
    return LLMError(kind, message, status=status, retryable=retryable, retry_after=hint, code=code)


def _kind(status: int | None, names: set[str], message: str) -> LLMErrorKind:
    """The kind of an error (docs/providers.md §4.2), from its effective HTTP status
    (the body's 3-digit code for in-band errors), its lower-case code/type/status
    names and its message, in that order: code and type, message, status."""
    low = message.lower()
    if names & _QUOTA_CODES or status == 402:
        return "quota_exhausted"
    if status == 413 or (status == 429 and "request too large" in low):
        return "request_too_large"
    if status == 429 or names & _RATE_CODES:
        return "rate_limit"
    if names & _CONTEXT_CODES or _CONTEXT_RE.search(message):
        return "context_length_exceeded"
    if names & _FILTER_CODES:
        return "content_filter"
    if status is not None and status >= 500 and _HISTORY_5XX_RE.search(message):
        return "invalid_request"  # llama.cpp cannot parse replayed arguments
    if status in (401, 403) or names & _AUTH_CODES:
        return "authentication"
    if status == 404 or "model_not_found" in names:
        return "not_found"
    if status == 408:
        return "timeout"
    overloaded = "unavailable" in names or any("overloaded" in name for name in names)
    if status in (503, 529) or overloaded or "overloaded" in low:
        return "overloaded"
    if (status is not None and status >= 500) or status == 409:
        return "server_error"
    if status is not None and 400 <= status < 500:
        return "invalid_request"
    return "server_error"  # an error without status: in-band / 200 error body


def _context_numbers(message: str, error: dict[str, Any]) -> tuple[int | None, int | None]:
    """Parse (limit, requested) tokens from an overflow message or llama.cpp fields."""
    n_ctx, n_prompt = error.get("n_ctx"), error.get("n_prompt_tokens")
    if isinstance(n_ctx, int) and isinstance(n_prompt, int):
        return n_ctx, n_prompt
    found = re.search(r"maximum context length is (\d+) tokens", message, re.I)
    if found:
        rest = message[found.end() :]
        req = re.search(r"(\d+) (?:input )?tokens", rest)
        requested = int(req.group(1)) if req else None
        plus = re.search(r"plus (\d+)", rest)
        if requested is not None and plus:
            requested += int(plus.group(1))  # input tokens plus the max_tokens asked for
        return int(found.group(1)), requested
    found = re.search(r"prompt is too long: (\d+) tokens > (\d+)", message, re.I)
    if found:
        return int(found.group(2)), int(found.group(1))
    found = re.search(r"input token count \((\d+)\) exceeds .*?\((\d+)\)", message, re.I | re.S)
    if found:
        return int(found.group(2)), int(found.group(1))
    found = re.search(r"limit (\d+), requested (\d+)", message, re.I)
    if found:
        return int(found.group(1)), int(found.group(2))
    return None, None


def parse_duration(value: str) -> float | None:
    """Parse ``"20"``, ``"1.5"``, ``"644ms"``, ``"6m0s"``, ``"1h2m"`` to seconds (None if not)."""
    value = value.strip().lower()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION_RE.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def retry_hint(headers: Mapping[str, str] | None, message: str = "") -> float | None:
    """Return the server's wait hint in seconds, or None.

    Order: ``retry-after-ms``; ``Retry-After`` (seconds or an HTTP date);
    ``x-ratelimit-reset-requests``/``-tokens`` of an exhausted limit (``644ms``,
    ``6m0s``); then "try again in N s/ms" or "retry after N seconds" in the message,
    and Gemini's ``retryDelay``.
    """
    if headers:
        h = {k.lower(): v for k, v in headers.items()}
        if "retry-after-ms" in h:
            try:
                return max(0.0, float(h["retry-after-ms"]) / 1000)
            except ValueError:
                pass
        if "retry-after" in h:
            value = h["retry-after"].strip()
            try:
                return max(0.0, float(value))
            except ValueError:
                try:
                    when = email.utils.parsedate_to_datetime(value)
                    return max(0.0, when.timestamp() - time.time())
                except (TypeError, ValueError, IndexError, OverflowError):
                    pass
        resets = []
        for kind in ("requests", "tokens"):
            reset = h.get(f"x-ratelimit-reset-{kind}")
            if reset and h.get(f"x-ratelimit-remaining-{kind}", "0").strip() in ("0", ""):
                seconds = parse_duration(reset)
                if seconds is not None:
                    resets.append(seconds)
        if resets:
            return max(resets)
    found = _HINT_RE.search(message)
    if found:
        unit = (found.group(2) or "s").lower()
        scale = 0.001 if unit.startswith("ms") or unit.startswith("milli") else 1.0
        if unit.startswith("m") and not unit.startswith(("ms", "milli")):
            scale = 60.0
        return float(found.group(1)) * scale
    found = _RETRY_DELAY_RE.search(message)
    if found:
        return float(found.group(1))
    return None


def transport_error_types() -> tuple[
    tuple[type[BaseException], ...], tuple[type[BaseException], ...]
]:
    """(transport errors, timeout errors) raised while reading a body."""
    try:
        from openai._httpx2 import request_exceptions, timeout_exceptions

        return tuple(request_exceptions()), tuple(timeout_exceptions())
    except ImportError:
        import httpx

        return (httpx.TransportError,), (httpx.TimeoutException,)
