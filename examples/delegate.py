"""Delegating from code: start sub-agents yourself, wait for their typed results.

    python examples/delegate.py

``agent.spawn`` starts a sub-agent of the conversation as the model's
create_sub_agent would (same limits, folder, record; the main agent is told), and
``await agent.aspawn`` is its asyncio twin with the sub-agent's own event stream.
This program runs with no key and no network: agentkit.testing.FakeOpenAIServer
plays the main agent and the sub-agents on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from agentkit import Agent, Settings, SubAgentRefused, SubAgentResult
from agentkit.testing import FakeOpenAIServer


def play(request: dict[str, Any]) -> Any:
    """The scripted model: a sub-agent finishes at once; the main agent acknowledges."""
    if str(request["messages"][0].get("content", "")).startswith("You are a focused sub-agent"):
        finish = {"success": True, "summary": "Listed the notes; nothing was missing."}
        return {"tool_calls": [{"name": "finish_task", "arguments": finish}]}
    return "Noted."


def delegate(workspace: str, settings: Settings) -> SubAgentResult:
    """Start one sub-agent from code and wait for it; a second asks too much."""
    with Agent(workspace=workspace, settings=settings) as agent:
        handle = agent.spawn("List the notes in this folder.", summary="List the notes")
        result = handle.result(timeout=120)
        try:
            agent.spawn("List them again.", timeout_seconds=5)  # under the 60 s minimum
        except SubAgentRefused as refused:
            print("refused:", refused.error)
        return result


async def follow(workspace: str, settings: Settings) -> list[str]:
    """Start one with aspawn and follow its events to its end."""
    async with await Agent.open(workspace, settings) as agent:
        handle = await agent.aspawn("Check the notes again.", summary="Check the notes")
        names = [event.type async for event in handle.events()]
        print((await handle.result()).status)
        return names


def main() -> int:
    with FakeOpenAIServer(play) as server, tempfile.TemporaryDirectory() as workspace:
        settings = Settings(model="fake", base_url=server.base_url, api_key="x", language="en")
        result = delegate(workspace, settings)
        print(result.agent_id, result.status, result.deliverables_dir, result.result_summary)
        print(asyncio.run(follow(workspace, settings)))
        return 0 if result.success else 1


if __name__ == "__main__":
    raise SystemExit(main())
