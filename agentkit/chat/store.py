"""The saved conversations of a workspace: list, read, rename, delete.

One job: the files under ``<workspace>/.agentkit/conversations/<id>.json``
(docs/architecture.md §1) seen as a list of conversations with a title, a state
and their sub-agents. Live conversations are :class:`agentkit.chat.Session`
objects; this module only reads and edits the files (a rename or delete of an
open conversation goes through its session, see agentkit.chat.workspace).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.conversation import (
    LIVE_STATES,
    PROCESS_GONE,
    Conversation,
    ConversationState,
    conversations_dir,
    hide_runtime_folder,
    utc_from,
    utc_now,
)
from agentkit.errors import ConfigurationError
from agentkit.jsonfile import JsonFileWriter, read_json
from agentkit.subagent.sweep import conversation_held, live_rows

if TYPE_CHECKING:
    from agentkit.chat.inbox import Inbox

__all__ = [
    "ConversationFile",
    "ConversationInfo",
    "ListedState",
    "conversation_path",
    "default_title",
    "delete_conversation",
    "list_conversations",
    "load_conversation",
    "rename_conversation",
]

TITLE_MAX = 80
"""Longest title kept, characters (a longer one is cut with an ellipsis)."""

_ID = re.compile(r"^[A-Za-z0-9_\-]{1,80}$")

ListedState = ConversationState | Literal["ended (process gone)", "damaged"]
"""A conversation's state in a list: its saved :data:`ConversationState`, ``ended
(process gone)`` (:data:`~agentkit.conversation.PROCESS_GONE`) or ``damaged``."""


@dataclass(frozen=True)
class ConversationInfo:
    """One saved conversation, for a list view.

    Attributes:
        id: the conversation id (``conv_...``).
        title: its title (given, or from its first user message).
        state: a :data:`ListedState`: the :data:`ConversationState` last saved, or
            ``ended (process gone)`` (agentkit.conversation.PROCESS_GONE) for one saved
            as running or waiting whose process is gone (killed).
        created_at, updated_at: ISO UTC times.
        subagents: how many sub-agents it created; ``subagents_running``: how many
            run now (saved as running, and their records say so with a live worker).
        turns: model requests so far.
        error: why the file cannot be read, for a damaged one (``state`` is then
            ``damaged`` and the file is left as it is); None for a good one.
    """

    id: str
    title: str
    state: ListedState
    created_at: str
    updated_at: str
    subagents: int
    subagents_running: int
    turns: int
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)


def conversation_path(workspace: Path, conversation_id: str) -> Path:
    """Return the file of ``conversation_id``.

    Raises:
        ConfigurationError: the id is not a plain name (letters, digits, ``_``, ``-``),
            so no id can point outside the conversations folder.
    """
    if not _ID.match(conversation_id):
        raise ConfigurationError(f"not a conversation id: {conversation_id!r}")
    return conversations_dir(workspace) / f"{conversation_id}.json"


def default_title(messages: list[dict[str, Any]]) -> str:
    """Return a title from the first user message (one line, at most TITLE_MAX
    characters), or "" when there is none."""
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return clean_title(message["content"])
    return ""


_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters, and the bidirectional controls that make a title read
otherwise than it is written (U+202E turns ``evil`` into ``live``)."""


def clean_title(text: str) -> str:
    """Return ``text`` as a one-line title of at most TITLE_MAX characters, without
    control characters or bidirectional controls (they become spaces)."""
    line = " ".join(_UNSHOWN.sub(" ", text).split())
    return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1] + "…"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _info(path: Path, data: Any) -> ConversationInfo:
    """The list entry of a conversation file's parsed content, its state and running
    sub-agents as they are now (a conversation saved as running by a killed process
    reads :data:`PROCESS_GONE`). Raises ValueError when it is not a conversation (the
    caller lists it as damaged)."""
    conversation = Conversation.load_data(data, path)  # checks what opening checks
    workspace = path.parent.parent.parent  # <workspace>/.agentkit/conversations/<id>.json
    state = conversation.state  # read and checked once, by Conversation.load_data
    alive = state not in LIVE_STATES or conversation_held(workspace, path.stem)
    rows = live_rows(workspace, conversation.subagents, owner_alive=alive)
    return ConversationInfo(
        id=path.stem,  # the file's name is its id (opening goes by it)
        title=conversation.title or default_title(conversation.messages) or path.stem,
        state=state if alive else PROCESS_GONE,
        created_at=_text(data.get("created_at")),
        updated_at=_text(data.get("updated_at")),
        subagents=len(rows),
        subagents_running=sum(1 for r in rows if r.get("status") == "running"),
        turns=conversation.stats.turns,
    )


def _damaged(path: Path, error: Exception) -> ConversationInfo:
    try:
        updated = utc_from(path.stat().st_mtime)
    except OSError:
        updated = ""
    reason = " ".join(str(error).replace(str(path), path.name).split())[:200]
    return ConversationInfo(path.stem, path.stem, "damaged", "", updated, 0, 0, 0, reason)


def list_conversations(workspace: Path) -> list[ConversationInfo]:
    """Return the workspace's saved conversations, most recently updated first.

    Never raises for a bad file: a file that is not a readable conversation (bad
    JSON, nested too deeply, messages that are not objects...) is listed with
    ``state`` ``damaged`` and the reason in ``error``, and left untouched.
    """
    folder = conversations_dir(workspace)
    found: list[ConversationInfo] = []
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".json" and _ID.match(p.stem)]
    except OSError:
        return []
    for path in paths:
        try:
            found.append(_info(path, read_json(path)))
        except FileNotFoundError:
            continue  # deleted meanwhile
        except (OSError, ValueError) as exc:
            found.append(_damaged(path, exc))
    found.sort(key=lambda i: (i.updated_at, i.id), reverse=True)
    return found


def load_conversation(workspace: Path, conversation_id: str) -> Conversation:
    """Load a saved conversation.

    Raises:
        FileNotFoundError: no such conversation in this workspace.
        ConfigurationError: a bad id, or the file is damaged (says which file).
    """
    path = conversation_path(workspace, conversation_id)
    if not path.is_file():
        raise FileNotFoundError(f"no saved conversation {conversation_id!r} in {path.parent}")
    try:
        conversation = Conversation.load(path)
    except ValueError as exc:  # bad JSON or not a conversation
        raise ConfigurationError(f"conversation file {path} is damaged: {exc}") from exc
    # The file's name is the id it is listed and opened by; an id inside that says
    # otherwise (a copied or edited file) must not make a second file at the next save.
    conversation.id = conversation_id
    return conversation


def rename_conversation(workspace: Path, conversation: Conversation, title: str) -> None:
    """Set the title of a saved conversation that is not open, loaded while its claim
    is held (agentkit.chat.lock: Workspace.rename claims it, so that a delete cannot
    interleave and have this save write the file back), and save it.

    Raises ConfigurationError for an empty title, OSError when it cannot be written.
    """
    title = clean_title(title)
    if not title:
        raise ConfigurationError("a title cannot be empty")
    conversation.title = title
    conversation.save(conversation_path(workspace, conversation.id), root=workspace)


def delete_conversation(workspace: Path, conversation_id: str) -> None:
    """Delete a saved (not open) conversation's file. Sub-agent deliverables and
    transcripts stay where they are (they are the user's files).

    Raises FileNotFoundError when there is no such conversation.
    """
    path = conversation_path(workspace, conversation_id)
    os.unlink(path)


class ConversationFile:
    """Saves a live conversation to ``<workspace>/.agentkit/conversations/<id>.json``,
    coalescing quick successive saves (agentkit.jsonfile.JsonFileWriter: atomic, off
    the caller's thread).

    While the session lives, each save writes ``last_event_seq`` as null (its events
    are numbered on past what any file says) and, once :meth:`follow` is called,
    ``queued`` from the session's inbox. :meth:`close` makes the last save: later
    ones write nothing (a rename or an event that comes after a session closed, or
    its conversation was deleted, must not write the file back).

    Args:
        workspace: the workspace root.
        memory: write nothing (``Settings.conversation_store="memory"``: the
            conversation lives in its session only).
    """

    def __init__(self, workspace: Path, *, memory: bool = False) -> None:
        self.workspace = workspace
        self.memory = memory
        self._writer: JsonFileWriter | None = None
        self._inbox: Inbox | None = None
        self._closed = False
        self._lock = threading.Lock()

    def follow(self, inbox: Inbox, conversation: Conversation) -> bool:
        """Save ``inbox``'s messages not yet in ``conversation`` as its ``queued``
        list, from now on; each accepted message is written before ``inbox.put``
        returns (its ``persist`` hook). The messages ``conversation`` already lists
        as queued (accepted by an earlier session, never delivered) go into the
        inbox first; returns True when there were any (a round is owed them)."""
        restored, conversation.queued = conversation.queued, []
        inbox.restore(restored)
        self._inbox = inbox

        def persist() -> None:
            self.save(conversation, None)
            self.flush()

        inbox.persist = persist
        return bool(restored)

    def save(self, conversation: Conversation, subagents: list[dict[str, Any]] | None) -> None:
        """Queue a save of ``conversation`` (its ``subagents`` rows replaced when given);
        nothing once closed."""
        with self._lock:
            if not self._closed:
                self._submit(conversation, subagents, final=False)

    def close(
        self,
        conversation: Conversation,
        subagents: list[dict[str, Any]] | None,
        last_event_seq: int,
    ) -> None:
        """The last save: ``conversation`` as it ends, with ``last_event_seq`` (the
        number of its stream's last event, once the stream has ended: the next
        opening numbers on from it); later saves write nothing. Raises OSError when
        it cannot be written."""
        conversation.last_event_seq = last_event_seq
        with self._lock:
            if self._closed:
                return
            self._submit(conversation, subagents, final=True)
            self._closed = True
        self.flush()

    def _submit(
        self, conversation: Conversation, subagents: list[dict[str, Any]] | None, final: bool
    ) -> None:
        if subagents is not None:
            conversation.subagents = subagents
        if self.memory:
            return
        path = conversations_dir(self.workspace) / f"{conversation.id}.json"
        if self._writer is None or self._writer.path != path:
            if self._writer is not None:
                self._writer.flush()
            hide_runtime_folder(self.workspace, path.parent)  # not in the user's git status
            self._writer = JsonFileWriter(path, root=self.workspace, forget_when_idle=True)
        conversation.updated_at = utc_now()
        data = conversation.to_dict()
        messages = list(data["messages"])  # the snapshot ``queued`` is computed against
        data["messages"] = messages
        if self._inbox is not None:
            data["queued"] = self._inbox.unsaved(messages)
        if not final:
            data["last_event_seq"] = None  # unknown while the session may stream more
        self._writer.submit(data)

    def flush(self) -> None:
        """Write what is queued now. Raises OSError when the file cannot be written."""
        with self._lock:
            writer = self._writer
        if writer is not None:
            writer.flush()
