"""The sub-agent record written as a journal with periodic compaction (issue 27 part 2,
issue 20 item 10): whatever a reader looks at is the record as last saved, valid JSON
in the seed's shape, with the archive of what was shrunk; the record's head is found
without parsing the transcript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkit.subagent.journal import JOURNAL_FILE
from agentkit.subagent.record import (
    load_record,
)

# ------------------------------------------------ a real sub-agent, read live
READER = r"""
import json, sys
from pathlib import Path
from agentkit.subagent.record import load_record

path, stop = Path(sys.argv[1]), Path(sys.argv[2])
seed = ("agent_id", "summary", "created_at", "completed_at", "messages", "stats")
counters = ("runtime_seconds", "files_read", "searches", "web_pages", "commands", "token_usage")
reads, problems, lengths = 0, [], set()
while not stop.exists():
    try:
        text = path.read_text()
    except FileNotFoundError:
        continue
    try:
        data = json.loads(text)  # the file alone, as any reader opens it
        missing = [k for k in seed if k not in data] + [k for k in counters if k not in data["stats"]]
        if missing or not isinstance(data["messages"], list):
            problems.append(missing)
        lengths.add(len(load_record(path)["messages"]))
        reads += 1
    except Exception as exc:
        problems.append(repr(exc)[:300])
print(json.dumps({"reads": reads, "problems": problems[:5], "lengths": len(lengths)}))
"""


class Turns:
    """A sub-agent model by request count: ``limit`` read_file turns, then finish_task."""

    def __init__(self, limit: int, latency: float = 0.0) -> None:
        self.limit, self.latency, self.served = limit, latency, 0

    def __call__(self, request: dict[str, Any]) -> Any:
        from subagent_helpers import call, calls, finish

        from agentkit.testing import Reply

        self.served += 1
        if self.served > self.limit:
            return Reply(**finish("read it all"), latency=self.latency)
        return Reply(**calls(call("read_file", path="page.txt")), latency=self.latency)


def _assistants(record: dict[str, Any]) -> int:
    """The model's answers the record holds: in its messages, and those the context
    window compacted away (archived whole: ``{"index", **message}``; an archived
    shrink of a call's arguments carries ``tool_call_id`` and is no extra answer)."""
    kept = sum(1 for m in record["messages"] if m.get("role") == "assistant")
    compacted = sum(
        1 for a in record["archive"] if a.get("role") == "assistant" and "tool_call_id" not in a
    )
    return kept + compacted


@pytest.mark.slow
def test_a_reader_process_always_sees_the_seeds_shape_and_the_end_is_complete(
    workspace: Path,
) -> None:
    import os
    import subprocess
    import sys

    from subagent_helpers import Router, scripted_settings

    from agentkit.subagent.manager import SubAgentManager
    from agentkit.testing import FakeOpenAIServer

    (workspace / "page.txt").write_text("".join(f"{i:05d} " + "w" * 57 + "\n" for i in range(64)))
    model = Turns(150)
    stop = workspace / "stop"
    path = workspace / "sub_agent_results/agent_1/.subagent/conversations.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(path), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        with FakeOpenAIServer(Router(main=["unused"], subs={1: [model]})) as server:
            settings = scripted_settings(
                server, "en", context_window=40_000, subagent_max_turns=200
            )
            manager = SubAgentManager(workspace=workspace, settings=settings)
            result = manager.create(agent_id=1, summary="reads", task="t", timeout_seconds=600)
            manager.shutdown()
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    seen_by_reader = json.loads(out)
    assert result["status"] == "completed"
    assert seen_by_reader["problems"] == [] and seen_by_reader["reads"] > 0, seen_by_reader
    assert seen_by_reader["lengths"] > 10, seen_by_reader  # it saw the transcript grow
    record = json.loads(path.read_text())  # complete in the file alone: no journal left
    assert not path.with_name(JOURNAL_FILE).exists()
    assert _assistants(record) == model.served
    tools = [m for m in record["messages"] if m.get("role") == "tool"]
    assert len(tools) == model.served
    shrunk = [
        i
        for i, m in enumerate(record["messages"])
        if "chars of this old tool output" in str(m.get("content"))
    ]
    assert shrunk and {a["index"] for a in record["archive"]} >= set(shrunk)


CHILD = r"""
import sys
import time
from pathlib import Path
from agentkit.settings import Settings
from agentkit.subagent.manager import SubAgentManager

settings = Settings(model="fake-model", base_url=sys.argv[1], api_key="k", language="en",
                    max_retries=0, subagent_timeout_min=1, subagent_max_turns=10000)
manager = SubAgentManager(workspace=Path(sys.argv[2]), settings=settings)
manager.create(agent_id=1, summary="long", task="t", run_in_background=True,
               timeout_seconds=int(sys.argv[3]))
for line in sys.stdin:
    if line.strip() == "terminate":
        manager.terminate(1)
        print("terminated", flush=True)
    elif line.strip() == "expire":  # the timeout clock jumps past the sub-agent's timeout
        manager.agents[1].clock = lambda: time.monotonic() + int(sys.argv[3])
        print("expired", flush=True)
manager.agents[1].done.wait(60)
manager.shutdown()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "end", ["timeout", "terminate", "kill-worker", "kill-parent", "kill-group"]
)
def test_the_record_is_complete_however_the_worker_ends(workspace: Path, end: str) -> None:
    """Finish is tested above; every other end leaves the record, in its file alone,
    holding every turn the worker saved (the parent, the worker's own parent-gone
    path or the sweep completes it from the journal)."""
    import os
    import signal
    import subprocess
    import sys

    from subagent_helpers import Router, wait_until

    from agentkit.subagent.sweep import sweep_record
    from agentkit.testing import FakeOpenAIServer

    (workspace / "page.txt").write_text("".join(f"{i:05d} " + "w" * 57 + "\n" for i in range(64)))
    model = Turns(10**6, latency=0.01)
    path = workspace / "sub_agent_results/agent_1/.subagent/conversations.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with FakeOpenAIServer(Router(main=["unused"], subs={1: [model]})) as server:
        # The timeout is reached by moving the sub-agent's timeout clock on ("expire",
        # SubAgent.clock) once the worker is past the floor, not by waiting it out.
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, server.base_url, str(workspace), "600"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            assert wait_until(lambda: path.exists() and len(load_record(path)["messages"]) > 40, 60)
            assert path.with_name(JOURNAL_FILE).exists()  # past the floor: turns are journaled
            worker = load_record(path)["worker_pid"]
            if end in ("terminate", "timeout"):
                order = "terminate" if end == "terminate" else "expire"
                child.stdin.write(f"{order}\n")
                child.stdin.flush()
                assert child.stdout.readline().strip() == f"{order}d"
            elif end == "kill-worker":
                os.kill(worker, signal.SIGKILL)
            elif end == "kill-parent":
                os.kill(child.pid, signal.SIGKILL)
            elif end == "kill-group":
                os.killpg(child.pid, signal.SIGKILL)
            # At a timeout the parent's word is awaited: the SIGTERM that follows its
            # Terminate may reach the worker first, whose own account of being stopped
            # (ORPHANED_ERROR) the living parent then replaces (record.may_replace).
            # The record is written final first, its journal dropped next: both are
            # awaited, or the parent killed below may die between the two.
            ended = {"timeout": ("timeout",), "kill-group": ("running",)}.get(end)
            journal = path.with_name(JOURNAL_FILE)
            assert wait_until(
                lambda: (
                    (
                        (json.loads(path.read_text())["status"] in ended)
                        if ended
                        else json.loads(path.read_text())["status"] != "running"
                    )
                    and (end == "kill-group" or not journal.exists())
                ),
                60,
            )
            assert wait_until(lambda: not psutil_alive(worker), 30)
            served = model.served
            if end == "kill-group":
                assert json.loads(path.read_text())["status"] == "running"
                sweep_record(path.parent.parent, workspace)
        finally:
            child.stdin.close()
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    record = json.loads(path.read_text())
    status = {"timeout": "timeout", "kill-worker": "failed"}.get(end, "terminated")
    assert record["status"] == status and record["completed_at"]
    assert not path.with_name(JOURNAL_FILE).exists()
    # Every answered turn but at most the one in flight was saved, and is in the file.
    assert served - 1 <= _assistants(record) <= served, (served, _assistants(record))


def psutil_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
