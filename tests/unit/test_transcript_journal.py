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
    from agentkit.subagent.record_folder import archive_record

    folder = tmp_path / "d"
    _, _, before = big_writer(folder, tmp_path)
    target = archive_record(folder, tmp_path)
    assert target is not None and target.name == "conversations.conv_sub1.json"
    archived = json.loads(target.read_text())
    archived.pop("journal_seq", None)
    assert archived == expected(before)
    assert not record_path(folder).exists() and not (folder / ".subagent" / JOURNAL_FILE).exists()


def test_a_rotation_never_leaves_a_journal_beside_the_parents_final_record(
    tmp_path: Path,
) -> None:
    """Regression: the worker wrote the record whole under the folder lock, then
    started its new journal after the lock was released; the parent's final record
    written in between (a timeout) was left with the worker's journal beside it
    (test_the_record_is_complete_however_the_worker_ends[timeout] found it)."""
    folder = tmp_path / "d"
    writer = transcript_writer(folder, tmp_path)
    writer.floor = 100  # past the floor at once: the first save rotates
    messages = [{"role": "user", "content": "task " + "x" * 500}]
    running = {**HEAD, "messages": messages, "archive": [], "stats": {}}
    final = {**running, "status": "timeout", "completed_at": "now", "error": "timeout"}
    guard = writer.guard
    ended: list[bool] = []

    def parent_ends_right_after(head: dict[str, Any], write: Any) -> bool:
        wrote = guard(head, write)  # the worker's whole write, under the lock
        ended.append(write_record(folder, final, by_parent=True, root=tmp_path))
        return wrote

    writer.guard = parent_ends_right_after
    writer.save(running)
    assert writer.error is None and ended == [True]
    assert (read_record(folder) or {})["status"] == "timeout"
    assert not (folder / ".subagent" / JOURNAL_FILE).exists()
