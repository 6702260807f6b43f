"""Conversation: messages, state and statistics, persisted atomically as JSON.

The main agent's conversation lives at ``<workspace>/.agentkit/conversations/<id>.json``
(docs/architecture.md §1) and is rewritten after every turn, so a crash loses at most the turn
in flight and ``Agent(conversation_id=...)`` can load it and continue.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentkit.jsonfile import read_json, write_json_atomic
from agentkit.llm.turns import Usage

# The seed's four activity counters (docs/specification.md §1 stats, §3.2 template), in display order;
# the one definition every module (Stats, records, status rows, views) uses.
SEED_COUNTERS = ("files_read", "searches", "web_pages", "commands")


def utc_now() -> str:
    """Return the current UTC time as ``2026-03-10T12:00:00Z`` (docs/specification.md §6 format)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_conversation_id() -> str:
    """Return a fresh id like ``conv_3f2a9c1b7d4e`` (docs/specification.md §1 shape ``conv_abc123``)."""
    return "conv_" + uuid.uuid4().hex[:12]


@dataclass
class Stats:
    """Counters of one conversation.

    ``turns`` counts model requests answered; ``tool_calls`` counts calls by tool
    name; token fields are summed usage (tokens), ``usage_estimated`` is True if any
    turn's usage was counted locally. The four seed counters (docs/specification.md §1 stats) count
    successful calls: files_read = read_file, searches = search_workspace +
    web_search, web_pages = extract_webpage, commands = run_command (a command
    that ran counts whatever its exit code).
    """

    turns: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)  # every call, by tool name
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    usage_estimated: bool = False
    files_read: int = 0
    searches: int = 0
    web_pages: int = 0
    commands: int = 0

    def add_usage(self, usage: Usage) -> None:
        """Add one turn's usage."""
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.total_tokens += usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
        self.usage_estimated = self.usage_estimated or usage.estimated

    def count_call(self, name: str) -> None:
        """Count one call of tool ``name`` (every attempt, failed ones included)."""
        self.tool_calls[name] = self.tool_calls.get(name, 0) + 1

    def count_done(self, counter: str | None) -> None:
        """Count one successful call into a seed counter: "read N files" counts
        files actually read, not refused attempts."""
        if counter in SEED_COUNTERS:
            setattr(self, counter, getattr(self, counter) + 1)

    def seed_counts(self) -> dict[str, int]:
        """Return the four seed counters as ``{name: count}`` (SEED_COUNTERS order)."""
        return {name: getattr(self, name) for name in SEED_COUNTERS}

    def token_usage(self) -> dict[str, int]:
        """Return ``{"prompt", "completion", "total"}`` (docs/specification.md §6 shape)."""
        return {
            "prompt": self.prompt_tokens,
            "completion": self.completion_tokens,
            "total": self.total_tokens,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict, including ``token_usage``."""
        data = asdict(self)
        data["tool_calls"] = dict(self.tool_calls)
        data["token_usage"] = self.token_usage()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stats:
        """Rebuild from :meth:`to_dict` output. Unknown keys, and values of the wrong
        type (a damaged file), are left out: those fields keep their defaults."""
        known: dict[str, Any] = {}
        for key, value in data.items():
            if key == "tool_calls" and isinstance(value, dict):
                known[key] = {
                    str(k): v
                    for k, v in value.items()
                    if type(v) is int  # not bool
                }
            elif key in cls.__dataclass_fields__ and key != "tool_calls":
                wanted = bool if key == "usage_estimated" else int
                if type(value) is wanted:
                    known[key] = value
        return cls(**known)


@dataclass
class Conversation:
    """One conversation: its messages (OpenAI shape), state and stats.

    ``archive`` keeps the original text of messages shrunk or compacted to fit the
    context window, so nothing is lost from the record.
    """

    id: str = field(default_factory=new_conversation_id)
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: str = "idle"
    stats: Stats = field(default_factory=Stats)
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)
    model: str | None = None
    final_text: str | None = None
    error: str | None = None
    archive: list[dict[str, Any]] = field(default_factory=list)
    subagents: list[dict[str, Any]] = field(default_factory=list)
    title: str | None = None
    pending_notes: list[str] = field(default_factory=list)  # owed to the model's next round

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON document saved on disk."""
        return {
            "conversation_id": self.id,
            "title": self.title,
            "state": self.state,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "model": self.model,
            "final_text": self.final_text,
            "error": self.error,
            "stats": self.stats.to_dict(),
            "subagents": self.subagents,
            "pending_notes": self.pending_notes,
            "messages": self.messages,
            "archive": self.archive,
        }

    def save(self, path: Path, root: Path | None = None) -> None:
        """Write the conversation atomically to ``path`` (temp file + rename); ``root``
        (the workspace): no link below it is followed (agentkit.confined)."""
        self.updated_at = utc_now()
        write_json_atomic(path, self.to_dict(), root=root)

    @classmethod
    def load(cls, path: Path) -> Conversation:
        """Load a conversation saved by :meth:`save`.

        Raises FileNotFoundError, or ValueError when the file is not a conversation.
        """
        data = read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise ValueError(f"{path} is not an agentkit conversation file")
        if not all(isinstance(m, dict) for m in data["messages"]):
            raise ValueError(f"{path}: a message is not a JSON object")

        def items(key: str, kind: type) -> list[Any]:
            # A damaged field (a number where a list belongs) reads as empty, not a crash.
            value = data.get(key)
            return [v for v in value if isinstance(v, kind)] if isinstance(value, list) else []

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        stats = data.get("stats")
        loaded = Stats.from_dict(stats) if isinstance(stats, dict) else Stats()
        return cls(
            id=str(data.get("conversation_id") or path.stem),
            messages=data["messages"],
            state=text("state") or "idle",
            stats=loaded,
            created_at=text("created_at") or utc_now(),
            updated_at=text("updated_at") or utc_now(),
            model=text("model"),
            final_text=text("final_text"),
            error=text("error"),
            archive=items("archive", dict),
            subagents=items("subagents", dict),
            title=text("title"),
            pending_notes=items("pending_notes", str),
        )


def conversations_dir(workspace: Path) -> Path:
    """Return ``<workspace>/.agentkit/conversations``."""
    return workspace / ".agentkit" / "conversations"
