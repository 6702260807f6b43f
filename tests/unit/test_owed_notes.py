"""The note the next round owes its model when the last user message got no answer:
its round was cancelled, stopped, or cut off because its process died (a conversation
file saved mid-round, reopened later)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkit import prompts
from agentkit.chat.rounds import owed_notes
from agentkit.chat.session import Session
from agentkit.conversation import Conversation, conversations_dir
from agentkit.settings import Settings

NOTE = prompts.phrase("en", "interrupted_request")
SYSTEM = {"role": "system", "content": "You are..."}
ASKED = {"role": "user", "content": "count the files"}
CALLED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "3 lines"}
ANSWER = {"role": "assistant", "content": "There are 3."}


def _conversation(messages: list[dict[str, Any]], error: str | None) -> Conversation:
    return Conversation(messages=[SYSTEM, *messages], error=error)


@pytest.mark.parametrize(
    "messages",
    [[ASKED], [ASKED, CALLED], [ASKED, CALLED, RESULT]],
    ids=["before-the-first-reply", "during-its-tool-calls", "after-its-tool-results"],
)
@pytest.mark.parametrize("error", ["cancelled", "interrupted"])
def test_a_round_that_ended_without_an_answer_is_owed_the_note(
    messages: list[dict[str, Any]], error: str
) -> None:
    assert owed_notes(_conversation(messages, error), "en") == [NOTE]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([ASKED, CALLED, RESULT, ANSWER], "cancelled"),  # answered before the stop
        ([ASKED, ANSWER], None),
        ([ASKED], "APIConnectionError: the model could not be reached"),  # shown as failed
        ([], "interrupted"),  # no message at all yet
    ],
    ids=["answered-then-stopped", "answered", "failed", "empty"],
)
def test_no_note_when_answered_failed_or_empty(
    messages: list[dict[str, Any]], error: str | None
) -> None:
    assert owed_notes(_conversation(messages, error), "en") == []


def _saved(workspace: Path, state: str, messages: list[dict[str, Any]]) -> str:
    """A conversation file as a process left it (``state`` when it was last saved)."""
    folder = conversations_dir(workspace)
    folder.mkdir(parents=True)
    cid = "conv_0123456789ab"
    data = {"conversation_id": cid, "messages": [SYSTEM, *messages], "state": state, "rounds": 1}
    (folder / f"{cid}.json").write_text(json.dumps(data))
    return cid


@pytest.mark.parametrize(("state", "owed"), [("running", [NOTE]), ("idle", [])])
def test_a_conversation_saved_mid_round_is_reopened_as_interrupted(
    tmp_path: Path, state: str, owed: list[str]
) -> None:
    """Its process was killed (SIGKILL) during the round's tool calls: the file still
    says running, and the next round's model hears that the request was cut off."""
    cid = _saved(tmp_path, state, [ASKED, CALLED, RESULT])
    settings = Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    with Session(tmp_path, settings, conversation_id=cid, prewarm=False) as session:
        assert session.conversation.state == "idle"
        assert owed_notes(session.conversation, "en") == owed
