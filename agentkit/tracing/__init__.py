"""OpenTelemetry traces of agent runs, in the GenAI semantic conventions (docs/tracing.md).

The map:

- ``base``: the no-op :class:`Span` (and :data:`NOOP`), the cost hook.
- **this module**: the switch and the calls the loop makes. While tracing is off
  (the default) every call is one check of the module-level ``_live`` and returns
  the shared no-op :data:`NOOP` or an empty dict: nothing from ``opentelemetry`` is
  imported and a turn costs what it cost before.
- ``setup``: turning it on, from the standard ``OTEL_*`` variables (exporter,
  endpoint, protocol, headers, timeout, service name, resource, sampler, limits,
  batch queue) or an application's own ``TracerProvider``; the bounded flush at the
  end of a process; one warning when the collector is away.
- ``spans``: the spans, named and attributed as the GenAI conventions v1.41.1 say:
  ``invoke_agent`` (a main-agent round, a sub-agent's run), ``chat {model}`` (each
  model request, retries as events), ``execute_tool {tool}`` (each tool call).
- ``live``: the tracer of a process that traces: starts each span, tracks a worker's
  open spans (its abort ends them), closes the provider within a bound.
- ``content``: message content on spans, only with
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, scrubbed by
  :func:`agentkit.process.secrets.scrub_text` and capped.
- ``propagation``: one trace across processes: W3C trace context in the sub-agent's
  WorkerSpec (local and Ray), ``TRACEPARENT``/``TRACESTATE`` for commands, ``_meta``
  for MCP calls.

Where the loop calls in: ``chat/rounds.py`` (the round), ``engine.py`` (each model
request, its retries, each tool call), ``subagent/manager.py`` (the context a worker
gets), ``subagent/worker/`` (the sub-agent's run, its end in any way),
``tools/shell/`` (commands), ``mcp/client.py`` (MCP calls).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentkit.tracing.base import NOOP, Span, stats_cost

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.engine import Engine
    from agentkit.errors import LLMError
    from agentkit.llm.turns import ToolCall
    from agentkit.settings import Settings
    from agentkit.subagent.contract import WorkerSpec
    from agentkit.tracing.live import Live

__all__ = [
    "ABORT_FLUSH_SECONDS",
    "NOOP",
    "WORKER_FLUSH_SECONDS",
    "Span",
    "chat_span",
    "command_env",
    "configure",
    "configure_from_environment",
    "enabled",
    "mcp_meta",
    "retry_event",
    "round_span",
    "shutdown",
    "start_worker",
    "stats_cost",
    "subagent_span",
    "tool_span",
    "worker_abort",
    "worker_context",
    "worker_flush",
]

WORKER_FLUSH_SECONDS = 2.5
"""At most this long a sub-agent process that ended its run waits for its spans to be
exported (its parent waits 5 s for it to exit: agentkit.subagent.supervisor)."""
ABORT_FLUSH_SECONDS = 0.3
"""The last wait of a worker ending by force (the parent kills it 0.5 s after asking)."""

_live: Live | None = None
"""The running tracer (agentkit.tracing.live.Live) once tracing is on, else None."""
_decided = False


# ------------------------------------------------------------------ switch
def enabled() -> bool:
    """True while this process traces."""
    return _live is not None


def configure(tracer_provider: Any = None) -> bool:
    """Turn tracing on for this process; returns whether it is on.

    Args:
        tracer_provider: an application's own ``opentelemetry.sdk.trace.TracerProvider``
            (or any API ``TracerProvider``): agentkit's spans go through it, and the
            application keeps its exporters, flushing and shutdown. None: build one
            from the standard ``OTEL_*`` variables (docs/tracing.md §2); tracing stays
            off when they do not ask for it, or the ``otel`` extra is missing (one
            warning then).

    One tracer per process: a later call replaces the earlier one (our own provider
    is flushed and shut down first). Sub-agent processes always build theirs from the
    ``OTEL_*`` variables this process had when it started them.
    """
    global _live, _decided
    if tracer_provider is not None and _live is not None and _live.provider is tracer_provider:
        return True
    shutdown()
    _decided = True
    from agentkit.tracing.setup import build

    _live = build(tracer_provider, agent_id="main")
    return _live is not None


def configure_from_environment() -> bool:
    """Turn tracing on from the ``OTEL_*`` variables, once per process: the first
    Agent or Session calls this; later calls (or after :func:`configure`) do nothing.
    Returns whether tracing is on. Imports nothing when the variables do not ask for
    tracing (agentkit.tracing.setup.wanted reads only ``os.environ``)."""
    global _decided
    if _decided:
        return _live is not None
    _decided = True
    from agentkit.tracing.setup import wanted

    return wanted(os.environ) and configure()


def shutdown(timeout_seconds: float = 3.0) -> None:
    """Turn tracing off: end the spans still open, flush and shut down our own provider
    within ``timeout_seconds`` (an application's provider is only flushed). Idempotent."""
    global _live
    live, _live = _live, None
    if live is not None:
        live.close(timeout_seconds)


# --------------------------------------------------------------- the loop
def round_span(conversation: Conversation, settings: Settings, trigger: str, finished: Any) -> Span:
    """The ``invoke_agent main`` span of one main-agent round (chat/rounds.py).

    Args:
        conversation: the main conversation (its id; its stats give the round's usage).
        settings: the round's settings (model, endpoint).
        trigger: ``user`` or ``notification`` (RoundPlan.trigger).
        finished: the sub-agents whose completion opens the round: the round links
            to the ``execute_tool create_sub_agent`` span that started each one.
    """
    if _live is None:
        return NOOP
    return _live.round(conversation, settings, trigger, finished)


def chat_span(engine: Engine) -> Span:
    """The ``chat {model}`` span of one model request (``Engine._complete``)."""
    if _live is None:
        return NOOP
    return _live.chat(engine)


def retry_event(error: LLMError, attempt: int, delay: float) -> None:
    """Add a ``retry`` event (kind, attempt, delay in seconds) to the open ``chat`` span."""
    if _live is not None:
        _live.retry(error, attempt, delay)


def tool_span(call: ToolCall, settings: Settings) -> Span:
    """The ``execute_tool {tool}`` span of one tool call (``Engine._call_tool``); it
    is the current span while the tool runs, so what the tool starts joins it."""
    if _live is None:
        return NOOP
    return _live.tool(call, settings)


# ----------------------------------------------------------- propagation
def worker_context(background: bool) -> dict[str, Any]:
    """What a new sub-agent's WorkerSpec carries for tracing: ``{"trace": {...}}``
    (the current span's W3C context, a link to the round for a ``background`` one,
    the ``OTEL_*`` variables), or ``{}`` while tracing is off."""
    if _live is None:
        return {}
    from agentkit.tracing.propagation import worker_extra

    return {"trace": worker_extra(background)}


def command_env() -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE``) of the current span for a command's
    environment, or ``{}`` while tracing is off."""
    if _live is None:
        return {}
    from agentkit.tracing.propagation import current_env

    return current_env()


def mcp_meta() -> dict[str, str] | None:
    """The ``_meta`` an MCP ``tools/call`` carries (``traceparent``, ``tracestate``:
    MCP SEP-414, read by servers built on the MCP SDK), or None while tracing is off."""
    if _live is None:
        return None
    from agentkit.tracing.propagation import current_carrier

    return current_carrier() or None


# ---------------------------------------------------------------- worker
def start_worker(spec: WorkerSpec) -> None:
    """In a sub-agent process: turn tracing on when the parent traced (the spec's
    ``extra["trace"]``), from the parent's ``OTEL_*`` variables, with the parent's
    span as the parent of this run's span. Nothing when the spec carries no trace."""
    global _live, _decided
    trace = spec.extra.get("trace")
    _decided = True
    if not isinstance(trace, dict):
        return
    from agentkit.tracing.setup import build_for_worker

    _live = build_for_worker(trace, agent_id=str(spec.agent_id))


def subagent_span(worker: Any) -> Span:
    """The ``invoke_agent sub-agent {id}`` span of a sub-agent's run, in its worker
    (agentkit.subagent.worker.Worker); it ends with the worker's status, error and
    token totals."""
    if _live is None:
        return NOOP
    return _live.subagent(worker)


def worker_abort(reason: str) -> None:
    """The worker ends now (terminated, timeout, parent gone): end every open span as
    ``reason`` and start flushing, without waiting (:func:`worker_flush` waits)."""
    if _live is not None:
        _live.abort(reason)


def worker_flush(timeout_seconds: float) -> None:
    """Wait up to ``timeout_seconds`` for the spans to be exported, then stop tracing."""
    shutdown(timeout_seconds)
