"""merge_sub_agent under ``agentkit acp`` (issue 34; docs/guide/editors.md): with the
approval rule ``merge_sub_agent: ask`` the editor is asked like for any tool; an
allowed merge's card carries the file it wrote as ACP diff content (path, oldText,
newText), a rejected one writes nothing and carries none. A real ``agentkit acp``
process driven by the acp library's client side, real workers on copies of a real
git repository, the model played by FakeOpenAIServer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from acp import text_block
from acp.schema import AllowedOutcome, RequestPermissionResponse
from acp_helpers import Recorder, connect, final_status
from isolation_front_helpers import APP, create, make_repo, version
from subagent_helpers import Router, call, calls, finish

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


def test_merge_asks_the_editor_and_shows_the_diff(workspace: Path) -> None:
    make_repo(workspace)
    router = Router(
        main=[
            calls(create(1), create(2)),
            calls(call("merge_sub_agent", agent_id=1)),
            calls(call("merge_sub_agent", agent_id=2)),
            "Done.",
        ],
        subs={
            i: [calls(call("write_file", path="app.py", content=version(i))), finish("ok")]
            for i in (1, 2)
        },
    )
    rec = Recorder()

    def answer(tool_call: Any, options: list[Any]) -> RequestPermissionResponse:
        choice = "allow" if tool_call.raw_input["agent_id"] == 1 else "deny"
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    rec.answer = answer
    env = {
        "AGENTKIT_APPROVALS": json.dumps({"merge_sub_agent": "ask"}),
        "AGENTKIT_SUBAGENT_ISOLATION": "available",
    }

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        async with connect(server.base_url, workspace, rec, **env) as (conn, _proc, _):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            result = await conn.prompt(session_id=sid, prompt=[text_block("two, merge")])
            assert result.stop_reason == "end_turn"
            return rec.calls(sid)

    with FakeOpenAIServer(router) as server:
        cards = asyncio.run(asyncio.wait_for(scenario(), 120))
    asked = [(p["tool_call"]["title"], p["tool_call"]["rawInput"]) for p in rec.permissions]
    assert [raw for _, raw in asked] == [{"agent_id": 1}, {"agent_id": 2}]
    merges = [u for u in cards.values() if u[0].get("rawInput", {}).get("agent_id") and
              "create" not in u[0]["title"].lower() and u[0]["kind"] == "other"]  # fmt: skip
    assert len(merges) == 2
    first, second = merges
    assert final_status(first) == "completed" and final_status(second) == "failed"
    content = [c for u in first for c in u.get("content") or []]
    diffs = [c for c in content if c["type"] == "diff"]
    assert diffs == [
        {"type": "diff", "path": str(workspace / "app.py"), "oldText": APP, "newText": version(1)}
    ]
    assert not [c for u in second for c in u.get("content") or [] if c["type"] == "diff"]
    assert (workspace / "app.py").read_text() == version(1)
