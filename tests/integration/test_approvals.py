"""Approvals end to end through a chat session: the main agent's calls and its sub-agents'
(real worker processes), over the real openai client and FakeOpenAIServer
(docs/approvals.md; issue 22). What an answer does (deny's note, one of two answers
winning, the timeout) is tests/unit/test_approval_logic.py's; here, what a Session adds:
its callback, its file, its rounds and its sub-agents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import (
    Recorder,
    call,
    calls,
    finish,
    script,
    scripted_settings,
    wait_until,
    who,
)
from switch_fixtures import (
    model_fixture,  # noqa: F401  (the model fixture)
    server_fixture,  # noqa: F401  (the server fixture)
)

from agentkit import events as ev
from agentkit.chat import Session
from agentkit.errors import ApprovalError
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    return scripted_settings(server, "en", **overrides)


def later(session: Session, text: str = "go") -> Any:
    """Post a message; returns its future (the round waits on an approval meanwhile)."""
    return session.post(text)


def open_session(
    workspace: Path, settings: Settings, recorder: Recorder, **options: Any
) -> Session:
    options.setdefault("on_approval", lambda request: None)  # a person answers later
    session = Session(workspace, settings, prewarm=False, **options)
    session.subscribe(recorder)
    return session


def open_asking_writes(workspace: Path, server: FakeOpenAIServer, recorder: Recorder) -> Session:
    """A session whose write_file calls wait for a person's approval."""
    return open_session(workspace, settings_for(server, approvals={"write_file": "ask"}), recorder)


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def saved(session: Session) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(session.transcript_path.read_text(encoding="utf-8"))
    return data


WRITE = {
    "name": "write_file",
    "id": "call_w",
    "arguments": {"path": "notes.txt", "content": "hi\n"},
}


def test_ask_then_allow_runs_the_call_and_the_request_is_in_the_file_meanwhile(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(model, [{"tool_calls": [WRITE]}, "written"])
    recorder = Recorder()
    settings = settings_for(server, approvals={"write_file": "ask"})
    with open_session(workspace, settings, recorder) as session:
        future = later(session)
        asked = recorder.wait_for(ev.ApprovalRequested)[0]
        assert (asked.agent_id, asked.tool, asked.arguments) == (
            None,
            "write_file",
            WRITE["arguments"],
        )
        assert asked.call_id == "call_w" and asked.key == "write_file"
        assert "'write_file'" in asked.reason and asked.conversation_id == session.id
        assert not (workspace / "notes.txt").exists()
        [pending] = session.pending_approvals()
        assert pending["request_id"] == asked.request_id
        assert saved(session)["approvals"]["pending"][0]["request_id"] == asked.request_id
        session.approve(asked.request_id, "allow")
        assert future.result(30).final_text == "written"
        assert (workspace / "notes.txt").read_text() == "hi\n"
        answered = recorder.of(ev.ApprovalAnswered)
        assert [(a.request_id, a.decision, a.by) for a in answered] == [
            (asked.request_id, "allow", "user")
        ]
        assert session.pending_approvals() == []
        assert "approvals" not in saved(session)  # nothing pending, nothing always: no key
        assert tool_results(server.requests[-1])["call_w"].startswith("Created notes.txt")


def test_allow_always_is_remembered_in_the_conversation_file(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    def push(n: int) -> dict[str, Any]:
        command = f"git push origin b{n}"
        return {"name": "run_command", "id": f"call_{n}", "arguments": {"command": command}}

    script(
        model,
        [
            {"tool_calls": [push(1)]},
            "one",
            {"tool_calls": [push(2)]},
            "two",
            {"tool_calls": [push(3)]},
            "three",
        ],
    )
    recorder = Recorder()
    settings = settings_for(server, approvals={"run_command:git push*": "ask"})
    with open_session(workspace, settings, recorder) as session:
        future = later(session)
        asked = recorder.wait_for(ev.ApprovalRequested)[0]
        assert asked.key == "run_command:git push*"
        session.approve(asked.request_id, "allow_always")
        future.result(30)
        assert session.send("again", 30).final_text == "two"
        conversation_id = session.id
        assert saved(session)["approvals"] == {"always": ["run_command:git push*"]}
    assert len(recorder.of(ev.ApprovalRequested)) == 1  # the second push did not ask
    assert recorder.of(ev.ApprovalAnswered)[0].decision == "allow_always"
    with open_session(workspace, settings, recorder, conversation_id=conversation_id) as session:
        assert session.send("and again", 30).final_text == "three"
    assert len(recorder.of(ev.ApprovalRequested)) == 1  # still remembered after reopening
    assert "[exit " in tool_results(server.requests[-1])["call_3"]  # it ran


def test_no_one_to_ask_denies_unless_approvals_default_allows(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    recorder = Recorder()
    settings = settings_for(server, approvals={"write_file": "ask"})
    with Session(workspace, settings, prewarm=False) as session:  # no answerer
        session.subscribe(recorder)
        assert session.send("go", 30).status == "done"
    result = tool_results(server.requests[-1])["call_w"]
    assert result.startswith("Error: denied:") and '"no one to ask"' in result
    [answered] = recorder.of(ev.ApprovalAnswered)
    assert (answered.decision, answered.note, answered.by) == ("deny", "no one to ask", "default")
    assert not (workspace / "notes.txt").exists()
    settings = settings_for(server, approvals={"write_file": "ask"}, approvals_default="allow")
    with Session(workspace, settings, prewarm=False) as session:
        assert session.send("go", 30).status == "done"
    assert (workspace / "notes.txt").exists()


def test_the_other_calls_of_the_message_go_on_while_one_waits(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    other = {
        "name": "run_command",
        "id": "call_o",
        "arguments": {"command": "echo ran > other.txt"},
    }
    script(model, [{"tool_calls": [WRITE, other]}, "ok"])
    recorder = Recorder()
    with open_asking_writes(workspace, server, recorder) as session:
        future = later(session)
        asked = recorder.wait_for(ev.ApprovalRequested)[0]
        # The command of the same message ran while the write waits for its answer.
        assert wait_until(lambda: (workspace / "other.txt").exists())
        assert not (workspace / "notes.txt").exists()
        session.approve(asked.request_id, "allow")
        future.result(30)
    assert (workspace / "notes.txt").exists()


def test_cancelling_the_round_withdraws_its_request(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    recorder = Recorder()
    with open_asking_writes(workspace, server, recorder) as session:
        future = later(session)
        asked = recorder.wait_for(ev.ApprovalRequested)[0]
        assert session.cancel()
        assert future.result(30).status == "cancelled"
        [withdrawn] = recorder.of(ev.ApprovalWithdrawn)
        assert withdrawn.request_id == asked.request_id and "cancelled" in withdrawn.reason
        with pytest.raises(ApprovalError, match="withdrawn") as caught:
            session.approve(asked.request_id, "allow")
        assert caught.value.code == "withdrawn"
        assert session.pending_approvals() == []
    assert not (workspace / "notes.txt").exists()


def test_requests_are_unchanged_when_no_rule_and_no_hook_acts(
    workspace: Path, model: Any, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentkit.prompts.current_time", lambda: "2026-01-01 00:00:00 +0000")
    (workspace / "a.txt").write_text("alpha\n")
    read = {"name": "read_file", "id": "call_r", "arguments": {"path": "a.txt"}}
    bodies = []
    for extra in ({}, {"approvals": {"mcp__nothing__*": "ask"}}):
        script(model, [{"tool_calls": [read]}, "ok"])
        server.clear()
        with Session(workspace, settings_for(server, **extra), prewarm=False) as session:
            session.send("go", 30)
            if not extra:
                assert session.policy.gate() is None  # nothing configured: no gate at all
                assert "approvals" not in saved(session)
        bodies.append(server.requests)
    assert bodies[0] == bodies[1]


def test_a_killed_process_leaves_its_requests_withdrawn_when_the_conversation_reopens(
    workspace: Path, model: Any, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    script(model, [{"tool_calls": [WRITE]}, "told"])
    child = tmp_path / "child.py"
    child.write_text(
        "import sys, threading\n"
        "from agentkit.chat import Session\n"
        "from agentkit.settings import Settings\n"
        f"s = Settings(model='m', base_url={server.base_url!r}, api_key='k', language='en',"
        " approvals={'write_file': 'ask'}, max_retries=0)\n"
        f"session = Session({str(workspace)!r}, s, prewarm=False, on_approval=lambda r: None)\n"
        "asked = threading.Event()\n"
        "session.subscribe(lambda e: asked.set() if e.type == 'ApprovalRequested' else None)\n"
        "session.post('go')\n"
        "asked.wait(30)\n"
        "print(session.id, flush=True)\n"
        "threading.Event().wait()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(child)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        conversation_id = proc.stdout.readline().strip()
        assert conversation_id.startswith("conv_")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    recorder = Recorder()
    settings = settings_for(server, approvals={"write_file": "ask"})
    session = Session(workspace, settings, prewarm=False, conversation_id=conversation_id)
    with session:
        session.subscribe(recorder)
        withdrawn = [
            e for e in session.bus.since(0)[0] if isinstance(e.event, ev.ApprovalWithdrawn)
        ]
        assert len(withdrawn) == 1 and "process ended" in withdrawn[0].event.reason
        assert session.pending_approvals() == []
        with pytest.raises(ApprovalError, match="withdrawn"):
            session.approve(withdrawn[0].event.request_id, "allow")
        assert session.send("what happened?", 30).final_text == "told"
    result = tool_results(server.requests[-1])["call_w"]
    assert result.startswith(
        "Error: denied: the approval request for this write_file call was withdrawn"
    )
    assert "agentkit process ended" in result
    assert not (workspace / "notes.txt").exists()


# ------------------------------------------------------------------ sub-agents
def background(agent_id: int, **extra: Any) -> dict[str, Any]:
    return call(
        "create_sub_agent", agent_id=agent_id, summary=f"helper {agent_id}", task="write notes",
        run_in_background=True, **extra,
    )  # fmt: skip


def sub_write(path: str = "notes.txt") -> dict[str, Any]:
    return calls(call("write_file", path=path, content="from the sub-agent\n"))


def script_background_writer(model: Any, agent_id: int, **extra: Any) -> None:
    """The main agent starts sub-agent ``agent_id`` in the background (``extra``: more
    create_sub_agent arguments); the sub-agent writes its notes.txt and finishes."""
    script(
        model,
        [calls(background(agent_id, **extra)), "started", "heard"],
        {agent_id: [sub_write(f"sub_agent_results/agent_{agent_id}/notes.txt"), finish()]},
    )


def test_a_background_sub_agent_asks_while_the_main_agent_is_idle(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script_background_writer(model, 1)
    recorder = Recorder()
    with open_asking_writes(workspace, server, recorder) as session:
        assert session.send("start one", 60).background == [1]
        asked = recorder.wait_for(ev.ApprovalRequested, timeout=60)[0]
        assert asked.agent_id == 1 and asked.tool == "write_file"
        assert session.state == "waiting_for_subagents"  # no round runs: the main agent is idle
        assert session.pending_approvals()[0]["agent_id"] == 1
        session.approve(asked.request_id, "allow")
        recorder.wait_for(ev.RoundFinished, 2, timeout=60)  # the completion's own round
    assert (workspace / "sub_agent_results/agent_1/notes.txt").read_text() == "from the sub-agent\n"
    [done] = recorder.of(ev.SubAgentFinished)
    assert done.info["status"] == "completed"


def test_a_waiting_sub_agent_timeout_clock_is_paused(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script_background_writer(model, 2, timeout_seconds=1)
    recorder = Recorder()
    with open_asking_writes(workspace, server, recorder) as session:
        # The clock counts from the sub-agent's creation, its worker's start included,
        # which on a loaded machine alone outlasts one second: the test holds its own
        # pause of the clock (nested with the approval's) but for the wait under test.
        held = HeldClock(session)
        session.send("start one", 60)
        asked = recorder.wait_for(ev.ApprovalRequested, timeout=60)[0]
        held.release()  # from here only the approval's pause stops the clock
        # Twice its whole timeout passes while it waits for the person.
        assert not wait_until(lambda: bool(recorder.of(ev.SubAgentFinished)), timeout=2.0)
        held.hold()  # and the rest of its run (a write and a reply) is not on the clock
        session.approve(asked.request_id, "allow")
        [done] = recorder.wait_for(ev.SubAgentFinished, timeout=60)
    assert done.info["status"] == "completed"


class HeldClock:
    """Pauses each sub-agent's timeout clock from just before its worker starts (wraps
    the session's real launcher); :meth:`release` ends the pause, :meth:`hold` takes it
    again. Nested with the product's own pauses (SubAgent.pause_clock)."""

    def __init__(self, session: Session) -> None:
        self.manager = session.manager
        self.launcher = self.manager.launcher
        self.held: list[Any] = []
        self.manager.launcher = self  # type: ignore[assignment]

    def start(self, spec: Any) -> Any:
        agent = self.manager.agents[spec.agent_id]
        agent.pause_clock()
        self.held.append(agent)
        return self.launcher.start(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.launcher, name)

    def hold(self) -> None:
        for agent in self.held:
            agent.pause_clock()

    def release(self) -> None:
        for agent in self.held:
            agent.resume_clock()


def test_a_question_and_an_approval_at_once_keep_the_clock_paused_until_both_end(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    """The control plane's ask_parent and an approval share the sub-agent's timeout
    clock: the clock runs again only when neither waits (the pauses nest)."""
    script(
        model,
        [calls(background(6)), "started", "noted", "heard"],
        {
            6: [
                calls(
                    call("ask_parent", question="which file?"),
                    call("write_file", path="sub_agent_results/agent_6/notes.txt", content="n\n"),
                ),
                finish(),
            ]
        },
    )
    recorder = Recorder()
    settings = settings_for(server, approvals={"write_file": "ask"}, subagent_control=True)
    with open_session(workspace, settings, recorder) as session:
        session.send("start one", 60)
        asked = recorder.wait_for(ev.ApprovalRequested, timeout=60)[0]
        recorder.wait_for(ev.SubAgentQuestion, timeout=60)
        assert session.answer_subagent(6, "notes.txt")["success"]
        [answered] = recorder.wait_for(ev.SubAgentAnswered, timeout=60)
        assert answered.outcome == "answered"
        agent = session.manager.agents[6]
        assert agent.clock_paused()  # the approval still waits: the clock stays stopped
        session.approve(asked.request_id, "allow")
        [done] = recorder.wait_for(ev.SubAgentFinished, timeout=60)
    assert done.info["status"] == "completed"
    assert (workspace / "sub_agent_results/agent_6/notes.txt").read_text() == "n\n"


def test_an_answer_after_the_sub_agent_ended_is_refused(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script_background_writer(model, 3)
    recorder = Recorder()
    with open_asking_writes(workspace, server, recorder) as session:
        session.send("start one", 60)
        asked = recorder.wait_for(ev.ApprovalRequested, timeout=60)[0]
        assert session.terminate_subagent(3)["success"]
        [withdrawn] = recorder.wait_for(ev.ApprovalWithdrawn)
        assert (withdrawn.request_id, withdrawn.agent_id) == (asked.request_id, 3)
        assert "sub-agent 3 has ended" in withdrawn.reason
        with pytest.raises(ApprovalError, match="withdrawn: sub-agent 3 has ended"):
            session.approve(asked.request_id, "allow")
        assert session.pending_approvals() == []
    assert not (workspace / "sub_agent_results/agent_3/notes.txt").exists()


def test_a_blocking_sub_agent_of_a_profile_with_rules_asks_too(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    folder = workspace / ".agentkit" / "agents"
    folder.mkdir(parents=True)
    (folder / "careful.md").write_text(
        '---\nname: careful\napprovals: {"run_command": "ask"}\n---\nBe careful.\n'
    )
    blocking = call(
        "create_sub_agent", agent_id=4, summary="careful helper", task="run it", profile="careful"
    )
    script(
        model,
        [calls(blocking), "done"],
        {
            4: [
                calls(
                    call("run_command", command="echo hello > sub_agent_results/agent_4/out.txt")
                ),
                finish(),
            ]
        },
    )
    recorder = Recorder()
    with open_session(workspace, settings_for(server), recorder) as session:
        future = later(session)
        asked = recorder.wait_for(ev.ApprovalRequested, timeout=60)[0]
        assert (asked.agent_id, asked.tool, asked.key) == (4, "run_command", "run_command")
        session.approve(asked.request_id, "deny", "not today")
        assert future.result(60).final_text == "done"
    sub = [r for r in server.requests if who(r) == 4]
    result = tool_results(sub[-1])
    assert any(
        'the user denied this run_command call: "not today"' in text for text in result.values()
    )
