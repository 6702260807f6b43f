"""The sub-agent record written as a journal with periodic compaction (issue 27 part 2,
issue 20 item 10): whatever a reader looks at is the record as last saved, valid JSON
in the seed's shape, with the archive of what was shrunk; the record's head is found
without parsing the transcript."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from agentkit import context
from agentkit.jsonfile import JsonFileWriter
from agentkit.subagent.journal import JOURNAL_FILE
from agentkit.subagent.record import (
    _stored_head,
    load_record,
    read_record,
    record_path,
    transcript_writer,
    write_record,
)

HEAD = {
    "agent_id": 1,
    "summary": "s",
    "created_at": "2026-03-10T12:00:00Z",
    "completed_at": None,
    "status": "running",
    "result_summary": None,
    "sub_conversation_id": "conv_sub1",
    "task": "t",
    "deliverables_dir": "d",
}


def record_of(
    messages: list[Any], archive: list[Any], stats: dict[str, Any], **head: Any
) -> dict[str, Any]:
    return {**HEAD, **head, "messages": messages, "archive": archive, "stats": stats}


def expected(record: dict[str, Any]) -> dict[str, Any]:
    """What a reader must see: the record as JSON (keys in any order)."""
    return json.loads(json.dumps(record, default=str))


def seen(folder: Path) -> dict[str, Any]:
    data = load_record(record_path(folder))
    data.pop("journal_seq", None)
    return data


# ------------------------------------------------------------ _stored_head
def test_the_head_of_a_record_written_without_a_space_is_found_without_the_transcript(
    tmp_path: Path,
) -> None:
    """Regression (issue 27): ``_stored_head`` looked for ``"messages": `` with a space;
    the writer wrote ``"messages":`` without one, so every guarded write parsed the
    whole record, and a record whose transcript part did not parse counted as no
    record: a final record could be replaced."""
    folder = tmp_path / "d"
    final = record_of([{"role": "user", "content": "x" * 100}], [], {}, status="completed")
    writer = JsonFileWriter(record_path(folder))  # the writer that puts no space after it
    writer.submit(final)
    writer.flush()
    assert b'"messages":[' in record_path(folder).read_bytes()
    with open(record_path(folder), "r+b") as handle:  # the transcript's end lost
        handle.truncate(record_path(folder).stat().st_size - 20)
    assert _stored_head(folder) == {"status": "completed", "sub_conversation_id": "conv_sub1"}
    assert write_record(folder, {**final, "status": "running"}, root=tmp_path) is False


# -------------------------------------------------------- writer and reader
def shrinkable(i: int) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": f"c{i}",
        "name": "read_file",
        "content": f"{i}:" + "y" * 900,
    }


def call_message(i: int, size: int) -> dict[str, Any]:
    arguments = json.dumps({"path": f"f{i}", "content": "z" * size})
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "write_file", "arguments": arguments},
            }
        ],
    }


@pytest.mark.parametrize("seed", range(6))
def test_every_save_reads_back_exactly_through_shrinks_compactions_and_rotations(
    tmp_path: Path, seed: int
) -> None:
    """After each save the record file plus its journal read as exactly the record
    saved: appends, tool outputs and call arguments shrunk in place, turns compacted
    into a summary, stats and head changes, the journal rotated many times."""
    rng = random.Random(seed)
    folder = tmp_path / "d"
    writer = transcript_writer(folder, tmp_path)
    writer.floor, writer.ratio = 2000, rng.choice([0.5, 1.0, 3.0])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
    ]
    archive: list[dict[str, Any]] = []
    stats: dict[str, Any] = {"runtime_seconds": 0, "commands": 0}
    count = lambda m: len(json.dumps(m)) // 4  # noqa: E731
    for step in range(120):
        action = rng.random()
        if action < 0.5:
            messages.append(call_message(step, rng.choice([10, 2000])))
            messages.append(shrinkable(step))
            stats = {**stats, "commands": stats["commands"] + 1}
        elif action < 0.7:
            sizes = [count(m) for m in messages]
            context.shrink_tool_outputs(messages, sizes, sum(sizes) // 2, archive, count)
        elif action < 0.8:
            sizes = [count(m) for m in messages]
            context.shrink_call_arguments(messages, sizes, sum(sizes) // 2, archive, count)
        elif action < 0.9:
            sizes = [count(m) for m in messages]
            context.compact_turns(messages, sizes, sum(sizes) // 2, archive, count, "Summary:")
        else:
            stats = {**stats, "runtime_seconds": step}
        record = record_of(messages, archive, stats)
        writer.save(record)
        assert writer.error is None
        assert seen(folder) == expected(record), f"step {step}"
    assert archive, "the run never shrank anything: the test would prove little"
    final = record_of(messages, archive, stats, status="completed", completed_at="now")
    assert writer.final(final) is True
    assert json.loads(record_path(folder).read_text()) | {"journal_seq": 0} == expected(final) | {
        "journal_seq": 0
    }
    assert not (folder / ".subagent" / JOURNAL_FILE).exists()
    writer.save(record_of(messages + [{"role": "user", "content": "late"}], archive, stats))
    assert seen(folder) == expected(final)  # final is final


def big_writer(folder: Path, root: Path) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """A writer past its floor, with a journal of a few lines."""
    writer = transcript_writer(folder, root)
    writer.floor, writer.ratio = 100, 1000.0
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for i in range(4):
        messages.append(shrinkable(i))
        writer.save(record_of(messages, [], {"n": i}))
    return writer, messages, expected(record_of(messages, [], {"n": 3}))


def test_a_line_cut_short_by_a_kill_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    writer, messages, before = big_writer(folder, tmp_path)
    assert (folder / ".subagent" / JOURNAL_FILE).stat().st_size > 0
    messages.append(shrinkable(9))
    writer.save(record_of(messages, [], {"n": 9}))
    journal = folder / ".subagent" / JOURNAL_FILE
    data = journal.read_bytes()
    journal.write_bytes(data[:-30])  # the last line torn
    assert seen(folder) == expected(before)
    # The whole record file alone is valid JSON in the seed's shape all along.
    whole = json.loads(record_path(folder).read_text())
    assert isinstance(whole["messages"], list) and whole["status"] == "running"


@pytest.mark.parametrize(
    "damage",
    [
        b'{"seq": 99, "add": [{"role": "user", "content": "gap"}]}\n',
        b'{"seq": SEQ, "cut": [5, 1, []]}\n',
        b'{"seq": SEQ, "set": [[999, {"role": "user"}]]}\n',
        b'{"seq": SEQ, "archive": [{"index": 999, "$content": true}]}\n',
        b'{"seq": SEQ, "add": [1, 2]}\n',
        b'{"seq": SEQ, "archive": 7}\n',
        b"[" * 100_000 + b"\n",
        b"\xff\xfe not json\n",
    ],
)
def test_a_bad_journal_line_ends_the_replay_and_never_raises(tmp_path: Path, damage: bytes) -> None:
    folder = tmp_path / "d"
    writer, _, before = big_writer(folder, tmp_path)
    record_now = seen(folder)
    seq = json.loads(record_path(folder).read_text())["journal_seq"]
    seq += sum(1 for line in (folder / ".subagent" / JOURNAL_FILE).read_bytes().splitlines()[1:])
    with open(folder / ".subagent" / JOURNAL_FILE, "ab") as handle:
        handle.write(damage.replace(b"SEQ", str(seq + 1).encode()))
        handle.write(b'{"seq": %d, "add": [{"role": "user", "content": "after"}]}\n' % (seq + 2))
    assert record_now == expected(before)
    assert seen(folder) == expected(before)


def test_a_journal_of_another_sub_conversation_is_not_applied(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    big_writer(folder, tmp_path)
    other = record_of(
        [{"role": "user", "content": "new agent"}], [], {}, sub_conversation_id="conv_sub2"
    )
    # A new agent's first whole write, before it starts a journal (a kill between).
    path = record_path(folder)
    path.write_text(json.dumps(other))
    assert read_record(folder) == expected(other)


def test_a_whole_write_by_the_parent_drops_the_journal(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    _, _, before = big_writer(folder, tmp_path)
    swept = {**seen(folder), "status": "terminated", "error": "killed"}
    assert write_record(folder, swept, root=tmp_path)
    assert not (folder / ".subagent" / JOURNAL_FILE).exists()
    assert read_record(folder) == swept
    assert swept["messages"] == expected(before)["messages"]


def test_archiving_an_earlier_record_keeps_what_its_journal_held(tmp_path: Path) -> None:
    from agentkit.subagent.record import archive_record

    folder = tmp_path / "d"
    _, _, before = big_writer(folder, tmp_path)
    target = archive_record(folder, tmp_path)
    assert target is not None and target.name == "conversations.conv_sub1.json"
    archived = json.loads(target.read_text())
    archived.pop("journal_seq", None)
    assert archived == expected(before)
    assert not record_path(folder).exists() and not (folder / ".subagent" / JOURNAL_FILE).exists()


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
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
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
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    with FakeOpenAIServer(Router(main=["unused"], subs={1: [model]})) as server:
        # Long enough for the worker to start on a loaded machine and pass the floor.
        timeout = "20" if end == "timeout" else "600"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, server.base_url, str(workspace), timeout],
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
            if end == "terminate":
                child.stdin.write("terminate\n")
                child.stdin.flush()
                assert child.stdout.readline().strip() == "terminated"
            elif end == "kill-worker":
                os.kill(worker, signal.SIGKILL)
            elif end == "kill-parent":
                os.kill(child.pid, signal.SIGKILL)
            elif end == "kill-group":
                os.killpg(child.pid, signal.SIGKILL)
            # At a timeout the parent's word is awaited: the SIGTERM that follows its
            # Terminate may reach the worker first, whose own account of being stopped
            # (ORPHANED_ERROR) the living parent then replaces (record.may_replace).
            ended = {"timeout": ("timeout",), "kill-group": ("running",)}.get(end)
            assert wait_until(
                lambda: (
                    (json.loads(path.read_text())["status"] in ended)
                    if ended
                    else json.loads(path.read_text())["status"] != "running"
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
