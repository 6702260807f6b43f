"""A Workspace made with ``discard_untouched`` (the CLI chat's) keeps no file for a
conversation it created where nothing happened; every other conversation is kept."""

from __future__ import annotations

from pathlib import Path

from agentkit.chat import Workspace
from agentkit.chat.store import conversation_path, list_conversations
from agentkit.settings import Settings

SETTINGS = Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")


def _workspace(path: Path, discard: bool = True) -> Workspace:
    return Workspace(path, SETTINGS, prewarm=False, discard_untouched=discard)


def test_a_created_conversation_left_untouched_is_not_kept(tmp_path: Path) -> None:
    with _workspace(tmp_path) as chats:
        cid = chats.create().id
    assert not conversation_path(tmp_path, cid).exists()
    assert chats.discarded == {cid}
    assert list_conversations(tmp_path) == []


def test_left_by_a_switch_it_is_not_kept_either(tmp_path: Path) -> None:
    with _workspace(tmp_path) as chats:
        first = chats.create("named")  # a title is something: kept
        empty = chats.create()
        chats.switch(empty.id, first.id)
        assert chats.discarded == {empty.id}
    assert chats.last_kept == first.id  # the chat's way back names it
    assert [c.id for c in list_conversations(tmp_path)] == [first.id]


def test_without_the_option_or_when_opened_again_it_is_kept(tmp_path: Path) -> None:
    with _workspace(tmp_path, discard=False) as chats:
        cid = chats.create().id
    assert conversation_path(tmp_path, cid).is_file() and chats.discarded == set()
    with _workspace(tmp_path) as chats:
        chats.open(cid)  # saved before, chosen by the person: theirs to delete
    assert conversation_path(tmp_path, cid).is_file() and chats.discarded == set()
