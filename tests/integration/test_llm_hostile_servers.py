"""The model client under hostile or failing servers (issue 20 items 6, 20 and 24):
one retry rule for every transient error, bounded response time, bounded JSON nesting,
unique tool-call ids, a cap on calls per reply, and a compact stream assembler.
Real HTTP against FakeOpenAIServer, real server and worker processes
(docs/providers.md rules cited per test)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from subagent_helpers import Router, call, calls, running, who

from agentkit import Agent, Settings
from agentkit.conversation import Conversation
from agentkit.engine import Engine
from agentkit.errors import LLMError
from agentkit.llm import LLMClient
from agentkit.process.tree import processes_with_mark
from agentkit.testing import ErrorReply, FakeOpenAIServer, RawChunks, Reply
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry

USER = [{"role": "user", "content": "Please help."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "note",
            "description": "Take a note.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    }
]
DONE = {"__sse__": "done"}
DEEP = "[" * 10_000 + "]" * 10_000


def settings_for(base_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "m",
        "base_url": base_url,
        "api_key": "k",
        "language": "en",
        "max_retries": 2,
        "retry_base_delay": 0.01,
        "retry_max_delay": 0.05,
        # Long enough that the rule before the fix (outages retried past max_retries
        # for this long) would show as extra requests.
        "retry_total_seconds": 10,
    }
    values.update(overrides)
    return Settings(**values)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class Counted:
    """A server answering every request with ``reply``; counts requests."""

    def __init__(self, reply: Any) -> None:
        self.server = FakeOpenAIServer(lambda request: reply)

    def __enter__(self) -> FakeOpenAIServer:
        return self.server.start()

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def complete(settings: Settings, tools: list[dict[str, Any]] | None = TOOLS) -> tuple[Any, list]:
    """Run one ``complete``; return (turn or raised LLMError, retries seen)."""
    retries: list[tuple[str, int]] = []
    with LLMClient(settings) as client:
        try:
            turn: Any = client.complete(
                USER, tools, on_retry=lambda e, n, d: retries.append((e.kind, n))
            )
        except LLMError as error:
            turn = error
    return turn, retries


# -- one retry rule (item 6; docs/providers.md §4.5) -------------------------------

TRANSIENT = {
    "500": (lambda: ErrorReply(500), "server_error", 2),
    "503": (lambda: ErrorReply(503), "overloaded", 2),
    "429": (lambda: ErrorReply(429, {"error": {"message": "slow down"}}), "rate_limit", 2),
    "timeout": (lambda: Reply(content="late", latency=2), "timeout", 2),
    "dropped mid-stream": (
        lambda: Reply(content="a long answer cut short", disconnect_after=2),
        "connection",
        2,
    ),
    "in-band error": (
        lambda: RawChunks([chunk({"content": "Hel"}), {"error": {"message": "upstream died"}}]),
        "server_error",
        2,
    ),
    "network_error finish": (
        lambda: RawChunks([chunk({"content": "Hel"}, "network_error"), DONE]),
        "server_error",
        2,
    ),
    "incomplete stream": (
        lambda: RawChunks([chunk({"content": "Hel"}), DONE]),
        "incomplete_stream",
        1,
    ),
}


@pytest.mark.parametrize("failure", sorted(TRANSIENT))
def test_every_transient_error_stops_at_max_retries(failure: str) -> None:
    """Regression: an outage (5xx, timeouts, dropped connections) was retried past
    max_retries for retry_total_seconds; now max_retries bounds every kind."""
    make, kind, retries = TRANSIENT[failure]
    with Counted(make()) as server:
        error, seen = complete(settings_for(server.base_url, request_timeout=0.5))
        requests = len(server.requests)
    assert isinstance(error, LLMError) and error.kind == kind, error
    assert requests == 1 + retries
    assert [n for _, n in seen] == list(range(1, retries + 1))
    if retries == 2:
        assert "gave up after 2 retries: max_retries=2" in error.one_line()


def test_the_time_budget_stops_retries_before_max_retries() -> None:
    with Counted(ErrorReply(500)) as server:
        settings = settings_for(server.base_url, max_retries=1000, retry_total_seconds=0.5)
        error, seen = complete(settings)
        requests = len(server.requests)
    assert isinstance(error, LLMError) and error.kind == "server_error"
    assert "retry_total_seconds=0.5)" in error.one_line()
    assert 2 < requests < 1001 and len(seen) == requests - 1


SLOW_SERVER = r"""
import sys
from agentkit.testing import FakeOpenAIServer, Reply
reply = Reply(content="word " * 200, chunk_delay=0.5)
with FakeOpenAIServer(lambda request: reply) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""


def test_a_model_server_killed_mid_stream_is_retried_max_retries_times() -> None:
    """Regression (issue 20 item 6): SIGKILL of the model server mid-stream, then
    refused connections, were retried for retry_total_seconds whatever max_retries."""
    server = subprocess.Popen(
        [sys.executable, "-c", SLOW_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        retries: list[str] = []

        def kill_on_first_text(text: str) -> None:
            if server.poll() is None:
                server.send_signal(signal.SIGKILL)
                server.wait(10)

        with LLMClient(settings_for(base_url)) as client, pytest.raises(LLMError) as info:
            client.complete(
                USER,
                None,
                on_text=kill_on_first_text,
                on_retry=lambda e, n, d: retries.append(e.kind),
            )
    finally:
        server.kill()
        server.wait(10)
    assert info.value.kind == "connection"
    assert retries == ["connection", "connection"]
    assert "max_retries=2" in info.value.one_line()


def test_background_sub_agents_end_failed_after_max_retries(workspace: Path) -> None:
    """Regression (issue 20 item 6): with max_retries=2, two background sub-agents
    whose model streams kept breaking retried for over 90 s and the run waited.
    Now each makes 1 + 2 requests, its record ends ``failed`` with the reason, and
    no process of it is left."""
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent", agent_id=1, summary="甲", task="t", run_in_background=True
                ),
                call(
                    "create_sub_agent", agent_id=2, summary="乙", task="t", run_in_background=True
                ),
            ),
            "等待",
            "好",
        ],
        subs={n: [Reply(content="部分输出，随后断开", disconnect_after=2)] for n in (1, 2)},
    )
    with FakeOpenAIServer(router) as server:
        settings = settings_for(server.base_url, language="zh", subagent_timeout_min=1)
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("t")
            subs = {n: agent.manager.agents[n] for n in (1, 2)}
            counts = {n: sum(1 for r in server.requests if who(r) == n) for n in (1, 2)}
            for sub in subs.values():
                assert sub.done.wait(30)
    assert result.status == "done"
    assert counts == {1: 3, 2: 3}
    for n, sub in subs.items():
        record = json.loads(
            (workspace / f"sub_agent_results/agent_{n}/.subagent/conversations.json").read_text()
        )
        assert record["status"] == "failed" and sub.status == "failed"
        assert "connection" in record["error"] and "max_retries=2" in record["error"]
        assert not running(processes_with_mark(sub.spec.process_mark))
        assert sub.handle is not None and not sub.handle.is_alive()


# -- the whole response time of one request (item 24; rule R4) ------------------------


def test_a_trickling_stream_is_cut_at_request_total_timeout() -> None:
    """Regression: keep-alive comments kept a stream going until ten times
    request_timeout; request_total_timeout bounds the whole reply."""
    trickle = RawChunks(
        [{"__sse__": "comment", "text": ": keep-alive"}] * 30
        + [chunk({"content": "late"}), chunk({}, "stop"), DONE],
        chunk_delay=0.1,
    )
    with Counted(trickle) as server:
        settings = settings_for(
            server.base_url, request_timeout=1, request_total_timeout=1, max_retries=0
        )
        error, _ = complete(settings)
    assert isinstance(error, LLMError) and error.kind == "timeout", error
    assert "request_total_timeout (1 s)" in error.one_line()


def test_a_trickling_body_is_cut_at_request_total_timeout() -> None:
    body = json.dumps(
        {"choices": [{"index": 0, "message": {"content": "late"}, "finish_reason": "stop"}]}
    )
    pieces = [body[i : i + 3] for i in range(0, len(body), 3)]
    trickle = RawChunks(pieces, headers={"content-type": "application/json"}, chunk_delay=0.1)
    with Counted(trickle) as server:
        settings = settings_for(
            server.base_url, stream=False, request_timeout=1, request_total_timeout=1, max_retries=0
        )
        error, _ = complete(settings)
    assert isinstance(error, LLMError) and error.kind == "timeout", error


def test_a_reply_within_request_total_timeout_is_unaffected() -> None:
    slow = Reply(content="on time", chunk_delay=0.2)
    with Counted(slow) as server:
        turn, seen = complete(settings_for(server.base_url, request_total_timeout=30))
    assert turn.content == "on time" and seen == []


# -- nesting (item 20; rule T6) -----------------------------------------------------


class NoteParams(BaseModel):
    text: str = ""


def run_engine(server: FakeOpenAIServer, workspace: Path, **overrides: Any) -> tuple[Any, list]:
    """An engine with one ``note`` tool; returns (result, notes taken)."""
    settings = settings_for(server.base_url, max_retries=0, **overrides)
    registry = ToolRegistry()
    taken: list[str] = []

    @registry.tool
    def note(p: NoteParams) -> str:
        """Take a note."""
        taken.append(p.text)
        return "noted"

    conv = Conversation()
    conv.messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    engine = Engine(
        model=LLMClient(settings),
        registry=registry,
        conversation=conv,
        ctx=ToolContext(workspace=workspace, settings=settings),
    )
    try:
        return engine.run(), taken
    finally:
        engine.close()


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


DEEP_ARGUMENTS = {
    "string, streamed": ('{"text": ' + DEEP + "}", {}),
    "string, whole body": ('{"text": ' + DEEP + "}", {"stream": False}),
    "object of 110 levels": ({"text": json.loads("[" * 110 + "]" * 110)}, {"stream": False}),
}


@pytest.mark.parametrize("case", sorted(DEEP_ARGUMENTS))
def test_deeply_nested_arguments_are_a_tool_error_and_the_loop_goes_on(
    workspace: Path, case: str
) -> None:
    """Regression: 10,000 nested levels raised RecursionError out of the run."""
    arguments, overrides = DEEP_ARGUMENTS[case]
    script = [{"tool_calls": [{"name": "note", "arguments": arguments}]}, "done"]
    with FakeOpenAIServer(script) as server:
        result, taken = run_engine(server, workspace, **overrides)
        (answer,) = tool_messages(server.requests[1])
    assert result.status == "done" and result.final_text == "done", result.error
    assert taken == []
    assert answer["content"].startswith("Error: invalid_argument:")
    assert "nested deeper than 100 levels" in answer["content"]


def test_a_deeply_nested_prompted_call_is_a_tool_error(workspace: Path) -> None:
    deep_call = '{"name": "note", "arguments": {"text": ' + DEEP + "}}"
    with FakeOpenAIServer(
        [deep_call, '{"name": "final_answer", "arguments": {"text": "done"}}']
    ) as server:
        result, taken = run_engine(server, workspace, tool_calling="prompted")
        fed_back = server.requests[1]["messages"][-1]["content"]
    assert result.status == "done" and result.final_text == "done", result.error
    assert taken == [] and "nested deeper than 100 levels" in fed_back


@pytest.mark.parametrize(
    "reply",
    [
        RawChunks(['data: {"choices": ' + DEEP + "}\n\n", DONE]),
        ErrorReply(500, {"__raw_body__": '{"error": ' + DEEP + "}"}),
    ],
    ids=["stream event", "error body"],
)
def test_deeply_nested_server_json_is_a_clear_model_error(reply: Any) -> None:
    with Counted(reply) as server:
        error, _ = complete(settings_for(server.base_url, max_retries=0))
    assert isinstance(error, LLMError) and error.kind == "server_error", error
    if isinstance(reply, RawChunks):
        assert "nested deeper than 120 levels" in error.one_line()


def test_deep_json_written_as_text_is_not_read_as_a_call() -> None:
    text = '<tool_call>{"name": "note", "arguments": {"text": ' + DEEP + "}}</tool_call>"
    with Counted(text) as server:
        turn, _ = complete(settings_for(server.base_url, text_tool_call_fallback=True))
    assert turn.tool_calls == [] and turn.content == text


# -- duplicate ids and the number of calls (item 24; rules S9, S10) ------------------


@pytest.mark.parametrize("stream", [True, False])
def test_duplicate_tool_call_ids_are_made_unique_in_order(workspace: Path, stream: bool) -> None:
    """Regression: two calls sharing an id were kept as sent, so one id got two results."""
    twice = {
        "tool_calls": [
            {"name": "note", "arguments": {"text": "first"}, "id": "call_same"},
            {"name": "note", "arguments": {"text": "second"}, "id": "call_same"},
            {"name": "note", "arguments": {"text": "third"}, "id": "call_other"},
        ]
    }
    with FakeOpenAIServer([twice, "done"]) as server:
        result, taken = run_engine(server, workspace, stream=stream)
        second = server.requests[1]["messages"]
    assert result.status == "done" and taken == ["first", "second", "third"]
    (assistant,) = [m for m in second if m["role"] == "assistant"]
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert ids[0] == "call_same" and ids[2] == "call_other" and len(set(ids)) == 3
    assert [json.loads(c["function"]["arguments"])["text"] for c in assistant["tool_calls"]] == [
        "first",
        "second",
        "third",
    ]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ids  # H1


def test_calls_beyond_max_tool_calls_per_turn_are_answered_unrun(workspace: Path) -> None:
    """Regression: a reply with 10,000 tool calls ran them all."""
    many = {"tool_calls": [{"name": "note", "arguments": {"text": str(i)}} for i in range(40)]}
    with FakeOpenAIServer([many, "done"]) as server:
        result, taken = run_engine(server, workspace, max_tool_calls_per_turn=5)
        second = server.requests[1]["messages"]
    assert result.status == "done"
    assert taken == ["0", "1", "2", "3", "4"]
    (assistant,) = [m for m in second if m["role"] == "assistant"]
    answers = tool_messages(server.requests[1])
    assert [m["tool_call_id"] for m in answers] == [c["id"] for c in assistant["tool_calls"]]
    assert [m["content"] for m in answers[:5]] == ["noted"] * 5
    for answer in answers[5:]:
        assert answer["content"].startswith("Error: too_many_tool_calls: not run:")
        assert "40 tool calls and at most 5" in answer["content"]
