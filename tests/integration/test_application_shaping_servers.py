"""The application's options and the language rule over real runs (FakeOpenAIServer,
real worker processes): a conversation kept in memory, the language settled by the
first text and inherited by sub-agents, instructions in the request, and requests
unchanged byte for byte with the options left at their defaults."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings, who

from agentkit import Agent
from agentkit.prompts import render
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

ZH_MAIN = render("zh", "main_system.txt")[:40]
EN_MAIN = render("en", "main_system.txt")[:40]
ZH_SUB = "你是一个专注的子智能体"
EN_SUB = "You are a focused sub-agent"


def delegating() -> Router:
    return Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="Note", task="write note.md")),
            "Done.",
        ],
        subs={
            1: [
                calls(call("write_file", path="sub_agent_results/agent_1/note.md", content="n\n")),
                finish("Wrote note.md with one line."),
            ]
        },
    )


def system_prompts(server: FakeOpenAIServer) -> dict[int | None, str]:
    """The first system message each agent (None: the main one) sent."""
    found: dict[int | None, str] = {}
    for request in server.requests:
        found.setdefault(who(request), request["messages"][0]["content"])
    return found


def test_memory_store_writes_no_conversation_file_and_sub_agents_keep_records(
    workspace: Path,
) -> None:
    with FakeOpenAIServer(delegating()) as server:
        settings = scripted_settings(server, "en", conversation_store="memory")
        with Agent(workspace, settings) as agent:
            result = agent.run("Delegate a note.").raise_for_status()
            assert agent.conversation.messages  # kept, in memory
    assert result.final_text == "Done."
    assert result.transcript_path is None  # no file to name
    conversations = workspace / ".agentkit" / "conversations"
    assert not conversations.exists() or list(conversations.iterdir()) == []
    folder = workspace / "sub_agent_results" / "agent_1"
    assert (folder / "note.md").read_text(encoding="utf-8") == "n\n"
    assert (folder / ".subagent" / "conversations.json").is_file()


def test_the_file_store_still_writes_the_conversation(workspace: Path) -> None:
    with FakeOpenAIServer(["Hi."]) as server, Agent(workspace, scripted_settings(server)) as agent:
        agent.run("Hello").raise_for_status()
        path = agent.transcript_path
    assert path.is_file()


@pytest.mark.parametrize(
    ("task", "main", "sub", "language"),
    [
        ("请把笔记交给子智能体写", ZH_MAIN, ZH_SUB, "zh"),
        ("Have a sub-agent write the note", EN_MAIN, EN_SUB, "en"),
    ],
)
def test_the_first_message_settles_the_language_and_sub_agents_inherit_it(
    workspace: Path, task: str, main: str, sub: str, language: str
) -> None:
    with FakeOpenAIServer(delegating()) as server:
        settings = scripted_settings(server, "auto")
        with Agent(workspace, settings) as agent:
            agent.run(task).raise_for_status()
            path = agent.transcript_path
            assert agent.session.settings.language == language
        prompts = system_prompts(server)
    assert prompts[None].startswith(main)
    assert prompts[1].startswith(sub)
    assert f'"language": "{language}"' in path.read_text(encoding="utf-8")


def test_a_sub_agent_started_from_code_settles_the_language(workspace: Path) -> None:
    router = Router(main=["Seen."], subs={1: [finish("Looked at the folder.")]})
    with FakeOpenAIServer(router) as server:
        with Agent(workspace, scripted_settings(server, "auto")) as agent:
            reply = agent.manager.create(agent_id=1, summary="看", task="请查看工作区里的文件")
            assert reply["status"] == "completed", reply
            assert agent.session.conversation.language == "zh"
            agent.run("Thanks, what did it find?").raise_for_status()
        prompts = system_prompts(server)
    assert prompts[1].startswith(ZH_SUB)
    assert prompts[None].startswith(ZH_MAIN)  # the English message came second


def test_a_saved_conversation_keeps_its_language(workspace: Path) -> None:
    with FakeOpenAIServer(["好的。", "Again."]) as server:
        settings = scripted_settings(server, "auto")
        with Agent(workspace, settings) as agent:
            agent.run("你好，请介绍一下自己").raise_for_status()
            conversation_id = agent.conversation.id
        with Agent(workspace, settings, conversation_id=conversation_id) as agent:
            assert agent.session.settings.language == "zh"
            agent.run("And in English?").raise_for_status()
    assert server.requests[-1]["messages"][0]["content"].startswith(ZH_MAIN)


def test_instructions_reach_the_request_before_agents_md(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("PROJECT RULE: tabs.\n", encoding="utf-8")
    with FakeOpenAIServer(["Ok."]) as server:
        settings = scripted_settings(server, "en", user_files=False)
        with Agent(
            workspace,
            settings,
            instructions="Answer as Acme's helper.",
            builtin_tools=["read_file"],
        ) as agent:
            agent.run("Hello").raise_for_status()
        request = server.requests[0]
    system = request["messages"][0]["content"]
    assert system.startswith(EN_MAIN)
    assert system.index("Answer as Acme's helper.") < system.index("PROJECT RULE: tabs.")
    assert [t["function"]["name"] for t in request["tools"]] == ["read_file"]


_TIME = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}")


def main_bodies(server: FakeOpenAIServer) -> list[bytes]:
    """The main agent's request bodies as sent, the clock in the prompt blanked."""
    return [
        _TIME.sub(b"<time>", r.raw_body)
        for r in server.records
        if r.path.endswith("/chat/completions") and who(r.body) is None
    ]


def run_once(workspace: Path, task: str, **settings: Any) -> list[bytes]:
    with FakeOpenAIServer(["Done."]) as server:
        with Agent(workspace, scripted_settings(server, **settings)) as agent:
            agent.run(task).raise_for_status()
        return main_bodies(server)


@pytest.mark.parametrize(("task", "language"), [("请总结", "zh"), ("Summarise", "en")])
def test_defaults_leave_the_request_bytes_unchanged(
    workspace: Path, task: str, language: str
) -> None:
    explicit = run_once(workspace, task, language=language)
    default = run_once(workspace, task, language="auto")
    assert explicit and default == explicit


def test_acp_says_the_language_in_use(workspace: Path) -> None:
    pytest.importorskip("acp")
    import asyncio

    from acp import text_block
    from acp_helpers import connect

    async def scenario(server: FakeOpenAIServer) -> tuple[Any, Any]:
        async with connect(server.base_url, workspace, AGENTKIT_LANGUAGE="auto") as (conn, _, _r):
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            answer = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("请列出工作区的文件")]
            )
            return session.field_meta, answer.field_meta

    with FakeOpenAIServer(["好的。"]) as server:
        opened, answered = asyncio.run(scenario(server))
        system = server.requests[0]["messages"][0]["content"]
    assert opened == {"agentkit": {"language": "auto"}}
    assert answered == {"agentkit": {"language": "zh"}}
    assert system.startswith(ZH_MAIN)


def test_the_page_api_says_the_language_in_use(workspace: Path) -> None:
    import httpx
    from subagent_helpers import wait_until

    from agentkit.webchat import create_app
    from agentkit.webchat.serve import BackgroundServer

    with FakeOpenAIServer(["Fine."]) as model:
        server = BackgroundServer(create_app(workspace, scripted_settings(model, "auto"))).start()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                assert client.get("/api/info").json()["language"] == "auto"
                cid = client.post("/api/conversations", json={}).json()["id"]
                assert client.get(f"/api/conversations/{cid}").json()["language"] == "auto"
                posted = client.post(f"/api/conversations/{cid}/messages", json={"text": "List"})
                assert posted.status_code == 202 and posted.json()["language"] == "en"
                assert wait_until(lambda: bool(model.requests))
                assert client.get(f"/api/conversations/{cid}").json()["language"] == "en"
        finally:
            server.stop()


def test_a_saved_conversation_is_shown_in_its_language(workspace: Path) -> None:
    import httpx

    from agentkit.webchat import create_app
    from agentkit.webchat.serve import BackgroundServer

    (workspace / "a.txt").write_text("x\n", encoding="utf-8")
    with FakeOpenAIServer([calls(call("read_file", path="a.txt")), "读完了。"]) as model:
        settings = scripted_settings(model, "auto")
        with Agent(workspace, settings) as agent:
            agent.run("请读取 a.txt").raise_for_status()
            cid = agent.conversation.id
        server = BackgroundServer(create_app(workspace, settings)).start()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                detail = client.get(f"/api/conversations/{cid}").json()
        finally:
            server.stop()
    assert detail["language"] == "zh"
    actions = [a for m in detail["messages"] for a in (m.get("actions") or {}).values()]
    assert actions == ["正在读取 a.txt"]
