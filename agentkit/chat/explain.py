"""Words for people about a round that failed: what failed and what to do.

One job: :func:`state_words` says a conversation's state as people read it, and
:func:`round_failure` turns a round's error and its kind (the LLMError kind,
``RoundResult.error_kind``) into one sentence that names the endpoint when the endpoint
is at fault, for the terminal chat and the web chat (docs/web-api.md: RoundFinished's
``explanation``). :func:`shown_url` is the endpoint as it may be shown anywhere: no
user name, password, query or fragment (they may hold a secret); :func:`closing_words`
says what a server's shutdown ended, :func:`counter_words` an agent's counters (the one
wording of the chat, ``agentkit show`` and ACP) and :func:`usage_words` its tokens and cost.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentkit.conversation import PROCESS_GONE

__all__ = [
    "COUNTER_NOUNS",
    "DEFAULT_BASE_URL",
    "closing_words",
    "counter_words",
    "round_failure",
    "shown_url",
    "state_words",
    "usage_words",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The endpoint used when no base URL is set (the OpenAI SDK's default)."""

_PREFIX = re.compile(r"^[a-z_]+(?: \(HTTP \d{3}\))?: ")
_SAID = re.compile(r"^cannot reach the model server: ")  # the sentence says it already

_ADVICE = {
    "connection": "cannot reach the model server at {url} ({detail}). Check that it is running "
    "and that the base URL is right, then send the message again.",
    "timeout": "the model server at {url} did not answer in time ({detail}). "
    "Send the message again in a moment.",
    "authentication": "the model server at {url} refused the API key ({detail}). "
    "Check the key (OPENAI_API_KEY), then send the message again.",
    "not_found": "the model server at {url} does not know the model {model} or this address "
    "({detail}). Check the model name and the base URL.",
    "rate_limit": "the model server at {url} is limiting requests ({detail}). "
    "Wait a moment, then send the message again.",
    "quota_exhausted": "the account at {url} has no quota left ({detail}). "
    "Add credit or use another key.",
    "overloaded": "the model server at {url} is overloaded ({detail}). Try again in a moment.",
    "server_error": "the model server at {url} had an internal error ({detail}). "
    "Try again in a moment.",
    "context_length_exceeded": "the conversation no longer fits the model's context ({detail}). "
    "Start a new conversation, or use a model with a larger context.",
    "request_too_large": "the request is too large for the model server ({detail}). "
    "Start a new conversation, or send a shorter message.",
    "content_filter": "the provider's content filter refused the request ({detail}). "
    "Rephrase the message.",
}


def shown_url(url: str | None) -> str:
    """``url`` without user name, password, query and fragment (default endpoint for
    None or empty); text that is not a URL comes back as it was, cut to 200 characters."""
    if not url:
        return DEFAULT_BASE_URL
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]  # user:password@ dropped
        return urlunsplit((parts.scheme, host, parts.path, "", "")) or url[:200]
    except ValueError:
        return url[:200]


def round_failure(
    error: str | None, error_kind: str | None, *, base_url: str | None, model: str | None
) -> str:
    """One sentence for a failed round: ``"The round failed: <what> (<detail>). <what
    to do>."``.

    Args:
        error: the round's error text (``LLMError.one_line()`` for model errors:
            ``"kind (HTTP n): message"``; the kind prefix is dropped as redundant).
        error_kind: the LLMError kind (docs/providers.md §4.2), or None for other failures.
        base_url, model: the settings the round used (the URL is shown without secrets).
    """
    detail = _SAID.sub("", _PREFIX.sub("", " ".join((error or "no reason given").split())))
    if len(detail) > 300:
        detail = detail[:300] + "…"
    template = _ADVICE.get(error_kind or "")
    if template is None:
        return f"The round failed: {detail}. Send a message to try again."
    text = template.format(url=shown_url(base_url), model=repr(model or ""), detail=detail)
    return f"The round failed: {text}"


def state_words(state: str, running: int = 0) -> str:
    """A conversation's state in words: ``working`` (running), ``waiting for 2
    sub-agents`` (waiting_for_subagents; ``running`` is how many), ``idle``; a list's
    ``damaged`` (agentkit.chat.store) is ``damaged (cannot be read)`` and ``ended
    (process gone)`` (agentkit.conversation.PROCESS_GONE) stays as it is (a trial saw
    both listed as idle). The web page's common.js ``stateWords`` says the same."""
    if state == "running":
        return "working"
    if state == "waiting_for_subagents":
        if running <= 0:
            return "waiting for sub-agents"
        return f"waiting for {running} sub-agent{'s' if running != 1 else ''}"
    if state == "damaged":
        return "damaged (cannot be read)"
    if state == PROCESS_GONE:
        return PROCESS_GONE
    return "idle"


def closing_words(sessions: list[Any]) -> str:
    """One line saying what closing ``sessions`` (agentkit.chat.Session, open ones)
    ends: ``closed 2 conversations (saved): the round of conv_a stopped; sub-agents
    #1, #2 of conv_b terminated``, or ``…; nothing was running``, or ``no
    conversation was open``. Read before they close."""
    if not sessions:
        return "no conversation was open"
    ended: list[str] = []
    for session in sessions:
        if session.state == "running":
            ended.append(f"the round of {session.id} stopped")
        running = [r.get("agent_id") for r in session.subagents() if r.get("status") == "running"]
        if running:
            ids = ", ".join(f"#{i}" for i in running)
            noun = "sub-agents" if len(running) > 1 else "sub-agent"
            ended.append(f"{noun} {ids} of {session.id} terminated")
    count = len(sessions)
    head = f"closed {count} conversation{'s' if count != 1 else ''} (saved)"
    return f"{head}: {'; '.join(ended)}" if ended else f"{head}; nothing was running"


COUNTER_NOUNS: tuple[tuple[str, str, str], ...] = (
    ("files_read", "file read", "files read"),
    ("searches", "search", "searches"),
    ("web_pages", "web page", "web pages"),
    ("commands", "command", "commands"),
)
"""The four counters (docs/guide/glossary.md "counters"): key, one, many."""


def counter_words(row: dict[str, Any]) -> str:
    """A status row's or stats' counters in the words every front end uses (the chat,
    ``agentkit show``, ACP; the page's common.js mirrors it): ``3 tool calls, 2 files
    read, 1 search, 0 web pages, 4 commands``. Tool calls lead when ``row`` counts them
    (``tool_calls``: a count, or the stats' name -> count dict); missing counters are 0."""

    def said(count: Any, one: str, many: str) -> str:
        number = count if isinstance(count, int) and not isinstance(count, bool) else 0
        return f"{number} {one if number == 1 else many}"

    parts = []
    calls = row.get("tool_calls")
    if isinstance(calls, dict):
        calls = sum(v for v in calls.values() if isinstance(v, int))
    if isinstance(calls, int):
        parts.append(said(calls, "tool call", "tool calls"))
    parts += [said(row.get(key), one, many) for key, one, many in COUNTER_NOUNS]
    return ", ".join(parts)


def usage_words(row: dict[str, Any]) -> str:
    """A status row's ``tokens`` and ``cost_usd`` in the front ends' words:
    ``1,234 tokens · $0.001200``, ``1,234 tokens · cost unknown`` (no known price),
    ``~1,234 tokens (estimated) · ...`` (``usage_estimated``), and ``0 tokens`` when it
    never reached the model: no cost to speak of (never a bare "$0.000000"; the page
    shows none either)."""
    count = row.get("tokens")
    tokens = int(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else 0
    cost = row.get("cost_usd")
    shown = f"${cost:.6f}" if isinstance(cost, (int, float)) else "cost unknown"
    if row.get("usage_estimated"):
        return f"~{tokens:,} tokens (estimated) · {shown}"
    if tokens == 0:
        return "0 tokens"
    return f"{tokens:,} tokens · {shown}"
