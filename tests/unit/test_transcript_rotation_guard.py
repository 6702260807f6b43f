"""A worker's journal rotation and the parent's final record (agentkit.subagent.transcript):
a new journal is started under the record folder's lock, so it is never left beside
a record the parent made final."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.subagent.journal import JOURNAL_FILE
from agentkit.subagent.record import read_record, transcript_writer, write_record

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
