"""Conversations on disk and in a Workspace under abuse (issue 20 items 13, 16, 17, 18,
19, 24b): damaged files, ids, durable queued messages, event numbering across
sessions, writes after a close, and a bounded number of live sessions. Real
sessions, real files, a scripted model on FakeOpenAIServer."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Gate, scripted_settings, wait_until

from agentkit import events as ev
from agentkit.chat import Session, Workspace
from agentkit.chat.store import conversations_dir
from agentkit.errors import Cancelled, ConfigurationError, WorkspaceFull
from agentkit.jsonfile import read_json
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    return scripted_settings(server, "en", **overrides)


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def saved(session: Session) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(session.transcript_path.read_text())
    return data


def test_a_file_whose_inner_id_differs_from_its_name_is_opened_by_its_name(
    workspace: Path,
) -> None:
    """Regression: opening it saved a second copy under the inner id."""
    folder = conversations_dir(workspace)
    folder.mkdir(parents=True)
    doc = {"conversation_id": "conv_inner", "title": "copied", "messages": []}
    (folder / "conv_outer.json").write_text(json.dumps(doc))
    with (
        FakeOpenAIServer(["hello back"]) as server,
        Workspace(workspace, settings_for(server)) as ws,
    ):
        assert [i.id for i in ws.list()] == ["conv_outer"]
        session = ws.open("conv_outer")
        assert session.id == "conv_outer"
        assert session.send("hi").final_text == "hello back"
    # .gitignore: agentkit's runtime folder stays out of the user's git status.
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "conv_outer.json"]
    assert read_json(folder / "conv_outer.json")["conversation_id"] == "conv_outer"


# -------------------------------------------------------- writes after a close (18)
def test_a_rename_after_close_or_delete_writes_nothing_back(workspace: Path) -> None:
    with FakeOpenAIServer(["answer"]) as server, Workspace(workspace, settings_for(server)) as ws:
        session = ws.create("first")
        session.send("hello")
        ws.delete(session.id)
        assert not session.transcript_path.exists()
        with pytest.raises(Cancelled, match="closed"):
            session.rename("written back?")
        session._save(session.conversation)  # noqa: SLF001 - a late save from inside, too
        assert not session.transcript_path.exists()
        assert ws.list() == []


def test_rename_and_delete_at_once_never_leave_the_file(workspace: Path) -> None:
    """Regression (1 in 30 over HTTP): a rename racing a delete wrote the file back."""
    with (
        FakeOpenAIServer(["answer"] * 30) as server,
        Workspace(workspace, settings_for(server)) as ws,
    ):
        for i in range(30):
            session = ws.create(f"c{i}")
            session.send("hello")
            if i % 2:
                ws.close_session(session.id)  # the file rename path too
            start = threading.Barrier(2)
            errors: list[BaseException] = []

            def run(
                action: Any,
                cid: str = session.id,
                start: threading.Barrier = start,
                errors: list[BaseException] = errors,
            ) -> None:
                start.wait()
                try:
                    action(cid)
                except (FileNotFoundError, ConfigurationError) as exc:
                    errors.append(exc)

            threads = [
                threading.Thread(target=run, args=(ws.delete,)),
                threading.Thread(target=run, args=(lambda c: ws.rename(c, "renamed"),)),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(20)
            assert not session.transcript_path.exists(), (i, errors)
        assert ws.list() == []


# --------------------------------------------------- durable queued messages (16)
def test_accepted_messages_are_on_disk_at_once_and_delivered_at_the_next_opening(
    workspace: Path,
) -> None:
    gate = Gate()
    with FakeOpenAIServer([gate.hold("first answer"), "all three answered"]) as server:
        session = Session(workspace, settings_for(server))
        session.post("one")
        assert wait_until(lambda: session.state == "running" and len(server.requests) == 1)
        for text in ("two", "three", "four"):
            session.post(text)
            # Accepted = saved: the file holds it before post() returns.
            assert text in saved(session).get("queued", [])
        first = saved(session)
        assert "one" in first.get("queued", []) + [m.get("content") for m in first["messages"]]
        session.close()  # Ctrl-C of the server: the round is cancelled
        gate.event.set()
        data = saved(session)
        assert data["queued"] == ["two", "three", "four"]
        again = Session(workspace, settings_for(server), conversation_id=session.id)
        try:
            assert again.wait_idle(20)
            assert user_texts(server.requests[-1])[-3:] == ["two", "three", "four"]
            assert again.last_result is not None
            assert again.last_result.final_text == "all three answered"
        finally:
            again.close()
    assert saved(again)["queued"] == []


def test_the_running_rounds_own_message_is_saved_before_its_first_turn_ends(
    workspace: Path,
) -> None:
    """Regression: a user message was saved only when its first turn ended, so a
    kill -9 during that turn lost it."""
    gate = Gate()
    with FakeOpenAIServer([gate.hold("late")]) as server:
        session = Session(workspace, settings_for(server))
        try:
            session.post("keep me")
            assert wait_until(lambda: len(server.requests) == 1)
            assert wait_until(lambda: session.transcript_path.exists(), 2)
            data = saved(session)
            kept = data.get("queued", []) + [m.get("content") for m in data["messages"]]
            assert kept.count("keep me") == 1
        finally:
            gate.event.set()
            session.close()


# ----------------------------------------------- numbering across sessions (17)
def test_event_numbers_go_on_across_sessions_and_restart_never(workspace: Path) -> None:
    with FakeOpenAIServer(["one", "two"]) as server:
        first = Session(workspace, settings_for(server))
        first.send("hello")
        last = first.bus.last_seq
        first.close()
        assert saved(first).get("last_event_seq") == last
        second = Session(workspace, settings_for(server), conversation_id=first.id)
        assert second.bus.last_seq == last  # clean close: numbering goes on
        assert second.bus.since(last) == ([], True)
        assert second.bus.since(last - 3)[1] is False  # those were the earlier session's
        second.publish(ev.TextDelta(text="x"))
        assert second.bus.last_seq == last + 1
        second.close()
        # A session killed (its lock file left behind) may have streamed past its file.
        lock = second.transcript_path.with_suffix(".lock")
        lock.write_text(json.dumps({"pid": 999_999_999, "started": 1.0}))
        third = Session(workspace, settings_for(server), conversation_id=first.id)
        try:
            assert third.bus.last_seq > 10**15  # above anything an earlier one sent
            assert third.bus.since(last + 1)[1] is False
        finally:
            third.close()


# ------------------------------------------------------- bounded workspace (13)
def test_idle_conversations_are_closed_to_make_room_and_reopen_on_demand(
    workspace: Path,
) -> None:
    with FakeOpenAIServer([f"answer {i}" for i in range(40)]) as server:
        ws = Workspace(workspace, settings_for(server), max_open=3)
        try:
            baseline = threading.active_count()
            ids = []
            for i in range(12):
                session = ws.create()
                assert session.send(f"hello {i}").final_text == f"answer {i}"
                ids.append(session.id)
                assert len(ws.sessions()) <= 3
            assert {i.id for i in ws.list()} == set(ids)
            again = ws.open(ids[0])  # closed long ago: reopened with its history
            assert [m["content"] for m in again.conversation.messages if m["role"] == "user"] == [
                "hello 0"
            ]
            assert len(ws.sessions()) <= 3
            # Threads stay bounded by the open sessions, not by all ever opened.
            assert wait_until(lambda: threading.active_count() <= baseline + 3 * 2 + 2, 15)
        finally:
            ws.close()


def test_a_full_workspace_refuses_clearly_and_leaves_nothing_behind(workspace: Path) -> None:
    gate = Gate()
    with FakeOpenAIServer([gate.hold("late")] * 3 + ["ok"] * 3) as server:
        ws = Workspace(workspace, settings_for(server), max_open=3)
        try:
            busy = [ws.create() for _ in range(3)]
            for session in busy:
                session.post("work")
            assert wait_until(lambda: all(s.state == "running" for s in busy))
            before = sorted(p.name for p in conversations_dir(workspace).iterdir())
            with pytest.raises(WorkspaceFull, match="every one is busy"):
                ws.create()
            assert sorted(p.name for p in conversations_dir(workspace).iterdir()) == before
            assert len(ws.list()) == 3 and len(ws.sessions()) == 3
            # A reader of its events keeps an idle conversation open too.
            gate.event.set()
            assert wait_until(lambda: all(s.wait_idle(0) for s in busy))
            busy[0].bus.iter(timeout=0.01)  # subscribed from the call on
            fresh = ws.create()
            assert busy[0] in ws.sessions() and fresh in ws.sessions()
        finally:
            gate.event.set()
            ws.close()
