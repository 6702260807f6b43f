"""Writing a sub-agent's transcript: a journal line a save, the whole record now and then.

One job: :class:`TranscriptWriter`, the worker's writer of its record file
(``.subagent/conversations.json``, agentkit.subagent.record) and of the journal
beside it (agentkit.subagent.journal defines the format and reads it back).

Each message is encoded once, when it is first saved; its bytes are kept and
written again as they are, with ``os.writev``, whenever the record is written
whole. A save appends one journal line with what changed since the last one. The
record is written whole (temp file + rename: valid JSON in the seed's shape at
every instant) while it is small (under :data:`COMPACT_FLOOR` bytes), when the
journal has outgrown :data:`COMPACT_RATIO` times the record, after a journal
write failed, and at the end (:meth:`TranscriptWriter.final`,
:meth:`TranscriptWriter.end`). The bytes written for a whole run are then about
the final record once for the journal, plus (1 + 1/COMPACT_RATIO) times it and
the last whole write for the compactions.

Messages changed in place are found by identity: agentkit.context gives a shrunk
message a new ``content`` (or ``tool_calls``) object and archives the original,
and compaction replaces a run of messages by a summary, archiving them. So a save
after which the archive did not grow, and whose last saved message is still in
its place unchanged, only appends; otherwise the messages the new archive entries
name (or, after a compaction, the whole list) are compared with what was saved.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkit.confined import open_append, write_fragments_atomic, writev_all
from agentkit.subagent.journal import JOURNAL_FILE, JOURNAL_VERSION, drop_journal

COMPACT_FLOOR = 16 * 1024
"""A record smaller than this (bytes) is written whole at every save."""
COMPACT_RATIO = 3.0
"""The record is written whole once the journal is this many times its size."""

Guard = Callable[[dict[str, Any], Callable[[], None]], bool]
"""``guard(head, write)``: run ``write()`` (which replaces the record file) when the
record rules allow it (agentkit.subagent.record.may_replace, under the folder lock);
returns whether it ran."""

_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
_OUTSIDE_HEAD = ("messages", "archive", "stats")


def _bytes(value: Any) -> bytes:
    # errors="replace": a lone surrogate from anywhere must not lose the save.
    return _encode(value).encode("utf-8", "replace")


def _joined(items: Iterable[bytes]) -> list[bytes]:
    parts: list[bytes] = []
    for item in items:
        if parts:
            parts.append(b", ")
        parts.append(item)
    return parts


@dataclass
class _Saved:
    """One message as last saved: the object, its content and tool_calls objects and
    key count then, and its JSON."""

    ref: dict[str, Any]
    content: Any
    calls: Any
    keys: int
    data: bytes


def _saved(message: dict[str, Any]) -> _Saved:
    return _Saved(
        message, message.get("content"), message.get("tool_calls"), len(message), _bytes(message)
    )


def _same(saved: _Saved, message: Any) -> bool:
    return (
        saved.ref is message
        and message.get("content") is saved.content
        and message.get("tool_calls") is saved.calls
        and len(message) == saved.keys
    )


def _archive_ref(entry: Any, before: list[_Saved]) -> dict[str, Any] | None:
    """The journal's short form of an archive ``entry`` whose text is what the
    message at its index held when last saved (agentkit.subagent.journal), else None."""
    index = entry.get("index") if isinstance(entry, dict) else None
    if type(index) is not int or not 0 <= index < len(before):
        return None
    saved = before[index]
    keys = list(entry)
    if keys == ["index", "role", "content"] and entry["content"] is saved.content:
        return {"index": index, "role": entry["role"], "$content": True}
    if keys == ["index", "role", "tool_call_id", "arguments"]:
        for call in saved.calls or []:
            function = call.get("function") if isinstance(call, dict) else None
            if (
                isinstance(function, dict)
                and call.get("id") == entry["tool_call_id"]
                and function.get("arguments") is entry["arguments"]
            ):
                return {**{k: entry[k] for k in keys[:3]}, "$arguments": True}
        return None
    if (
        keys[0] == "index"
        and len(keys) - 1 == saved.keys
        and entry.get("content") is saved.content
        and entry.get("tool_calls") is saved.calls
    ):
        return {"index": index, "$message": True}
    return None


def _touched(entries: list[Any]) -> set[int] | None:
    """Indexes of the messages shrunk in place that ``entries`` (new archive entries)
    name, or None when one of them is another kind (a compaction moved messages)."""
    found: set[int] = set()
    for entry in entries:
        keys = list(entry) if isinstance(entry, dict) else []
        if keys not in (
            ["index", "role", "content"],
            ["index", "role", "tool_call_id", "arguments"],
        ):
            return None
        if type(entry["index"]) is not int:
            return None
        found.add(entry["index"])
    return found


def _diff(
    old: list[_Saved], new: list[Any], touched: set[int] | None
) -> tuple[list[bytes], list[_Saved]]:
    """Journal fragments (cut, set, add) turning ``old`` into ``new``, and the new
    saved state. ``touched``: the only indexes that may have changed in place, or
    None to compare everything."""
    k = len(old)
    if touched is not None and len(new) >= k and (k == 0 or new[k - 1] is old[-1].ref):
        state = list(old)
        sets = [i for i in sorted(touched | {k - 1}) if 0 <= i < k and not _same(old[i], new[i])]
        return _ops(None, sets, new[k:], state, new)
    end = len(new)
    if old:
        end = next((j + 1 for j in range(len(new) - 1, -1, -1) if new[j] is old[-1].ref), 0)
    body, add = (new[:end], new[end:]) if end else (new, [])
    p = 0
    while p < min(k, len(body)) and body[p] is old[p].ref:
        p += 1
    s = 0
    while s < min(k, len(body)) - p and body[len(body) - 1 - s] is old[k - 1 - s].ref:
        s += 1
    middle = body[p : len(body) - s]
    state = old[:p] + [_saved(m) for m in middle] + old[k - s :]
    cut = None if p == k - s and not middle else (p, k - s, middle)
    kept = [*range(p), *range(len(body) - s, len(body))]
    sets = [i for i in kept if not _same(state[i], body[i])]
    return _ops(cut, sets, add, state, body)


def _ops(
    cut: tuple[int, int, list[Any]] | None,
    sets: list[int],
    add: list[Any],
    state: list[_Saved],
    new: list[Any],
) -> tuple[list[bytes], list[_Saved]]:
    parts: list[bytes] = []
    if cut is not None:
        parts.append(b', "cut": [%d, %d, [' % (cut[0], cut[1]))
        parts += _joined(state[cut[0] + i].data for i in range(len(cut[2])))
        parts.append(b"]]")
    if sets:
        for i in sets:
            state[i] = _saved(new[i])
        parts.append(b', "set": [')
        parts += _joined(b"[%d, %s]" % (i, state[i].data) for i in sets)
        parts.append(b"]")
    if add:
        added = [_saved(m) for m in add]
        state += added
        parts.append(b', "add": [')
        parts += _joined(a.data for a in added)
        parts.append(b"]")
    return parts, state


class TranscriptWriter:
    """The worker's writer of its record and journal (see the module docstring).

    Args:
        record_file: ``<deliverables>/.subagent/conversations.json``.
        root: the workspace: no link below it is followed (agentkit.confined).
        guard: decides whether a whole write may replace the record (:data:`Guard`).
        ratio, floor: :data:`COMPACT_RATIO`, :data:`COMPACT_FLOOR`.

    Thread-safe. ``bytes_written`` counts what it wrote (record and journal).
    """

    def __init__(
        self,
        record_file: Path,
        root: Path,
        guard: Guard,
        *,
        ratio: float = COMPACT_RATIO,
        floor: int = COMPACT_FLOOR,
    ) -> None:
        self.path = record_file
        self.root = root
        self.guard = guard
        self.ratio = ratio
        self.floor = floor
        self.bytes_written = 0
        self.error: OSError | None = None  # the last failed write, until one succeeds
        self._lock = threading.Lock()
        self._head: dict[str, Any] = {}
        self._stats: Any = None
        self._messages: list[_Saved] = []
        self._archive: list[bytes] = []  # each entry's whole JSON
        self._seq = 0
        self._base: int | None = None  # bytes of the record last written whole
        self._journal = 0  # bytes in the current journal
        self._fd: int | None = None
        self._stale = False  # the journal cannot be trusted: write whole next time
        self._done = False

    # --------------------------------------------------------------- saving
    def save(self, record: dict[str, Any]) -> None:
        """Save ``record`` (a record as agentkit.subagent.record.build_record makes it,
        with ``archive``): append what changed to the journal, or write it whole.
        Never raises: a failed write is kept in :attr:`error` and the next save
        writes the record whole. Nothing happens once the record is final."""
        with self._lock:
            if self._done:
                return
            try:
                line = self._sync(record)
                if line is None:
                    return
                if self._compacting(line):
                    self._write_whole(rotate=True)
                else:
                    self._append(line)
                self.error = None
            except OSError as exc:
                self.error, self._stale = exc, True

    def final(self, record: dict[str, Any]) -> bool:
        """Write ``record`` (final) whole and remove the journal; later saves write
        nothing. Returns False when the record rules refused it (a final record of
        this sub-conversation is there already). Raises OSError."""
        with self._lock:
            if self._done:
                return False
            self._sync(record)
            return self._finish()

    def end(
        self, update: dict[str, Any], timeout: float = 5.0, runtime_seconds: int | None = None
    ) -> bool | None:
        """Write the record as last saved (its messages and the counters saved with
        them), with the fields ``update`` (status, completed_at, ...), whole, and
        remove the journal: the end of a worker that cannot take its live
        conversation's state (another thread owns it). ``runtime_seconds``: its
        runtime up to this end (the saved one is the last save's). Returns None when
        nothing was saved yet (or the lock is not had within ``timeout`` seconds), else
        as :meth:`final`. Raises OSError."""
        if not self._lock.acquire(timeout=timeout):
            return None
        try:
            if self._done:
                return False
            if self._base is None and not self._messages:
                return None
            self._head.update(update)
            if runtime_seconds is not None and isinstance(self._stats, dict):
                self._stats = {**self._stats, "runtime_seconds": runtime_seconds}
            return self._finish()
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the journal (the record stays as it is)."""
        with self._lock:
            self._close_fd()

    # ------------------------------------------------------------- internals
    def _sync(self, record: dict[str, Any]) -> list[bytes] | None:
        """Take ``record`` into the saved state; returns its journal line's fragments
        (None: nothing changed)."""
        head = {k: v for k, v in record.items() if k not in _OUTSIDE_HEAD}
        changed = {k: v for k, v in head.items() if k not in self._head or self._head[k] != v}
        if any(k not in head for k in self._head):
            self._stale = True  # a field went away: the journal cannot say so
        self._head = head
        parts: list[bytes] = []
        if changed:
            parts += [b', "head": ', _bytes(changed)]
        stats = record.get("stats")
        if stats != self._stats:
            self._stats = stats
            parts += [b', "stats": ', _bytes(stats)]
        parts += self._sync_messages(record.get("messages") or [], record.get("archive") or [])
        if not parts and not self._stale:
            return None
        self._seq += 1
        return [b'{"seq": %d' % self._seq, *parts, b"}\n"]

    def _sync_messages(self, messages: list[Any], archive: list[Any]) -> list[bytes]:
        done = len(self._archive)
        if len(archive) < done:  # the archive was replaced: start over
            self._messages, self._archive, self._stale = [], [], True
            done = 0
        entries = archive[done:]
        parts: list[bytes] = []
        if entries:
            short = [_archive_ref(e, self._messages) for e in entries]
            self._archive += [_bytes(e) for e in entries]
            journaled = [
                _bytes(s) if s is not None else self._archive[done + i] for i, s in enumerate(short)
            ]
            parts += [b', "archive": [', *_joined(journaled), b"]"]
        touched = _touched(entries) if entries else set()
        ops, self._messages = _diff(self._messages, messages, touched)
        return parts + ops

    def _compacting(self, line: list[bytes]) -> bool:
        if self._stale or self._base is None or self._fd is None or self._base < self.floor:
            return True
        return self._journal + sum(map(len, line)) > self.ratio * self._base

    def _whole(self) -> list[bytes]:
        """The record's fragments, written whole: the head, stats and journal_seq,
        then the messages and the archive as saved."""
        head = _bytes({**self._head, "stats": self._stats, "journal_seq": self._seq})
        opening = [head[:-1], b", "] if head != b"{}" else [b"{"]
        return [
            *opening,
            b'"messages": [',
            *_joined(m.data for m in self._messages),
            b'], "archive": [',
            *_joined(self._archive),
            b"]}",
        ]

    def _write_whole(self, rotate: bool) -> bool:
        """Write the record whole (if the guard allows; else it is final: stop) and
        start a new journal after it (``rotate``) or remove it. Raises OSError.

        All of it happens within the guard (the record folder's lock): a journal
        started after the lock is released could follow a final record the parent
        wrote in between, and stay beside it."""
        fragments = self._whole()

        def write() -> None:
            size = write_fragments_atomic(self.root, self.path, fragments)
            self._base = size
            self.bytes_written += size
            self._close_fd()
            drop_journal(self.path.parent, self.root)
            self._stale = False
            if rotate and size >= self.floor:  # a small record is written whole each time
                self._start_journal()

        if not self.guard(self._head, write):
            self._done = True
            self._close_fd()
            return False
        return True

    def _start_journal(self) -> None:
        header = _bytes(
            {
                "journal": JOURNAL_VERSION,
                "sub_conversation_id": self._head.get("sub_conversation_id"),
                "after": self._seq,
            }
        )
        fd = open_append(self.root, self.path.with_name(JOURNAL_FILE), create_new=True)
        try:
            self._journal = writev_all(fd, [header, b"\n"])
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        self.bytes_written += self._journal

    def _append(self, line: list[bytes]) -> None:
        assert self._fd is not None
        try:
            written = writev_all(self._fd, line)
        except OSError:
            try:  # take back a line cut short (a full disk), so the next ones parse
                os.ftruncate(self._fd, self._journal)
            except OSError:
                pass
            raise
        self._journal += written
        self.bytes_written += written

    def _finish(self) -> bool:
        wrote = self._write_whole(rotate=False)
        self._done = True
        self._close_fd()
        return wrote

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
