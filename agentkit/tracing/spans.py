"""The spans, named and attributed per the GenAI semantic conventions v1.41.1.

One job: fill and end spans (docs/tracing.md §3): each kind of span is a small class
with the methods the loop calls (agentkit.tracing.Span); agentkit.tracing.live starts
them. The names are string literals on purpose: the Python semconv package marks them
deprecated since they moved to semantic-conventions-genai, and importing it costs
start-up time.

- ``invoke_agent main`` (INTERNAL): a main-agent round;
- ``invoke_agent sub-agent {id}`` (INTERNAL): a sub-agent's run, in its worker, child
  of the parent's ``execute_tool create_sub_agent`` span;
- ``chat {model}`` (CLIENT): one model request;
- ``execute_tool {tool}`` (INTERNAL): one tool call.

Attributes that sampling may use are given when a span starts. A failure sets the
span's status to ERROR and ``error.type`` (the LLMError kind, the tool's error code,
the sub-agent's end status); success leaves the status unset.

Spans start with ``record_exception=False``: the SDK's own ``exception`` event would
carry the exception's message and stack trace as they are, and a server that echoes
the key it was sent would put the key in the trace. :func:`record_exception` adds that
event scrubbed (agentkit.process.redact), with content capture on or off.
"""

from __future__ import annotations

import functools
import time
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentkit.process.redact import scrub_error
from agentkit.process.secrets import scrub_text
from agentkit.tracing import content as text
from agentkit.tracing.base import Span, stats_cost

if TYPE_CHECKING:
    from agentkit.tracing.live import Live

PROVIDER = "openai"
"""``gen_ai.provider.name``: the telemetry flavour of any OpenAI-compatible endpoint
(the conventions' rule); ``server.address`` says which host it really is."""
MAIN_AGENT = "main"
STATUS_CHARS = 300


@functools.lru_cache(maxsize=16)
def server_attributes(base_url: str | None) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of an endpoint URL ({} when unknown)."""
    if not base_url:
        return {}
    try:
        parts = urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname or "", "server.port": port} if parts.hostname else {}


def _usage_attributes(prompt: int, completion: int) -> dict[str, Any]:
    return {"gen_ai.usage.input_tokens": prompt, "gen_ai.usage.output_tokens": completion}


def _scrub(message: str, hidden: tuple[str | None, ...]) -> str:
    return scrub_text(scrub_error(message, hidden), hidden)


def _fail(span: Any, kind: str, message: str, hidden: tuple[str | None, ...]) -> None:
    span.set_attribute("error.type", kind or "_OTHER")
    span.set_status(Status(StatusCode.ERROR, _scrub(message, hidden)[:STATUS_CHARS]))


def record_exception(span: Any, exc: BaseException, hidden: tuple[str | None, ...]) -> None:
    """Add the conventions' ``exception`` event to ``span``, its message and stack trace
    scrubbed of every known secret and of ``hidden`` (the SDK's own event is off)."""
    kind = type(exc)
    module = kind.__module__
    name = (
        kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"
    )
    stack = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
    span.add_event(
        "exception",
        {
            "exception.type": name,
            "exception.message": scrub_error(str(exc), hidden),
            "exception.stacktrace": scrub_error(stack, hidden),
            "exception.escaped": "False",
        },
    )


def _error(exc: BaseException) -> tuple[str, str]:
    """``error.type`` and the one-line message of an exception (an LLMError's kind)."""
    one_line = getattr(exc, "one_line", None)
    return str(getattr(exc, "kind", None) or type(exc).__name__), (
        one_line() if callable(one_line) else str(exc)
    )


class OpenSpan(Span):
    """A live span made current on this thread between enter and exit."""

    def __init__(self, live: Live, span: Any, hidden: tuple[str | None, ...]) -> None:
        self.live, self.span, self.hidden = live, span, hidden
        self._token: Any = None

    def __enter__(self) -> Span:
        self.live.opened(self)
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        otel_context.detach(self._token)
        if not self.live.closed(self):
            return  # ended already by the worker's abort
        if exc is not None:
            record_exception(self.span, exc, self.hidden)
            _fail(self.span, *_error(exc), self.hidden)
        self.end()

    def end(self) -> None:
        """Set the closing attributes and end the span."""
        self.span.end()

    def abort(self, reason: str) -> None:
        """End it now as ``reason`` (the worker is ending by force)."""
        _fail(self.span, reason, reason, ())
        self.span.set_attribute("agentkit.agent.status", reason)
        self.span.end()


class ChatSpan(Span):
    """A model request. Its span is made once the answer is in, with the request's start
    time and every attribute in one pass (the SDK checks each attribute it is given: a
    second pass would double that); nothing runs under it, so it need not be current."""

    def __init__(
        self,
        live: Live,
        name: str,
        attributes: dict[str, Any],
        hidden: tuple[str | None, ...],
        wire: Any,
    ) -> None:
        self.live, self.name, self.attributes, self.hidden, self.wire = (
            live,
            name,
            attributes,
            hidden,
            wire,
        )
        self.started = time.time_ns()
        self.parent = otel_context.get_current()
        self.events: list[tuple[str, dict[str, Any], int]] = []

    def __enter__(self) -> Span:
        self.live.opened(self)
        self.live.requests.current = self
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.live.requests.current = None
        if self.live.closed(self):
            self.emit(_error(exc) if exc is not None else None, exc)

    def emit(self, error: tuple[str, str] | None, exc: BaseException | None = None) -> None:
        """Make and end the span (``error``: its ``error.type`` and message)."""
        if error is not None:
            self.attributes["error.type"] = error[0]
        span = self.live.tracer.start_span(
            self.name,
            context=self.parent,
            kind=SpanKind.CLIENT,
            attributes=self.attributes,
            start_time=self.started,
            record_exception=False,
        )
        for name, attributes, at in self.events:
            span.add_event(name, attributes, at)
        if exc is not None:
            record_exception(span, exc, self.hidden)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, _scrub(error[1], self.hidden)[:STATUS_CHARS]))
        span.end()

    def abort(self, reason: str) -> None:
        """End it now as ``reason`` (the worker is ending by force)."""
        self.emit((reason, reason))

    def retry(self, attributes: dict[str, Any]) -> None:
        """Note a ``retry`` event (given to the span when it is made)."""
        self.events.append(("retry", attributes, time.time_ns()))

    def turn(self, turn: Any) -> None:
        usage, attributes = turn.usage, self.attributes
        attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
        attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
        attributes["gen_ai.response.finish_reasons"] = [
            turn.raw_finish_reason or turn.finish_reason
        ]
        if turn.response_model:
            attributes["gen_ai.response.model"] = turn.response_model
        if turn.response_id:
            attributes["gen_ai.response.id"] = turn.response_id
        if usage.extras:
            cached = (usage.extras.get("prompt_tokens_details") or {}).get("cached_tokens")
            if isinstance(cached, int):
                attributes["gen_ai.usage.cache_read.input_tokens"] = cached
            reasoning = (usage.extras.get("completion_tokens_details") or {}).get(
                "reasoning_tokens"
            )
            if isinstance(reasoning, int):
                attributes["gen_ai.usage.reasoning.output_tokens"] = reasoning
        if usage.estimated:
            attributes["agentkit.usage.estimated"] = True
        if self.live.capture:
            attributes["gen_ai.input.messages"] = text.input_messages(self.wire, self.hidden)
            attributes["gen_ai.output.messages"] = text.output_messages(turn, self.hidden)


class ToolSpan(OpenSpan):
    def result(self, result: Any) -> None:
        if self.live.capture:
            self.span.set_attribute(
                "gen_ai.tool.call.result", text.tool_result(result.output, self.hidden)
            )
        if not result.ok:
            # The output may be the user's data: only its code, unless content is on.
            code = result.error_code or "_OTHER"
            _fail(self.span, code, result.output if self.live.capture else code, self.hidden)


class RoundSpan(OpenSpan):
    """A main-agent round; its usage is what the conversation's stats grew by."""

    def __init__(self, live: Live, span: Any, hidden: tuple[str | None, ...], stats: Any) -> None:
        super().__init__(live, span, hidden)
        self.stats = stats
        self.before = (stats.prompt_tokens, stats.completion_tokens, stats_cost(stats))

    def outcome(self, outcome: Any) -> None:
        stats, (prompt, completion, cost) = self.stats, self.before
        self.span.set_attributes(
            {
                **_usage_attributes(
                    stats.prompt_tokens - prompt, stats.completion_tokens - completion
                ),
                "agentkit.agent.status": outcome.status,
            }
        )
        now = stats_cost(stats)
        if now is not None and cost is not None:  # every response of the round priced
            self.span.set_attribute("agentkit.usage.cost_usd", round(now - cost, 10))
        if outcome.status == "failed":
            _fail(self.span, outcome.error_kind or "failed", outcome.error or "failed", self.hidden)


class SubAgentSpan(OpenSpan):
    """A sub-agent's run in its worker; ends with the worker's status and totals."""

    def __init__(self, live: Live, span: Any, hidden: tuple[str | None, ...], worker: Any) -> None:
        super().__init__(live, span, hidden)
        self.worker = worker

    def end(self) -> None:
        self.finish(self.worker.status, self.worker.error)
        self.span.end()

    def abort(self, reason: str) -> None:
        self.finish(reason, reason)
        self.span.end()

    def finish(self, status: str, error: str | None) -> None:
        """Set status, model, token totals and cost from the worker's conversation."""
        conversation = self.worker.conversation
        stats = conversation.stats
        attributes = _usage_attributes(stats.prompt_tokens, stats.completion_tokens)
        attributes["agentkit.agent.status"] = status
        if conversation.model:
            attributes["gen_ai.request.model"] = conversation.model
        cost = stats_cost(stats)
        if cost is not None:
            attributes["agentkit.usage.cost_usd"] = cost
        self.span.set_attributes(attributes)
        if status != "completed":
            _fail(self.span, status, error or status, self.hidden)
