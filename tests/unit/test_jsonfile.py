"""Atomic JSON saving, including the incremental message encoding of JsonFileWriter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentkit.jsonfile import JsonFileWriter, read_json, write_json_atomic


def test_writer_output_equals_a_full_encode_as_messages_change(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    writer = JsonFileWriter(path)
    messages: list[dict] = [{"role": "user", "content": "héllo 你好"}]
    doc = {"conversation_id": "conv_1", "messages": messages, "stats": {"turns": 0}}
    for turn in range(5):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{turn}"}]})
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": "x" * (100 + turn)})
        if turn == 3:
            messages[2]["content"] = "shrunk in place"  # compaction rewrites a message
        doc["stats"]["turns"] = turn + 1
        writer.submit(doc)
        writer.flush()
        assert read_json(path) == json.loads(json.dumps(doc))
    assert not list(tmp_path.glob("*.tmp"))


def test_writer_keeps_only_the_newest_pending_version(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    writer = JsonFileWriter(path)
    for i in range(50):
        writer.submit({"n": i, "messages": []})
    writer.flush()
    assert read_json(path) == {"n": 49, "messages": []}


def test_write_json_atomic_creates_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "doc.json"
    write_json_atomic(path, {"x": [1, 2]})
    assert read_json(path) == {"x": [1, 2]}


def test_writer_thread_ends_when_idle_and_a_later_save_still_lands(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Regression: each writer kept a thread for the life of the process, so every
    conversation ever opened by a server held one."""
    from agentkit import jsonfile

    monkeypatch.setattr(jsonfile, "IDLE_SECONDS", 0.05)
    path = tmp_path / "c.json"
    writer = JsonFileWriter(path)
    writer.submit({"n": 1, "messages": []})
    writer.flush()
    thread = writer._thread  # noqa: SLF001 - the test looks at the thread itself
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive() and writer._thread is None  # noqa: SLF001
    writer.submit({"n": 2, "messages": []})
    writer.flush()
    assert read_json(path) == {"n": 2, "messages": []}
