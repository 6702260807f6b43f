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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentkit.conversation import Conversation, conversations_dir, utc_now
from agentkit.errors import ConfigurationError
from agentkit.jsonfile import JsonFileWriter, read_json

__all__ = [
    "ConversationFile",
    "ConversationInfo",
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


@dataclass(frozen=True)
class ConversationInfo:
    """One saved conversation, for a list view.

    Attributes:
        id: the conversation id (``conv_...``).
        title: its title (given, or from its first user message).
        state: ``idle``, ``running`` or ``waiting_for_subagents`` as last saved
            (a conversation saved as running by a process that is gone shows as it was).
        created_at, updated_at: ISO UTC times.
        subagents: how many sub-agents it created; ``subagents_running``: how many its
            file lists as running.
        turns: model requests so far.
    """

    id: str
    title: str
    state: str
    created_at: str
    updated_at: str
    subagents: int
    subagents_running: int
    turns: int

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


def clean_title(text: str) -> str:
    """Return ``text`` as a one-line title of at most TITLE_MAX characters."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1] + "…"


def _info(path: Path, data: dict[str, Any]) -> ConversationInfo:
    rows = [r for r in data.get("subagents") or [] if isinstance(r, dict)]
    raw_messages, raw_title, raw_stats = data.get("messages"), data.get("title"), data.get("stats")
    messages: list[dict[str, Any]] = raw_messages if isinstance(raw_messages, list) else []
    title = raw_title if isinstance(raw_title, str) else None
    stats: dict[str, Any] = raw_stats if isinstance(raw_stats, dict) else {}
    return ConversationInfo(
        id=str(data.get("conversation_id") or path.stem),
        title=title or default_title(messages) or path.stem,
        state=str(data.get("state") or "idle"),
        created_at=str(data.get("created_at") or ""),
        updated_at=str(data.get("updated_at") or ""),
        subagents=len(rows),
        subagents_running=sum(1 for r in rows if r.get("status") == "running"),
        turns=int(stats.get("turns") or 0),
    )


def list_conversations(workspace: Path) -> list[ConversationInfo]:
    """Return the workspace's saved conversations, most recently updated first.

    Damaged or foreign files in the folder are skipped (never raised): a list view
    must show what it can.
    """
    folder = conversations_dir(workspace)
    found: list[ConversationInfo] = []
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".json" and _ID.match(p.stem)]
    except OSError:
        return []
    for path in paths:
        try:
            data = read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            try:
                found.append(_info(path, data))
            except (TypeError, ValueError):  # e.g. "turns": "many": skip, as promised
                continue
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
        return Conversation.load(path)
    except ValueError as exc:  # bad JSON or not a conversation
        raise ConfigurationError(f"conversation file {path} is damaged: {exc}") from exc


def rename_conversation(workspace: Path, conversation_id: str, title: str) -> None:
    """Set the title of a saved (not open) conversation; an empty title is refused.

    Raises FileNotFoundError, ConfigurationError as :func:`load_conversation`.
    """
    title = clean_title(title)
    if not title:
        raise ConfigurationError("a title cannot be empty")
    conversation = load_conversation(workspace, conversation_id)
    conversation.title = title
    conversation.save(conversation_path(workspace, conversation_id), root=workspace)


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

    Args:
        workspace: the workspace root.
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._writer: JsonFileWriter | None = None

    def save(self, conversation: Conversation, subagents: list[dict[str, Any]] | None) -> None:
        """Queue a save of ``conversation`` (its ``subagents`` rows replaced when given)."""
        if subagents is not None:
            conversation.subagents = subagents
        path = conversations_dir(self.workspace) / f"{conversation.id}.json"
        if self._writer is None or self._writer.path != path:
            self.flush()
            self._writer = JsonFileWriter(path, root=self.workspace)
        conversation.updated_at = utc_now()
        self._writer.submit(conversation.to_dict())

    def flush(self) -> None:
        """Write what is queued now. Raises OSError when the file cannot be written."""
        if self._writer is not None:
            self._writer.flush()
