"""A conversation's state read from its file: one function turns the text into a
ConversationState, and every reader (opening, the conversation list) goes through it."""

from __future__ import annotations

import json
import logging
import typing
from pathlib import Path
from typing import Any

import pytest

from agentkit.chat.store import list_conversations
from agentkit.conversation import (
    CONVERSATION_STATES,
    Conversation,
    ConversationState,
    conversation_state,
    conversations_dir,
)


def _write(workspace: Path, state: Any, conversation_id: str = "conv_a") -> Path:
    folder = conversations_dir(workspace)
    folder.mkdir(parents=True)
    data: dict[str, Any] = {"conversation_id": conversation_id, "messages": []}
    if state is not ...:
        data["state"] = state
    path = folder / f"{conversation_id}.json"
    path.write_text(json.dumps(data))
    return path


def test_the_states_are_the_literal_type() -> None:
    assert set(CONVERSATION_STATES) == set(typing.get_args(ConversationState))
    assert set(CONVERSATION_STATES) == {
        "idle",
        "running",
        "waiting_for_subagents",
        "done",
        "failed",
    }


@pytest.mark.parametrize("state", CONVERSATION_STATES)
def test_a_known_state_is_kept(state: str, tmp_path: Path) -> None:
    path = _write(tmp_path, state)
    assert Conversation.load(path).state == state


@pytest.mark.parametrize("bad", ["runnin", "IDLE", "", 42, None, ["idle"], {"s": 1}, "x" * 10_000])
def test_an_unknown_state_reads_as_idle(
    bad: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, bad)
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        conversation = Conversation.load(path)
    assert conversation.state == "idle"
    assert conversation.id == "conv_a"  # the rest of the file is kept
    if bad is not None:
        assert "unknown conversation state" in caplog.text
        assert len(caplog.text) < 1000  # a long value is not copied into the log


def test_a_missing_state_reads_as_idle_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, ...)
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        assert Conversation.load(path).state == "idle"
    assert caplog.text == ""


def test_the_list_reads_the_state_through_the_same_function(tmp_path: Path) -> None:
    _write(tmp_path, "bogus")
    [info] = list_conversations(tmp_path)
    assert info.state == "idle"


def test_conversation_state_directly() -> None:
    assert conversation_state("waiting_for_subagents") == "waiting_for_subagents"
    assert conversation_state("cancelled", "f.json") == "idle"
    assert conversation_state(1.5) == "idle"
