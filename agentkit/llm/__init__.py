"""Talking to an OpenAI-compatible Chat Completions endpoint.

- ``client``: :class:`LLMClient`, one request in, one normalised turn out; retries,
  cancellation and the one-off repairs of server quirks.
- ``turns``: the normalised result (:class:`AssistantTurn`, :class:`ToolCall`,
  :class:`Usage`).
- ``wire``: messages encoded once (:class:`~agentkit.llm.wire.WireMessage`) and the
  request body's bytes built from them.
- ``_retry``: when to retry a failed request and how long to wait.
- ``_assemble`` (a reply from its body or stream), ``_errors`` (classifying
  failures), ``_sse`` (the event-stream parser), ``_toolcall_accumulator`` and
  ``_text_toolcalls`` (tool calls from deltas or from text), ``_cancel`` (aborting
  blocked reads).

Names are loaded on first use, so importing ``agentkit.llm.turns`` (the engine,
the conversation record) does not load the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit.llm._retry import ONCE_ONLY_KINDS, OUTAGE_KINDS
    from agentkit.llm.client import LLMClient
    from agentkit.llm.turns import AssistantTurn, ToolCall, Usage

__all__ = ["ONCE_ONLY_KINDS", "OUTAGE_KINDS", "AssistantTurn", "LLMClient", "ToolCall", "Usage"]

_LAZY = {
    "LLMClient": "agentkit.llm.client",
    "ONCE_ONLY_KINDS": "agentkit.llm._retry",
    "OUTAGE_KINDS": "agentkit.llm._retry",
    "AssistantTurn": "agentkit.llm.turns",
    "ToolCall": "agentkit.llm.turns",
    "Usage": "agentkit.llm.turns",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkit.llm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
