"""One trace across processes: W3C trace context in and out (docs/tracing.md §4).

One job: carriers. The current span's context becomes ``{"traceparent", "tracestate"}``
(W3C Trace Context) for a sub-agent's WorkerSpec, a command's environment
(``TRACEPARENT``/``TRACESTATE``, the OpenTelemetry "environment variables as context
propagation carriers" names) and an MCP call's ``_meta`` (SEP-414); a worker turns
its carrier back into the parent context and links of its run's span.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()


def current_carrier() -> dict[str, str]:
    """``{"traceparent": ..., "tracestate": ...}`` of the current span (``tracestate``
    only when it has entries); ``{}`` when no span is current."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def current_env() -> dict[str, str]:
    """The current span's context as ``TRACEPARENT`` and ``TRACESTATE`` variables."""
    return {name.upper(): value for name, value in current_carrier().items()}


def _carrier_of(context: Any) -> dict[str, str]:
    carrier: dict[str, str] = {}
    if context is not None and context.is_valid:
        _PROPAGATOR.inject(carrier, trace.set_span_in_context(trace.NonRecordingSpan(context)))
    return carrier


def worker_extra(background: bool) -> dict[str, Any]:
    """What a sub-agent's spec carries (``WorkerSpec.extra["trace"]``): the current span's
    context (the ``execute_tool create_sub_agent`` span: the run's parent), for a
    ``background`` one a link to the round that started it (that span's parent), and the
    ``OTEL_*`` variables of this process, from which the worker builds its exporter."""
    extra: dict[str, Any] = {
        **current_carrier(),
        "background": background,
        "env": otel_env(os.environ),
    }
    if background:
        round_context = getattr(trace.get_current_span(), "parent", None)
        link = _carrier_of(round_context)
        if link:
            extra["links"] = [link]
    return extra


def extract(carrier: dict[str, Any]) -> Any:
    """The OpenTelemetry context a carrier's ``traceparent``/``tracestate`` give, or
    None when it has no valid one (the span is then a root)."""
    values = {k: str(carrier[k]) for k in ("traceparent", "tracestate") if carrier.get(k)}
    if not values:
        return None
    context = _PROPAGATOR.extract(values)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def links(carriers: Any, why: str) -> list[Any]:
    """``opentelemetry.trace.Link`` objects to the carriers' spans (invalid ones
    skipped), each with the attribute ``agentkit.link`` = ``why``."""
    found = []
    for carrier in carriers if isinstance(carriers, list) else []:
        if isinstance(carrier, dict):
            context = extract(carrier)
            if context is not None:
                span_context = trace.get_current_span(context).get_span_context()
                found.append(trace.Link(span_context, {"agentkit.link": why}))
    return found


def otel_env(env: Mapping[str, str]) -> dict[str, str]:
    """The ``OTEL_*`` variables of ``env`` (what a sub-agent process is given)."""
    return {k: v for k, v in env.items() if k.startswith("OTEL_")}
