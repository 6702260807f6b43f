"""The shared loop, driven through the real LLMClient over HTTP against FakeOpenAIServer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from engine_tools import EchoParams, make_registry

from agentkit import events as ev
from agentkit.conversation import Conversation
from agentkit.engine import Engine, Hooks, Step
from agentkit.llm import LLMClient
from agentkit.settings import Settings
from agentkit.testing import ErrorReply, FakeOpenAIServer, Reply
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry


def call(tool: str, **arguments: object) -> dict:
    return {"name": tool, "arguments": arguments}


def run_engine(
    server: FakeOpenAIServer,
    workspace: Path,
    *,
    registry: ToolRegistry | None = None,
    hooks: Hooks | None = None,
    events: list | None = None,
    **overrides: object,
) -> tuple[Engine, object, Conversation]:
    values: dict[str, object] = {
        "model": "m",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "en",
        "retry_base_delay": 0.01,
        "max_retries": 1,
    }
    settings = Settings(**{**values, **overrides})
    conv = Conversation()
    conv.messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    saved: list[int] = []
    path = workspace / "conv.json"

    def save(c: Conversation) -> None:
        c.save(path)
        saved.append(len(c.messages))

    engine = Engine(
        model=LLMClient(settings),
        registry=registry or make_registry(),
        conversation=conv,
        ctx=ToolContext(workspace=workspace, settings=settings),
        hooks=hooks,
        emit=(events.append if events is not None else None),
        save=save,
    )
    result = engine.run()
    engine.close()
    engine.saved = saved  # type: ignore[attr-defined]
    return engine, result, conv


def test_multi_turn_tool_calls_results_in_model_order(workspace: Path) -> None:
    barrier = threading.Barrier(2)
    script = [
        {
            "tool_calls": [
                call("rendezvous", name="a"),
                call("rendezvous", name="b"),
                call("echo", text="c"),
            ]
        },
        "all done",
    ]
    with FakeOpenAIServer(script) as server:
        engine, result, conv = run_engine(server, workspace, registry=make_registry(barrier))
        second = server.requests[1]["messages"]
    assert result.status == "done" and result.final_text == "all done"
    tools = [m for m in second if m["role"] == "tool"]
    # Results follow the model's order, each names its call and tool (rule H2).
    assert [m["content"] for m in tools] == ["met:a", "met:b", "echo:c"]
    calls = second[2]["tool_calls"]
    assert [m["tool_call_id"] for m in tools] == [c["id"] for c in calls]
    assert all(m["name"] for m in tools)
    assert conv.stats.turns == 2
    assert conv.stats.tool_calls == {"rendezvous": 2, "echo": 1}
    assert conv.state == "done"
    on_disk = json.loads((workspace / "conv.json").read_text())
    assert on_disk["messages"][-1]["content"] == "all done"
    # Saved after every turn, not only at the end.
    assert len(engine.saved) >= 3  # type: ignore[attr-defined]


def test_tool_failures_become_error_messages_and_loop_goes_on(workspace: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("nope", text="x"),
                call("echo", wrong=1),
                call("boom", text="x"),
                call("refuse", text="x"),
                {"name": "echo", "arguments": "{text: bare words}"},
            ]
        },
        "recovered",
    ]
    with FakeOpenAIServer(script) as server:
        _, result, _ = run_engine(server, workspace)
        tools = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert result.status == "done"
    texts = [t["content"] for t in tools]
    assert texts[0].startswith("Error: unknown_tool:") and "echo" in texts[0]
    assert texts[1].startswith("Error: invalid_argument:") and "text" in texts[1]
    assert texts[2].startswith("Error: internal_error:") and "kaboom" in texts[2]
    assert texts[3] == "Error: not_found: nothing here"
    assert texts[4].startswith("Error: invalid_argument:") and "JSON" in texts[4]
    # Invalid JSON is never replayed (rule T5).
    replayed = server.requests[1]["messages"][2]["tool_calls"][4]["function"]["arguments"]
    assert json.loads(replayed) == {}


def test_max_turns_ends_as_failed(workspace: Path) -> None:
    script = [{"tool_calls": [call("echo", text=str(i))]} for i in range(5)]
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(server, workspace, max_turns=3)
    assert result.status == "failed" and "max_turns" in (result.error or "")
    assert conv.stats.turns == 3 and conv.state == "failed"


def test_cancel_from_another_thread_stops_a_slow_request(workspace: Path) -> None:
    script = [Reply(content="late", latency=20)]
    with FakeOpenAIServer(script) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", language="en")
        conv = Conversation(messages=[{"role": "user", "content": "t"}])
        engine = Engine(
            model=LLMClient(settings),
            registry=make_registry(),
            conversation=conv,
            ctx=ToolContext(workspace=workspace, settings=settings),
        )
        threading.Timer(0.3, engine.cancel_event.set).start()
        started = time.monotonic()
        result = engine.run()
        elapsed = time.monotonic() - started
    assert result.status == "cancelled"
    assert elapsed < 10  # no hang until the 20 s reply


def test_model_error_after_retries_fails_cleanly_and_saves(workspace: Path) -> None:
    script = [ErrorReply(503), ErrorReply(503)]
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(server, workspace, retry_total_seconds=0)
        assert len(server.requests) == 2  # one retry (max_retries=1, no outage budget)
    assert result.status == "failed" and result.error_kind in ("server_error", "overloaded")
    assert "\n" not in (result.error or "")
    saved = json.loads((workspace / "conv.json").read_text())
    assert saved["state"] == "failed" and saved["error"] == result.error


def test_context_budget_shrinks_old_tool_outputs(workspace: Path) -> None:
    script = [{"tool_calls": [call("big", text="abcdefghij ")]} for _ in range(8)] + ["done"]
    events: list = []
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(
            server, workspace, events=events, context_window=40_000, context_budget=0.5
        )
        last = server.requests[-1]["messages"]
    assert result.status == "done"
    assert any(isinstance(e, ev.ContextCompacted) for e in events)
    shrunk = [
        m
        for m in last
        if m["role"] == "tool" and "removed to fit the context window" in m["content"]
    ]
    assert shrunk, "old tool outputs should have been shrunk"
    # Nothing lost: the originals are in the archive.
    assert any(len(a.get("content") or "") >= 33000 for a in conv.archive)
    # The latest output, which the model is working with, is intact.
    assert last[-1]["role"] == "tool" and len(last[-1]["content"]) == 33000


def test_context_length_error_triggers_compaction_and_one_retry(workspace: Path) -> None:
    overflow = ErrorReply(
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )
    script = [{"tool_calls": [call("big", text="0123456789 ")]} for _ in range(3)] + [
        overflow,
        "fits now",
    ]
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(server, workspace)
        sizes = [len(json.dumps(r["messages"])) for r in server.requests]
    assert result.status == "done" and result.final_text == "fits now"
    assert sizes[-1] < sizes[-2]  # the retry sent less than the refused request
    assert conv.archive


def test_mid_conversation_system_message_refused_falls_back_to_user(workspace: Path) -> None:
    class Notify(Hooks):
        def after_tool_results(self, engine: Engine) -> Step:
            return Step(messages=[{"role": "system", "content": "NOTICE"}])

    def handler(request: dict) -> object:
        roles = [m["role"] for m in request["messages"]]
        if "system" in roles[1:]:
            return ErrorReply(
                400,
                {
                    "error": {
                        "message": "System message must be at the beginning.",
                        "type": "invalid_request_error",
                    }
                },
            )
        if len(request["messages"]) <= 2:
            return {"tool_calls": [call("echo", text="x")]}
        return "ok"

    with FakeOpenAIServer(handler) as server:
        engine, result, conv = run_engine(server, workspace, hooks=Notify())
        last = server.requests[-1]["messages"]
    assert result.status == "done"
    assert {"role": "user", "content": "NOTICE"} in last
    assert engine.model.shape.allow_mid_system is False  # the client remembers it
    # The record keeps what it was.
    assert any(m["role"] == "system" and m["content"] == "NOTICE" for m in conv.messages)


def outage(seconds: float, reply: Callable[[], object]) -> Callable[[dict], object]:
    """A handler failing with ``reply()`` for ``seconds`` after its first request."""
    started: list[float] = []

    def handler(request: dict) -> object:
        if not started:
            started.append(time.monotonic())
        return reply() if time.monotonic() - started[0] < seconds else "back"

    return handler


OUTAGE_REPLIES = {
    "503": lambda: ErrorReply(503),
    "dropped": lambda: Reply(content="cut short", disconnect_after=1),
}


@pytest.mark.parametrize("failure", sorted(OUTAGE_REPLIES))
def test_a_model_outage_within_the_retry_budget_is_ridden_out(
    workspace: Path, failure: str
) -> None:
    handler = outage(1.5, OUTAGE_REPLIES[failure])
    with FakeOpenAIServer(handler) as server:
        _, result, _ = run_engine(
            server,
            workspace,
            max_retries=1000,
            retry_base_delay=0.05,
            retry_max_delay=0.2,
            retry_total_seconds=5,
        )
        requests = len(server.requests)
    assert result.status == "done" and result.final_text == "back", result.error
    assert requests > 2  # retried through the outage


def test_a_model_outage_longer_than_the_budget_fails_saying_so(workspace: Path) -> None:
    # docs/providers.md §4.5: max_retries or retry_total_seconds, whichever ends first;
    # here the time budget ends first.
    with FakeOpenAIServer(outage(60, OUTAGE_REPLIES["503"])) as server:
        _, result, _ = run_engine(
            server,
            workspace,
            max_retries=1000,
            retry_base_delay=0.02,
            retry_max_delay=0.05,
            retry_total_seconds=1,
        )
        requests = len(server.requests)
    assert result.status == "failed" and result.error_kind == "overloaded"
    assert "retry_total_seconds=1)" in (result.error or "")
    assert "kept failing" in (result.error or "")
    assert 2 < requests < 1001  # retried, and stopped by the budget, not max_retries


def test_final_answer_hook_can_nudge(workspace: Path) -> None:
    class Nudge(Hooks):
        count = 0

        def on_final_answer(self, engine: Engine, turn: object) -> Step:
            if self.count == 0:
                self.count += 1
                return Step(messages=[{"role": "user", "content": "keep going"}])
            return Step(stop=True)

    with FakeOpenAIServer(["first", "second"]) as server:
        _, result, _ = run_engine(server, workspace, hooks=Nudge())
        assert server.requests[1]["messages"][-1] == {"role": "user", "content": "keep going"}
    assert result.final_text == "second"


def test_interrupted_history_is_repaired_before_the_next_request(workspace: Path) -> None:
    with FakeOpenAIServer(["fine"]) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k")
        conv = Conversation(
            messages=[
                {"role": "user", "content": "t"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "echo", "arguments": "{}"},
                        }
                    ],
                },
            ]
        )
        engine = Engine(
            model=LLMClient(settings),
            registry=make_registry(),
            conversation=conv,
            ctx=ToolContext(workspace=workspace, settings=settings),
        )
        conv.messages.append({"role": "user", "content": "continue"})
        result = engine.run()
        sent = server.requests[0]["messages"]
    assert result.status == "done"
    assert sent[2]["role"] == "tool" and sent[2]["tool_call_id"] == "c1"


def test_truncated_tool_call_becomes_a_tool_error_and_the_loop_goes_on(workspace: Path) -> None:
    from agentkit.testing import RawChunks

    def cut_chunks() -> RawChunks:
        base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        delta = {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_cut",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"text": "a very lo'},
                }
            ]
        }
        return RawChunks(
            [
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
                {"__sse__": "done"},
            ]
        )

    script = [cut_chunks(), cut_chunks(), "I will write less at a time."]
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(server, workspace)
        tools = [m for m in server.requests[2]["messages"] if m["role"] == "tool"]
    assert result.status == "done" and result.final_text == "I will write less at a time."
    assert len(tools) == 1 and tools[0]["content"].startswith("Error: invalid_argument:")
    assert "cut off" in tools[0]["content"]
    assert conv.stats.tool_calls == {"echo": 1}


def test_seed_counters_count_successful_calls_only(workspace: Path) -> None:
    from agentkit.tools.base import Tool

    registry = make_registry()
    registry.register(
        Tool("fetch", EchoParams, lambda p, ctx: "Error: http_error: 404", counter="web_pages")
    )
    registry.register(Tool("look", EchoParams, lambda p, ctx: "content", counter="files_read"))
    script = [
        {"tool_calls": [call("fetch", text="a"), call("look", text="b"), call("look", wrong=1)]},
        "done",
    ]
    with FakeOpenAIServer(script) as server:
        _, _, conv = run_engine(server, workspace, registry=registry)
    assert conv.stats.tool_calls == {"fetch": 1, "look": 2}
    assert (conv.stats.files_read, conv.stats.web_pages) == (1, 0)


def test_half_an_emoji_from_the_model_does_not_break_the_conversation(workspace: Path) -> None:
    """Regression: a lone surrogate ("\\ud83d", valid JSON) in a reply made every
    later request and save fail with a UTF-8 encoding error."""
    script = [
        {"content": "look \ud83d", "tool_calls": [call("echo", text="half \ud83d emoji")]},
        "fine \ud83d",
        "next run",
    ]
    with FakeOpenAIServer(script) as server:
        engine, result, conv = run_engine(server, workspace)
        tool = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][0]
    assert result.status == "done" and result.final_text == "fine \ufffd"
    assert tool["content"] == "echo:half \ufffd emoji"
    json.loads((workspace / "conv.json").read_text(encoding="utf-8"))


def test_a_tool_returning_unserialisable_json_is_a_result_not_a_crash(workspace: Path) -> None:
    import datetime

    from agentkit.tools.base import Tool

    registry = make_registry()
    registry.register(
        Tool("when", EchoParams, lambda p, ctx: {"at": datetime.datetime(2026, 1, 2)})
    )
    with FakeOpenAIServer([{"tool_calls": [call("when", text="x")]}, "ok"]) as server:
        _, result, _ = run_engine(server, workspace, registry=registry)
        tool = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][0]
    assert result.status == "done" and "2026-01-02" in tool["content"]


def test_huge_arguments_of_answered_calls_are_shortened_to_fit(workspace: Path) -> None:
    """Regression: a 3 MB write_file argument stayed in every later request, and
    compaction could not remove it (it belongs to the newest turns)."""
    huge = "y" * 400_000
    script = [{"tool_calls": [call("refuse", text=huge)]}, "done"]  # a short result
    events: list = []
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(
            server, workspace, events=events, context_window=40_000, context_budget=0.5
        )
        sent = server.requests[1]["messages"]
    assert result.status == "done"
    arguments = json.loads(sent[2]["tool_calls"][0]["function"]["arguments"])
    assert len(arguments["text"]) < 1000 and "chars removed" in arguments["text"]
    assert any(a.get("arguments") and huge in a["arguments"] for a in conv.archive)
    assert any(isinstance(e, ev.ContextCompacted) and e.how == "shrink arguments" for e in events)


def test_calls_on_one_path_run_in_order_while_others_run_at_once(workspace: Path) -> None:
    # A trial: write r.txt, read it, edit it, in one message; the read found no file
    # and the edit missed it. Calls naming one path run in order (agentkit.tools.lanes);
    # the rendezvous pair, on no path, still needs to run at the same time to return.
    from agentkit.tools import base_tools

    registry = ToolRegistry(base_tools())
    barrier = threading.Barrier(2)
    extra = make_registry(barrier)
    registry.register(extra.get("rendezvous"))  # type: ignore[arg-type]
    batch: list[dict] = []
    for i in range(4):
        name = f"r{i}.txt"
        batch += [
            call("write_file", path=name, content="alpha\n" + "gamma\n" * 200_000),
            call("read_file", path=f"./{name}", limit=1),
            call("edit_file", path=name, old_string="alpha\n", new_string="beta\n"),
        ]
    batch += [call("rendezvous", name="a"), call("rendezvous", name="b")]
    with FakeOpenAIServer([{"tool_calls": batch}, "done"]) as server:
        run_engine(server, workspace, registry=registry, tool_workers=8)
        results = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    for i in range(4):
        wrote, read, edited = results[3 * i : 3 * i + 3]
        assert wrote.startswith("Created"), wrote
        assert "alpha" in read and "not_found" not in read, read
        assert edited.startswith("Edited"), edited
        assert (workspace / f"r{i}.txt").read_text().startswith("beta\n")
    assert results[-2:] == ["met:a", "met:b"]


# ----------------------------------------------------------------- hooks
def test_hooks_see_each_run_and_tool_call_in_order(workspace: Path) -> None:
    seen: list[tuple[object, ...]] = []

    class Watch(Hooks):
        def before_run(self, engine: Engine) -> None:
            seen.append(("before_run", engine.conversation.state))
            super().before_run(engine)

        def before_tool_call(self, engine: Engine, call: object) -> None:
            seen.append(("before", call.name, engine.last_action))  # type: ignore[attr-defined]

        def after_tool_call(self, engine: Engine, call: object, result: object) -> None:
            tool_messages = [m for m in engine.conversation.messages if m["role"] == "tool"]
            seen.append(("after", call.name, result.output, tool_messages[-1]["content"]))  # type: ignore[attr-defined]

        def after_tool_results(self, engine: Engine) -> Step:
            seen.append(("batch",))
            return Step()

        def after_run(self, engine: Engine, result: object) -> None:
            seen.append(("after_run", result.status))  # type: ignore[attr-defined]
            super().after_run(engine, result)  # type: ignore[arg-type]

    script = [{"tool_calls": [call("echo", text="a"), call("refuse", text="b")]}, "done"]
    with FakeOpenAIServer(script) as server:
        _, result, conv = run_engine(server, workspace, hooks=Watch())
    assert result.status == "done" and conv.state == "done"
    assert seen == [
        ("before_run", "idle"),
        ("before", "echo", "Calling echo"),
        ("before", "refuse", "Calling refuse"),
        ("after", "echo", "echo:a", "echo:a"),
        ("after", "refuse", "Error: not_found: nothing here", "Error: not_found: nothing here"),
        ("batch",),
        ("after_run", "done"),
    ]


def test_hooks_that_keep_the_state_themselves_leave_it_alone(workspace: Path) -> None:
    # A chat round's hooks (agentkit.chat.rounds.SessionHooks): the session keeps
    # the conversation's state, so the engine neither sets nor announces one.
    class Quiet(Hooks):
        def before_run(self, engine: Engine) -> None:
            pass

        def after_run(self, engine: Engine, result: object) -> None:
            pass

    events: list = []
    with FakeOpenAIServer(["done"]) as server:
        _, result, conv = run_engine(server, workspace, hooks=Quiet(), events=events)
    assert result.status == "done" and conv.state == "idle"
    assert not [e for e in events if isinstance(e, ev.StateChanged)]


# ------------------------------------------- identical failing calls
def scripted_calls(*batches: list[dict]) -> list[object]:
    """Replies with the given tool calls, ids fixed (two runs send the same bodies)."""
    replies: list[object] = []
    for n, batch in enumerate(batches):
        replies.append({"tool_calls": [{**c, "id": f"call_{n}_{i}"} for i, c in enumerate(batch)]})
    return [*replies, "gave up"]


def bodies_with_and_without_the_note(
    workspace: Path, script: list[object], registry: ToolRegistry | None = None
) -> tuple[list[dict], list[dict], Conversation]:
    runs = {}
    for limit in (3, 0):
        with FakeOpenAIServer(list(script)) as server:
            _, result, conv = run_engine(
                server, workspace, registry=registry, repeated_failure_note=limit
            )
            assert result.status == "done"
            runs[limit] = (server.requests, conv)
    return runs[3][0], runs[0][0], runs[3][1]


def tool_contents(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_the_third_identical_failing_call_gets_one_note_in_its_result(workspace: Path) -> None:
    """Issue 20: a sub-agent of the toy model ran the same failing command 17 times.
    The result of the 3rd identical failure says so, once; nothing else changes."""
    from agentkit import prompts

    script = scripted_calls(*[[call("refuse", text="x")]] * 5)
    noted, plain, conv = bodies_with_and_without_the_note(workspace, script)
    note = prompts.phrase("en", "repeated_failure", count=3)
    error = "Error: not_found: nothing here"
    assert tool_contents(plain[-1]) == [error] * 5
    assert tool_contents(noted[-1]) == [error, error, f"{error}\n\n{note}", error, error]
    # Every request is byte for byte the one sent without the note, but that result.
    assert len(noted) == len(plain) == 6
    for with_note, without in zip(noted, plain, strict=True):
        sent = json.dumps(with_note, ensure_ascii=False)
        assert sent.replace(json.dumps(f"\n\n{note}")[1:-1], "") == json.dumps(
            without, ensure_ascii=False
        )
    assert sum(note in m.get("content", "") for m in conv.messages if m["role"] == "tool") == 1


def test_a_different_call_or_a_success_starts_the_count_again(workspace: Path) -> None:
    fail, other, ok = call("refuse", text="x"), call("refuse", text="y"), call("echo", text="x")
    script = scripted_calls([fail], [fail], [ok], [fail], [fail], [other], [fail], [fail])
    noted, plain, _ = bodies_with_and_without_the_note(workspace, script)
    assert noted == plain  # never three identical failures in a row


def test_a_command_that_exits_non_zero_counts_as_failing(workspace: Path) -> None:
    registry = make_registry()

    @registry.tool
    def run(p: EchoParams) -> ToolResult:
        """Runs a command that exits 1 (as run_command reports one)."""
        return ToolResult(output=f"{p.text}: not found\n[exit 1 · 0.0 s]", meta={"exit_code": 1})

    script = scripted_calls(*[[call("run", text="pytest")]] * 3)
    noted, plain, _ = bodies_with_and_without_the_note(workspace, script, registry)
    last = tool_contents(noted[-1])[-1]
    assert last.startswith("pytest: not found\n[exit 1 · 0.0 s]\n\nNote: ")
    assert tool_contents(plain[-1])[-1] == "pytest: not found\n[exit 1 · 0.0 s]"


def test_a_json_result_keeps_its_shape_with_the_note(workspace: Path) -> None:
    registry = make_registry()

    @registry.tool
    def seed(p: EchoParams) -> dict:
        """Refuses in the seed's JSON shape."""
        return {"success": False, "error": "no"}

    script = scripted_calls(*[[call("seed", text="x")]] * 3)
    noted, _, _ = bodies_with_and_without_the_note(workspace, script, registry)
    results = [json.loads(c) for c in tool_contents(noted[-1])]
    assert results[:2] == [{"success": False, "error": "no"}] * 2
    assert results[2]["success"] is False and results[2]["error"] == "no"
    assert results[2]["note"].startswith("Note: ")
