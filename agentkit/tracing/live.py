"""The tracer of a process that traces (docs/tracing.md §3, §5).

One job: :class:`Live` holds the provider and tracer, starts each kind of span with
the attributes sampling may use (names per the GenAI semantic conventions v1.41.1,
as string literals: see agentkit.tracing.spans), tracks a worker's open spans so that
its abort ends them, and closes the provider within a bound.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.trace import SpanKind

from agentkit.process.secrets import scrub_text
from agentkit.tracing import content as text
from agentkit.tracing.base import SCHEMA_URL, SDK_LOGGERS, Span
from agentkit.tracing.spans import (
    MAIN_AGENT,
    PROVIDER,
    ChatSpan,
    RoundSpan,
    SubAgentSpan,
    ToolSpan,
    server_attributes,
)


class Live:
    """The tracer of a process that traces.

    Args:
        provider: the TracerProvider spans go through.
        owned: True when agentkit built it (then agentkit flushes and shuts it down).
        capture: message content on spans (agentkit.tracing.content).
        guard: the one-warning filter on the SDK's loggers (our provider only).

    Attributes:
        parent, links, background: in a worker, the parent's context, the links and the
            background flag of the run's span (agentkit.tracing.setup.build_for_worker).
    """

    def __init__(self, provider: Any, *, owned: bool, capture: bool, guard: Any) -> None:
        from agentkit import __version__

        self.provider, self.owned, self.capture, self.guard = provider, owned, capture, guard
        self.tracer = provider.get_tracer("agentkit", __version__, schema_url=SCHEMA_URL)
        self.parent: Any = None
        self.links: list[Any] = []
        self.background = False
        self.requests = threading.local()  # .current: this thread's open model request
        self.track = False  # a worker tracks its open spans, for abort
        self.finished = False
        self._open: dict[int, Any] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ open spans
    def opened(self, handle: Any) -> None:
        """Track an open span (in a worker: its abort ends those left open)."""
        if self.track:
            with self._lock:
                self._open[id(handle)] = handle

    def closed(self, handle: Any) -> bool:
        """Forget a span that ends now; False when it was ended already (abort)."""
        if not self.track:
            return True
        with self._lock:
            return self._open.pop(id(handle), None) is not None

    def abort(self, reason: str) -> None:
        """End every open span as ``reason`` (ERROR) and start flushing on a daemon thread."""
        with self._lock:
            handles, self._open = list(self._open.values()), {}
        for handle in reversed(handles):  # the innermost first
            handle.abort(reason)
        threading.Thread(
            target=self.provider.force_flush, name="agentkit-trace-abort", daemon=True
        ).start()

    def close(self, timeout_seconds: float) -> None:
        """Flush (and, when ours, shut down) the provider within ``timeout_seconds``;
        once (the exit hook calls it again)."""
        if self.finished:
            return
        self.finished = True
        action = self.provider.shutdown if self.owned else self.provider.force_flush
        if not bounded(action, timeout_seconds):
            if self.guard is not None:
                self.guard.say(f"the last spans were not sent within {timeout_seconds:g} s")
        elif self.owned:
            quiet(self.guard)  # (an export still running keeps it: its messages stay quiet)

    # ------------------------------------------------------------------ spans
    def _start(self, name: str, kind: Any, attributes: dict[str, Any], **more: Any) -> Any:
        # No SDK exception event: spans.record_exception adds a scrubbed one.
        return self.tracer.start_span(
            name, kind=kind, attributes=attributes, record_exception=False, **more
        )

    def round(self, conversation: Any, settings: Any, trigger: str, finished: Any) -> Span:
        """A main-agent round's ``invoke_agent main`` span (links: see agentkit.tracing)."""
        from agentkit.tracing.propagation import links

        carriers = [getattr(a, "spec", None) and a.spec.extra.get("trace") for a in finished or []]
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": MAIN_AGENT,
            "gen_ai.agent.id": MAIN_AGENT,
            "gen_ai.conversation.id": conversation.id,
            "gen_ai.request.model": settings.model or "",
            "agentkit.round.trigger": trigger,
        }
        span = self._start(
            f"invoke_agent {MAIN_AGENT}",
            SpanKind.INTERNAL,
            attributes,
            links=links([c for c in carriers if c], "finished_sub_agent"),
        )
        return RoundSpan(self, span, (settings.api_key,), conversation.stats)

    def subagent(self, worker: Any) -> Span:
        """A sub-agent's ``invoke_agent sub-agent {id}`` span, child of the parent's span."""
        spec = worker.spec
        name = f"sub-agent {spec.agent_id}"
        hidden = (spec.settings.get("api_key"),)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": str(spec.agent_id),
            "gen_ai.conversation.id": spec.sub_conversation_id,
            "gen_ai.request.model": str(spec.settings.get("model") or ""),
            "agentkit.subagent.background": self.background,
        }
        if self.capture:
            attributes["gen_ai.agent.description"] = scrub_text(spec.summary, hidden)
        span = self._start(
            f"invoke_agent {name}",
            SpanKind.INTERNAL,
            attributes,
            context=self.parent,
            links=self.links,
        )
        return SubAgentSpan(self, span, hidden, worker)

    def chat(self, engine: Any) -> Span:
        """A model request's ``chat {model}`` span."""
        settings = engine.settings
        model = settings.model or ""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": model,
            **server_attributes(settings.base_url),
        }
        if settings.stream:
            attributes["gen_ai.request.stream"] = True
        if settings.temperature is not None:
            attributes["gen_ai.request.temperature"] = settings.temperature
        if settings.max_output_tokens:
            attributes["gen_ai.request.max_tokens"] = settings.max_output_tokens
        wire = engine.window.wire if self.capture else None
        return ChatSpan(self, f"chat {model}", attributes, (settings.api_key,), wire)

    def retry(self, error: Any, attempt: int, delay: float) -> None:
        """A ``retry`` event on this thread's open model request."""
        request = getattr(self.requests, "current", None)
        if request is not None:
            request.retry(
                {
                    "error.type": str(error.kind),
                    "agentkit.retry.attempt": attempt,
                    "agentkit.retry.delay_seconds": float(delay),
                }
            )

    def tool(self, call: Any, settings: Any) -> Span:
        """A tool call's ``execute_tool {tool}`` span."""
        hidden = (settings.api_key,)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        }
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = text.tool_arguments(call, hidden)
        span = self._start(f"execute_tool {call.name}", SpanKind.INTERNAL, attributes)
        return ToolSpan(self, span, hidden)


def bounded(action: Any, timeout_seconds: float) -> bool:
    """Run ``action()`` on a daemon thread and wait at most ``timeout_seconds``; True when
    it finished (a daemon thread left behind dies with the process)."""
    thread = threading.Thread(target=action, name="agentkit-trace-flush", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout_seconds))
    return not thread.is_alive()


def quiet(guard: logging.Filter | None) -> None:
    """Take the one-warning filter off the SDK's loggers (our provider is gone)."""
    if guard is not None:
        for name in SDK_LOGGERS:
            logging.getLogger(name).removeFilter(guard)
