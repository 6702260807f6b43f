"""Sub-agent records under hostile endings (hardening issue items 10, 6, 9, 2):
a final record stays final after the main process exits, a full disk gives a
clear failure and keeps the transcript, finished sub-agents hold no file
descriptors, and records a killed process group left running are swept."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from subprocess import PIPE
from typing import Any

import psutil
import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings, wait_until, who

from agentkit import Agent, Settings
from agentkit.process.tree import processes_with_mark
from agentkit.subagent.sweep import KILLED_ERROR
from agentkit.testing import FakeOpenAIServer
from agentkit.tools import base_tools
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry

pytestmark = pytest.mark.slow
RECORD = "sub_agent_results/agent_1/.subagent/conversations.json"
ROOT = Path(__file__).resolve().parents[2]


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    """Settings for a model played by ``server`` (see subagent_helpers.scripted_settings)."""
    return scripted_settings(server, "en", **overrides)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def live_marked(mark: str) -> list[psutil.Process]:
    return [p for p in processes_with_mark(mark) if alive(p.pid)]


# ------------------------------------------------------------------ item 10
# One launcher imports what a run's main process imports (openai above all, ~1.2 s
# of CPU) once and forks each run's main process from itself: a run is still its own
# main process (its own Agent, forkserver, worker and workspace) that ends the
# ordinary way (sys.exit: atexit handlers, interpreter finalisation). Each run's
# stdout and stderr go to run<N>.out and run<N>.err beside the workspaces.
EXIT_SCRIPT = r"""
import os
import sys
import threading

import openai
import agentkit.chat.assembly
import agentkit.llm.client
import agentkit.subagent.launchers.local
import agentkit.subagent.manager
from agentkit import Agent, Settings


def run(base_url, folder, number):
    for fd, name in ((1, "out"), (2, "err")):
        os.dup2(os.open(f"{folder}/run{number}.{name}", os.O_WRONLY | os.O_CREAT, 0o644), fd)
    settings = Settings(model="fake-model", base_url=base_url, api_key="k", language="en")
    agent = Agent(workspace=f"{folder}/ws{number}", settings=settings)
    result = agent.manager.create(agent_id=1, summary="quick", task="t")
    print(result["status"], flush=True)
    agent.manager.shutdown()
    sys.exit(0)  # this run's main process ends here, as a script's would


base_url, folder, runs, at_once = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
assert threading.active_count() == 1, threading.enumerate()  # no thread to fork beside
codes = []
for first in range(0, runs, at_once):
    batch = []
    for number in range(first, min(first + at_once, runs)):
        pid = os.fork()
        if pid == 0:
            run(base_url, folder, number)
        batch.append(pid)
    codes += [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in batch]
print(codes, flush=True)
"""


RUNS, AT_ONCE = 15, 3  # the race hit ~1/3 of runs; the runs are independent processes


@pytest.mark.timeout(360)  # fifteen runs of a main process each: slow on a loaded CI
def test_a_completed_record_stays_completed_after_the_main_process_exits(tmp_path: Path) -> None:
    """Regression: the worker's parent-gone handler stayed armed during its last
    clean-up and rewrote a completed record as terminated in ~1/3 of runs. Fifteen
    runs, three at a time (each its own main process, worker and workspace: most of a
    run is waiting for its processes to start)."""
    router = Router(main=["unused"], subs={1: [finish("all done")]})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for run in range(RUNS):
        (tmp_path / f"ws{run}").mkdir()
    with FakeOpenAIServer(router) as server:
        command = [sys.executable, "-c", EXIT_SCRIPT, server.base_url, str(tmp_path)]
        launcher = subprocess.Popen(
            [*command, str(RUNS), str(AT_ONCE)], stdout=PIPE, stderr=PIPE, text=True, env=env
        )
        try:
            stdout, stderr = launcher.communicate(timeout=300)
        finally:  # none outlives the test
            launcher.kill()
            launcher.wait()
    assert stdout.strip() == str([0] * RUNS), (stdout, stderr)
    for run in range(RUNS):
        said = (tmp_path / f"run{run}.out").read_text()
        assert said.strip() == "completed", (run, (tmp_path / f"run{run}.err").read_text())
        path = tmp_path / f"ws{run}" / RECORD
        worker = json.loads(path.read_text())["worker_pid"]
        assert wait_until(lambda: not alive(worker), timeout=20)  # noqa: B023
        record = json.loads(path.read_text())
        assert (run, record["status"], record["error"]) == (run, "completed", None)


def test_the_living_parent_replaces_a_workers_account_of_losing_it(tmp_path: Path) -> None:
    from agentkit.subagent.contract import WorkerSpec
    from agentkit.subagent.finalise import finalise_record
    from agentkit.subagent.record import ORPHANED_ERROR, Ending, read_record, write_record

    folder = tmp_path / "d"
    spec = WorkerSpec(1, "s", "t", 60, "d", str(folder), str(tmp_path), "s1", {}, "m", "now")
    said = [{"role": "user", "content": "t"}]
    orphan = {"sub_conversation_id": "s1", "status": "terminated", "error": ORPHANED_ERROR}
    assert write_record(
        folder, {**orphan, "messages": said}, root=tmp_path
    )  # the worker, relay gone
    # The parent lived after all (its relay died under the worker): its verdict wins,
    # and the worker's messages stay.
    record, where = finalise_record(spec, "failed", {}, {}, Ending("node died", "node died"))
    assert where is not None and read_record(folder) == record
    assert record["status"] == "failed" and record["messages"] == said
    # Any other final record, and the parent's own, stay as they are.
    assert write_record(folder, {**orphan, "messages": []}, root=tmp_path) is False
    for sub_id, status, error in (("s2", "completed", None), ("s3", "terminated", "by user")):
        done: dict[str, Any] = {
            "sub_conversation_id": sub_id,
            "status": status,
            "error": error,
            "messages": [],
        }
        assert write_record(folder, done, root=tmp_path)
        later = dataclasses.replace(spec, sub_conversation_id=sub_id)
        finalise_record(later, "failed", {}, {}, Ending("late", "late"))
        assert read_record(folder) == done


# ------------------------------------------------------------------- item 9
def thread_names() -> set[str]:
    return {thread.name for thread in threading.enumerate()}


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_finished_sub_agents_hold_no_file_descriptors(workspace: Path) -> None:
    """Regression: each finished sub-agent kept its pipe end and process sentinel open."""
    router = Router(main=["unused"], subs={i: [finish()] for i in range(1, 8)})
    with FakeOpenAIServer(router) as server:
        agent = Agent(workspace=workspace, settings=settings_for(server))
        manager = agent.manager
        assert manager.create(agent_id=1, summary="warm up", task="t")["status"] == "completed"
        handle = manager.agents[1].handle
        assert handle is not None and wait_until(lambda: handle.exit_code is not None)
        # The first monitor's clean-up is over once its thread has ended.
        assert wait_until(lambda: "agentkit-monitor-1" not in thread_names())
        before = fd_count()
        for agent_id in range(2, 7):
            result = manager.create(agent_id=agent_id, summary="s", task="t")
            assert result["status"] == "completed"
        settled = wait_until(lambda: fd_count() <= before + 2, timeout=15)
        after = fd_count()
        agent.close()
    assert settled, f"{after - before} more file descriptors after 5 sub-agents"


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="mounting a small tmpfs (a real full disk) needs root",
)


class FullDisk:
    """A 256 KiB tmpfs mounted at ``folder``; ``fill()`` uses up every byte."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __enter__(self) -> FullDisk:
        self.folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(self.folder)], check=True
        )
        return self

    def fill(self) -> None:
        with (
            open(self.folder / "filler.bin", "wb", buffering=0) as handle,
            pytest.raises(OSError) as info,
        ):
            while True:
                handle.write(b"\0" * 4096)
        assert info.value.errno == errno.ENOSPC

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["umount", "-l", str(self.folder)], check=False)


@needs_root
def test_write_file_on_a_full_disk_says_disk_full_and_keeps_the_old_file(tmp_path: Path) -> None:
    workspace = tmp_path / "full"
    with FullDisk(workspace) as disk:
        (workspace / "keep.txt").write_text("old content\n")
        ctx = ToolContext(
            workspace=workspace.resolve(), settings=Settings(model="m", api_key="k", language="en")
        )
        registry = ToolRegistry(base_tools())
        assert registry.execute("read_file", {"path": "keep.txt"}, ctx).ok
        disk.fill()
        result = registry.execute("write_file", {"path": "keep.txt", "content": "new\n" * 50}, ctx)
        assert (result.ok, result.error_code) == (False, "disk_full")
        assert (workspace / "keep.txt").read_text() == "old content\n"
        assert not [p for p in os.listdir(workspace) if p.endswith(".tmp")]


@needs_root
def test_a_full_disk_fails_the_sub_agent_and_keeps_its_transcript(workspace: Path) -> None:
    """Regression: the record stayed at two messages, running, and the main agent
    was told the sub-agent completed."""
    fill = "cat /dev/zero > sub_agent_results/agent_1/filler.bin; echo filled"
    router = Router(
        main=["unused"],
        subs={1: [calls(call("run_command", command=fill)), finish("report written")]},
    )
    with FakeOpenAIServer(router) as server, FullDisk(workspace / "sub_agent_results/agent_1"):
        agent = Agent(workspace=workspace, settings=settings_for(server))
        result = agent.manager.create(agent_id=1, summary="fills the disk", task="t")
        row = agent.manager.records()[0]
        agent.close()
    assert result["success"] is False and result["status"] == "failed"
    assert "disk_full" in result["message"] and "No space left" in result["message"]
    # The parent wrote the worker's final record where it could.
    assert row["transcript"] == f".agentkit/subagent-records/{result['sub_conversation_id']}.json"
    record = json.loads((workspace / row["transcript"]).read_text())
    assert record["status"] == "failed" and "disk_full" in record["error"]
    assert record["completed_at"]
    called = [c["function"]["name"] for m in record["messages"] for c in m.get("tool_calls") or []]
    assert called == ["run_command", "finish_task"]


# ------------------------------------------------------------------- item 2
RUN_SCRIPT = r"""
import sys
from agentkit import Agent, Settings
settings = Settings(model="fake-model", base_url=sys.argv[1], api_key="k", language="en")
Agent(workspace=sys.argv[2], settings=settings).run("start")
"""


def test_records_of_a_killed_process_group_are_swept_at_the_next_start(workspace: Path) -> None:
    """Regression: SIGKILL to the whole group left the record at running for ever.
    (The commands the sub-agent started die with it by construction: their pid
    namespace ends with the worker; the sweep still kills any marked leftover.)"""
    create = call("create_sub_agent", agent_id=1, summary="long", task="t", run_in_background=True)
    router = Router(
        main=[calls(create), "waiting for the sub-agent", "noted"],
        subs={1: [calls(call("run_command", command="sleep 1000"))]},
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with FakeOpenAIServer(router) as server:
        main = subprocess.Popen(
            [sys.executable, "-c", RUN_SCRIPT, server.base_url, str(workspace)],
            start_new_session=True,
            env=env,
        )
        try:
            path = workspace / RECORD
            assert wait_until(lambda: path.exists() and "sleep 1000" in path.read_text(), 60)
            mark = json.loads(path.read_text())["process_mark"]
            assert wait_until(lambda: len(live_marked(mark)) >= 1)  # the command
            conversations = workspace / ".agentkit/conversations"
            assert wait_until(
                lambda: any(
                    json.loads(f.read_text()).get("state") == "waiting_for_subagents"
                    for f in conversations.glob("*.json")
                )
            )
            os.killpg(main.pid, signal.SIGKILL)
            main.wait(10)
            worker = json.loads(path.read_text())["worker_pid"]
            assert wait_until(lambda: not alive(worker), 10)
            assert json.loads(path.read_text())["status"] == "running"
            assert wait_until(lambda: not live_marked(mark), 10), "a command outlived its owner"
        finally:
            if main.poll() is None:
                os.killpg(main.pid, signal.SIGKILL)
                main.wait(10)
        conversation_id = next(conversations.glob("*.json")).stem
        try:
            with Agent(
                workspace=workspace, settings=settings_for(server), conversation_id=conversation_id
            ) as agent:
                record = json.loads(path.read_text())
                assert wait_until(lambda: not live_marked(mark), 10)
                result = agent.run("go on")
        finally:  # a failing run must not leave the command behind
            for process in live_marked(mark):
                process.kill()
        sent = [r for r in server.requests if who(r) is None][-1]["messages"]
    assert record["status"] == "terminated" and record["error"] == KILLED_ERROR
    assert record["completed_at"]
    assert result.status == "done" and result.final_text == "noted"
    notes = [m["content"] for m in sent if m["role"] == "system"]
    assert any(KILLED_ERROR in n and "1 (long)" in n for n in notes)
