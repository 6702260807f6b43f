"""Conversations on disk and in a Workspace under abuse (issue 20 items 13, 16, 17, 18,
19, 24b): damaged files, ids, durable queued messages, event numbering across
sessions, writes after a close, and a bounded number of live sessions. Real
sessions, real files, a scripted model on FakeOpenAIServer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkit.chat import Session, Workspace, list_conversations
from agentkit.chat.store import conversations_dir
from agentkit.errors import ConfigurationError
from agentkit.jsonfile import read_json
from agentkit.settings import Settings

pytestmark = pytest.mark.slow


def saved(session: Session) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(session.transcript_path.read_text())
    return data


# ------------------------------------------------------------- damaged files (19)
def test_damaged_files_are_listed_as_damaged_untouched_and_the_rest_still_lists(
    workspace: Path,
) -> None:
    folder = conversations_dir(workspace)
    folder.mkdir(parents=True)
    bad = {
        "conv_numbers": '{"messages": [1, 2, 3]}',
        "conv_deep": "[" * 100_000 + "]" * 100_000,
        "conv_deepobj": '{"messages": [' + '{"a":' * 5000 + "1" + "}" * 5000 + "]}",
        "conv_text": "not json at all",
        "conv_list": "[]",
    }
    for cid, text in bad.items():
        (folder / f"{cid}.json").write_text(text)
    good = {"conversation_id": "conv_good", "title": "fine", "messages": []}
    (folder / "conv_good.json").write_text(json.dumps(good))
    listed = {i.id: i for i in list_conversations(workspace)}
    assert set(listed) == {*bad, "conv_good"}
    assert listed["conv_good"].state == "idle" and listed["conv_good"].error is None
    for cid in bad:
        assert listed[cid].state == "damaged" and listed[cid].error, cid
        assert (folder / f"{cid}.json").read_text() == bad[cid]  # kept untouched
    assert "nested too deeply" in (listed["conv_deep"].error or "")
    with Workspace(workspace, Settings(model="m", api_key="k"), prewarm=False) as ws:
        assert {i.id for i in ws.list()} == {*bad, "conv_good"}
        for cid in bad:
            with pytest.raises(ConfigurationError, match="damaged"):
                ws.open(cid)
    assert all((folder / f"{cid}.json").read_text() == bad[cid] for cid in bad)


def test_read_json_refuses_deep_nesting_with_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    for text in ("[" * 100_000 + "]" * 100_000, "[" * 300 + "]" * 300):
        path.write_text(text)
        with pytest.raises(ValueError, match="nested too deeply"):
            read_json(path)
    path.write_text("[" * 150 + "]" * 150)
    assert isinstance(read_json(path), list)


def test_an_idle_open_conversation_file_keeps_no_copy_of_its_transcript(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Regression (issue 27, memory): the writer kept every message's encoded JSON,
    about the transcript's size again, for as long as the conversation stayed open."""
    import gc
    import tracemalloc

    from agentkit import jsonfile
    from agentkit.chat.store import ConversationFile
    from agentkit.conversation import Conversation

    monkeypatch.setattr(jsonfile, "IDLE_SECONDS", 0.05)
    conversation = Conversation(
        messages=[
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 1000} for i in range(500)
        ]
    )
    store = ConversationFile(tmp_path)
    tracemalloc.start()
    try:
        store.save(conversation, None)
        store.flush()
        writer = store._writer  # noqa: SLF001 - wait for its thread to go idle
        assert writer is not None and writer._thread is not None  # noqa: SLF001
        writer._thread.join(10)  # noqa: SLF001
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / ".agentkit/conversations" / f"{conversation.id}.json").exists()
    assert held < 100_000, held  # the transcript is 500 kB; its JSON would be as much again
    store.save(conversation, None)  # a later save still writes the whole document
    store.flush()
    saved = json.loads(
        (tmp_path / ".agentkit/conversations" / f"{conversation.id}.json").read_text()
    )
    assert saved["messages"] == conversation.messages
