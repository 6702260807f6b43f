"""Capturing a run's trace for the tracing tests: a module-wide OTLP capture receiver on
127.0.0.1, tracing switched on towards it, an agent run against FakeOpenAIServer, and
the run's spans once they have arrived.

Import ``receiver_fixture`` and ``traced_fixture`` into a test module to use the
``receiver`` and ``traced`` fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import CaptureReceiver
from subagent_helpers import scripted_settings
from tracing_helpers import of_trace, root_of

from agentkit import Agent, tracing
from agentkit.testing import FakeOpenAIServer


@pytest.fixture(scope="module", name="receiver")
def receiver_fixture() -> Iterator[CaptureReceiver]:
    with CaptureReceiver() as running:
        yield running


@pytest.fixture(name="traced")
def traced_fixture(
    receiver: CaptureReceiver, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CaptureReceiver]:
    """Tracing on in this process (and its sub-agents) towards the receiver."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    assert tracing.configure()
    try:
        yield receiver
    finally:
        tracing.shutdown()


def run_agent(workspace: Path, router: Any, task: str = "go", **overrides: Any) -> Any:
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(server, "en", **overrides)
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run(task)
            conversation_id = agent.conversation.id
    return result, conversation_id, server


def spans_of_run(
    receiver: CaptureReceiver, conversation_id: str, done: Any
) -> list[dict[str, Any]]:
    """Flush this process, then wait for the run's trace to satisfy ``done``."""
    tracing.shutdown()

    def ready(spans: list[dict[str, Any]]) -> bool:
        root = root_of(spans, conversation_id)
        return root is not None and done(of_trace(spans, root["trace_id"]))

    spans = receiver.wait_for(ready)
    root = root_of(spans, conversation_id)
    assert root is not None, "the round's span never arrived"
    return of_trace(spans, root["trace_id"])
