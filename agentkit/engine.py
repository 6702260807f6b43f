"""The one conversation loop shared by the main agent and every sub-agent (docs/architecture.md §1).

Roles, as small protocols: a *model* (``Model.complete``: messages in, one
normalised AssistantTurn out), an *environment* (the ToolRegistry and its
ToolContext), and *hooks* that differ between the main agent and a sub-agent
(:class:`Hooks`: the conversation's state, progress, notifications, the finish_task
nudge). The loop:

    hooks.before_run → hooks.before_request (messages to add, or the end) → request →
    hooks.after_response → append assistant message → hooks.before_tool_call
    for each call → run them concurrently (registry.run) → append results in the
    model's order, hooks.after_tool_call for each, then the messages a result
    carries (ToolResult.messages) → hooks.after_tool_results → repeat; an answer
    without tool calls → hooks.on_final_answer (stop, nudge or wait); at the end
    hooks.after_run.

One place each: a model request is ``Engine._complete``, a tool call's run is
``Engine._call_tool``. The conversation is saved after every turn.

Map: this module is the loop (:class:`Engine`); the roles' types (``Model``,
``Hooks``, ``Step``, ``EngineResult``, ``RunStatus``) live in agentkit.engine_roles
and are importable from here too.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit import prompts, tracing
from agentkit.context import ContextWindow
from agentkit.conversation import Conversation, ConversationState
from agentkit.engine_roles import EngineResult, Hooks, Model, RunStatus, Step
from agentkit.errors import Cancelled, ContextLengthExceeded, ErrorKind, LLMError
from agentkit.llm.turns import AssistantTurn, ToolCall
from agentkit.output import FINAL_RESULT
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.lanes import lanes
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.repeats import FailureStreak, call_key

if TYPE_CHECKING:
    from agentkit.output import OutputSpec

# The roles live in agentkit.engine_roles; re-exported: tests and applications
# import Hooks, Step, Model and RunStatus from here.
__all__ = ["Engine", "EngineResult", "Hooks", "Model", "RunStatus", "Step"]


def _noop(_event: ev.Event) -> None:
    return None


class Engine:
    """Runs a conversation until the hooks stop it, max_turns, an error or cancel.

    Args:
        model: the LLM client.
        registry: the tools offered.
        conversation: the conversation to extend (its messages are the history).
        ctx: the tool context (workspace, settings, cancel event, write claims).
        hooks: main-agent or sub-agent behaviour (see :class:`Hooks`).
        emit: event callback (see agentkit.events).
        save: called with the conversation after every turn (atomic JSON write).
        max_turns: model requests allowed in this run (default settings.max_turns).
        output: the typed result asked of this run (agentkit.output): a
            ``final_result`` tool is offered and the run ends when a valid one is
            given; None (default): nothing is added and an answer ends the run.

    Attributes:
        window: the :class:`~agentkit.context.ContextWindow`: the messages as
            sent, their token sizes, the budget and the fitting.
    """

    def __init__(
        self,
        *,
        model: Model,
        registry: ToolRegistry,
        conversation: Conversation,
        ctx: ToolContext,
        hooks: Hooks | None = None,
        emit: ev.EventHandler | None = None,
        save: Callable[[Conversation], None] | None = None,
        max_turns: int | None = None,
        output: OutputSpec[Any] | None = None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.conversation = conversation
        self.ctx = ctx
        self.settings: Settings = ctx.settings
        self.hooks = hooks or Hooks()
        self.emit = emit or _noop
        self._save = save
        self.max_turns = max_turns or self.settings.max_turns
        self.last_action = ""
        self.output = output
        self._failures = FailureStreak(self.settings.repeated_failure_note, self.settings.language)
        self.window = ContextWindow(conversation, self.settings, self._tools_schema, self.emit)
        self._pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ public
    @property
    def cancel_event(self) -> threading.Event:
        """The event that cancels this run when set (from any thread)."""
        return self.ctx.cancel

    def append(self, message: dict[str, Any]) -> None:
        """Append a message to the conversation (see ContextWindow.append)."""
        self.window.append(message)

    def save(self) -> None:
        """Persist the conversation now (no-op without a save callback)."""
        if self._save is not None:
            self._save(self.conversation)

    def set_state(self, state: ConversationState) -> None:
        """Change the conversation state, emit StateChanged and save."""
        if self.conversation.state != state:
            self.conversation.state = state
            self.emit(ev.StateChanged(state=state))
            self.save()

    def close(self) -> None:
        """Release the tool thread pool."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def run(self) -> EngineResult:
        """Run the loop; returns how it ended. Never raises LLMError (the result says
        ``failed`` with the error's one line); raises nothing on cancel either."""
        conv = self.conversation
        self._repair_history()
        self.hooks.before_run(self)
        turns = 0
        try:
            while True:
                if self.ctx.cancel.is_set():
                    raise Cancelled("cancelled")
                if turns >= self.max_turns:
                    return self._finish(
                        "failed", conv.final_text, f"max_turns ({self.max_turns}) reached"
                    )
                before = self.hooks.before_request(self)
                for message in before.messages:
                    self.append(message)
                if before.stop or before.error:
                    return self._end(before, conv.final_text)
                turn = self._request()
                turns += 1
                conv.stats.turns += 1
                conv.stats.add_usage(turn.usage)
                self.hooks.after_response(self, turn)
                self.append(turn.message())
                self.emit(
                    ev.AssistantMessage(
                        content=turn.content,
                        tool_calls=[c.wire() for c in turn.tool_calls],
                        turn=conv.stats.turns,
                        reasoning=turn.reasoning,
                    )
                )
                if turn.tool_calls:
                    # Saved before the tools run too (cheap: writes are coalesced), so
                    # a run killed during a long command still shows that call.
                    self.save()
                    self._run_tool_calls(turn.tool_calls)
                    step = self._after_tools(turn)
                else:
                    step = self._after_answer(turn)
                for message in step.messages:
                    self.append(message)
                self.save()
                if step.stop or step.error:
                    return self._end(step, conv.final_text)
        except Cancelled:
            return self._finish("cancelled", conv.final_text, "cancelled")
        except LLMError as exc:
            return self._finish("failed", conv.final_text, exc.one_line(), exc.kind)

    # ----------------------------------------------------------------- helpers
    def _after_tools(self, turn: AssistantTurn) -> Step:
        """After a batch of tool results: a valid final_result is the answer (the
        hooks' on_final_answer, Stop hooks, may send the agent back to work; else the
        run ends, and what after_tool_results would add waits for the next round);
        spent output retries fail the run; otherwise the hooks' Step."""
        if self.output is not None:
            ended = self.output.after_tools(self.settings.language)
            if ended is not None:
                if ended.error:
                    return ended
                answer = self.conversation.final_text = self.output.text()
                step = self.hooks.on_final_answer(self, dataclasses.replace(turn, content=answer))
                return step if step.messages else ended
        return self.hooks.after_tool_results(self)

    def _after_answer(self, turn: AssistantTurn) -> Step:
        """An answer without tool calls: the hooks stop, nudge or wait; with a typed
        output asked, the model is told to call final_result instead."""
        self.conversation.final_text = turn.content
        self.save()  # the hook may wait a long time for sub-agents
        if self.output is not None:
            return self.output.on_text(self.settings.language)
        step = self.hooks.on_final_answer(self, turn)
        if not step.messages:
            step.stop = True
        return step

    def _end(self, step: Step, final_text: str | None) -> EngineResult:
        """End the run as a hook's Step says: ``failed`` with its error, else ``done``."""
        if step.error:
            return self._finish("failed", final_text, step.error, step.error_kind)
        return self._finish("done", final_text, None)

    def _finish(
        self,
        status: RunStatus,
        final_text: str | None,
        error: str | None,
        error_kind: ErrorKind | None = None,
    ) -> EngineResult:
        self.conversation.error = error
        result = EngineResult(
            status=status, final_text=final_text, error=error, error_kind=error_kind
        )
        self.hooks.after_run(self, result)
        self.save()
        return result

    def _repair_history(self) -> None:
        """Answer tool calls left without a result (an interrupted run): every call
        id is answered by exactly one tool message."""
        messages = self.conversation.messages
        answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if msg.get("role") == "assistant" and msg.get("tool_calls"):
                missing = [c for c in msg["tool_calls"] if c.get("id") not in answered]
                insert_at = i + 1
                while insert_at < len(messages) and messages[insert_at].get("role") == "tool":
                    insert_at += 1
                for call in missing:
                    messages.insert(
                        insert_at,
                        {
                            "role": "tool",
                            "tool_call_id": call.get("id"),
                            "name": call.get("function", {}).get("name"),
                            "content": "Error: cancelled: this tool call was interrupted before it finished.",
                        },
                    )
                    insert_at += 1
                break
        self.window.rebuild()

    def _tools_schema(self) -> list[dict[str, Any]]:
        schemas = self.registry.schemas(self.settings.language)
        if self.output is not None:  # a new list: the registry's is cached
            return [*schemas, self.output.tool_schema(self.settings.language)]
        return schemas

    def _request(self) -> AssistantTurn:
        window = self.window
        window.fit(window.budget())
        tools = self._tools_schema() or None
        try:
            return self._complete(tools)
        except ContextLengthExceeded as exc:
            # The server counts differently: fit under what it said, and ask once more.
            limit = exc.limit_tokens or int(window.tokens * 0.8)
            window.fit(min(window.budget(), int(limit * 0.75)))
            return self._complete(tools)

    def _complete(self, tools: list[dict[str, Any]] | None) -> AssistantTurn:
        with tracing.chat_span(self) as span:
            turn = self.model.complete(
                self.window.wire,
                tools,
                cancel=self.ctx.cancel,
                on_text=self._on_text,
                on_retry=self._on_retry,
            )
            span.turn(turn)
        return turn

    def _on_text(self, text: str) -> None:
        self.emit(ev.TextDelta(text=text))

    def _on_retry(self, error: LLMError, attempt: int, delay: float) -> None:
        tracing.retry_event(error, attempt, delay)
        self.emit(
            ev.RetryScheduled(
                kind=error.kind, attempt=attempt, delay_seconds=delay, message=error.one_line()
            )
        )

    def _run_tool_calls(self, calls: list[ToolCall]) -> None:
        stats = self.conversation.stats
        language = self.settings.language
        tools = [self.registry.get(call.name) for call in calls]
        for call, tool in zip(calls, tools, strict=True):
            stats.count_call(call.name)
            self.last_action = prompts.last_action(
                language, tool.action or call.name if tool else call.name, call.arguments
            )
            self.emit(
                ev.ToolCallStarted(
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    last_action=self.last_action,
                )
            )
            self.hooks.before_tool_call(self, call)
        results = self._run_lanes(calls)
        for call, tool, (result, duration) in zip(calls, tools, results, strict=True):
            key = call_key(call.name, call.arguments, call.arguments_raw or call.error or "")
            result = self._failures.observe(key, result)
            if result.ok or result.error_code in ("timeout", "killed"):  # the command ran
                stats.count_done(tool.counter if tool else None)
            self.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": result.output,
                }
            )
            self.emit(
                ev.ToolCallFinished(
                    call_id=call.id,
                    name=call.name,
                    ok=result.ok,
                    output=result.output,
                    duration_seconds=duration,
                )
            )
            self.hooks.after_tool_call(self, call, result)
        for message in (m for result, _ in results for m in result.messages):
            self.append(message)  # the user's text a tool fetched (a skill), after the batch

    def _run_lanes(self, calls: list[ToolCall]) -> list[tuple[ToolResult, float]]:
        """Run the calls, lanes at once and each lane's calls (one path) in their
        order (agentkit.tools.lanes); returns the results in the calls' order."""
        groups = lanes([c.arguments for c in calls], self.ctx.workspace)
        if len(groups) == 1:
            return [self._call_tool(call) for call in calls]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.settings.tool_workers, thread_name_prefix="agentkit-tool"
            )
        done: dict[int, tuple[ToolResult, float]] = {}

        def run_lane(lane: list[int]) -> None:
            for i in lane:
                done[i] = self._call_tool(calls[i])

        # Each lane runs in a copy of this thread's context (the current span among it).
        contexts = [contextvars.copy_context() for _ in groups]
        # list(): wait, and raise what a lane raised.
        list(self._pool.map(lambda c, lane: c.run(run_lane, lane), contexts, groups))
        return [done[i] for i in range(len(calls))]

    def _call_tool(self, call: ToolCall) -> tuple[ToolResult, float]:
        """Run one tool call (on a lane's thread); returns its result and seconds."""
        started = time.monotonic()
        with tracing.tool_span(call, self.settings) as span:
            if self.output is not None and call.name == FINAL_RESULT:
                result = self.output.check(call, self.settings.language)
            else:
                result = self.registry.run(call, self.ctx)
            span.result(result)
        return result, round(time.monotonic() - started, 3)
