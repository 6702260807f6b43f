"""``agentkit acp`` driven by a client no one here wrote: the ``acp`` library's client side.

The real command (``python -m agentkit acp``) runs under the library's
``spawn_agent_process``, against one FakeOpenAIServer for the module; sub-agents are
real worker processes. Tests that need only sessions of their own share one command
(``shared``, tests/acp_shared.py); those of a process's start or end start their own. The official TypeScript SDK drives it in test_acp_node.py,
raw bytes in test_acp_input.py.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from switch_fixtures import (
    cleared_fixture,  # noqa: F401  (clears the server before each test)
    handled_server_fixture,  # noqa: F401  (the server fixture)
)

pytest.importorskip("acp")

from acp import RequestError, text_block
from acp_helpers import Recorder, connect, final_status, run
from acp_shared import SharedAgent
from shell_helpers import sleep_marks
from subagent_helpers import Gate, Router, call, calls, finish, no_process_left, running, who

from agentkit.testing import FakeOpenAIServer, Reply

pytestmark = pytest.mark.slow


def main_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if who(r) is None]


@pytest.fixture(scope="module")
def shared(
    server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedAgent]:
    """One ``agentkit acp`` for the tests that need only sessions of their own (each in
    its own workspace); the tests of a process's start or end start their own."""
    agent = SharedAgent(server.base_url, tmp_path_factory.mktemp("acp-shared").resolve())
    try:
        yield agent
    finally:
        agent.close()


# -------------------------------------------------------------- a whole turn
def test_prompt_with_tool_calls_and_a_blocking_subagent(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    server.handler = Router(
        main=[
            calls(
                call("read_file", path="a.txt"), call("run_command", command="echo hi-from-command")
            ),
            calls(
                call("edit_file", path="a.txt", old_string="hello", new_string="bye"),
                call("write_file", path="new.txt", content="fresh\n"),
            ),
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="write the report",
                    task="write report.md",
                )
            ),
            {"content": "All done.", "reasoning": "Checking what was asked."},
        ],
        subs={
            1: [
                calls(
                    call("write_file", path="sub_agent_results/agent_1/report.md", content="# r\n")
                ),
                finish(),
            ]
        },
    )

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        assert sid.startswith("conv_")
        assert session.modes.current_mode_id == "workspace-write"
        result = await conn.prompt(session_id=sid, prompt=[text_block("do the work")])
        assert result.stop_reason == "end_turn"

        assert rec.text(session_id=sid).endswith("All done.")
        assert rec.text("agent_thought_chunk", sid) == "Checking what was asked."
        cards = rec.calls(sid)
        assert len(cards) == 5
        by_title = {updates[0]["title"]: updates for updates in cards.values()}
        for title, updates in by_title.items():
            assert updates[0]["sessionUpdate"] == "tool_call", title
            statuses = [u["status"] for u in updates if u.get("status")]
            assert statuses[:2] == ["pending", "in_progress"], title
            assert statuses[-1] == "completed", title
        read = by_title["Reading a.txt"]
        assert read[0]["kind"] == "read"
        assert read[0]["locations"] == [{"path": str(workspace / "a.txt")}]
        command = by_title["Running echo hi-from-command"]
        assert command[0]["kind"] == "execute"
        assert "hi-from-command" in command[-1]["content"][0]["content"]["text"]
        edit = by_title["Editing a.txt"]
        assert edit[0]["kind"] == "edit"
        assert edit[-1]["content"] == [
            {
                "type": "diff",
                "path": str(workspace / "a.txt"),
                "oldText": "hello\n",
                "newText": "bye\n",
            }
        ]
        created = by_title["Writing new.txt"][-1]["content"][0]
        assert created["type"] == "diff" and created["newText"] == "fresh\n"
        assert "oldText" not in created  # a new file
        sub = by_title["Creating sub-agent 1: write the report"]
        assert sub[0]["kind"] == "think"
        progress = [u["content"][0]["content"]["text"] for u in sub[2:-1] if u.get("content")]
        assert any("Sub-agent 1 (write the report): running" in p for p in progress)
        assert "has completed its task" in sub[-1]["content"][0]["content"]["text"]
        assert rec.of("session_info_update", sid)[-1]["title"] == "do the work"
        assert (workspace / "a.txt").read_text() == "bye\n"

    shared.run(scenario)


# ------------------------------------------------------------------- cancel
def test_cancel_stops_the_round_and_its_blocking_subagent(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    server.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="a long job", task="sleep")),
            "after the cancel",
        ],
        subs={1: [calls(call("run_command", command="sleep 60", timeout_seconds=600)), finish()]},
    )

    async def scenario(conn: Any, proc: Any, rec: Recorder) -> None:
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("start")]))
        assert await rec.wait_for(lambda: bool(sleep_marks(proc.pid)), 60)
        marks = sleep_marks(proc.pid)
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(turn, 20)
        assert result.stop_reason == "cancelled"
        assert all(no_process_left(mark) for mark in marks)
        card = next(iter(rec.calls(sid).values()))
        assert final_status(card) == "failed"
        # The session goes on: the next prompt is answered.
        again = await conn.prompt(session_id=sid, prompt=[text_block("and now?")])
        assert again.stop_reason == "end_turn"
        assert rec.text(session_id=sid).endswith("after the cancel")

    shared.run(scenario)


# -------------------------------------------------------------- load, list
def test_load_replays_an_earlier_session_in_a_new_process(
    server: FakeOpenAIServer, workspace: Path
) -> None:
    (workspace / "notes.md").write_text("# notes\n")
    server.handler = Router(
        main=[calls(call("read_file", path="notes.md")), "The notes have a title."]
    )

    async def first() -> str:
        async with connect(server.base_url, workspace) as (conn, _proc, _rec):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("what is in notes.md?")])
            return str(sid)

    sid = run(first())
    server.handler = Router(main=["Yes, I remember."])

    async def second() -> None:
        async with connect(server.base_url, workspace) as (conn, _proc, rec):
            listed = await conn.list_sessions(cwd=str(workspace))
            assert [(s.session_id, s.title) for s in listed.sessions] == [
                (sid, "what is in notes.md?")
            ]
            loaded = await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
            assert loaded.modes.current_mode_id == "workspace-write"
            kinds = [u["sessionUpdate"] for _, u in rec.updates]
            assert kinds == ["user_message_chunk", "tool_call", "agent_message_chunk"]
            assert rec.text("user_message_chunk") == "what is in notes.md?"
            card = rec.of("tool_call")[0]
            assert (card["title"], card["status"]) == ("Reading notes.md", "completed")
            assert rec.text() == "The notes have a title."
            result = await conn.prompt(session_id=sid, prompt=[text_block("remember?")])
            assert result.stop_reason == "end_turn"
            sent = [
                m["content"] for m in main_requests(server)[-1]["messages"] if m["role"] == "user"
            ]
            assert sent == ["what is in notes.md?", "remember?"]
            with pytest.raises(RequestError) as missing:
                await conn.load_session(
                    cwd=str(workspace), session_id="conv_000000000000", mcp_servers=[]
                )
            assert missing.value.code == -32002

    run(second())


# ------------------------------------------------------------------- modes
def test_read_only_mode_keeps_commands_from_writing(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    server.handler = Router(
        main=[calls(call("run_command", command="touch made-by-command")), "tried"]
    )

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        assert await rec.wait_for(lambda: bool(rec.of("current_mode_update", sid)))
        assert rec.of("current_mode_update", sid)[-1]["currentModeId"] == "read-only"
        await conn.prompt(session_id=sid, prompt=[text_block("make a file")])
        assert not (workspace / "made-by-command").exists()
        with pytest.raises(RequestError) as bad:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert bad.value.code == -32602 and "read-only" in str(bad.value)

    shared.run(scenario)


# ------------------------------------------------------ background, leaving
def test_background_subagent_ends_outside_the_prompt_turn(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    gate = Gate()
    server.handler = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=2,
                    summary="background job",
                    task="work",
                    run_in_background=True,
                )
            ),
            "Started it.",
            "The background job is done.",
        ],
        subs={
            2: [
                gate.hold(
                    calls(call("write_file", path="sub_agent_results/agent_2/r.md", content="r"))
                ),
                finish(),
            ]
        },
    )

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("start it")])
        assert result.stop_reason == "end_turn"
        text = rec.text(session_id=sid)
        assert "Started it." in text and "Sub-agent 2 is still working in the background" in text
        card = next(iter(rec.calls(sid).values()))
        assert final_status(card) == "in_progress"
        gate.event.set()
        # No prompt runs now: the sub-agent's end and the round it starts still arrive.
        assert await rec.wait_for(
            lambda: "The background job is done." in rec.text(session_id=sid), 60
        )
        assert final_status(rec.calls(sid)[card[0]["toolCallId"]]) == "completed"

    shared.run(scenario)


def test_closing_stdin_ends_every_subagent_and_leaves_no_process(
    server: FakeOpenAIServer, workspace: Path
) -> None:
    server.handler = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="sleeper one",
                    task="s",
                    run_in_background=True,
                ),
                call(
                    "create_sub_agent",
                    agent_id=2,
                    summary="sleeper two",
                    task="s",
                    run_in_background=True,
                ),
            ),
            "Both are running.",
        ],
        subs={
            1: [calls(call("run_command", command="sleep 120", timeout_seconds=600)), finish()],
            2: [calls(call("run_command", command="sleep 120", timeout_seconds=600)), finish()],
        },
    )

    async def scenario() -> tuple[int, set[str], list[psutil.Process]]:
        async with connect(server.base_url, workspace) as (conn, proc, rec):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("start two")])
            assert await rec.wait_for(lambda: len(sleep_marks(proc.pid)) == 2, 60)
            tree = psutil.Process(proc.pid).children(recursive=True)
            marks = sleep_marks(proc.pid)
            pid = proc.pid
            proc.stdin.close()  # the editor leaves
            code = await asyncio.wait_for(proc.wait(), 40)
            assert code == 0
            return pid, marks, tree

    _pid, marks, tree = run(scenario())
    assert all(no_process_left(mark) for mark in marks)
    # The worker server (a forkserver) sees its owner gone and leaves right after it.
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert [p.pid for p in running(alive)] == []


# ---------------------------------------------------------------- editor's MCP
def test_the_editors_mcp_servers_join_the_session(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    pytest.importorskip("mcp")
    from acp.schema import McpServerStdio

    server.handler = Router(
        main=[calls(call("mcp__editor_tools__echo", text="via the editor")), "echoed"]
    )
    entry = McpServerStdio(
        name="editor tools",
        command=sys.executable,
        args=[str(Path(__file__).resolve().parents[1].joinpath("mcp_test_server.py")), "stdio"],
        env=[],
    )

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[entry])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("echo it")])
        offered = [t["function"]["name"] for t in main_requests(server)[0]["tools"]]
        assert "mcp__editor_tools__echo" in offered
        card = next(iter(rec.calls(sid).values()))
        assert final_status(card) == "completed"
        assert "echo: via the editor" in card[-1]["content"][0]["content"]["text"]
        other = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        server.handler = Router(main=["plain"])
        await conn.prompt(session_id=other, prompt=[text_block("no tools from the editor")])
        offered = [t["function"]["name"] for t in main_requests(server)[-1]["tools"]]
        assert "mcp__editor_tools__echo" not in offered

    shared.run(scenario)


def test_cancel_interrupts_a_slow_request_and_a_second_prompt_is_refused(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    replies = iter([Reply(content="too late", latency=60), Reply(content="third")])
    server.handler = lambda request: next(replies)

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("one")]))
        assert await rec.wait_for(lambda: len(server.requests) == 1, 30)
        with pytest.raises(RequestError) as busy:
            await conn.prompt(session_id=sid, prompt=[text_block("two")])
        assert busy.value.code == -32600 and "already answering" in str(busy.value)
        await conn.cancel(session_id=sid)
        # A prompt right after a cancel waits for the cancelled one instead.
        third = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[text_block("three")]), 30
        )
        assert (await first).stop_reason == "cancelled"
        assert third.stop_reason == "end_turn"
        assert rec.text(session_id=sid) == "third"
        sent = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
        assert sent == ["one", "three"]

    shared.run(scenario)
