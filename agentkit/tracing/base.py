"""What the tracing modules share without importing opentelemetry.

One job: the no-op :class:`Span` the loop holds while tracing is off (the live spans of
agentkit.tracing.spans subclass it), the cost hook, and the shared constants.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentkit.conversation import Stats
    from agentkit.engine_roles import EngineResult
    from agentkit.llm.turns import AssistantTurn
    from agentkit.tools.base import ToolResult


SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.1"
"""The semantic conventions the span names and attributes follow: v1.41.1, the last
release whose GenAI names are live (they moved to semantic-conventions-genai since)."""
SEMCONV_VERSION = "1.41.1"
# The SDK's loggers that would print a line per retry and per dropped span: while our
# own exporter runs they are replaced by one warning (agentkit.tracing.setup).
SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.sdk._shared_internal",
)


class Span:
    """What the loop holds while a span is open; this base does nothing (tracing off).

    Used as ``with tracing.chat_span(engine) as span: ...; span.turn(turn)``. The
    live spans (agentkit.tracing.spans) override the methods they need.
    """

    def __enter__(self) -> Span:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def turn(self, turn: AssistantTurn) -> None:
        """Record a model request's answer (a ``chat`` span)."""

    def result(self, result: ToolResult) -> None:
        """Record a tool call's result (an ``execute_tool`` span)."""

    def outcome(self, outcome: EngineResult) -> None:
        """Record how a round ended (a main-agent ``invoke_agent`` span)."""


NOOP = Span()
"""The one no-op span every call returns while tracing is off."""


def stats_cost(stats: Stats) -> float | None:
    """The conversation's cost in USD so far (``Stats.cost()``, agentkit.cost), or None
    when a response had no known price: the value the ``invoke_agent`` spans carry."""
    cost = getattr(stats, "cost", None)
    value = cost() if callable(cost) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
