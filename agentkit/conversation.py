"""Conversation: messages, state and statistics, persisted atomically as JSON.

The main agent's conversation lives at ``<workspace>/.agentkit/conversations/<id>.json``
(docs/architecture.md §1) and is rewritten after every turn, so a crash loses at most the turn
in flight and ``Agent(conversation_id=...)`` can load it and continue.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final, Literal, get_args

from agentkit.jsonfile import read_json, write_json_atomic
from agentkit.llm.turns import Usage

log = logging.getLogger("agentkit")

STATE_DIR = ".agentkit"
"""agentkit's own folder at the workspace root (conversations, records, logs): the one
spelling; commands never write it (docs/architecture.md §6)."""

PROCESS_GONE: Final = "ended (process gone)"
"""What a view shows (``agentkit show``, the conversation list, the web list) for a
conversation or sub-agent its file says is running whose owning process is gone
(killed before it could write how it ended)."""

ConversationState = Literal["idle", "running", "waiting_for_subagents", "done", "failed"]
"""A conversation's state (:attr:`Conversation.state`, the ``StateChanged`` event):
``running`` (a round runs, or work for one waits), ``waiting_for_subagents`` (no round;
background sub-agents work), ``idle``; a one-shot run (``Agent.run``) ends ``done`` or
``failed`` (a cancelled one ``idle``)."""

CONVERSATION_STATES: tuple[ConversationState, ...] = get_args(ConversationState)
"""Every :data:`ConversationState`, in the order of its definition."""

LIVE_STATES: tuple[ConversationState, ...] = ("running", "waiting_for_subagents")
"""Conversation states that only a live session can be in."""

# The seed's four activity counters (docs/specification.md §1 stats, §3.2 template), in display order;
# the one definition every module (Stats, records, status rows, views) uses.
SEED_COUNTERS = ("files_read", "searches", "web_pages", "commands")


def utc_now() -> str:
    """Return the current UTC time as ``2026-03-10T12:00:00Z`` (docs/specification.md §6 format)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_from(timestamp: float) -> str:
    """Return a POSIX ``timestamp`` (seconds) in :func:`utc_now`'s format."""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_conversation_id() -> str:
    """Return a fresh id like ``conv_3f2a9c1b7d4e`` (docs/specification.md §1 shape ``conv_abc123``)."""
    return "conv_" + uuid.uuid4().hex[:12]


@dataclass
class Stats:
    """Counters of one conversation.

    ``turns`` counts model requests answered; ``tool_calls`` counts calls by tool
    name; token fields are summed usage (tokens), ``usage_estimated`` is True if any
    turn's usage was counted locally; ``cached_tokens`` is the part of the prompt
    tokens the server had cached, ``cost_usd`` the priced responses' cost in US dollars
    (agentkit.cost) and ``unpriced_responses`` those without a known price: then the
    cost is unknown (:meth:`cost` is None, never 0). The four seed counters (docs/specification.md §1 stats) count
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
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_responses: int = 0
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

    def add_cost(self, cached_tokens: int, cost_usd: float | None) -> None:
        """Add one response's cached prompt tokens and its cost (None: no known price)."""
        self.cached_tokens += cached_tokens
        if cost_usd is None:
            self.unpriced_responses += 1
        else:
            self.cost_usd += cost_usd

    def cost(self) -> float | None:
        """The cost in US dollars so far, or None when a response had no known price."""
        return None if self.unpriced_responses else round(self.cost_usd, 10)

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
        data["cost_usd"] = self.cost()
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
            elif key == "cost_usd":
                if known_cost(value) is not None:
                    known[key] = float(value)
                elif isinstance(value, float):  # NaN or Infinity from an older version
                    log.warning(
                        "a saved cost_usd of %r is not a number: the cost is unknown", value
                    )
            elif key in cls.__dataclass_fields__ and key != "tool_calls":
                wanted = bool if key == "usage_estimated" else int
                if type(value) is wanted:
                    known[key] = value
        if known.get("turns") and known_cost(data.get("cost_usd")) is None:
            # Saved before costs were counted, with an unknown price, or damaged (a NaN
            # an older version wrote from a NaN model price): unknown.
            known["unpriced_responses"] = max(known.get("unpriced_responses", 0), 1)
        return cls(**known)


def known_cost(value: Any) -> float | None:
    """``value`` as a cost read back from a file (US dollars), or None (unknown) when it
    is not a finite number >= 0: absent, text, a bool, negative, or the NaN or Infinity
    an older version could write."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def usage_total(stats: Stats, subagents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The whole conversation's usage, the main agent's ``stats`` and every sub-agent's
    row (``tokens``, ``cost_usd``) summed: ``{"tokens": int, "cost_usd": float | None}``
    (tokens are prompt plus completion; the cost is None when any agent's is unknown,
    never a partial sum; issue 21, docs/control-plane.md §3)."""
    tokens = stats.prompt_tokens + stats.completion_tokens
    cost = stats.cost()
    for row in subagents:
        used, spent = row.get("tokens"), row.get("cost_usd")
        tokens += used if isinstance(used, int) and not isinstance(used, bool) else 0
        spent_usd = known_cost(spent)
        if cost is not None and spent_usd is not None:
            cost += spent_usd
        else:
            cost = None
    return {"tokens": tokens, "cost_usd": None if cost is None else round(cost, 10)}


@dataclass
class Conversation:
    """One conversation: its messages (OpenAI shape), state and stats.

    ``archive`` keeps the original text of messages shrunk or compacted to fit the
    context window, so nothing is lost from the record. ``queued`` holds user
    messages accepted but not yet in ``messages`` (a live session keeps it current,
    so a message is on disk from the moment it is accepted; the next opening
    delivers them). ``last_event_seq`` is the number of the last event its session
    streamed, written when that session closed cleanly (0 for a new conversation;
    None: unknown, e.g. the process was killed): the next session numbers its events
    on from there (agentkit.chat.eventbus). ``round_ends`` notes each chat
    round that ended without an answer (stopped or failed: ``{"round", "status",
    "error", "error_kind", "background", "after"}``, ``after`` the number of messages
    then), so that a reloaded conversation shows it where it happened; the model never
    reads it. ``rounds`` counts the chat rounds so far, so that a reopened
    conversation numbers its next round on from there (older files: the highest
    round in ``round_ends``).
    """

    id: str = field(default_factory=new_conversation_id)
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: ConversationState = "idle"
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
    # The AGENTS.md files and skills in the system prompt (agentkit.conventions.gather);
    # saved only when there are some, so files without conventions stay as they were.
    conventions: dict[str, Any] = field(default_factory=dict)
    queued: list[str] = field(default_factory=list)
    last_event_seq: int | None = 0  # a new conversation's events start at 1
    round_ends: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    # Approval requests waiting for an answer and the allow_always rules of this
    # conversation (agentkit.chat.approvals); saved only when there are some.
    approvals: dict[str, Any] = field(default_factory=dict)
    # zh or en once settled (agentkit.language); saved only then.
    language: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON document saved on disk (``conventions``, ``approvals`` and
        ``language`` only when set)."""
        data = {
            "conversation_id": self.id,
            "title": self.title,
            "state": self.state,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "model": self.model,
            "final_text": self.final_text,
            "error": self.error,
            "stats": self.stats.to_dict(),
            "usage_total": usage_total(self.stats, self.subagents),
            "subagents": self.subagents,
            "pending_notes": self.pending_notes,
            "queued": self.queued,
            "last_event_seq": self.last_event_seq,
            "messages": self.messages,
            "archive": self.archive,
            "round_ends": self.round_ends,
            "rounds": self.rounds,
        }
        if self.conventions:
            data["conventions"] = self.conventions
        if self.approvals:
            data["approvals"] = self.approvals
        if self.language:
            data["language"] = self.language
        return data

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
        return cls.load_data(read_json(path), path)

    @classmethod
    def load_data(cls, data: Any, path: Path) -> Conversation:
        """Build a conversation from the parsed content of its file ``path`` (named in
        errors; its name is the id when the content has none). Raises ValueError
        when ``data`` is not a conversation (not an object, messages not a list of
        objects); damaged fields of the wrong type read as empty."""
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
        conventions = data.get("conventions")
        approvals = data.get("approvals")
        language = data.get("language")
        round_ends = items("round_ends", dict)
        ended = [n for n in (_count(e.get("round")) for e in round_ends) if n is not None]
        rounds = _count(data.get("rounds"))
        return cls(
            id=str(data.get("conversation_id") or path.stem),
            messages=data["messages"],
            state=conversation_state(data.get("state"), path),
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
            conventions=conventions if isinstance(conventions, dict) else {},
            queued=items("queued", str),
            last_event_seq=_count(data.get("last_event_seq")),
            round_ends=round_ends,
            rounds=rounds if rounds is not None else max(ended, default=0),
            approvals=approvals if isinstance(approvals, dict) else {},
            language=language if language in ("zh", "en") else None,
        )


def conversation_state(value: Any, path: Path | str = "") -> ConversationState:
    """The state a conversation file's ``state`` field names: the one place a state
    read from outside becomes a :data:`ConversationState`.

    A missing field (an older file) reads as ``idle``; any other value that is not a
    known state (a typo, a number, a state of a later version) reads as ``idle`` too,
    logged with ``path``, so the conversation still opens and loses nothing (its
    messages are what matter; the next save writes a known state).
    """
    for state in CONVERSATION_STATES:
        if value == state:
            return state
    if value is not None:
        shown = value[:40] if isinstance(value, str) else type(value).__name__
        log.warning("%s: unknown conversation state %r, read as idle", path, shown)
    return "idle"


def state_path(workspace: Path, *parts: str) -> Path:
    """Return ``<workspace>/.agentkit/<parts...>`` (:data:`STATE_DIR`); nothing is created."""
    return workspace.joinpath(STATE_DIR, *parts)


RUNTIME_GITIGNORE = "# agentkit's own runtime files (conversations, logs, records)\n*\n"
"""The ``.gitignore`` in each runtime subfolder of ``.agentkit`` (the isolation engine's
``hide_from_git`` writes the same for ``worktrees`` and ``isolation``)."""


def hide_runtime_folder(workspace: Path, folder: Path) -> None:
    """Make ``folder`` (inside ``<workspace>/.agentkit``) and hide the runtime subfolder
    holding it from the user's ``git status``: a ``.gitignore`` of ``*`` in
    ``.agentkit/<its first part>`` (conversations, outputs, logs, records...), unless one
    is there. ``.agentkit`` itself is never hidden: people commit its skills, agents,
    mcp.json and hooks.json. Through no link below ``workspace`` (agentkit.confined).
    Never raises: a folder that cannot be made is the caller's write to report."""
    from agentkit.confined import folder as open_folder

    try:
        first = folder.relative_to(workspace / STATE_DIR).parts[0]
        with (
            open_folder(workspace, folder, create=True),
            open_folder(workspace, workspace / STATE_DIR / first) as fd,
        ):
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(".gitignore", flags, 0o644, dir_fd=fd), "w") as marker:
                marker.write(RUNTIME_GITIGNORE)
    except (OSError, ValueError, IndexError):  # there already, read-only, not below it
        pass


def _count(value: object) -> int | None:
    """``value`` when it is a plain non-negative int (not a bool), else None."""
    return value if type(value) is int and value >= 0 else None


def conversations_dir(workspace: Path) -> Path:
    """Return ``<workspace>/.agentkit/conversations``."""
    return state_path(workspace, "conversations")
