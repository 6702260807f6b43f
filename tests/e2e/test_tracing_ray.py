"""OpenTelemetry traces (agentkit.tracing) with the real SDK exporting OTLP over HTTP to a
real receiver on 127.0.0.1 (tests/otlp_receiver.py, which keeps span kind, links and
resources); the real openai client against FakeOpenAIServer; real worker processes.
The same tree through Arize Phoenix is tests/e2e/test_tracing_phoenix.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import CaptureReceiver
from subagent_helpers import Router, scripted_settings, wait_until
from tracing_helpers import (
    HAVE_SDK,
    NO_SDK,
    check_tree,
    expected_spans,
    of_trace,
    root_of,
    two_sub_agents_script,
)

from agentkit import Agent, tracing
from agentkit.testing import FakeOpenAIServer

needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason=NO_SDK)


@pytest.fixture(scope="module")
def receiver() -> Iterator[CaptureReceiver]:
    with CaptureReceiver() as running:
        yield running


@pytest.fixture
def traced(receiver: CaptureReceiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[CaptureReceiver]:
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


# ------------------------------------------------------------------- Ray
@needs_sdk
@pytest.mark.ray
@pytest.mark.slow
def test_one_trace_across_ray_nodes(
    traced: CaptureReceiver, workspace: Path, ray_cluster: Any
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    main, subs = two_sub_agents_script()
    result, conversation_id, _ = run_agent(
        workspace,
        Router(main, subs),
        subagent_launcher="ray",
        ray_address=ray_cluster.address,
        ray_num_cpus=0.25,
    )
    assert result.status == "done", result
    trace = spans_of_run(traced, conversation_id, expected_spans)
    root = root_of(trace, conversation_id)
    assert root is not None
    runs = check_tree(trace, root)
    pids = {run["resource"]["process.pid"] for run in runs.values()}
    assert root["resource"]["process.pid"] not in pids and len(pids) == 2
    assert wait_until(lambda: ray_cluster.wait_no_hosts() == [], 30)
