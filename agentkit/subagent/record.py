"""A sub-agent's record on disk: ``<deliverables_dir>/.subagent/conversations.json`` (docs/specification.md §6).

One job: the record's one definition (building, writing, reading, archiving) and
the deliverables folder around it. The seed's fields (agent_id, summary,
created_at, completed_at, messages, stats with runtime_seconds, the four seed
counters and token_usage) plus status (running, completed, failed, timeout,
terminated), result_summary, task, sub_conversation_id and error. Written
atomically after every turn by the worker, and finalised by the parent when it
kills a worker.

A final record (any status but running) is final: every write goes through
:func:`may_replace` under a lock on the record folder, which refuses to replace
a final record of the same sub-conversation, whoever writes (the worker's
parent-gone handler, the parent's finalise), with one exception: the worker's
account of losing its parent (:data:`ORPHANED_ERROR`) is a guess, and the parent,
when it is alive after all (a Ray node died under the relay, say), replaces it
with what happened. A record left ``running`` by a process group killed at once is
swept at the next start (agentkit.subagent.sweep).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.confined import folder as confined_folder
from agentkit.confined import list_files, open_folder
from agentkit.conversation import utc_now
from agentkit.jsonfile import JsonFileWriter, read_json, write_json_atomic

try:
    import fcntl
except ImportError:  # Windows: no cross-process lock; the in-process rules still hold
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from agentkit.conversation import Stats
    from agentkit.subagent.contract import WorkerSpec
    from agentkit.subagent.state import Status

RECORD_DIR = ".subagent"
RECORD_FILE = "conversations.json"
NO_TOKENS = {"prompt": 0, "completion": 0, "total": 0}
FINAL_STATUSES = ("completed", "failed", "timeout", "terminated")
# Where the parent writes a record it cannot write in the deliverables folder.
FALLBACK_DIR = Path(".agentkit") / "subagent-records"


@dataclass(frozen=True)
class Ending:
    """How a record ends: ``completed_at`` (docs/specification.md §6 time format), the summary and
    the error (None when it completed)."""

    result_summary: str | None
    error: str | None
    completed_at: str = ""


def record_stats(runtime_seconds: int, stats: Stats) -> dict[str, Any]:
    """Return the record's ``stats`` object from a conversation's Stats: the seed's
    (runtime_seconds, the four counters, token_usage) plus turns, tool_calls and
    usage_estimated."""
    return {
        "runtime_seconds": runtime_seconds,
        **stats.seed_counts(),
        "turns": stats.turns,
        "tool_calls": dict(stats.tool_calls),
        "token_usage": stats.token_usage(),
        "usage_estimated": stats.usage_estimated,
    }


def build_record(
    spec: WorkerSpec,
    status: Status,
    *,
    messages: list[dict[str, Any]],
    stats: dict[str, Any],
    worker_pid: int | None = None,
    worker_started: float | None = None,
    ending: Ending | None = None,
) -> dict[str, Any]:
    """Return the conversations.json document (docs/specification.md §6 fields plus status).

    ``worker_pid`` (with ``worker_started``, its start time in seconds since the
    epoch, and the spec's process_mark) is written when given: agentkit.subagent.sweep's worker_alive and
    sweep_record read them to tell a live worker from a dead one; ``ending`` adds
    completed_at (now when empty), result_summary and error, else the record is
    still running (completed_at and result_summary null, no error).
    """
    record: dict[str, Any] = {
        "agent_id": spec.agent_id,
        "summary": spec.summary,
        "created_at": spec.created_at,
        "completed_at": None,
        "status": status,
        "result_summary": None,
        "sub_conversation_id": spec.sub_conversation_id,
        "task": spec.task,
        "deliverables_dir": spec.deliverables_dir,
    }
    if worker_pid is not None:
        record["worker_pid"] = worker_pid
        record["worker_started"] = worker_started
        record["process_mark"] = spec.process_mark
    record["messages"] = messages
    record["stats"] = stats
    if ending is not None:
        record["completed_at"] = ending.completed_at or utc_now()
        record["result_summary"] = ending.result_summary
        record["error"] = ending.error
    return record


def finalise_record(
    spec: WorkerSpec,
    status: Status,
    seed_stats: dict[str, int],
    token_usage: dict[str, int],
    ending: Ending,
    worker_record: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Path | None]:
    """Make the record say how the agent ended when its worker could not (killed,
    crashed, its own write failed): status, ending and ``seed_stats``
    (runtime_seconds and the counters, by the parent's clock) over
    ``worker_record`` (the worker's final record, sent when it could not write it)
    or else whatever the worker wrote last. Temp files a killed worker left are
    removed. A final record is left alone.

    Returns ``(record, path)``: the record as it now stands and where it is on
    disk: the deliverables folder, else ``<workspace>/.agentkit/subagent-records/
    <sub_conversation_id>.json`` when that folder cannot be written (full disk),
    else None (the caller keeps ``record`` in memory).
    """
    deliverables = Path(spec.deliverables_path)
    root = Path(spec.workspace)
    clean_temp_files(deliverables, root=root)
    stored = read_record(deliverables)
    if stored is not None and not may_replace(stored, spec.sub_conversation_id, by_parent=True):
        return stored, record_path(deliverables)
    record = worker_record or stored or build_record(spec, status, messages=[], stats={})
    stats = dict(record.get("stats") or {})
    stats.update(seed_stats)
    stats.setdefault("token_usage", token_usage or dict(NO_TOKENS))
    record.update(
        status=status,
        completed_at=ending.completed_at or utc_now(),
        result_summary=ending.result_summary,
        error=ending.error,
        stats=stats,
    )
    try:
        if write_record(deliverables, record, by_parent=True, root=root):
            return record, record_path(deliverables)
        return read_record(deliverables) or record, record_path(deliverables)
    except OSError:
        pass
    fallback = Path(spec.workspace) / FALLBACK_DIR / f"{spec.sub_conversation_id}.json"
    try:
        write_json_atomic(fallback, record, root=root)
    except OSError:
        return record, None
    return record, fallback


def record_path(deliverables: Path) -> Path:
    """Return ``<deliverables>/.subagent/conversations.json``."""
    return deliverables / RECORD_DIR / RECORD_FILE


def record_relpath(deliverables_dir: str) -> str:
    """Return the record's path relative to the workspace, for messages and rows."""
    return f"{deliverables_dir}/{RECORD_DIR}/{RECORD_FILE}"


ORPHANED_ERROR = "stopped: the main process ended or stopped this worker"
"""The error of the record a worker writes when it finds its parent gone."""


def may_replace(
    stored: dict[str, Any] | None, sub_conversation_id: object, by_parent: bool = False
) -> bool:
    """The one rule for replacing a record: anything may replace a running record,
    a missing one or another sub-conversation's; nothing replaces a final record
    (status in FINAL_STATUSES) of the same sub-conversation, except that the parent
    (``by_parent``) replaces the worker's own parent-gone account (status
    terminated, error :data:`ORPHANED_ERROR`): the parent lived, and knows better."""
    if not stored or stored.get("sub_conversation_id") != sub_conversation_id:
        return True
    if stored.get("status") not in FINAL_STATUSES:
        return True
    return by_parent and orphaned_account(stored)


def orphaned_account(stored: dict[str, Any]) -> bool:
    """Whether ``stored`` is a worker's record of losing its parent."""
    return stored.get("status") == "terminated" and stored.get("error") == ORPHANED_ERROR


@contextlib.contextmanager
def _folder_lock(deliverables: Path, root: Path) -> Iterator[None]:
    """Hold an exclusive flock on the record folder (across processes and threads),
    made if missing through no link below ``root`` (agentkit.confined)."""
    fd = open_folder(root, deliverables / RECORD_DIR, create=True)
    if fcntl is None:
        os.close(fd)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


_HEAD = re.compile(r'"status": "(\w+)".*?"sub_conversation_id": "([^"\\]*)"', re.S)


def _stored_head(deliverables: Path) -> dict[str, Any] | None:
    """Return the stored record's status and sub_conversation_id, read from the
    file's head when they are there (they precede the messages), else the whole
    record; None when there is none."""
    try:
        with open(record_path(deliverables), encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
    except OSError:
        return None
    cut = head.find('"messages": ')
    match = _HEAD.search(head, 0, cut) if cut >= 0 else None
    if match is not None:
        return {"status": match.group(1), "sub_conversation_id": match.group(2)}
    return read_record(deliverables)


def guarded(
    deliverables: Path,
    record: Any,
    write: Callable[[], None],
    by_parent: bool = False,
    *,
    root: Path,
) -> bool:
    """Run ``write()`` (which replaces the record file with ``record``) unless
    may_replace refuses it, under the folder lock. Returns whether it wrote;
    raises OSError from the write (``root``: as write_record's)."""
    with _folder_lock(deliverables, root):
        sub_id = record.get("sub_conversation_id") if isinstance(record, dict) else None
        stored = _stored_head(deliverables)
        if by_parent and stored is not None and stored.get("status") == "terminated":
            stored = read_record(deliverables)  # the head has no error: read it all
        if not may_replace(stored, sub_id, by_parent):
            return False
        write()
        return True


def write_record(
    deliverables: Path,
    record: dict[str, Any],
    by_parent: bool = False,
    *,
    root: Path,
) -> bool:
    """Atomically (temp file + rename) write ``record`` as the agent's
    conversations.json, unless a final record of the same sub-conversation is
    there (see may_replace; ``by_parent``: the parent writes). ``root``: the
    workspace, below which no symbolic link is followed (agentkit.confined: a
    command may have replaced the folder by a link). Returns whether it wrote;
    raises OSError."""
    path = record_path(deliverables)

    def write() -> None:
        write_json_atomic(path, record, root=root)

    return guarded(deliverables, record, write, by_parent, root=root)


def record_writer(deliverables: Path, root: Path) -> JsonFileWriter:
    """Return a JsonFileWriter of the record whose every write obeys may_replace
    (``root``: as write_record's)."""

    def guard(data: Any, write: Callable[[], None]) -> None:
        guarded(deliverables, data, write, root=root)

    return JsonFileWriter(record_path(deliverables), guard=guard, root=root)


def read_record(deliverables: Path) -> dict[str, Any] | None:
    """Return the record, or None when it is missing or unreadable."""
    try:
        data = read_json(record_path(deliverables))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def archive_record(deliverables: Path, root: Path) -> Path | None:
    """Move an earlier sub-agent's record out of the way before a new one starts in
    the same folder: ``.subagent/conversations.<sub_conversation_id>.json``.

    Nothing is lost when a later run (or a continued conversation) reuses a
    deliverables folder. Returns the new path, or None when there was no record.
    """
    current = record_path(deliverables)
    if not current.is_file():
        return None
    old = read_record(deliverables) or {}
    name = str(old.get("sub_conversation_id") or f"archived-{int(current.stat().st_mtime)}")
    target = current.with_name(f"conversations.{name}.json")
    with confined_folder(root, current.parent) as fd:  # no link below root is followed
        os.replace(current.name, target.name, src_dir_fd=fd, dst_dir_fd=fd)
    return target


def clean_temp_files(deliverables: Path, *, root: Path) -> None:
    """Remove temp files a killed worker may have left beside the record (through
    no link below ``root``, as write_record)."""
    try:
        with confined_folder(root, deliverables / RECORD_DIR) as fd:
            for name in os.listdir(fd):
                if name.startswith(f".{RECORD_FILE}.") and name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=fd)
    except OSError:
        return


def list_deliverables(deliverables: Path, limit: int, root: Path) -> tuple[list[str], int]:
    """Return ``(files, total)``: up to ``limit`` files under ``deliverables`` (relative,
    forward slashes, sorted), skipping the ``.subagent`` record folder; ``total``
    counts them all. ``root`` (the workspace): no link below it is followed, and a
    folder reached through one, or missing, lists nothing (agentkit.confined)."""
    try:
        files = list_files(root, deliverables, skip=RECORD_DIR)
    except OSError:
        return [], 0
    return files[:limit], len(files)
