"""A record's end kept as one journal line when it cannot be written whole (hardening
issue 31, item 8): every reader sees it final, nothing saved is dropped, a torn
tail is cut first, and the whole record with the same end may replace it later
while no other write may."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentkit.subagent.finalise import end_in_journal, retry_final
from agentkit.subagent.journal import JOURNAL_FILE
from agentkit.subagent.record import read_record, record_path, transcript_writer, write_record

SUB = "conv_sub1"
END = {
    "status": "failed",
    "completed_at": "2026-03-10T12:05:00Z",
    "result_summary": "failed: no space left",
    "error": "disk_full: No space left on device",
}


def running(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "agent_id": 1,
        "status": "running",
        "completed_at": None,
        "sub_conversation_id": SUB,
        "messages": messages,
        "archive": [],
        "stats": {"turns": len(messages)},
    }


def say(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"message {n} " + "x" * 2000}


def test_the_end_as_a_journal_line_is_final_for_readers_and_keeps_the_messages(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "agent_1"
    assert write_record(folder, running([say(0)]), root=tmp_path)
    assert end_in_journal(folder, {**running([]), **END}, tmp_path)
    raw = json.loads(record_path(folder).read_text())
    assert raw["status"] == "running"  # the file as it was: the end is a journal line
    record = read_record(folder)
    assert record is not None
    assert {k: record[k] for k in END} == END
    assert record["messages"] == [say(0)]
    # Final now: a later write of another end is refused, the same end written whole is not.
    assert write_record(folder, {**running([]), "status": "completed"}, root=tmp_path) is False
    assert not end_in_journal(folder, {**running([]), **END}, tmp_path)  # ended already
    whole = {**running([say(0), say(1)]), **END}
    assert retry_final(folder, whole, tmp_path)
    assert json.loads(record_path(folder).read_text())["messages"] == [say(0), say(1)]
    assert not record_path(folder).with_name(JOURNAL_FILE).exists()


def test_the_end_goes_after_the_last_whole_journal_line_a_torn_one_is_cut(
    tmp_path: Path,
) -> None:
    """A worker killed in the middle of a line left it torn: a line appended after it
    would never be read."""
    folder = tmp_path / "agent_1"
    writer = transcript_writer(folder, tmp_path)
    messages = [say(i) for i in range(12)]  # over the size written whole each save
    writer.save(running(messages[:10]))
    writer.save(running(messages[:11]))
    writer.close()
    journal = record_path(folder).with_name(JOURNAL_FILE)
    assert journal.exists()
    with open(journal, "ab") as handle:
        handle.write(b'{"seq": 3, "add": [{"role": "user", "cont')  # killed mid-line
    assert end_in_journal(folder, {**running([]), **END}, tmp_path)
    record = read_record(folder)
    assert record is not None and record["status"] == "failed"
    assert record["messages"] == messages[:11]  # the last whole line kept
    assert b"cont\n" not in journal.read_bytes() and journal.read_bytes().endswith(b"}\n")
