"""The user guide's chat examples run as written (against FakeOpenAIServer via the
environment); they moved there from the README. tests/integration/test_guide_examples.py
runs the guide's other examples."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, who

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"


def code_after(heading: str) -> str:
    """The first ```python block after ``heading`` in the guide's pages."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(GUIDE.glob("*.md")))
    start = text.index(heading)
    match = re.search(r"```python\n(.*?)```", text[start:], flags=re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


def test_the_chat_application_example_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "my_project").mkdir()
    script = tmp_path / "chat_app.py"
    script.write_text(code_after("## Conversations: a chat application"))
    release = threading.Event()
    create = call(
        "create_sub_agent", agent_id=1, summary="后台任务示例", task="t", run_in_background=True
    )

    def main(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        last = messages[-1]
        if not any(m["role"] == "assistant" for m in messages):
            return calls(create)
        release.set()  # the sub-agent may finish once the main agent has answered once
        if last["role"] == "user" and "已完成任务" in last["content"]:
            return "The background job reports: done."
        return "Started it in the background."

    def sub(request: dict[str, Any]) -> Any:
        release.wait(30)
        return finish("Background job finished.")

    router = Router(main=[main], subs={1: [sub]})
    env: dict[str, Any] = {
        **os.environ,
        "AGENTKIT_MODEL": "fake-model",
        "OPENAI_API_KEY": "k",
        "AGENTKIT_SUBAGENT_TIMEOUT_MIN": "1",
        "AGENTKIT_LANGUAGE": "zh",  # the seed's templates, which the script above reads
    }
    with FakeOpenAIServer(router) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        proc = subprocess.run(
            [sys.executable, str(script)],
            input="start the job\nanother question\n",
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=90,
        )
        requests = [r for r in server.requests if who(r) is None]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # Both lines reached the model once each, in order (the second may join the first
    # round, at its start or after its tool results), and the notification round followed.
    said = [
        m["content"]
        for m in requests[-1]["messages"]
        if m["role"] == "user" and "已完成" not in m["content"]
    ]
    assert said == ["start the job", "another question"]
    assert "Started it in the background." in out
    assert "The background job reports: done." in out
    assert "[a sub-agent finished; the agent reports]" in out
    assert out.rstrip().endswith("[all work done]")


def test_the_control_plane_example_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    script = tmp_path / "control.py"
    script.write_text(code_after("## The control plane: steer, ask, wait, continue"))
    create = call(
        "create_sub_agent", agent_id=1, summary="迁移测试", task="t", run_in_background=True
    )
    steer = "Put the new files in tests_new/."

    def main(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        last = messages[-1]
        if not any(m["role"] == "assistant" for m in messages):
            return calls(create)
        if last["role"] == "user" and "answer_sub_agent" in last["content"]:
            return calls(call("answer_sub_agent", agent_id=1, answer="Python 3.10"))
        return "Working on it."

    def sub(request: dict[str, Any]) -> Any:  # after its answer: work until the message came
        if any(steer in str(m.get("content")) for m in request["messages"]):
            return finish("Ported, in tests_new/.")
        return calls(call("search_workspace", pattern="x"))

    router = Router(
        main=[main], subs={1: [calls(call("ask_parent", question="Oldest Python?")), sub]}
    )
    env: dict[str, Any] = {**os.environ, "AGENTKIT_MODEL": "fake-model", "OPENAI_API_KEY": "k"}
    with FakeOpenAIServer(router) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        proc = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=90,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "sub-agent 1 asks: Oldest Python?" in lines
    assert "delivered" in lines
    cost, total = lines[-1].split("] ")
    assert cost == "cost: [None"  # fake-model has no known price: null, never 0
    assert total.startswith("{'tokens': ") and total.endswith(", 'cost_usd': None}")
