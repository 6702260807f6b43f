"""The user guide's Starlette endpoint (docs/guide/python-api.md) streaming a run as
SSE runs as written: served by
uvicorn on loopback, read by httpx, the model a FakeOpenAIServer (issue 33 item 2)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from subagent_helpers import Router, call, calls, finish

from agentkit.testing import FakeOpenAIServer, Reply

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "python-api.md"
HEADING = "## Asyncio: streaming a run to a web client"


def readme_app(monkeypatch: pytest.MonkeyPatch, folder: Path, base_url: str) -> Any:
    """The guide block's ``app``, its Settings read from this environment."""
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text[text.index(HEADING) :], flags=re.S)
    assert block, "no python block under the heading"
    (folder / "my_project").mkdir()
    monkeypatch.chdir(folder)
    for name, value in {
        "AGENTKIT_MODEL": "fake-model",
        "OPENAI_API_KEY": "k",
        "OPENAI_BASE_URL": base_url,
        "AGENTKIT_SUBAGENT_TIMEOUT_MIN": "1",
    }.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, Any] = {"__name__": "readme_sse"}
    exec(compile(block.group(1), "python-api.md", "exec"), namespace)
    return namespace["app"]


async def until(predicate: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def read_events(app: Any, task: str, leave_at: str | None, done: Any) -> list[str]:
    """Serve ``app``, GET /run?task=..., collect the event names (closing the
    connection after ``leave_at``), wait for ``done()``, stop serving."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started)
    port = server.servers[0].sockets[0].getsockname()[1]
    seen: list[str] = []
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("GET", f"http://127.0.0.1:{port}/run", params={"task": task}) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                seen.append(line[len("event: ") :])
                if seen[-1] == leave_at:
                    break
    await until(done)
    server.should_exit = True
    await serving
    return seen


def saved_conversations(folder: Path) -> list[dict[str, Any]]:
    found = (folder / "my_project" / ".agentkit" / "conversations").glob("conv_*.json")
    return [json.loads(path.read_text()) for path in found]


def no_lock_left(folder: Path) -> bool:
    """True once every conversation was closed (its claim released)."""
    return not list((folder / "my_project" / ".agentkit" / "conversations").glob("*.lock"))


def test_the_sse_endpoint_streams_a_run_with_its_sub_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create = call("create_sub_agent", agent_id=1, summary="look", task="look around")
    router = Router(main=[calls(create), "all done"], subs={1: [finish()]})
    with FakeOpenAIServer(router) as server:
        app = readme_app(monkeypatch, tmp_path, server.base_url)
        seen = asyncio.run(read_events(app, "delegate", None, lambda: no_lock_left(tmp_path)))
    assert seen[0] == "RunStarted" and seen[-1] == "RunFinished"
    assert seen.index("SubAgentStarted") < seen.index("SubAgentFinished")
    [saved] = saved_conversations(tmp_path)
    assert saved["messages"][-1]["content"] == "all done"


def test_a_client_gone_stops_the_run_and_closes_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAIServer([Reply(content="too late", latency=60)]) as server:
        app = readme_app(monkeypatch, tmp_path, server.base_url)
        seen = asyncio.run(read_events(app, "slow", "RoundStarted", lambda: no_lock_left(tmp_path)))
    assert seen[-1] == "RoundStarted"
    [saved] = saved_conversations(tmp_path)
    assert saved["state"] == "idle"
    assert [m["role"] for m in saved["messages"]] == ["system", "user"]  # no answer waited for
