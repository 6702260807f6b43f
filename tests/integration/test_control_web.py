"""The control plane in ``agentkit serve``: the API (answer, message, continue, usage)
over HTTP, and in a real browser the question shown in the sub-agent's row with its
answer box, the answer reaching the sub-agent, and the costs shown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from control_web_helpers import asking_router, tool_json
from subagent_helpers import Router, call, calls, finish, wait_until, who
from web_helpers import running_web

from agentkit import prompts
from agentkit.testing import FakeOpenAIServer
from agentkit.webchat.serve import free_port

pytestmark = pytest.mark.slow


def test_the_api_answers_refuses_and_counts(workspace: Path) -> None:
    with running_web(workspace, asking_router(), subagent_control=True) as web:
        cid = web.new_conversation()
        assert web.post(f"/api/conversations/{cid}/messages", {"text": "go"}).status_code == 202
        session = web.server.app.state.agentkit.workspace.get(cid)
        assert wait_until(
            lambda: bool(session.subagents()) and "question" in session.subagents()[0]
        )
        base = f"/api/conversations/{cid}/subagents/1"
        assert web.post(f"{base}/answer", {"text": "  "}).status_code == 400
        assert web.post(f"{base}/answer", {"text": 5}).status_code == 400
        assert (
            web.post(f"/api/conversations/{cid}/subagents/9/answer", {"text": "x"}).status_code
            == 404
        )
        answered = web.post(f"{base}/answer", {"text": "Blue"})
        assert answered.status_code == 200 and answered.json()["status"] == "answered"
        again = web.post(f"{base}/answer", {"text": "Red"})  # nothing is pending now
        assert again.status_code == 409 and again.json()["success"] is False
        assert session.wait_idle(30)
        message = web.post(f"{base}/message", {"text": "hello"})  # it has ended
        assert message.status_code == 409 and "continue_sub_agent" in message.json()["error"]
        usage = web.client.get(f"/api/conversations/{cid}/usage").json()
        assert usage["total"]["tokens"] == usage["main"]["tokens"] + usage["subagents"][0]["tokens"]
        assert usage["total"]["cost_usd"] is None  # fake-model has no known price
        subs = [r for r in web.model.requests if who(r) == 1]
    assert tool_json(subs[1], "ask_parent") == [{"success": True, "answer": "Blue"}]


def test_the_api_refuses_with_control_off(workspace: Path) -> None:
    with running_web(workspace, Router(main=[calls(call("create_sub_agent", agent_id=1, summary="s",
                                                             task="t")), "ok"], subs={1: [finish()]})) as web:  # fmt: skip
        cid = web.new_conversation()
        web.post(f"/api/conversations/{cid}/messages", {"text": "go"})
        session = web.server.app.state.agentkit.workspace.get(cid)
        assert wait_until(lambda: session.last_result is not None)
        refused = web.post(f"/api/conversations/{cid}/subagents/1/continue", {"task": "again"})
    assert refused.status_code == 409
    assert refused.json()["error"] == prompts.phrase("en", "control_off")


@pytest.mark.parametrize("flag", [True, False], ids=["--subagent-control", "without"])
def test_agentkit_serve_takes_the_flag(workspace: Path, flag: bool) -> None:
    """``agentkit serve --subagent-control`` (a real process) offers the main agent the
    control tools; without the flag it does not."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with FakeOpenAIServer(["Hello."]) as model:
        argv = [sys.executable, "-m", "agentkit", "serve", "-w", str(workspace), "--port",
                str(port), "--model", "m", "--base-url", model.base_url, "--api-key", "k",
                *(["--subagent-control"] if flag else [])]  # fmt: skip
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout is not None and b"agentkit serve: open" in proc.stdout.readline()
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
            # The line is printed just before the socket listens: retry a refused connection.
            assert wait_until(lambda: _listening(client), 30)
            cid = client.post("/api/conversations", json={}).json()["id"]
            client.post(f"/api/conversations/{cid}/messages", json={"text": "hi"})
            assert wait_until(lambda: bool(model.requests), 30)
            client.close()
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        names = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert proc.returncode == 130, err  # the CLI's exit code for Ctrl-C
    assert ("answer_sub_agent" in names) is flag and ("wait_for_sub_agents" in names) is flag


def _listening(client: httpx.Client) -> bool:
    try:
        return client.get("/api/conversations").status_code == 200
    except httpx.ConnectError:
        return False
