"""The parts of agentkit.acp one at a time, in process: the channel on real pipes, the
JSON-RPC checks, tool cards, prompt blocks, the editor's MCP servers, history replay
and the event → update mapping (fed real agentkit events)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from acp.schema import (
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    McpServerStdio,
    ResourceContentBlock,
    SseMcpServer,
    TextContentBlock,
    TextResourceContents,
)

from agentkit import events as ev
from agentkit.acp import stdio, toolcalls
from agentkit.acp.content import PromptError, prompt_text
from agentkit.acp.history import replay
from agentkit.acp.options import mode_state, session_settings, with_mode
from agentkit.acp.session import stop_reason
from agentkit.acp.updates import UpdateMapper
from agentkit.chat import RoundResult
from agentkit.settings import Settings


def dump(update: Any) -> dict[str, Any]:
    return update.model_dump(mode="json", by_alias=True, exclude_none=True)


# ------------------------------------------------------------------- JSON-RPC
@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{", -32700),
        (b"\xc3\x28", -32700),
        (b"[]", -32600),
        (b"null", -32600),
        (b'{"jsonrpc": "2.0", "id": true, "method": "x"}', -32600),
        (b'{"jsonrpc": "2.0", "id": [1], "method": "x"}', -32600),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "x"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": ""}', -32600),
        (b'{"jsonrpc": "2.0", "params": {}}', -32600),
    ],
)
def test_parse_line_answers_what_is_not_a_message(line: bytes, code: int) -> None:
    message, error = stdio.parse_line(line)
    assert message is None and error is not None
    assert error["jsonrpc"] == "2.0" and error["error"]["code"] == code
    json.dumps(error)


def test_parse_line_keeps_messages_and_leaves_bad_notifications_unanswered() -> None:
    request = b'{"jsonrpc": "2.0", "id": "a", "method": "session/new", "params": {}}'
    assert stdio.parse_line(request) == (json.loads(request), None)
    response = b'{"jsonrpc": "2.0", "id": 3, "result": {}}'
    assert stdio.parse_line(response) == (json.loads(response), None)
    for notification in (b'{"method": "x"}', b'{"jsonrpc": "2.0", "method": 5}'):
        assert stdio.parse_line(notification) == (None, None)
    # The id of a request with a wrong "jsonrpc" is trusted for the answer.
    _, error = stdio.parse_line(b'{"id": 9, "method": "x"}')
    assert error is not None and error["id"] == 9


def test_clarify_puts_the_detail_in_the_message() -> None:
    missing = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32601,
            "message": "Method not found",
            "data": {"method": "session/fork"},
        },
    }
    assert stdio.clarify(missing)["error"]["message"] == "Method not found: session/fork"
    invalid = {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {
            "code": -32602,
            "message": "Invalid params",
            "data": {
                "errors": [
                    {"loc": ["sessionId"], "msg": "Field required"},
                    {"loc": [], "msg": "bad"},
                ]
            },
        },
    }
    assert (
        stdio.clarify(invalid)["error"]["message"]
        == "Invalid params: sessionId: Field required; params: bad"
    )
    ok = {"jsonrpc": "2.0", "id": 3, "result": None}
    assert stdio.clarify(ok) is ok


def test_encode_sends_lone_surrogates_as_replacement_characters() -> None:
    line = stdio.encode({"text": "a\ud800b", "why": ValueError("x")})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"text": "a\ufffdb", "why": "x"}


def test_channel_answers_an_oversized_line_and_reads_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 1000)

    async def scenario() -> None:
        client_to_agent, agent_in = os.pipe()
        agent_out, agent_to_client = os.pipe()
        seen: list[dict[str, Any]] = []
        channel = stdio.StdioChannel(client_to_agent, agent_to_client, on_incoming=seen.append)
        os.write(agent_in, b"x" * 5000 + b"\n" + b'{"jsonrpc":"2.0","id":1,"method":"m"}\n')
        os.close(agent_in)
        message = await channel.receive()
        assert message == {"jsonrpc": "2.0", "id": 1, "method": "m"} and seen == [message]
        assert await channel.receive() is None  # end of input
        await channel.send({"jsonrpc": "2.0", "id": 1, "result": {"ok": True}})
        await channel.close()
        os.close(agent_to_client)
        answers = [json.loads(x) for x in os.read(agent_out, 1 << 16).splitlines()]
        assert (
            answers[0]["error"]["code"] == -32600 and "1000 bytes" in answers[0]["error"]["message"]
        )
        assert answers[1] == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}
        os.close(agent_out)
        os.close(client_to_agent)

    asyncio.run(scenario())


def test_channel_send_fails_once_the_reader_is_gone() -> None:
    async def scenario() -> None:
        read_end, write_end = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        channel = stdio.StdioChannel(null, write_end)
        os.close(read_end)  # the editor has gone
        with pytest.raises(ConnectionError):
            await channel.send({"jsonrpc": "2.0", "method": "session/update", "params": {}})
        with pytest.raises(ConnectionError):
            await channel.send({"jsonrpc": "2.0", "method": "session/update", "params": {}})
        # An answer nobody can read any more is dropped, not an error.
        await channel.send({"jsonrpc": "2.0", "id": 4, "result": {}})
        await channel.close()
        os.close(write_end)

    asyncio.run(scenario())


# ------------------------------------------------------------------ tool cards
def test_describe_gives_titles_kinds_and_absolute_locations(tmp_path: Path) -> None:
    view = toolcalls.describe(
        "read_file", {"path": "src/a.py", "offset": 40}, "Reading src/a.py", tmp_path
    )
    assert (view.title, view.kind) == ("Reading src/a.py", "read")
    assert [dump(loc) for loc in view.locations] == [
        {"path": str(tmp_path / "src/a.py"), "line": 40}
    ]
    sub = toolcalls.describe(
        "create_sub_agent",
        {"agent_id": 3, "summary": "  write\nthe docs "},
        "Creating sub-agent 3",
        tmp_path,
    )
    assert (sub.title, sub.kind, sub.locations) == (
        "Creating sub-agent 3: write the docs",
        "think",
        [],
    )
    assert (
        toolcalls.describe("run_command", {"command": "ls"}, "Running ls", tmp_path).kind
        == "execute"
    )
    assert (
        toolcalls.describe("web_search", {"query": "q"}, "Searching the web for q", tmp_path).kind
        == "fetch"
    )
    mcp = toolcalls.describe("mcp__docs__lookup", None, "Calling mcp__docs__lookup", tmp_path)
    assert (mcp.kind, mcp.locations) == ("other", [])
    odd = toolcalls.describe("read_file", {"path": 7, "offset": True}, "", tmp_path)
    assert (odd.title, odd.locations) == ("read_file", [])


def test_command_output_cannot_close_its_code_block(tmp_path: Path) -> None:
    output = "exit 0\n```\n# not a heading\n````"
    [block] = toolcalls.result_content(
        "run_command", {"command": "x"}, True, output, workspace=tmp_path
    )
    text = dump(block)["content"]["text"]
    assert text.startswith("`````\n") and text.endswith("\n`````")
    long = toolcalls.text_content("y" * (toolcalls.MAX_CONTENT_CHARS + 5))
    assert dump(long)["content"]["text"].endswith("… (5 more characters)")


def test_search_hits_become_locations(tmp_path: Path) -> None:
    output = "src/a.py:3:def a():\nsrc/b.py:10:    return b\n(2 matches)"
    locations = toolcalls.result_locations(
        "search_workspace", {"pattern": "a", "path": "."}, output, tmp_path
    )
    assert [dump(loc) for loc in locations or []] == [
        {"path": str(tmp_path / "src/a.py"), "line": 3},
        {"path": str(tmp_path / "src/b.py"), "line": 10},
    ]
    assert toolcalls.result_locations("read_file", {}, output, tmp_path) is None


def test_read_text_never_opens_a_pipe_and_skips_big_or_binary_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert toolcalls.read_text(str(fifo)) is None  # returns at once: no writer needed
    (tmp_path / "big").write_bytes(b"a" * (toolcalls.MAX_DIFF_BYTES + 1))
    assert toolcalls.read_text(str(tmp_path / "big")) is None
    (tmp_path / "bin").write_bytes(b"a\0b")
    assert toolcalls.read_text(str(tmp_path / "bin")) is None
    (tmp_path / "latin").write_bytes(b"caf\xe9\n")
    assert toolcalls.read_text(str(tmp_path / "latin")) == "caf\ufffd\n"
    assert toolcalls.read_text(str(tmp_path / "missing")) is None


def test_edit_target_follows_the_tools_path_guard(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    (workspace / "link").symlink_to(tmp_path)
    settings = Settings(model="m", api_key="k")
    assert toolcalls.edit_target("edit_file", {"path": "a.txt"}, workspace, settings) == str(
        workspace / "a.txt"
    )
    assert (
        toolcalls.edit_target("write_file", {"path": "link/secret.txt"}, workspace, settings)
        is None
    )
    assert (
        toolcalls.edit_target("write_file", {"path": "../secret.txt"}, workspace, settings) is None
    )
    assert toolcalls.edit_target("write_file", {"path": ".agentkit/x"}, workspace, settings) is None
    assert toolcalls.edit_target("read_file", {"path": "a.txt"}, workspace, settings) is None


# ---------------------------------------------------------------- prompt blocks
def test_prompt_blocks_become_one_message(tmp_path: Path) -> None:
    code = "x = '```'\n"
    blocks = [
        TextContentBlock(type="text", text="Look at"),
        ResourceContentBlock(type="resource_link", uri=f"file://{tmp_path}/src/a.py", name="a.py"),
        EmbeddedResourceContentBlock(
            type="resource", resource=TextResourceContents(uri=f"file://{tmp_path}/b.py", text=code)
        ),
        ResourceContentBlock(type="resource_link", uri="https://example.com/x", name="x"),
    ]
    assert prompt_text(blocks, tmp_path) == (
        "Look at\n\n@src/a.py\n\n@b.py\n```` b.py\nx = '```'\n````\n\nhttps://example.com/x"
    )
    elsewhere = [ResourceContentBlock(type="resource_link", uri="file:///etc/hosts", name="hosts")]
    assert prompt_text(elsewhere, tmp_path) == "@/etc/hosts"


def test_prompt_refuses_images_and_empty_prompts(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="image content is not supported"):
        prompt_text([ImageContentBlock(type="image", data="AA", mime_type="image/png")], tmp_path)
    with pytest.raises(PromptError, match="empty"):
        prompt_text([TextContentBlock(type="text", text=" \n")], tmp_path)


# ------------------------------------------------------------- session options
def test_the_editors_mcp_servers_join_the_agents_own() -> None:
    base = Settings(
        model="m",
        api_key="k",
        mcp_servers={"time": {"command": "mcp-server-time"}, "docs": {"url": "http://a/mcp"}},
    )
    servers = [
        McpServerStdio(
            name="docs", command="/bin/docs", args=["-v"], env=[{"name": "TOKEN", "value": "t"}]
        ),
        McpServerStdio(name="My Server!", command="/bin/a", args=[], env=[]),
        McpServerStdio(name="My Server?", command="/bin/b", args=[], env=[]),
        HttpMcpServer(
            type="http",
            name="remote",
            url="https://mcp.example/mcp",
            headers=[{"name": "X-A", "value": "1"}],
        ),
    ]
    settings = session_settings(base, servers)
    assert settings.mcp_servers == {
        "time": {"command": "mcp-server-time"},
        "docs": {"command": "/bin/docs", "args": ["-v"], "env": {"TOKEN": "t"}},
        "My_Server": {"command": "/bin/a", "args": [], "env": {}},
        "My_Server_2": {"command": "/bin/b", "args": [], "env": {}},
        "remote": {"type": "http", "url": "https://mcp.example/mcp", "headers": {"X-A": "1"}},
    }
    assert base.mcp_servers == {
        "time": {"command": "mcp-server-time"},
        "docs": {"url": "http://a/mcp"},
    }
    assert session_settings(base, []) is base
    with pytest.raises(ValueError, match="sse transport is not supported"):
        session_settings(base, [SseMcpServer(type="sse", name="s", url="http://x/sse", headers=[])])
    with pytest.raises(ValueError, match="needs a url"):
        session_settings(base, [HttpMcpServer(type="http", name="h", url="ftp://x", headers=[])])


def test_modes_are_the_command_sandbox_modes() -> None:
    settings = Settings(model="m", api_key="k")
    state = dump(mode_state(settings))
    assert state["currentModeId"] == "workspace-write"
    assert [m["id"] for m in state["availableModes"]] == ["read-only", "workspace-write", "full"]
    assert with_mode(settings, "full").command_sandbox_mode == "full"
    with pytest.raises(ValueError, match="read-only, workspace-write, full"):
        with_mode(settings, "plan")


# ----------------------------------------------------------- replay, stop reason
def test_replay_draws_the_conversation_and_leaves_out_system_and_notifications(
    tmp_path: Path,
) -> None:
    created = {
        "success": True,
        "agent_id": 1,
        "status": "running",
        "summary": "s",
        "message": "started",
        "background": True,
    }
    messages = [
        {"role": "system", "content": "You are the main agent."},
        {"role": "user", "content": "please read"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "first read it",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{not json"},
                },
                {
                    "id": "c3",
                    "type": "function",
                    "function": {
                        "name": "create_sub_agent",
                        "arguments": {
                            "agent_id": 1,
                            "summary": "s",
                            "task": "t",
                            "run_in_background": True,
                        },
                    },
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1\thello"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: invalid_arguments: ..."},
        {"role": "tool", "tool_call_id": "c3", "content": json.dumps(created)},
        {"role": "user", "content": "Sub-agent 1 (s) has finished its task.\n\nok"},
        {"role": "assistant", "content": "It is hello."},
    ]
    rows = [{"agent_id": 1, "summary": "s", "status": "failed", "result_summary": "it broke"}]
    updates = [dump(u) for u in replay(messages, workspace=tmp_path, language="en", subagents=rows)]
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call",
        "tool_call",
        "agent_message_chunk",
    ]
    read, broken, sub = updates[2:5]
    assert (read["title"], read["status"], read["kind"]) == ("Reading a.txt", "completed", "read")
    assert broken["status"] == "failed"
    assert sub["status"] == "failed" and "it broke" in sub["content"][0]["content"]["text"]
    assert updates[-1]["content"]["text"] == "It is hello."


def result(status: str, error: str | None = None, kind: str | None = None) -> RoundResult:
    return RoundResult(
        conversation_id="conv_1",
        round=1,
        status=status,
        final_text=None,
        error=error,
        error_kind=kind,
    )


def test_stop_reasons() -> None:
    from acp import RequestError

    assert stop_reason(result("done")) == "end_turn"
    assert stop_reason(result("cancelled", "cancelled")) == "cancelled"
    assert stop_reason(result("failed", "max_turns (50) reached")) == "max_turn_requests"
    assert stop_reason(result("failed", "filtered", "content_filter")) == "refusal"
    assert stop_reason(result("failed", "cut", "truncated_tool_call")) == "max_tokens"
    with pytest.raises(RequestError) as failed:
        stop_reason(result("failed", "authentication: bad key", "authentication"))
    assert failed.value.code == -32603 and "bad key" in str(failed.value)


# -------------------------------------------------------------- the mapping
def updates_of(
    mapper: UpdateMapper, events: list[ev.Event], prompting: bool = True
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in events:
        captured = mapper.capture(event)
        out += [dump(u) for u in mapper.updates(captured, prompting=prompting)]
    return out


def mapper(workspace: Path) -> UpdateMapper:
    settings = Settings(model="m", api_key="k")
    return UpdateMapper(workspace, lambda: settings)


def test_two_edits_of_one_file_in_one_batch_share_one_diff(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("one\n")
    m = mapper(tmp_path)
    first = m.capture(
        ev.ToolCallStarted(
            call_id="e1", name="edit_file", arguments={"path": "a.txt"}, last_action="Editing a.txt"
        )
    )
    second = m.capture(
        ev.ToolCallStarted(
            call_id="e2", name="edit_file", arguments={"path": "a.txt"}, last_action="Editing a.txt"
        )
    )
    out = [dump(u) for c in (first, second) for u in m.updates(c, prompting=True)]
    target.write_text("three\n")  # both edits ran
    for call_id in ("e1", "e2"):
        finished = m.capture(
            ev.ToolCallFinished(
                call_id=call_id,
                name="edit_file",
                ok=True,
                output=f"Edited ({call_id})",
                duration_seconds=0.0,
            )
        )
        out += [dump(u) for u in m.updates(finished, prompting=True)]
    ends = [u for u in out if u.get("status") == "completed"]
    assert ends[0]["content"] == [
        {"type": "diff", "path": str(target), "oldText": "one\n", "newText": "three\n"}
    ]
    assert ends[1]["content"][0]["content"]["text"] == "Edited (e2)"


def test_a_file_that_cannot_be_shown_gets_no_diff(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"\0\1")
    m = mapper(tmp_path)
    events: list[ev.Event] = [
        ev.ToolCallStarted(
            call_id="w",
            name="write_file",
            arguments={"path": "data.bin", "content": "x"},
            last_action="Writing data.bin",
        ),
    ]
    out = updates_of(m, events)
    (tmp_path / "data.bin").write_text("x")
    out += updates_of(
        m,
        [
            ev.ToolCallFinished(
                call_id="w",
                name="write_file",
                ok=True,
                output="Wrote data.bin",
                duration_seconds=0.0,
            )
        ],
    )
    assert out[-1]["content"][0]["type"] == "content"


def test_text_reasoning_retries_and_echoes(tmp_path: Path) -> None:
    m = mapper(tmp_path)
    m.expect_echo("hi")
    out = updates_of(
        m,
        [
            ev.UserMessage(text="hi"),
            ev.UserMessage(text="typed elsewhere", queued=True),
            ev.TextDelta(text="par"),
            ev.RetryScheduled(
                kind="server_error", attempt=1, delay_seconds=1.0, message="HTTP 502"
            ),
            ev.TextDelta(text="full answer"),
            ev.AssistantMessage(content="full answer", tool_calls=[], turn=1, reasoning="why"),
            ev.AssistantMessage(content="not streamed", tool_calls=[], turn=2),
        ],
    )
    kinds = [(u["sessionUpdate"], u.get("content", {}).get("text")) for u in out]
    assert kinds[0] == ("user_message_chunk", "typed elsewhere")
    assert kinds[1:] == [
        ("agent_message_chunk", "par"),
        ("agent_thought_chunk", "Retrying in 1 s (attempt 1): HTTP 502"),
        ("agent_message_chunk", "full answer"),
        ("agent_thought_chunk", "why"),
        ("agent_message_chunk", "not streamed"),
    ]
    ids = [u["messageId"] for u in out[1:]]
    assert ids[0] != ids[1] == ids[2] == ids[3] != ids[4]


def test_background_subagent_card_follows_the_subagent(tmp_path: Path) -> None:
    m = mapper(tmp_path)
    row = {
        "agent_id": 4,
        "summary": "bg",
        "status": "running",
        "runtime_seconds": 3,
        "files_read": 1,
        "searches": 0,
        "web_pages": 0,
        "commands": 2,
        "last_action": "Running make",
    }
    started = {
        "success": True,
        "agent_id": 4,
        "status": "running",
        "message": "Sub-agent 4 has started",
        "background": True,
    }
    out = updates_of(
        m,
        [
            ev.ToolCallStarted(
                call_id="c",
                name="create_sub_agent",
                arguments={"agent_id": 4, "summary": "bg", "task": "t", "run_in_background": True},
                last_action="Creating sub-agent 4",
            ),
            ev.SubAgentStarted(info=row),
            ev.ToolCallFinished(
                call_id="c",
                name="create_sub_agent",
                ok=True,
                output=json.dumps(started),
                duration_seconds=0.1,
            ),
            ev.RoundFinished(round=1, status="done", final_text="ok", background=[4]),
            ev.SubAgentProgress(info=row),
            ev.SubAgentFinished(info={**row, "status": "timeout"}),
            ev.SubAgentProgress(info={**row, "agent_id": 9}),
        ],
    )
    statuses = [u.get("status") for u in out if u["sessionUpdate"] == "tool_call_update"]
    assert statuses == ["in_progress", None, None, None, "failed"]
    note = [u for u in out if u["sessionUpdate"] == "agent_message_chunk"][0]["content"]["text"]
    assert "Sub-agent 4 is still working in the background" in note
    progress = out[2]["content"][0]["content"]["text"]
    assert progress.splitlines() == [
        "Sub-agent 4 (bg): running, 3 s",
        "Running make",
        "1 file read, 0 searches, 0 web pages, 2 commands",
    ]


def test_a_failed_round_is_said_in_words_only_outside_a_prompt(tmp_path: Path) -> None:
    failed = ev.RoundFinished(
        round=2, status="failed", final_text=None, error="connection: refused"
    )
    assert updates_of(mapper(tmp_path), [failed], prompting=True) == []
    [said] = updates_of(mapper(tmp_path), [failed], prompting=False)
    assert said["content"]["text"] == "\n\nThe round failed: connection: refused"
