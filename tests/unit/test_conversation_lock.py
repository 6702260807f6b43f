"""One live session per conversation (agentkit/chat/lock.py), within this process: an
unknown id creates no folder, a claim left by an abandoned session passes on with its
lock, a conversation file with damaged fields still opens. Across real processes:
tests/integration/test_conversation_lock_processes.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agentkit.chat import Session
from agentkit.chat.lock import claim_conversation
from agentkit.chat.store import conversation_path
from agentkit.conversation import Conversation, conversations_dir
from agentkit.errors import ConfigurationError
from agentkit.settings import Settings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock: Linux and macOS")
SETTINGS = Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", language="en")


def saved_conversation(workspace: Path) -> str:
    conversation = Conversation(model="m")
    conversation.save(conversation_path(workspace, conversation.id))
    return conversation.id


def open_here(workspace: Path, cid: str | None) -> Session:
    return Session(workspace, SETTINGS, conversation_id=cid, subagents=False, prewarm=False)


def test_an_unknown_id_creates_no_folder(workspace: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_here(workspace, "conv_nothing")
    assert not (workspace / ".agentkit").exists()


def test_a_claim_left_by_a_session_abandoned_in_this_process_passes_on_with_its_lock(
    workspace: Path,
) -> None:
    """Same process: a second claim while the first session is open is refused with
    the in-process message; once that session is no longer open, the claim (and the
    OS lock, still held) passes to the new one, and the old release does nothing."""
    lock = conversations_dir(workspace) / "conv_x.lock"
    first_open = [True]
    release_first = claim_conversation(lock, "conv_x", lambda: first_open[0])
    with pytest.raises(ConfigurationError, match="already open in this process"):
        claim_conversation(lock, "conv_x", lambda: True)
    first_open[0] = False
    release_second = claim_conversation(lock, "conv_x", lambda: True)
    release_first()
    assert lock.exists()
    with pytest.raises(ConfigurationError, match="already open in this process"):
        claim_conversation(lock, "conv_x", lambda: True)
    release_second()
    assert not lock.exists()
    claim_conversation(lock, "conv_x", lambda: True)()


def test_a_conversation_file_with_damaged_fields_still_opens(workspace: Path) -> None:
    # Bad input from a file gets a clear error or a sane default, never a crash:
    # a number where a list belongs, wrong types in the stats.
    cid = saved_conversation(workspace)
    path = conversation_path(workspace, cid)
    data = json.loads(path.read_text())
    data.update(
        pending_notes=5,
        subagents=[42, "x", {"agent_id": 1, "status": "running", "deliverables_dir": 5}],
        archive="x",
        title=7,
        state=["x"],
        stats={"turns": "3", "tool_calls": {"read_file": "2", "edit_file": 1}, "commands": True},
    )
    path.write_text(json.dumps(data))
    session = open_here(workspace, cid)
    try:
        conv = session.conversation
        assert conv.pending_notes == [] and conv.archive == [] and conv.title is None
        assert conv.stats.turns == 0 and conv.stats.tool_calls == {"edit_file": 1}
        assert conv.stats.commands == 0 and conv.state == "idle"
    finally:
        session.close()
    data["messages"] = ["not a message"]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigurationError, match="damaged"):
        open_here(workspace, cid)
