"""Turning tracing on: the ``OTEL_*`` variables read, the provider built, the bounded end.

One job: from the environment (or an application's provider) to a
:class:`agentkit.tracing.live.Live`. :func:`wanted` reads only ``os.environ``
and imports nothing, so a process that does not trace never loads opentelemetry.

What the SDK reads by itself (TracerProvider, Resource, OTLPSpanExporter,
BatchSpanProcessor): ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER(_ARG)``, the span limits, ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``,
``_HEADERS``, ``_TIMEOUT`` (seconds in the Python SDK), ``_COMPRESSION``,
``_CERTIFICATE``, ``OTEL_BSP_*``. What only the SDK's auto-configuration reads, and
this module reads by hand: ``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER`` (``otlp``,
``console``, ``none``) and ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` (only
``http/protobuf``: the ``otel`` extra has no gRPC exporter).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentkit.tracing.base import SDK_LOGGERS

if TYPE_CHECKING:
    from agentkit.tracing.live import Live

log = logging.getLogger("agentkit.tracing")

EXPORT_TIMEOUT_SECONDS = 3.0
"""Exporter timeout (all retries of one batch) when OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT
is not set; the SDK's own default is 10 s."""
EXIT_FLUSH_SECONDS = 3.0
"""At most this long a process's end waits for its spans to be exported."""
CONTENT_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event"})
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
TIMEOUT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")


def exporters_named(env: Mapping[str, str]) -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names (lower case, in order); ``["otlp"]``
    when it is unset but an OTLP endpoint is given; ``[]`` for none."""
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not raw:
        return ["otlp"] if any(env.get(v, "").strip() for v in ENDPOINT_VARS) else []
    names = [n.strip() for n in raw.split(",") if n.strip()]
    return [] if "none" in names else names


def wanted(env: Mapping[str, str]) -> bool:
    """True when the environment asks for traces: ``OTEL_TRACES_EXPORTER`` names an
    exporter, or an OTLP endpoint is set; never with ``OTEL_SDK_DISABLED=true``."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(exporters_named(env))


def capture_content(env: Mapping[str, str]) -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content on
    spans: ``true`` (the contrib instrumentations' boolean form) or ``SPAN_ONLY`` /
    ``SPAN_AND_EVENT`` (their enum form). Off by default."""
    return env.get(CONTENT_VAR, "").strip().lower() in CONTENT_ON


class _OneWarning(logging.Filter):
    """Drops the SDK's export-failure and queue-full records, and says once, on the
    ``agentkit.tracing`` logger, that traces are not getting through."""

    def __init__(self, endpoint: str, silent: bool = False) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.said = silent  # a sub-agent's process: its parent's warning is the one

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            args = record.args  # the SDK's first argument is the error itself
            self.say(
                str(args[0] if isinstance(args, tuple) and args else record.getMessage())[:200]
            )
        return False

    def say(self, why: str) -> None:
        """Log the one warning (later calls do nothing)."""
        if not self.said:
            self.said = True
            log.warning(
                "agentkit: traces are not reaching %s (%s); spans are dropped while it is "
                "away, the run goes on (this warning is given once)",
                self.endpoint,
                why,
            )


def _protocol_ok(env: Mapping[str, str]) -> bool:
    for name in PROTOCOL_VARS:
        value = env.get(name, "").strip().lower()
        if value:
            if value != "http/protobuf":
                log.warning(
                    "agentkit: %s=%s is not supported (agentkit exports traces over "
                    "http/protobuf only); tracing is off",
                    name,
                    value,
                )
                return False
            return True
    return True


def _exporters(env: Mapping[str, str]) -> tuple[list[Any], str]:
    """The span exporters the environment names, and the OTLP endpoint ("" if none)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    found: list[Any] = []
    endpoint = ""
    for name in exporters_named(env):
        if name == "otlp":
            timeout = None if any(env.get(v) for v in TIMEOUT_VARS) else EXPORT_TIMEOUT_SECONDS
            otlp = OTLPSpanExporter(timeout=timeout)
            endpoint = str(getattr(otlp, "_endpoint", "") or "the OTLP endpoint")
            found.append(otlp)
        elif name == "console":
            found.append(ConsoleSpanExporter(out=sys.stderr))
        else:
            log.warning("agentkit: OTEL_TRACES_EXPORTER=%s is not supported; ignored", name)
    return found, endpoint


def _resource(agent_id: str) -> Any:
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create({"process.pid": os.getpid(), "agentkit.agent.id": agent_id})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "agentkit"}))
    return resource


def _own_provider(
    env: Mapping[str, str], agent_id: str, silent: bool
) -> tuple[Any, _OneWarning | None]:
    """A TracerProvider from the environment, or (None, None) when it cannot be had."""
    if not _protocol_ok(env):
        return None, None
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporters, endpoint = _exporters(env)
    except ImportError as exc:
        from agentkit.extras import install_hint

        log.warning(
            "agentkit: the OTEL_* variables ask for traces but %s; install the extra: %s",
            exc,
            install_hint("otel"),
        )
        return None, None
    if not exporters:
        return None, None
    # shutdown_on_exit=False: the SDK's own atexit shutdown waits up to 30 s for a dead
    # collector; ours (_bounded_exit) waits EXIT_FLUSH_SECONDS at most.
    provider = TracerProvider(resource=_resource(agent_id), shutdown_on_exit=False)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    guard = _OneWarning(endpoint, silent) if endpoint else None
    if guard is not None:
        for name in SDK_LOGGERS:
            logging.getLogger(name).addFilter(guard)
    return provider, guard


def build(tracer_provider: Any, *, agent_id: str, silent: bool = False) -> Live | None:
    """The live tracer over ``tracer_provider``, or over one built from ``os.environ``
    when it is None (then None when the environment does not ask for traces or the
    extra is missing). Our own provider is shut down, bounded, when the process ends.
    ``silent``: no warning about an unreachable collector (a sub-agent's process)."""
    env = dict(os.environ)
    guard = None
    owned = tracer_provider is None
    if owned:
        if not wanted(env):
            return None
        tracer_provider, guard = _own_provider(env, agent_id, silent)
        if tracer_provider is None:
            return None
    from agentkit.tracing.live import Live

    live = Live(tracer_provider, owned=owned, capture=capture_content(env), guard=guard)
    if owned:
        atexit.register(_bounded_exit, live)
    return live


def build_for_worker(trace: dict[str, Any], *, agent_id: str) -> Live | None:
    """In a sub-agent process: make the ``OTEL_*`` variables the parent's (``trace["env"]``;
    its others are removed), build the tracer from them, and give it the parent's
    context (``trace["traceparent"]``) and links for the run's span."""
    given = trace.get("env")
    if isinstance(given, dict):
        for name in [n for n in os.environ if n.startswith("OTEL_")]:
            del os.environ[name]
        os.environ.update({str(k): str(v) for k, v in given.items() if str(k).startswith("OTEL_")})
    live = build(None, agent_id=agent_id, silent=True)
    if live is not None:
        from agentkit.tracing.propagation import extract, links

        live.track = True
        live.parent = extract(trace)
        live.links = links(trace.get("links"), "started_by")
        live.background = bool(trace.get("background"))
    return live


def _bounded_exit(live: Live) -> None:
    live.close(EXIT_FLUSH_SECONDS)
