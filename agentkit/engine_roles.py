"""The engine's roles: what the loop needs of a model, where a role changes it, how a run ends.

One job: the small types around :class:`agentkit.engine.Engine`: :class:`Model`
(``complete``: messages in, one normalised AssistantTurn out), :class:`Hooks`
(where the main agent and a sub-agent differ: the conversation's state, progress,
notifications, the finish_task nudge), :class:`Step` (a hook's answer: messages,
stop, or an error that ends the run), :class:`EngineResult` and :data:`RunStatus`
(how a run or a chat round ended). agentkit.engine re-exports them all, so
``from agentkit.engine import Hooks, Step`` goes on working.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentkit.conversation import ConversationState
from agentkit.errors import ErrorKind, LLMError
from agentkit.llm.turns import AssistantTurn, ToolCall
from agentkit.tools.base import ToolResult

if TYPE_CHECKING:
    from agentkit.engine import Engine

__all__ = ["EngineResult", "Hooks", "Model", "RunStatus", "Step"]

RunStatus = Literal["done", "failed", "cancelled"]
"""How a run or a chat round ended (:attr:`EngineResult.status`,
``RunResult.status``, ``RoundResult.status``, ``RunFinished``, ``RoundFinished``)."""

_END_STATE: dict[RunStatus, ConversationState] = {
    "done": "done",
    "failed": "failed",
    "cancelled": "idle",  # a cancelled conversation can simply be continued
}


class Model(Protocol):
    """What the engine needs from an LLM client (agentkit.llm.LLMClient fits)."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        cancel: threading.Event | None = None,
        on_text: Callable[[str], None] | None = None,
        on_retry: Callable[[LLMError, int, float], None] | None = None,
    ) -> AssistantTurn: ...


@dataclass
class Step:
    """A hook's answer: messages to append, and whether the run ends now. With
    ``error`` (one line) the run ends as ``failed`` with it, ``error_kind`` its kind
    (a spent budget: ``budget_exhausted``)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    stop: bool = False
    error: str | None = None
    error_kind: ErrorKind | None = None


class Hooks:
    """Where a role changes the loop. The defaults are a plain agent's: the engine
    keeps the conversation's state, nothing is added after tool results, and an
    answer without tool calls stops the run. Hooks run on the engine's thread."""

    def before_run(self, engine: Engine) -> None:
        """Called once when the run starts (history repaired): the state becomes
        ``running`` (a chat round, whose session keeps the state, does nothing)."""
        engine.set_state("running")

    def after_run(self, engine: Engine, result: EngineResult) -> None:
        """Called once when the run ends, ``conversation.error`` set, before the last
        save: the state becomes ``done``, ``failed``, or ``idle`` after a cancel (a
        cancelled conversation can simply be continued)."""
        engine.set_state(_END_STATE[result.status])

    def before_request(self, engine: Engine) -> Step:
        """Called before each model request (the first one too); its messages go in
        first (a steering message, a budget's wrap-up), or it ends the run (a spent
        budget)."""
        return Step()

    def after_response(self, engine: Engine, turn: AssistantTurn) -> None:
        """Called once per model response, its usage counted in the stats, before the
        assistant message is appended (cost and budgets count here: retries and
        streaming give one response, so usage is counted once)."""

    def before_tool_call(self, engine: Engine, call: ToolCall) -> None:
        """Called for each tool call of a reply, in the model's order, once it is
        counted in the stats and announced (ToolCallStarted), before any call of the
        reply runs; ``engine.last_action`` describes it."""

    def after_tool_call(self, engine: Engine, call: ToolCall, result: ToolResult) -> None:
        """Called for each tool call, in the model's order, once its ``result`` is in
        the conversation and announced (ToolCallFinished)."""

    def after_tool_results(self, engine: Engine) -> Step:
        """Called after each batch of tool results; may inject messages or stop."""
        return Step()

    def on_final_answer(self, engine: Engine, turn: AssistantTurn) -> Step:
        """Called when the model answers without tool calls: stop, nudge, or wait."""
        return Step(stop=True)


@dataclass
class EngineResult:
    """How a run ended: ``status`` a :data:`RunStatus` (``done``, ``failed`` or
    ``cancelled``); ``error_kind`` an :data:`agentkit.errors.ErrorKind` when a model
    error or a spent budget ended it, else None."""

    status: RunStatus
    final_text: str | None
    error: str | None = None
    error_kind: ErrorKind | None = None
