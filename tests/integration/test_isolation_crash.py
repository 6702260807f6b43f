"""A main process SIGKILLed while an isolated sub-agent starts: its copy is listed in the
conversation before its worker starts, so a reopened conversation knows it, can
discard it and gives the next sub-agent a new number (a fresh user's trial: the copy
was orphaned, its number given again, and the new sub-agent failed on the old copy).

Real processes and git: the main process runs a Session whose launcher waits before
it starts the worker, so the kill lands between the copy and the worker, every time.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from git_helpers import make_repo
from subagent_helpers import Router, call, calls, finish, scripted_settings, start_main

from agentkit import Agent
from agentkit.testing import FakeOpenAIServer

MAIN_SCRIPT = """
import sys, time
from agentkit import Settings
from agentkit.chat import Session
from agentkit.subagent.launchers.local import LocalLauncher


class WaitingLauncher(LocalLauncher):
    def start(self, spec):
        print("STARTING", flush=True)
        time.sleep(120)  # the test kills this process meanwhile
        return super().start(spec)


settings = Settings(model="fake-model", base_url=sys.argv[2], api_key="k", language="en",
                    max_retries=0, subagent_isolation="always")
with Session(sys.argv[1], settings, launcher=WaitingLauncher()) as session:
    print(session.id, flush=True)
    session.send("work in a copy")
"""


def test_a_copy_made_just_before_a_kill_is_known_when_the_conversation_reopens(
    workspace: Path, tmp_path: Path
) -> None:
    make_repo(workspace, {"app.py": "print(1)\n"})
    create = call("create_sub_agent", agent_id=1, summary="edit", task="t")
    router = Router(
        main=[calls(create), "noted", "noted", "noted"],  # the create never returns: the kill
        subs={2: [finish("Nothing to do here, as the task asked.")]},
    )
    with FakeOpenAIServer(router) as server:
        process = start_main(
            MAIN_SCRIPT, tmp_path, workspace, server.base_url, start_new_session=True
        )
        try:
            assert process.stdout is not None
            conversation_id = process.stdout.readline().strip()
            assert process.stdout.readline().strip() == "STARTING"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        saved = json.loads(
            (workspace / ".agentkit/conversations" / f"{conversation_id}.json").read_text()
        )
        rows = {row["agent_id"]: row for row in saved["subagents"]}
        assert 1 in rows and rows[1].get("isolation"), saved["subagents"]
        copy = Path(rows[1]["isolation"]["root"])
        assert copy.is_dir()
        (copy / "app.py").write_text("print(2)\n")  # as if its worker had begun
        with Agent(
            workspace=workspace,
            settings=scripted_settings(server, "en", subagent_isolation="always"),
            conversation_id=conversation_id,
        ) as agent:
            waiting = agent.manager.unmerged()
            assert [(u["agent_id"], u["status"]) for u in waiting] == [(1, "terminated")]
            agent.run("what happened?")
            notes = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "system"]
            told = "Sub-agent 1 (edit): Its changes are in its own copy of the workspace"
            assert any(told in n and "1 files, +1 -1 lines" in n for n in notes), notes
            agent.manager.discard(1)
            assert agent.manager.unmerged() == []
            handle = agent.spawn("look around", summary="look")
            assert handle.agent_id == 2
            assert handle.result().status == "completed"
    assert not copy.exists()
