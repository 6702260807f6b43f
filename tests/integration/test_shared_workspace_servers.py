"""A workspace shared by conversations (issue 33 item 8): two Agents on one folder each
start sub-agents 1 and 2 at once and all four run; a sub-agent whose default folder
(sub_agent_results/agent_<id>) another live conversation holds gets a folder of its
own, and every result, notification, status row and record names the folder really
used; a folder the model names is still refused while another conversation's
sub-agent holds it; alone, a conversation uses the seed's default folder. Real
workers against FakeOpenAIServer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Gate, Router, call, calls, finish, scripted_settings, step, wait_until

from agentkit import Agent
from agentkit.conversation import Conversation
from agentkit.subagent.manager import SubAgentManager
from agentkit.subagent.placement import default_folder, own_folder
from agentkit.subagent.record import read_record, write_record
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

_SECTION = re.compile(r"\[(Task details|Deliverables directory)\]\n(.*)\n")


def _brief(request: dict[str, Any]) -> dict[str, str]:
    """The sub-agent's task and deliverables folder, read from its first user message."""
    return dict(_SECTION.findall(request["messages"][1]["content"]))


def _main(request: dict[str, Any]) -> Any:
    """Each main agent starts sub-agents 1 (blocking) and 2 (background) in one batch,
    their tasks naming the conversation's own task ("A" or "B")."""
    if step(request) > 0:
        return "done"
    own = request["messages"][-1]["content"]
    return calls(
        call("create_sub_agent", agent_id=1, summary="s1", task=f"{own}1"),
        call("create_sub_agent", agent_id=2, summary="s2", task=f"{own}2", run_in_background=True),
    )


def test_two_agents_on_one_workspace_each_run_sub_agents_1_and_2(workspace: Path) -> None:
    """Regression (issue 33): two conversations each starting sub-agents 1 and 2 at
    once had 2 of the 4 refused ("Deliverables directory sub_agent_results/agent_1 is
    in use by a running sub-agent of another Agent"). All four must run at the same
    time (a barrier of four holds their ends), each in a folder of its own, and every
    answer name the folder its files are in."""
    together = threading.Barrier(4, timeout=90)
    met: list[bool] = []

    def write(request: dict[str, Any]) -> Any:
        brief = _brief(request)
        path = f"{brief['Deliverables directory']}/result.md"
        return calls(call("write_file", path=path, content=brief["Task details"]))

    def meet(request: dict[str, Any]) -> Any:
        try:
            together.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            met.append(False)
        return finish(f"wrote {_brief(request)['Task details']}")

    router = Router(main=[_main], subs={1: [write, meet], 2: [write, meet]})
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(server, "en")
        agents = {name: Agent(workspace, settings) for name in "AB"}
        results: dict[str, Any] = {}
        threads = [
            threading.Thread(target=lambda n=name: results.__setitem__(n, agents[n].run(n)))
            for name in agents
        ]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(180)
            assert [r.status for r in results.values()] == ["done", "done"], results
            ids = {name: agent.conversation.id for name, agent in agents.items()}
            rows = {name: agent.manager.status([1, 2])["agents"] for name, agent in agents.items()}
            saved = {name: agent.conversation.subagents for name, agent in agents.items()}
            messages = {name: agent.conversation.messages for name, agent in agents.items()}
        finally:
            for agent in agents.values():
                agent.close()
    assert met == [True] * 4  # all four ran at the same time
    folders: dict[tuple[str, int], str] = {}
    for name in "AB":
        answers = [json.loads(m["content"]) for m in messages[name] if m["role"] == "tool"]
        assert [a["success"] for a in answers] == [True, True], answers
        for answer in answers:
            folders[name, answer["agent_id"]] = answer["deliverables_dir"]
    for agent_id in (1, 2):  # one conversation has the default, the other its own
        pair = {folders["A", agent_id], folders["B", agent_id]}
        assert default_folder(agent_id) in pair, pair
        (other,) = pair - {default_folder(agent_id)}
        assert other in {own_folder(ids[name], agent_id) for name in "AB"}, (other, ids)
    for (name, agent_id), folder in folders.items():
        deliverables = workspace / folder
        task = f"{name}{agent_id}"
        assert (deliverables / "result.md").read_text() == task  # its own, not overwritten
        assert sorted(p.name for p in deliverables.iterdir()) == [".subagent", "result.md"]
        record = read_record(deliverables)
        assert record is not None and record["task"] == task
        assert record["deliverables_dir"] == folder and record["status"] == "completed"
        (row,) = [r for r in rows[name] if r["agent_id"] == agent_id]
        assert row["deliverables_dir"] == folder  # get_sub_agent_status
        (kept,) = [r for r in saved[name] if r["agent_id"] == agent_id]
        assert kept["deliverables_dir"] == folder  # the conversation file's row
        assert kept["transcript"] == f"{folder}/.subagent/conversations.json"
    for name in "AB":  # sub-agent 2's completion notification names its folder
        told = [
            str(m["content"])
            for m in messages[name]
            if m["role"] in ("user", "system") and "Deliverables directory:" in str(m["content"])
        ]
        assert told and f"Deliverables directory: {folders[name, 2]}\n" in told[-1] + "\n", told
    assert not list((workspace / "sub_agent_results").glob("*/.subagent/earlier"))  # none moved


def _manager(
    server: FakeOpenAIServer, workspace: Path, conversation: Conversation
) -> SubAgentManager:
    settings = scripted_settings(server, "en")
    return SubAgentManager(workspace=workspace, settings=settings, conversation=conversation)


def test_a_named_folder_held_by_another_conversation_is_still_refused(workspace: Path) -> None:
    """The seed's rule stands for a folder the model names: while conversation A's
    sub-agent 1 runs in sub_agent_results/agent_1, conversation B naming that folder is
    refused, naming A; B's sub-agent 1 by default goes to B's own folder, and A's files
    stay where they are (nothing set aside while their holder runs)."""
    gate = Gate()

    def write(request: dict[str, Any]) -> Any:
        path = f"{_brief(request)['Deliverables directory']}/notes.md"
        return calls(call("write_file", path=path, content=_brief(request)["Task details"]))

    held = gate.hold(finish())

    def end(request: dict[str, Any]) -> Any:
        # Only A's sub-agent 1 waits for the gate: B's, in a folder of its own, ends
        # at once (both are sub-agent 1 to the router).
        return held(request) if _brief(request)["Task details"] == "A" else finish()

    router = Router(main=["unused"], subs={1: [write, end], 3: [finish()]})
    with FakeOpenAIServer(router) as server:
        a, b = Conversation(), Conversation()
        first, second = _manager(server, workspace, a), _manager(server, workspace, b)
        try:
            alone = first.create(agent_id=1, summary="s", task="A", run_in_background=True)
            assert alone["deliverables_dir"] == "sub_agent_results/agent_1", alone  # the seed's
            notes = workspace / "sub_agent_results/agent_1/notes.md"
            assert wait_until(notes.is_file, 60)
            named = second.create(
                agent_id=3, summary="s", task="B", deliverables_dir="sub_agent_results/agent_1"
            )
            assert named == {"success": False, "agent_id": 3, "error": named["error"]}, named
            assert "in use by a running sub-agent of another Agent" in named["error"]
            # Named by its record (sub-conversation) or its OS lock (conversation).
            names = (f"sub-conversation {alone['sub_conversation_id']})", f"conversation {a.id},")
            assert any(n in named["error"] for n in names), named
            moved = second.create(agent_id=1, summary="s", task="B")
            assert moved["status"] == "completed", moved
            assert moved["deliverables_dir"] == own_folder(b.id, 1)
            assert (workspace / moved["deliverables_dir"] / "notes.md").read_text() == "B"
            assert notes.read_text() == "A"  # the holder's file, not moved nor overwritten
            assert not (workspace / "sub_agent_results/agent_1/.subagent/earlier").exists()
            gate.event.set()
            assert first.agents[1].done.wait(60)
            assert (read_record(workspace / "sub_agent_results/agent_1") or {})["task"] == "A"
        finally:
            gate.event.set()
            first.shutdown()
            second.shutdown()


def test_a_default_folder_whose_record_says_running_elsewhere_gives_way(workspace: Path) -> None:
    """Where no OS lock names the holder (a file system without locks), the record does:
    a default folder whose record says running, with a live worker of another
    process, gives way to the conversation's own folder; the record is left alone."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    folder = workspace / "sub_agent_results/agent_1"
    try:
        record = {"status": "running", "worker_pid": other.pid, "sub_conversation_id": "conv_x"}
        write_record(folder, record, root=workspace)
        with FakeOpenAIServer(Router(main=["unused"], subs={1: [finish()]})) as server:
            conversation = Conversation()
            manager = _manager(server, workspace, conversation)
            try:
                answer = manager.create(agent_id=1, summary="s", task="t")
            finally:
                manager.shutdown()
        assert answer["status"] == "completed", answer
        assert answer["deliverables_dir"] == own_folder(conversation.id, 1)
        assert read_record(folder) == record  # neither archived nor swept
        assert sorted(p.name for p in folder.iterdir()) == [".subagent"]
    finally:
        other.kill()
        other.wait()
