"""A sub-agent's final record on a real full disk (hardening issue 31, item 8): its
end reaches disk once it can (a journal line at once, the whole record at the next
save when there is room), and a record left running under a row that ended is
repaired at the next start. Nothing the sub-agent saved is dropped."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings

from agentkit import Agent
from agentkit.subagent.record import read_record
from agentkit.subagent.sweep import UNWRITTEN_ERROR
from agentkit.testing import FakeOpenAIServer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0,
        reason="mounting a small tmpfs (a real full disk) needs root",
    ),
]
RECORD = "sub_agent_results/agent_1/.subagent/conversations.json"
FILL = "cat /dev/zero > sub_agent_results/agent_1/filler.bin; echo filled"


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``folder`` for the block (a real full disk)."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Use up every byte of the filesystem holding ``folder``."""
    with open(folder / "filler.bin", "wb", buffering=0) as handle, pytest.raises(OSError) as info:
        while True:
            handle.write(b"\0" * 4096)
    assert info.value.errno == errno.ENOSPC


def raw(workspace: Path) -> dict[str, Any]:
    """The record file as it is on disk (its journal not applied)."""
    return json.loads((workspace / RECORD).read_text())


def called(record: dict[str, Any]) -> list[str]:
    return [c["function"]["name"] for m in record["messages"] for c in m.get("tool_calls") or []]


def test_a_record_too_big_to_write_again_still_ends_on_a_full_disk(workspace: Path) -> None:
    """Regression: a 2 MiB workspace, a sub-agent writing a 1.5 MB file: its record
    (holding the file's text) could not be written a second time, and stayed
    running for good, also after the conversation ran again."""
    big = "x" * 1_500_000
    create = call("create_sub_agent", agent_id=1, summary="writes big", task="t")
    router = Router(
        main=[calls(create), "done", "again"],
        subs={1: [calls(call("write_file", path="big.txt", content=big)), finish("wrote")]},
    )
    with FakeOpenAIServer(router) as server, tmpfs(workspace, "2m"):
        settings = scripted_settings(server, "en")
        with Agent(workspace=workspace, settings=settings) as agent:
            conversation_id = agent.run("go").conversation_id
        saved = raw(workspace)
        record = read_record(workspace / "sub_agent_results/agent_1")
        assert record is not None
        assert record["status"] == "failed" and "disk_full" in record["error"]
        assert record["completed_at"]
        assert called(saved) == ["write_file"] and called(record)[0] == "write_file"
        with Agent(
            workspace=workspace, settings=settings, conversation_id=conversation_id
        ) as agent:
            agent.run("again")
        again = read_record(workspace / "sub_agent_results/agent_1")
    assert again is not None and again["status"] == "failed"
    assert again["messages"] == record["messages"]


def test_a_final_record_that_did_not_fit_is_written_whole_at_the_next_save(
    workspace: Path,
) -> None:
    """Regression: the parent kept the final record in memory and never wrote it."""
    router = Router(
        main=["unused"],
        subs={1: [calls(call("run_command", command=FILL)), finish("report written")]},
    )
    records = workspace / ".agentkit/subagent-records"
    with (
        FakeOpenAIServer(router) as server,
        tmpfs(workspace / "sub_agent_results/agent_1", "256k") as folder,
        tmpfs(records, "64k"),
    ):
        fill(records)  # the fallback place is full too
        agent = Agent(workspace=workspace, settings=scripted_settings(server, "en"))
        try:
            result = agent.manager.create(agent_id=1, summary="fills the disk", task="t")
            assert result["status"] == "failed"
            assert read_record(folder, workspace)["status"] == "running"  # no room at all
            (folder / "filler.bin").unlink()  # room again
            agent.manager.records()  # the conversation's next save
            record = raw(workspace)
        finally:
            agent.close()
    assert record["status"] == "failed" and "disk_full" in record["error"]
    assert called(record) == ["run_command", "finish_task"]


def test_a_record_left_running_under_an_ended_row_is_repaired_at_the_next_start(
    workspace: Path,
) -> None:
    """Regression: the conversation file said the sub-agent failed, its record said
    running for good once the process that kept the final record ended."""
    create = call("create_sub_agent", agent_id=1, summary="fills the disk", task="t")
    router = Router(
        main=[calls(create), "done", "again"],
        subs={1: [calls(call("run_command", command=FILL)), finish("report written")]},
    )
    records = workspace / ".agentkit/subagent-records"
    with (
        FakeOpenAIServer(router) as server,
        tmpfs(workspace / "sub_agent_results/agent_1", "256k") as folder,
        tmpfs(records, "64k"),
    ):
        fill(records)
        settings = scripted_settings(server, "en")
        with Agent(workspace=workspace, settings=settings) as agent:
            conversation_id = agent.run("go").conversation_id
        saved = raw(workspace)
        assert saved["status"] == "running"
        (folder / "filler.bin").unlink()
        with Agent(
            workspace=workspace, settings=settings, conversation_id=conversation_id
        ) as agent:
            record = raw(workspace)
            agent.run("again")
    assert record["status"] == "failed" and record["error"] == UNWRITTEN_ERROR
    assert "disk_full" in record["result_summary"]
    assert record["completed_at"]
    assert record["messages"] == saved["messages"]  # nothing it saved is dropped
    assert called(record) == ["run_command"]
