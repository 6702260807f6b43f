"""The journal beside a sub-agent's record: its format, and reading it back.

One job: ``<deliverables>/.subagent/conversations.journal`` holds what changed in a
running sub-agent's record since the record file (``conversations.json``, the
seed's §6 shape, docs/specification.md §6) was last written whole. The worker
appends one line a save (agentkit.subagent.transcript writes it); every reader
of a running record applies the lines past the record's ``journal_seq``
(:func:`apply_journal`), so what it reads is the record as of the worker's last
save, even after a SIGKILL (a torn last line is left out).

The file is UTF-8 JSON, one object a line. The first line is the header
``{"journal": 1, "sub_conversation_id": ..., "after": N}``: the record it extends,
written whole with ``journal_seq`` N. Then lines ``{"seq": n, ...}`` with n = N+1,
N+2, ..., each holding, applied in this order:

- ``head``: record fields that changed (status, completed_at, error, ...);
- ``stats``: the record's ``stats``, when they changed;
- ``archive``: entries added to the record's ``archive``; instead of a text the
  message at the entry's ``index`` held before this line, an entry may say where
  it is: ``"$content": true`` (that message's content), ``"$arguments": true``
  (the arguments of its tool call ``tool_call_id``), ``"$message": true`` (the
  whole message), so no original is written twice;
- ``cut``: ``[start, end, [messages]]``: ``messages[start:end]`` replaced;
- ``set``: ``[[i, message], ...]``: messages changed in place;
- ``add``: ``[messages]`` appended.

A line that does not parse or does not fit (a bad index, a gap in ``seq``) ends
the replay there: what came before it stands. When the record cannot be written
whole at its end (a full disk: a whole write needs room for a second copy), the
parent appends its end as one ``head`` line instead (:func:`append_end`): a few
hundred bytes, and every reader sees the record final.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from agentkit.confined import folder as confined_folder
from agentkit.confined import writev_all
from agentkit.jsonfile import parse_json

JOURNAL_FILE = "conversations.journal"
JOURNAL_VERSION = 1

__all__ = [
    "JOURNAL_FILE",
    "append_end",
    "apply_journal",
    "drop_journal",
    "journal_ends",
    "read_journal",
]


def read_journal(record_file: Path) -> bytes | None:
    """Return the journal beside ``record_file`` (``.subagent/conversations.json``),
    or None when there is none or it cannot be read."""
    try:
        with open(record_file.with_name(JOURNAL_FILE), "rb") as handle:
            return handle.read()
    except OSError:
        return None


def drop_journal(record_dir: Path, root: Path) -> None:
    """Remove the journal in the record folder ``record_dir`` (through no link below
    ``root``, agentkit.confined), once the record file holds everything; errors are
    ignored (a leftover journal's lines are all at or before the record's
    ``journal_seq``, or it names another sub-conversation: readers skip it)."""
    with contextlib.suppress(OSError), confined_folder(root, record_dir) as fd:
        os.unlink(JOURNAL_FILE, dir_fd=fd)


def append_end(record_file: Path, root: Path, stored: dict[str, Any], head: dict[str, Any]) -> None:
    """Append one line setting the record fields ``head`` (its end: status,
    completed_at, result_summary, error) to the journal beside ``record_file``,
    after the last line ``stored`` holds (the record as read, its journal applied:
    its ``journal_seq``). A torn or unusable tail is cut first (no reader could
    apply it); a journal of another record, or none, is started anew after
    ``stored``. The caller holds the record folder's lock and knows the worker is
    done writing. Raises OSError (the line is then taken back)."""
    seq = _seq(stored)
    keep = _applied_end(read_journal(record_file) or b"", stored, seq)
    parts: list[bytes] = []
    if keep is None:
        header = {
            "journal": JOURNAL_VERSION,
            "sub_conversation_id": stored.get("sub_conversation_id"),
            "after": seq,
        }
        parts.append(_dumps(header) + b"\n")
        keep = 0
    parts.append(_dumps({"seq": seq + 1, "head": head}) + b"\n")
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with confined_folder(root, record_file.parent) as folder_fd:
        fd = os.open(JOURNAL_FILE, flags, 0o600, dir_fd=folder_fd)
        try:
            os.ftruncate(fd, keep)
            os.lseek(fd, keep, os.SEEK_SET)
            try:
                writev_all(fd, parts)
            except OSError:
                with contextlib.suppress(OSError):  # no half line left behind
                    os.ftruncate(fd, keep)
                raise
        finally:
            os.close(fd)


def journal_ends(record_file: Path) -> bool:
    """Whether the journal beside ``record_file`` ends with a line giving the record
    a status (an end :func:`append_end` wrote; the worker's lines never change it).
    Reads only the journal's last 64 KiB; False when there is none."""
    try:
        with open(record_file.with_name(JOURNAL_FILE), "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 65536))
            tail = handle.read()
    except OSError:
        return False
    lines = tail.split(b"\n")
    line = _parse(lines[-2]) if len(lines) > 1 else None
    head = line.get("head") if line is not None else None
    return isinstance(head, dict) and head.get("status") not in (None, "running")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "replace")


def _applied_end(data: bytes, stored: dict[str, Any], seq: int) -> int | None:
    """The length of ``data`` (a journal) up to the end of its line ``seq`` (the last
    one ``stored`` holds), or None when it is not ``stored``'s journal."""
    end = data.find(b"\n")
    header = _parse(data[:end]) if end >= 0 else None
    if (
        header is None
        or header.get("journal") != JOURNAL_VERSION
        or header.get("sub_conversation_id") != stored.get("sub_conversation_id")
        or type(header.get("after")) is not int
        or header["after"] > seq
    ):
        return None
    keep = end + 1
    while (stop := data.find(b"\n", keep)) >= 0:
        line = _parse(data[keep:stop])
        number = line.get("seq") if line is not None else None
        if type(number) is not int or number > seq:
            break
        keep = stop + 1
    return keep


_NOT_HEAD = ("messages", "archive", "stats", "journal_seq")


def _seq(record: dict[str, Any]) -> int:
    value = record.get("journal_seq")
    return value if type(value) is int and value >= 0 else 0


def apply_journal(record: dict[str, Any], data: bytes) -> bool | None:
    """Apply the journal ``data`` to ``record`` (a running record as read from its
    file) in place.

    Returns True when lines were applied, False when there was nothing to apply
    (no header, another sub-conversation's journal, nothing past ``journal_seq``),
    None when the journal is newer than the record (its header's ``after`` is past
    the record's ``journal_seq``: the record was rewritten meanwhile, read it again).
    Never raises for bad data; ``record["journal_seq"]`` ends at the last line applied.
    """
    lines = data.split(b"\n")
    lines.pop()  # what follows the last newline: b"", or a line cut short by a kill
    header = _parse(lines[0]) if lines else None
    if (
        header is None
        or header.get("journal") != JOURNAL_VERSION
        or header.get("sub_conversation_id") != record.get("sub_conversation_id")
        or type(header.get("after")) is not int
    ):
        return False
    seq = _seq(record)
    if header["after"] > seq:
        return None
    messages = record.get("messages")
    if not isinstance(messages, list):
        return False
    archive = record.get("archive")
    if not isinstance(archive, list):
        archive = record["archive"] = []
    applied = False
    for raw in lines[1:]:
        line = _parse(raw)
        if line is None or type(line.get("seq")) is not int:
            break
        if line["seq"] <= seq:
            continue
        if line["seq"] != seq + 1 or not _apply(record, messages, archive, line):
            break
        seq, applied = seq + 1, True
    record["journal_seq"] = seq
    return applied


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = parse_json(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _apply(
    record: dict[str, Any], messages: list[Any], archive: list[Any], line: dict[str, Any]
) -> bool:
    """Apply one line; False (and nothing changed) when it does not fit."""
    head, stats = line.get("head", {}), line.get("stats")
    if not isinstance(head, dict) or (stats is not None and not isinstance(stats, dict)):
        return False
    added = line.get("archive", [])
    entries = [_entry(item, messages) for item in added] if isinstance(added, list) else [None]
    if any(entry is None for entry in entries):
        return False
    plan = _plan(line, len(messages))
    if plan is None:
        return False
    cut, sets, add = plan
    record.update({k: v for k, v in head.items() if k not in _NOT_HEAD})
    if stats is not None:
        record["stats"] = stats
    archive.extend(entries)
    if cut is not None:
        messages[cut[0] : cut[1]] = cut[2]
    for i, message in sets:
        messages[i] = message
    messages.extend(add)
    return True


def _plan(
    line: dict[str, Any], length: int
) -> tuple[tuple[int, int, list[Any]] | None, list[tuple[int, Any]], list[Any]] | None:
    """Check a line's message operations against a list of ``length`` messages;
    returns ``(cut, sets, add)`` or None when they do not fit."""
    cut = line.get("cut")
    if cut is not None:
        if not (isinstance(cut, list) and len(cut) == 3 and _messages(cut[2])):
            return None
        start, end = cut[0], cut[1]
        if not (type(start) is int and type(end) is int and 0 <= start <= end <= length):
            return None
        length += len(cut[2]) - (end - start)
        cut = (start, end, cut[2])
    sets: list[tuple[int, Any]] = []
    changed = line.get("set", [])
    for item in changed if isinstance(changed, list) else [None]:
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int):
            return None
        if not (0 <= item[0] < length and isinstance(item[1], dict)):
            return None
        sets.append((item[0], item[1]))
    add = line.get("add", [])
    if not _messages(add):
        return None
    return cut, sets, add


def _messages(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(m, dict) for m in value)


def _entry(item: Any, messages: list[Any]) -> dict[str, Any] | None:
    """An archive entry, its ``$`` reference resolved against ``messages`` as they
    stand before the line; None when it does not resolve."""
    if not isinstance(item, dict):
        return None
    refs = [key for key in ("$content", "$arguments", "$message") if key in item]
    if not refs:
        return item
    index = item.get("index")
    if len(refs) != 1 or type(index) is not int or not 0 <= index < len(messages):
        return None
    source = messages[index]
    if not isinstance(source, dict):
        return None
    entry = {k: v for k, v in item.items() if k != refs[0]}
    if refs[0] == "$message":
        return {"index": index, **source}
    if refs[0] == "$content":
        entry["content"] = source.get("content")
        return entry
    for call in source.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id") == item.get("tool_call_id"):
            function = call.get("function")
            if isinstance(function, dict):
                entry["arguments"] = function.get("arguments")
                return entry
    return None
