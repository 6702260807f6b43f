"""A workspace's conversations, several of them open at once (a chat server).

One job: create, open, list, rename, delete and switch the conversations of one
folder, keeping at most one live :class:`Session` per conversation. Each open
session has its own sub-agents and limits (five running each). Leaving a
conversation (:meth:`Workspace.switch`, :meth:`Workspace.close_session`,
:meth:`Workspace.delete`) ends its sub-agents (docs/specification.md §8.5); when
it is opened again, the model is told which ended unseen.

Bounded: at most ``max_open`` sessions live at once (``Settings.max_open_conversations``,
lowered to what the file-descriptor limit allows: :func:`descriptor_bound`; each
holds a thread, a lock file and a model connection). To open one more, the
least recently used *idle* session is closed: no round, nothing queued, no
sub-agent running, nobody following its events. Closing one loses nothing (it is
saved; its event numbers go on when it is reopened, on demand, by the next
:meth:`Workspace.open`). When every session is busy, or the process has run out of
file descriptors or threads, opening raises :class:`agentkit.errors.WorkspaceFull`
and leaves nothing behind.

Operations on one conversation (open, close, rename, delete) run one at a time, so
a rename never writes back a file a delete has just removed.
"""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentkit.chat.assembly import check_folder
from agentkit.chat.lock import claim_conversation, claim_saved_conversation
from agentkit.chat.session import Session
from agentkit.chat.setup import check_builtin_tools
from agentkit.chat.store import (
    ConversationInfo,
    conversation_path,
    delete_conversation,
    list_conversations,
    rename_conversation,
)
from agentkit.errors import Cancelled, WorkspaceFull
from agentkit.settings import Settings

__all__ = ["FDS_PER_CONVERSATION", "FDS_RESERVED", "Workspace", "descriptor_bound"]

_OUT_OF = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN)

FDS_PER_CONVERSATION = 8
"""File descriptors budgeted per live conversation (its lock file and model
connection, its sub-agents' channels and commands' pipes)."""
FDS_RESERVED = 64
"""File descriptors kept for everything else (listening and client sockets, files)."""


def descriptor_bound() -> int | None:
    """How many live conversations the process's file-descriptor limit
    (``RLIMIT_NOFILE``, soft) allows: ``(limit - FDS_RESERVED) // FDS_PER_CONVERSATION``,
    at least 1; None where there is no such limit (or it cannot be read). With the
    common ``ulimit -n 1024``: 120."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, (soft - FDS_RESERVED) // FDS_PER_CONVERSATION)


class Workspace:
    """The conversations of one workspace folder.

    Args:
        path: the workspace folder (must exist).
        settings: Settings for every session (default: read the environment).
        max_open: most sessions live at once (default:
            ``settings.max_open_conversations``), and never more than the file
            descriptor limit allows (:func:`descriptor_bound`); see the module docstring.
        discard_untouched: delete, when it is closed, the file of a conversation this
            Workspace created and nothing happened in (no message, title, queued
            message or sub-agent); its id goes to :attr:`discarded`. For a chat that
            ends before anything is said (the CLI's); off: every conversation is kept.
        **session_options: passed to each :class:`Session` (``tools``, ``model``,
            ``subagents``, ``launcher``, ``prewarm``, ``instructions``,
            ``builtin_tools``: an unknown tool name is refused here).

    Thread-safe. Raises ConfigurationError for a missing folder.
    """

    def __init__(
        self,
        path: str | Path = ".",
        settings: Settings | None = None,
        *,
        max_open: int | None = None,
        discard_untouched: bool = False,
        **session_options: Any,
    ) -> None:
        self.path = check_folder(path)  # the message a Session or an Agent gives
        chosen = check_builtin_tools(session_options.get("builtin_tools"))  # now, not later
        if chosen is not None:  # a generator would serve the first session only
            session_options["builtin_tools"] = sorted(chosen)
        self.settings = settings or Settings()
        wanted = max(1, max_open or self.settings.max_open_conversations)
        self.max_open = min(wanted, descriptor_bound() or wanted)
        self._options = session_options
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # least recently used first
        self._opening = 0  # sessions being constructed (they count against max_open)
        self._lock = threading.RLock()
        self._ops: dict[str, threading.RLock] = {}
        self._discard_untouched = discard_untouched
        self._created: set[str] = set()
        self.discarded: set[str] = set()  # untouched conversations deleted at close
        self.last_kept: str | None = None  # the conversation closed last and kept

    # ------------------------------------------------------------ opening
    def create(self, title: str | None = None, *, settings: Settings | None = None) -> Session:
        """Open a new, empty conversation (saved once it has a title or a message,
        or when it is closed); ``settings`` replace the workspace's for this session
        (an editor's MCP servers for one conversation). Raises WorkspaceFull
        (nothing is created)."""
        session = self._new_session(None, settings)
        with self._lock:
            self._created.add(session.id)
        if title:
            session.rename(title)
        return session

    def open(self, conversation_id: str, *, settings: Settings | None = None) -> Session:
        """Return the live session of a conversation, loading it if needed (with
        ``settings`` instead of the workspace's, when given; a session already open
        keeps its own).

        Raises FileNotFoundError (no such conversation), ConfigurationError (a bad
        id or a damaged file) or WorkspaceFull."""
        with self._op(conversation_id):
            session = self.get(conversation_id)
            if session is not None:
                return session
            return self._new_session(conversation_id, settings)

    def _new_session(self, conversation_id: str | None, settings: Settings | None) -> Session:
        """Construct and register a session, within ``max_open``: an idle one is
        closed to make room, and once more when the process runs out of file
        descriptors or threads. Raises WorkspaceFull."""
        self._reserve()
        try:
            for attempt in range(2):
                try:
                    session = Session(
                        self.path,
                        settings or self.settings,
                        conversation_id=conversation_id,
                        **self._options,
                    )
                    break
                except (OSError, RuntimeError) as exc:
                    if not _out_of_resources(exc):
                        raise
                    if attempt or not self._evict_one():
                        raise WorkspaceFull(
                            f"cannot open another conversation now: {exc} (the process is out "
                            "of file descriptors or threads; close a conversation or raise "
                            "the limit, e.g. ulimit -n)"
                        ) from None
            with self._lock:
                self._sessions[session.id] = session
            return session
        finally:
            with self._lock:
                self._opening -= 1

    def _reserve(self) -> None:
        """Count one session being opened, closing idle ones to make room. Raises
        WorkspaceFull when every live session is busy."""
        while True:
            with self._lock:
                self._drop_closed()
                if len(self._sessions) + self._opening < self.max_open:
                    self._opening += 1
                    return
            if not self._evict_one():
                raise WorkspaceFull(
                    f"the server has {self.max_open} conversations open and every one is "
                    "busy (a round, queued messages, sub-agents or a reader of its events); "
                    "try again when one is idle, or close one (max_open_conversations "
                    "sets the limit)"
                )

    def _evict_one(self) -> bool:
        """Close the least recently used idle session; False when none could be."""
        with self._lock:
            candidates = [s for s in self._sessions.values() if _idle(s)]
        for session in candidates:
            lock = self._op_lock(session.id)
            if not lock.acquire(blocking=False):
                continue  # being renamed, opened or closed right now
            try:
                with self._lock:
                    if self._sessions.get(session.id) is not session or not _idle(session):
                        continue
                    del self._sessions[session.id]
                session.close()
                return True
            finally:
                lock.release()
        return False

    def _drop_closed(self) -> None:
        """Forget sessions their owner closed directly (they hold nothing)."""
        for cid in [cid for cid, s in self._sessions.items() if s.closed]:
            del self._sessions[cid]

    @contextmanager
    def _op(self, conversation_id: str) -> Iterator[None]:
        lock = self._op_lock(conversation_id)
        with lock:
            yield

    def _op_lock(self, conversation_id: str) -> threading.RLock:
        with self._lock:
            lock = self._ops.get(conversation_id)
            if lock is None:
                lock = self._ops[conversation_id] = threading.RLock()
            return lock

    # ---------------------------------------------------------- reading
    def get(self, conversation_id: str) -> Session | None:
        """The open session of ``conversation_id``, or None."""
        with self._lock:
            session = self._sessions.get(conversation_id)
            if session is None or session.closed:
                return None
            self._sessions.move_to_end(conversation_id)  # most recently used
            return session

    def sessions(self) -> list[Session]:
        """The open sessions."""
        with self._lock:
            return [s for s in self._sessions.values() if not s.closed]

    def list(self) -> list[ConversationInfo]:
        """Every saved conversation (open ones with their live state and title),
        most recently updated first, then open ones not saved yet. Damaged files
        are listed too (``state`` ``damaged``, see agentkit.chat.store)."""
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

    # ---------------------------------------------------------- changing
    def rename(self, conversation_id: str, title: str) -> None:
        """Rename a conversation, open or saved. Raises ConfigurationError (empty
        title, bad id, open in another process) or FileNotFoundError."""
        with self._op(conversation_id):
            session = self.get(conversation_id)
            if session is not None:
                try:
                    session.rename(title)
                    return
                except Cancelled:
                    pass  # its owner closed it just now: rename the file
            # Claimed while renaming: a delete elsewhere (which claims too) cannot interleave.
            conversation, release = claim_saved_conversation(self.path, conversation_id, _always)
            try:
                rename_conversation(self.path, conversation, title)
            finally:
                release()

    def close_session(self, conversation_id: str) -> None:
        """Leave a conversation: its sub-agents end, it is saved (§8.5)."""
        with self._op(conversation_id):
            with self._lock:
                session = self._sessions.pop(conversation_id, None)
            if session is not None:
                self._close(session)

    def delete(self, conversation_id: str) -> None:
        """Close (if open) and delete a conversation's file; its sub-agents'
        deliverables stay. Raises FileNotFoundError when nothing was saved or open,
        ConfigurationError when another process has it open."""
        with self._op(conversation_id):
            was_open = self.get(conversation_id) is not None
            self.close_session(conversation_id)
            # Claimed while deleting: a session of another process would write it back.
            lock = conversation_path(self.path, conversation_id).with_suffix(".lock")
            release = (
                claim_conversation(lock, conversation_id, _always) if lock.parent.is_dir() else None
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
        (None: a new conversation). Returns the session switched to. Leaving an
        untouched conversation (nothing said, no title, nothing queued, no sub-agent)
        for a new one returns it again: "New conversation" clicked twice makes one.

        ``to`` opens first: a switch that fails (no such conversation, a damaged
        file, one open in another process) raises as :meth:`open` does and leaves
        ``leaving`` as it was, its sub-agents still working (a new user's trial saw
        them stopped by a refused switch). When the workspace is full, ``leaving``
        is closed to make room and ``to`` is opened again."""

        def arrive() -> Session:
            return self.open(to) if to else self.create()

        if leaving is None or leaving == to:
            return arrive()
        left = self.get(leaving)
        if to is None and left is not None and _untouched(left):
            return left
        try:
            session = arrive()
        except WorkspaceFull:
            self.close_session(leaving)
            return arrive()
        self.close_session(leaving)
        return session

    def close(self) -> None:
        """Close every open session (their sub-agents end). Idempotent."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            with self._op(session.id):
                self._close(session)

    def _close(self, session: Session) -> None:
        """Close ``session``; with ``discard_untouched``, delete its file when this
        Workspace created it and nothing happened in it."""
        session.close()  # saves what it held: queued messages, sub-agents' rows
        if not (self._discard_untouched and session.id in self._created and _untouched(session)):
            self.last_kept = session.id
            return
        try:
            delete_conversation(self.path, session.id)
        except FileNotFoundError:
            pass  # never saved (a memory store) or removed meanwhile
        with self._lock:
            self.discarded.add(session.id)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _always() -> bool:
    return True  # a claim held only while this call works on the file


def _idle(session: Session) -> bool:
    """True when closing ``session`` now loses nothing and stops nothing: no round,
    nothing queued or waiting to be announced, no sub-agent running, nobody
    following its events (and no background services its commands may keep)."""
    if session.closed or not session.wait_idle(0) or session.state != "idle":
        return False
    if session.settings.command_background_services:
        return False  # closing would end services its commands left running
    return session.bus.subscribers == 0


def _untouched(session: Session) -> bool:
    """True when nothing happened in ``session``'s conversation yet: no message but
    the system prompt, no title, nothing queued, no sub-agent, no round running."""
    conv = session.conversation
    said = any(m.get("role") != "system" for m in conv.messages)
    busy = session.state != "idle"  # a round, or a message waiting for one
    return not (said or conv.title or conv.queued or conv.subagents or busy)


def _out_of_resources(exc: BaseException) -> bool:
    """True for running out of file descriptors, memory or threads."""
    if isinstance(exc, OSError):
        return exc.errno in _OUT_OF
    return isinstance(exc, RuntimeError) and "thread" in str(exc)
