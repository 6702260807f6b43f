"""Approvals under ``agentkit acp``: each ``ask`` becomes ``session/request_permission``
and the editor's choice is the answer (docs/acp.md §8), driven by the ``acp`` library's
client side against the real command, with real worker processes for sub-agents."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from switch_fixtures import (
    cleared_fixture,  # noqa: F401  (clears the server before each test)
    handled_server_fixture,  # noqa: F401  (the server fixture)
)

pytest.importorskip("acp")

from acp import text_block
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse
from acp_helpers import Recorder, connect, final_status, run
from acp_shared import SharedAgent
from subagent_helpers import Gate, Router, call, calls, finish, who

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

RULES = json.dumps({"run_command:echo *": "ask", "run_command:touch *": "ask"})


@pytest.fixture(scope="module")
def shared(
    server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedAgent]:
    """One ``agentkit acp`` with the :data:`RULES` for the tests with no setting of their
    own (each in its own workspace and session, tests/acp_shared.py)."""
    agent = SharedAgent(
        server.base_url,
        tmp_path_factory.mktemp("acp-shared").resolve(),
        AGENTKIT_APPROVALS=RULES,
    )
    try:
        yield agent
    finally:
        agent.close()


def chose(option_id: str) -> RequestPermissionResponse:
    return RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id=option_id)
    )


def tool_results(server: FakeOpenAIServer, agent: int | None = None) -> list[str]:
    """The tool results in the last request of the main agent (or sub-agent ``agent``)."""
    last = [r for r in server.requests if who(r) == agent][-1]
    return [str(m.get("content")) for m in last["messages"] if m["role"] == "tool"]


def test_the_editor_allows_denies_and_always_allows_the_main_agents_calls(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    server.handler = Router(
        main=[
            calls(call("run_command", command="echo allowed-once")),
            calls(call("run_command", command="echo rejected-one")),
            calls(call("run_command", command="echo always-first")),
            calls(call("run_command", command="echo always-second")),
            "Done.",
        ]
    )
    rec = shared.recorder
    card_shown_first: list[bool] = []
    choices = {"allowed-once": "allow", "rejected-one": "deny", "always-first": "allow_always"}

    def answer(tool_call: Any, options: list[Any]) -> RequestPermissionResponse:
        # The card of the call is already on the editor's screen when its buttons come.
        card_shown_first.append(tool_call.tool_call_id in rec.calls())
        word = tool_call.raw_input["command"].split()[-1]
        return chose(choices[word])

    async def scenario(conn: Any, _proc: Any, _rec: Recorder) -> None:
        rec.answer = answer
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("run them")])
        assert result.stop_reason == "end_turn"
        asked = [p["tool_call"]["rawInput"]["command"] for p in rec.permissions]
        assert asked == ["echo allowed-once", "echo rejected-one", "echo always-first"]
        assert card_shown_first == [True, True, True]
        first = rec.permissions[0]
        assert first["session_id"] == sid
        assert first["tool_call"]["status"] == "pending"
        assert "run_command:echo *" in first["tool_call"]["content"][0]["content"]["text"]
        assert [o["optionId"] for o in first["options"]] == ["allow", "allow_always", "deny"]
        cards = {u[0]["title"]: u for u in rec.calls(sid).values()}
        assert final_status(cards["Running echo allowed-once"]) == "completed"
        assert final_status(cards["Running echo always-second"]) == "completed"
        assert final_status(cards["Running echo rejected-one"]) == "failed"
        for p in rec.permissions:  # the buttons were on the call's own card
            assert p["tool_call"]["toolCallId"] in rec.calls(sid)
        saved = json.loads((workspace / ".agentkit" / "conversations" / f"{sid}.json").read_text())
        assert saved["approvals"]["always"] == ["run_command:echo *"]

    shared.run(scenario)
    results = tool_results(server)
    assert "allowed-once" in results[0]
    assert "the user denied this run_command call" in results[1]
    assert "rejected in the editor" in results[1]
    assert "always-first" in results[2] and "always-second" in results[3]


def test_a_background_subagents_ask_reaches_the_editor_between_prompts(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    gate = Gate()
    out = "sub_agent_results/agent_1/ran.txt"
    server.handler = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="background job",
                    task="touch the file",
                    run_in_background=True,
                )
            ),
            "Started it.",
            "The background job is done.",
        ],
        subs={1: [gate.hold(calls(call("run_command", command=f"touch {out}"))), finish()]},
    )

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        rec.answer = lambda tool_call, options: chose("allow")
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("start it")])
        assert result.stop_reason == "end_turn"
        assert rec.permissions == []
        gate.event.set()  # no prompt runs now: the sub-agent's ask still reaches the editor
        assert await rec.wait_for(lambda: bool(rec.permissions), 60)
        assert await rec.wait_for(
            lambda: "The background job is done." in rec.text(session_id=sid), 60
        )
        (asked,) = rec.permissions
        assert asked["session_id"] == sid
        assert asked["tool_call"]["toolCallId"].startswith("approval-ap_")
        assert asked["tool_call"]["title"].startswith("Sub-agent 1: ")
        assert asked["tool_call"]["rawInput"] == {"command": f"touch {out}"}

    shared.run(scenario)
    assert (workspace / out).is_file()


def test_a_cancelled_prompt_withdraws_its_ask_and_the_editors_cancelled_decides_nothing(
    server: FakeOpenAIServer, workspace: Path, shared: SharedAgent
) -> None:
    server.handler = Router(
        main=[calls(call("run_command", command="touch ran.txt")), "after the cancel"]
    )

    async def scenario(conn: Any, _proc: Any, rec: Recorder) -> None:
        release = asyncio.Event()

        async def answer(tool_call: Any, options: list[Any]) -> RequestPermissionResponse:
            await release.wait()  # ACP: a cancelled prompt's requests are answered cancelled
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

        rec.answer = answer
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("touch it")]))
        assert await rec.wait_for(lambda: bool(rec.permissions), 60)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "cancelled"
        release.set()
        # The agent goes on: the next prompt is answered, nothing more is asked.
        again = await conn.prompt(session_id=sid, prompt=[text_block("and now?")])
        assert again.stop_reason == "end_turn"
        assert len(rec.permissions) == 1
        saved = json.loads((workspace / ".agentkit" / "conversations" / f"{sid}.json").read_text())
        assert not (saved.get("approvals") or {}).get("pending")

    shared.run(scenario)
    assert not (workspace / "ran.txt").exists()


def test_an_answer_after_the_timeout_is_refused_and_the_agent_goes_on(
    server: FakeOpenAIServer, workspace: Path
) -> None:
    denied = Gate()  # opened by the model's next request: the call was denied
    server.handler = Router(
        main=[
            calls(call("run_command", command="touch late.txt")),
            denied.release("It was not approved."),
        ]
    )
    rec = Recorder()

    async def scenario() -> None:
        answered = asyncio.Event()

        async def answer(tool_call: Any, options: list[Any]) -> RequestPermissionResponse:
            # Past approval_timeout_seconds: the agent went on without this answer.
            assert await asyncio.to_thread(denied.event.wait, 30)
            answered.set()
            return chose("allow")

        rec.answer = answer
        async with connect(
            server.base_url,
            workspace,
            rec,
            AGENTKIT_APPROVALS=RULES,
            AGENTKIT_APPROVAL_TIMEOUT_SECONDS="0.2",
        ) as (conn, _proc, _):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            result = await conn.prompt(session_id=sid, prompt=[text_block("touch it")])
            assert result.stop_reason == "end_turn"
            await asyncio.wait_for(answered.wait(), 30)  # its late answer goes out now
            again = await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
            assert again.stop_reason == "end_turn"

    run(scenario())
    assert "did not answer the approval request" in tool_results(server)[0]
    assert not (workspace / "late.txt").exists()
