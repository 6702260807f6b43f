"""Traces in a real backend: Arize Phoenix (tests/phoenix_server.py) receives the spans of
a run with a blocking and a background sub-agent over OTLP/HTTP, and its REST API gives
back one trace with the whole tree. One Phoenix per module (it takes ~15 s to start);
skipped with the reason where Phoenix is not installed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from phoenix_server import Phoenix, as_tree_spans, skip_reason
from subagent_helpers import Router, scripted_settings
from tracing_helpers import (
    HAVE_SDK,
    NO_SDK,
    check_tree,
    expected_spans,
    root_of,
    two_sub_agents_script,
)

from agentkit import Agent, tracing
from agentkit.testing import FakeOpenAIServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),  # Phoenix's start counts (15 s here, a minute on a busy machine)
    pytest.mark.skipif(not HAVE_SDK, reason=NO_SDK),
    pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason())),
]
PROJECT = "agentkit-tests"


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    server = Phoenix().start(tmp_path_factory.mktemp("phoenix"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def traced(phoenix: Phoenix, monkeypatch: pytest.MonkeyPatch) -> Iterator[Phoenix]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-project-name={PROJECT}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    assert tracing.configure()
    try:
        yield phoenix
    finally:
        tracing.shutdown()


def trace_in_phoenix(phoenix: Phoenix, conversation_id: str) -> list[dict[str, Any]]:
    """Poll Phoenix until the run's trace holds the round and both sub-agents' runs."""
    deadline = time.monotonic() + 60
    while True:
        spans = as_tree_spans(phoenix.spans(PROJECT))
        root = root_of(spans, conversation_id)
        trace = [s for s in spans if root and s["trace_id"] == root["trace_id"]]
        if (root and expected_spans(trace)) or time.monotonic() > deadline:
            return trace
        time.sleep(0.3)


def test_phoenix_shows_one_trace_from_the_round_down_to_each_sub_agents_calls(
    traced: Phoenix, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    main, subs = two_sub_agents_script()
    with (
        FakeOpenAIServer(Router(main, subs)) as server,
        Agent(workspace=workspace, settings=scripted_settings(server, "en")) as agent,
    ):
        assert agent.run("go").status == "done"
        conversation_id = agent.conversation.id
    tracing.shutdown()
    trace = trace_in_phoenix(traced, conversation_id)
    root = root_of(trace, conversation_id)
    assert root is not None, "Phoenix has no round span for the run"
    runs = check_tree(trace, root)  # the tree, and usage on every chat span
    # Phoenix reads the GenAI names into its own model: agents, LLM calls, tools.
    kinds = {s["name"]: s["kind"] for s in trace}
    assert kinds["invoke_agent main"] == "AGENT"
    assert kinds["chat fake-model"] == "LLM"
    assert kinds["execute_tool create_sub_agent"] == "TOOL"
    assert {r["attributes"]["gen_ai.agent.id"] for r in runs.values()} == {"1", "2"}
    by_id = {s["span_id"]: s for s in trace}
    assert all(s["parent_span_id"] in by_id for s in trace if s is not root), json.dumps(trace)[
        :500
    ]
