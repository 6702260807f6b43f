"""Deliverables folders claimed across processes (issue 20 item 14): two processes on one
workspace started together never both run a sub-agent in one folder (nor in folders
nested in each other); the second is refused in the seed's JSON naming the owner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, finish, wait_until, who

from agentkit.subagent.record import read_record
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys
from pathlib import Path
from agentkit.conversation import Conversation
from agentkit.settings import Settings
from agentkit.subagent.manager import SubAgentManager

settings = Settings(model="fake-model", base_url=sys.argv[1], api_key="k", language="en",
                    max_retries=0, subagent_timeout_min=1)
conversation = Conversation()
manager = SubAgentManager(workspace=Path(sys.argv[2]), settings=settings, conversation=conversation)
print(json.dumps({"conversation_id": conversation.id}), flush=True)
for line in sys.stdin:
    agent_id, folder = line.split()
    result = manager.create(agent_id=int(agent_id), summary="claims", task="t",
                            deliverables_dir=folder, run_in_background=True)
    print(json.dumps(result), flush=True)
manager.shutdown()
"""


class Child:
    """One agentkit process with its own conversation, creating sub-agents on demand."""

    def __init__(self, base_url: str, workspace: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, base_url, str(workspace)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.conversation_id = json.loads(self.stdout.readline())["conversation_id"]

    def ask(self, agent_id: int, folder: str) -> None:
        self.stdin.write(f"{agent_id} {folder}\n")
        self.stdin.flush()

    def answer(self) -> dict[str, Any]:
        return dict(json.loads(self.stdout.readline()))

    def close(self) -> None:
        self.stdin.close()
        try:
            self.process.wait(60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)


def test_two_processes_started_together_never_share_a_deliverables_folder(workspace: Path) -> None:
    """Regression: two processes on one workspace both ran sub-agent 1 in
    sub_agent_results/agent_1 (12 of 12 when started together): one record lost,
    their files mixed."""
    gates: dict[int, threading.Event] = {}

    def held(request: dict[str, Any]) -> Any:
        gates[who(request) or 0].wait(60)  # both creates answer while it runs
        return finish("claimed and done")

    router = Router(main=["unused"], subs={i: [held] for i in range(1, 100)})
    with FakeOpenAIServer(router) as server:
        children = [Child(server.base_url, workspace) for _ in range(2)]
        by_pid = {c.process.pid: c for c in children}
        try:
            for round_ in range(1, 13):
                gates[round_] = threading.Event()
                folder = f"sub_agent_results/agent_{round_}"
                order = children if round_ % 2 else children[::-1]
                for child in order:  # together: neither waits for the other's answer
                    child.ask(round_, folder)
                answers = [c.answer() for c in children]
                won = [a for a in answers if a["success"]]
                assert len(won) == 1, (round_, answers)
                (lost,) = [a for a in answers if not a["success"]]
                winner = children[answers.index(won[0])]
                assert lost == {"success": False, "agent_id": round_, "error": lost["error"]}
                assert f"conversation {winner.conversation_id}" in lost["error"], lost
                assert f"process {winner.process.pid}" in lost["error"], lost
                assert f"sub-agent {round_} " in lost["error"], lost
                gates[round_].set()
                deliverables = workspace / folder
                assert wait_until(
                    lambda: (read_record(deliverables) or {}).get("status") == "completed",  # noqa: B023
                    60,
                )
                assert wait_until(lambda: not (deliverables / ".subagent/owner.json").exists(), 30)  # noqa: B023
                record = read_record(deliverables)
                assert record is not None
                assert record["sub_conversation_id"] == won[0]["sub_conversation_id"]
                assert sorted(p.name for p in (deliverables / ".subagent").iterdir()) == [
                    "conversations.json"
                ]  # one record, no other agent's, and the claim's owner file gone
            # Nested either way is refused across processes too; a released folder is free.
            gates[50] = threading.Event()
            gates[51] = threading.Event()
            children[0].ask(50, "shared/inner")
            assert children[0].answer()["success"]
            children[1].ask(51, "shared")
            around = children[1].answer()
            assert not around["success"] and "inside or around" in around["error"], around
            assert f"process {children[0].process.pid}" in around["error"]
            gates[50].set()
            assert wait_until(
                lambda: (
                    (read_record(workspace / "shared/inner") or {}).get("status") == "completed"
                ),
                60,
            )
            assert wait_until(
                lambda: not (workspace / "shared/inner/.subagent/owner.json").exists(), 30
            )
            gates[51].set()
            children[1].ask(51, "shared")
            assert children[1].answer()["success"]
        finally:
            for gate in gates.values():
                gate.set()
            for child in by_pid.values():
                child.close()


HOLDER = r"""
import sys
from pathlib import Path
from agentkit.subagent.folder_lock import FolderOwner, hold_folder

root = Path(sys.argv[1])
hold = hold_folder(root, root / sys.argv[2], FolderOwner.here("conv_holder", 7))
print("held", flush=True)
sys.stdin.read()  # until the test closes it, or kills this process
"""


def _holder(workspace: Path, folder: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workspace), folder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_killed_holder_frees_its_folder_and_a_planted_owner_file_blocks_nothing(
    workspace: Path,
) -> None:
    """The claim dies with its holder (SIGKILL: the kernel drops the lock; the stale
    owner file names no one); a FIFO or link a command put where the owner file goes
    neither hangs a refusal nor is followed."""
    import signal

    from agentkit.subagent.folder_lock import FolderBusy, FolderOwner, hold_folder

    me = FolderOwner.here("conv_me", 3)
    holder = _holder(workspace, "out/a")
    try:
        with pytest.raises(FolderBusy) as busy:
            hold_folder(workspace, workspace / "out/a", me)
        assert busy.value.owner is not None and busy.value.owner.pid == holder.pid
        assert busy.value.owner.conversation_id == "conv_holder" and not busy.value.nested
        with pytest.raises(FolderBusy) as around:
            hold_folder(workspace, workspace / "out", me)
        assert around.value.nested and around.value.owner is not None
        assert around.value.owner.pid == holder.pid
        # A sub-agent's command replaces the owner file by a FIFO: refused, unnamed, at once.
        owner_file = workspace / "out/a/.subagent/owner.json"
        owner_file.unlink()
        os.mkfifo(owner_file)
        with pytest.raises(FolderBusy) as planted:
            hold_folder(workspace, workspace / "out/a", me)
        assert planted.value.owner is None
        owner_file.unlink()
        owner_file.symlink_to(workspace / "elsewhere.json")
        (workspace / "elsewhere.json").write_text('{"pid": 1, "agent_id": 1}')
        with pytest.raises(FolderBusy) as linked:
            hold_folder(workspace, workspace / "out/a", me)
        assert linked.value.owner is None  # the link is not followed
        owner_file.unlink()
        (workspace / "out/a/.subagent/owner.json").write_text(
            json.dumps({"pid": holder.pid, "started": 0, "conversation_id": "c", "agent_id": 7})
        )
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
    hold = hold_folder(workspace, workspace / "out/a", me)  # free at once; the stale file replaced
    try:
        assert json.loads(owner_file.read_text())["conversation_id"] == "conv_me"
    finally:
        hold.release()
    assert not owner_file.exists()
    hold_folder(workspace, workspace / "out", me).release()  # and the folder around it too


def test_the_folder_stays_held_until_the_record_is_final(workspace: Path) -> None:
    """Regression: the folder's OS lock was dropped with the in-process claims, before
    the parent wrote the final record of a terminated agent; another process could
    then take the folder, archive or sweep that record, and have its own new record
    overwritten by the late final write. Here the record folder's lock is held (as a
    slow disk would), so the parent's final write waits: the folder must stay held."""
    import fcntl

    from subagent_helpers import Gate, scripted_settings

    from agentkit.subagent.folder_lock import FolderBusy, FolderOwner, hold_folder
    from agentkit.subagent.manager import SubAgentManager

    gate = Gate()
    router = Router(main=["unused"], subs={1: [gate.hold(finish())]})
    folder = workspace / "held"
    me = FolderOwner.here("conv_other", 9)
    with FakeOpenAIServer(router) as server:
        manager = SubAgentManager(workspace=workspace, settings=scripted_settings(server, "en"))
        try:
            answer = manager.create(
                agent_id=1, summary="s", task="t", deliverables_dir="held", run_in_background=True
            )
            assert answer["success"], answer
            assert wait_until(lambda: read_record(folder) is not None, 60)
            record_folder = os.open(folder / ".subagent", os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(record_folder, fcntl.LOCK_EX)  # the parent's final write waits
            ending = threading.Thread(target=manager.terminate, args=(1,))
            try:
                ending.start()
                assert wait_until(lambda: manager.agents[1].status != "running", 60)
                assert ending.is_alive()  # still writing the final record
                with pytest.raises(FolderBusy) as busy:
                    hold_folder(workspace, folder, me)
                assert busy.value.owner is not None and busy.value.owner.pid == os.getpid()
            finally:
                os.close(record_folder)  # drops the lock
                ending.join(60)
            assert (read_record(folder) or {}).get("status") == "terminated"
            hold_folder(workspace, folder, me).release()  # free once the record is final
        finally:
            gate.event.set()
            manager.shutdown()


def test_a_continued_run_holds_its_folder_as_a_create_does(workspace: Path) -> None:
    """Regression (the merge with issue 27 part 1, whose starts leave the manager lock):
    the folder's OS lock is taken when the manager reserves an agent, so a
    continue_sub_agent run is held to it as a create is: refused, taking nothing,
    while another process holds its folder; holding it, named, while it runs; and
    letting it go once its record is final."""
    from subagent_helpers import Gate, scripted_settings

    from agentkit.conversation import Conversation
    from agentkit.subagent.continuation import continue_subagent
    from agentkit.subagent.folder_lock import FolderBusy, FolderOwner, hold_folder
    from agentkit.subagent.manager import SubAgentManager

    gate = Gate()
    router = Router(main=["unused"], subs={1: [finish(), gate.hold(finish("Again."))]})
    folder = workspace / "again"
    me = FolderOwner.here("conv_other", 9)
    conversation = Conversation()
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(server, "en", subagent_control=True)
        manager = SubAgentManager(workspace=workspace, settings=settings, conversation=conversation)
        try:
            first = manager.create(agent_id=1, summary="s", task="t", deliverables_dir="again")
            assert first["status"] == "completed", first
            ended = manager.agents[1]
            holder = _holder(workspace, "again")
            try:
                refused = continue_subagent(manager, 1, "once more", run_in_background=True)
            finally:
                holder.kill()
                holder.wait(30)
            assert not refused["success"], refused
            assert f"conversation conv_holder, process {holder.pid}" in refused["error"]
            assert manager.agents[1] is ended and ended.status == "completed"  # nothing taken
            assert manager.claims.folder_overlap(folder) is None and not manager.claims.holds
            again = continue_subagent(manager, 1, "once more", run_in_background=True)
            assert again["success"] and again["status"] == "running", again
            with pytest.raises(FolderBusy) as busy:
                hold_folder(workspace, folder, me)
            assert busy.value.owner is not None and busy.value.owner.pid == os.getpid()
            assert busy.value.owner.conversation_id == conversation.id
            gate.event.set()
            assert manager.agents[1].done.wait(60)
            assert (read_record(folder) or {}).get("runs") == 2
            hold_folder(workspace, folder, me).release()  # free once the record is final
        finally:
            gate.event.set()
            manager.shutdown()


class _NoWorkers:
    """A launcher that cannot start a worker (a custom launcher's failure)."""

    def start(self, spec: Any) -> Any:
        raise RuntimeError("no workers on this host")


def test_a_start_that_fails_or_is_refused_keeps_no_folder_lock(workspace: Path) -> None:
    """Every way a start ends before its worker runs lets the folder's OS lock go: a
    launcher that fails (the agent fails with the reason, the folder is free for
    another process at once), and a create refused because another process holds
    the folder (nothing taken: its id and the folder stay free in this process)."""
    from subagent_helpers import scripted_settings

    from agentkit.subagent.folder_lock import FolderOwner, hold_folder
    from agentkit.subagent.manager import SubAgentManager

    me = FolderOwner.here("conv_other", 9)
    with FakeOpenAIServer(Router(main=["unused"], subs={1: [finish()]})) as server:
        settings = scripted_settings(server, "en")
        broken = SubAgentManager(workspace=workspace, settings=settings, launcher=_NoWorkers())
        try:
            failed = broken.create(agent_id=1, summary="s", task="t", deliverables_dir="out/f")
        finally:
            broken.shutdown()
        assert failed["status"] == "failed" and "no workers on this host" in str(failed), failed
        assert not broken.claims.holds
        hold_folder(workspace, workspace / "out/f", me).release()  # free at once
        manager = SubAgentManager(workspace=workspace, settings=settings)
        try:
            holder = _holder(workspace, "out/busy")
            try:
                refused = manager.create(agent_id=1, summary="s", task="t", deliverables_dir="out")
            finally:
                holder.kill()
                holder.wait(30)
            assert not refused["success"] and f"process {holder.pid}" in refused["error"], refused
            assert 1 not in manager.agents and not manager.claims.holds  # nothing taken
            done = manager.create(agent_id=1, summary="s", task="t", deliverables_dir="out/g")
            assert done["status"] == "completed", done
        finally:
            manager.shutdown()
        hold_folder(workspace, workspace / "out", me).release()  # out/g's lock went too
