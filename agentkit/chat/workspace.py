"""A workspace's conversations, several of them open at once (a chat server).

One job: create, open, list, rename, delete and switch the conversations of one
folder, keeping at most one live :class:`Session` per conversation. Each open
session has its own sub-agents and limits (five running each). Leaving a
conversation (:meth:`Workspace.switch`, :meth:`Workspace.close_session`,
:meth:`Workspace.delete`) ends its sub-agents (docs/specification.md §8.5); when
it is opened again, the model is told which ended unseen.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from agentkit.chat.lock import claim_conversation
from agentkit.chat.session import Session
from agentkit.chat.store import (
    ConversationInfo,
    conversation_path,
    delete_conversation,
    list_conversations,
    rename_conversation,
)
from agentkit.errors import ConfigurationError
from agentkit.settings import Settings

__all__ = ["Workspace"]


class Workspace:
    """The conversations of one workspace folder.

    Args:
        path: the workspace folder (must exist).
        settings: Settings for every session (default: read the environment).
        **session_options: passed to each :class:`Session` (``tools``, ``model``,
            ``subagents``, ``launcher``, ``prewarm``).

    Thread-safe. Raises ConfigurationError for a missing folder.
    """

    def __init__(
        self, path: str | Path = ".", settings: Settings | None = None, **session_options: Any
    ) -> None:
        root = Path(path).expanduser()
        if not root.is_dir():
            raise ConfigurationError(f"workspace {str(root)!r} is not a folder")
        self.path = root.resolve()
        self.settings = settings or Settings()
        self._options = session_options
        self._sessions: dict[str, Session] = {}
        self._lock = threading.RLock()

    def create(self, title: str | None = None) -> Session:
        """Open a new, empty conversation (saved once it has a title or a message)."""
        session = Session(self.path, self.settings, **self._options)
        with self._lock:
            self._sessions[session.id] = session
        if title:
            session.rename(title)
        return session

    def open(self, conversation_id: str) -> Session:
        """Return the live session of a conversation, loading it if needed.

        Raises FileNotFoundError (no such conversation) or ConfigurationError (a bad
        id or a damaged file)."""
        with self._lock:
            session = self._sessions.get(conversation_id)
            if session is not None and not session.closed:
                return session
            session = Session(
                self.path, self.settings, conversation_id=conversation_id, **self._options
            )
            self._sessions[conversation_id] = session
            return session

    def get(self, conversation_id: str) -> Session | None:
        """The open session of ``conversation_id``, or None."""
        with self._lock:
            session = self._sessions.get(conversation_id)
            return session if session is not None and not session.closed else None

    def sessions(self) -> list[Session]:
        """The open sessions."""
        with self._lock:
            return [s for s in self._sessions.values() if not s.closed]

    def list(self) -> list[ConversationInfo]:
        """Every saved conversation (open ones with their live state and title),
        most recently updated first, then open ones not saved yet."""
        infos = {i.id: i for i in list_conversations(self.path)}
        for session in self.sessions():
            rows = session.subagents()
            infos[session.id] = ConversationInfo(
                id=session.id,
                title=session.title or session.id,
                state=session.state,
                created_at=session.conversation.created_at,
                updated_at=session.conversation.updated_at,
                subagents=len(rows),
                subagents_running=sum(1 for r in rows if r.get("status") == "running"),
                turns=session.conversation.stats.turns,
            )
        return sorted(infos.values(), key=lambda i: (i.updated_at, i.id), reverse=True)

    def rename(self, conversation_id: str, title: str) -> None:
        """Rename a conversation, open or saved. Raises ConfigurationError (empty
        title, bad id) or FileNotFoundError."""
        session = self.get(conversation_id)
        if session is not None:
            session.rename(title)
        else:
            rename_conversation(self.path, conversation_id, title)

    def close_session(self, conversation_id: str) -> None:
        """Leave a conversation: its sub-agents end, it is saved (§8.5)."""
        with self._lock:
            session = self._sessions.pop(conversation_id, None)
        if session is not None:
            session.close()

    def delete(self, conversation_id: str) -> None:
        """Close (if open) and delete a conversation's file; its sub-agents'
        deliverables stay. Raises FileNotFoundError when nothing was saved or open,
        ConfigurationError when another process has it open."""
        was_open = self.get(conversation_id) is not None
        self.close_session(conversation_id)
        # Claimed while deleting: a session of another process would write it back.
        lock = conversation_path(self.path, conversation_id).with_suffix(".lock")
        release = (
            claim_conversation(lock, conversation_id, lambda: True)
            if lock.parent.is_dir()
            else None
        )
        try:
            delete_conversation(self.path, conversation_id)
        except FileNotFoundError:
            if not was_open:
                raise
        finally:
            if release is not None:
                release()

    def switch(self, leaving: str | None, to: str | None = None) -> Session:
        """Leave conversation ``leaving`` (its sub-agents end: §8.5) and open ``to``
        (None: a new conversation). Returns the session switched to."""
        if leaving is not None and leaving != to:
            self.close_session(leaving)
        return self.open(to) if to else self.create()

    def close(self) -> None:
        """Close every open session (their sub-agents end). Idempotent."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
