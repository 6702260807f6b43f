"""A sub-agent's record on disk: ``<deliverables_dir>/.subagent/conversations.json`` (docs/specification.md §6).

One job: the record's one definition (building, writing, reading); the deliverables
folder around it is agentkit.subagent.record_folder's (archiving, temp files, listing).
The seed's fields (agent_id, summary, created_at, completed_at, messages, stats with
runtime_seconds, the four seed counters and token_usage) plus status (running,
completed, failed, timeout, terminated), result_summary, task, sub_conversation_id and
error, ``conventions`` (the AGENTS.md files and skills it was given) when there were
any, ``isolation`` (an isolated sub-agent's copy; the parent adds ``changes``,
``merged`` and ``discarded``: agentkit.subagent.isolated), ``archive`` (the originals of messages shrunk or compacted to fit the context
window: nothing the sub-agent saw is lost) and ``journal_seq``. The worker saves it
after every turn through agentkit.subagent.transcript: a line in the journal beside it,
and now and then the whole file, atomically (temp file + rename); every reader here
(:func:`load_record`, :func:`read_record`) applies the journal
(agentkit.subagent.journal). The parent finalises it when it kills a worker
(agentkit.subagent.finalise).

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

from agentkit.confined import open_folder
from agentkit.conventions.gather import record_metadata
from agentkit.conversation import state_path, utc_now
from agentkit.jsonfile import read_json, write_json_atomic
from agentkit.subagent.journal import (
    apply_journal,
    drop_journal,
    journal_ends,
    read_journal,
)
from agentkit.subagent.transcript import TranscriptWriter

try:
    import fcntl
except ImportError:  # Windows: no cross-process lock; the in-process rules still hold
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from agentkit.conversation import Stats
    from agentkit.subagent.contract import Status, WorkerSpec

RECORD_DIR = ".subagent"
RECORD_FILE = "conversations.json"
NO_TOKENS = {"prompt": 0, "completion": 0, "total": 0}
FINAL_STATUSES = ("completed", "failed", "timeout", "terminated", "budget_exhausted")
# Where the parent writes a record it cannot write in the deliverables folder
# (below the workspace's STATE_DIR).
FALLBACK_DIR = "subagent-records"


@dataclass(frozen=True)
class Ending:
    """How a record ends: ``completed_at`` (docs/specification.md §6 time format), the summary and
    the error (None when it completed); ``result``: finish_task's object under a
    profile's output_schema (docs/control-plane.md), else None."""

    result_summary: str | None
    error: str | None
    completed_at: str = ""
    result: Any = None


def record_stats(runtime_seconds: int, stats: Stats) -> dict[str, Any]:
    """Return the record's ``stats`` object from a conversation's Stats: the seed's
    (runtime_seconds, the four counters, token_usage) plus turns, tool_calls,
    usage_estimated, cached_tokens and cost_usd (None: a response had no known price)."""
    return {
        "runtime_seconds": runtime_seconds,
        **stats.seed_counts(),
        "turns": stats.turns,
        "tool_calls": dict(stats.tool_calls),
        "token_usage": stats.token_usage(),
        "usage_estimated": stats.usage_estimated,
        "cached_tokens": stats.cached_tokens,
        "cost_usd": stats.cost(),
    }


def build_record(
    spec: WorkerSpec,
    status: Status,
    *,
    messages: list[dict[str, Any]],
    stats: dict[str, Any],
    archive: list[dict[str, Any]] | None = None,
    worker_pid: int | None = None,
    worker_started: float | None = None,
    ending: Ending | None = None,
) -> dict[str, Any]:
    """Return the conversations.json document (docs/specification.md §6 fields plus status,
    and ``runs``: how many times it ran, continue_sub_agent counting on).

    ``worker_pid`` (with ``worker_started``, its start time in seconds since the
    epoch, and the spec's process_mark) is written when given: agentkit.subagent.sweep's worker_alive and
    sweep_record read them to tell a live worker from a dead one; ``archive`` (the
    conversation's: originals of what was shrunk or compacted) is written when
    given; ``ending`` adds completed_at (now when empty), result_summary and error,
    else the record is still running (completed_at and result_summary null, no
    error).
    """
    record: dict[str, Any] = {
        "agent_id": spec.agent_id,
        "summary": spec.summary,
        "created_at": spec.created_at,
        "completed_at": None,
        "status": status,
        "result_summary": None,
        "sub_conversation_id": spec.sub_conversation_id,
        "runs": record_runs(spec),
        "task": spec.task,
        "deliverables_dir": spec.deliverables_dir,
    }
    if (conventions := record_metadata(spec.extra)) is not None:
        record["conventions"] = conventions  # the AGENTS.md files and skills it was given
    if isinstance(copy := spec.extra.get("isolation"), dict):
        record["isolation"] = copy  # its own copy (agentkit.subagent.isolated)
    if worker_pid is not None:
        record["worker_pid"] = worker_pid
        record["worker_started"] = worker_started
        record["process_mark"] = spec.process_mark
    record["messages"] = messages
    if archive is not None:
        record["archive"] = archive
    record["stats"] = stats
    if ending is not None:
        record["completed_at"] = ending.completed_at or utc_now()
        record["result_summary"] = ending.result_summary
        record["error"] = ending.error
        if ending.result is not None:
            record["result"] = ending.result
    return record


def record_runs(spec: WorkerSpec) -> int:
    """How many times the spec's sub-agent has run, this run included (1, or more for a
    continue_sub_agent run: ``WorkerSpec.extra["continued"]["runs"]``)."""
    continued = spec.extra.get("continued")
    runs = continued.get("runs") if isinstance(continued, dict) else None
    return runs if isinstance(runs, int) and runs > 1 else 1


def record_path(deliverables: Path) -> Path:
    """Return ``<deliverables>/.subagent/conversations.json``."""
    return deliverables / RECORD_DIR / RECORD_FILE


def record_relpath(deliverables_dir: str) -> str:
    """Return the record's path relative to the workspace, for messages and rows."""
    return f"{deliverables_dir}/{RECORD_DIR}/{RECORD_FILE}"


ORPHANED_ERROR = "stopped: the main process ended or stopped this worker"
"""The error of the record a worker writes when it finds its parent gone."""


def may_replace(
    stored: dict[str, Any] | None,
    sub_conversation_id: object,
    by_parent: bool = False,
    runs: object = 1,
) -> bool:
    """The one rule for replacing a record: anything may replace a running record,
    a missing one or another sub-conversation's; nothing replaces a final record
    (status in FINAL_STATUSES) of the same sub-conversation, except a later run of it
    (``runs`` above the stored one's: continue_sub_agent, whose record keeps every
    run's messages) and the parent (``by_parent``) replacing the worker's own
    parent-gone account (status terminated, error :data:`ORPHANED_ERROR`): the parent
    lived, and knows better."""
    if not stored or stored.get("sub_conversation_id") != sub_conversation_id:
        return True
    if stored.get("status") not in FINAL_STATUSES:
        return True
    stored_runs = stored.get("runs")
    stored_runs = stored_runs if isinstance(stored_runs, int) else 1
    if isinstance(runs, int) and runs > stored_runs:
        return True
    return by_parent and orphaned_account(stored)


def orphaned_account(stored: dict[str, Any]) -> bool:
    """Whether ``stored`` is a worker's record of losing its parent."""
    return stored.get("status") == "terminated" and stored.get("error") == ORPHANED_ERROR


@contextlib.contextmanager
def folder_lock(deliverables: Path, root: Path) -> Iterator[None]:
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


_SUB_ID = re.compile(r"^[A-Za-z0-9_\-]{1,80}$")
_HEAD = re.compile(r'"status": "(\w+)".*?"sub_conversation_id": "([^"\\]*)"', re.S)
_RUNS = re.compile(r'"runs": (\d+)')
_END_KEYS = ("sub_conversation_id", "status", "completed_at")


def _stored_head(deliverables: Path) -> dict[str, Any] | None:
    """Return the stored record's status and sub_conversation_id, read from the
    file's head when they are there (they precede the messages), else the whole
    record; None when there is none."""
    try:
        with open(record_path(deliverables), encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
    except OSError:
        return None
    cut = head.find('"messages":')  # the writers put no space after it
    match = _HEAD.search(head, 0, cut) if cut >= 0 else None
    if match is not None:
        head_fields: dict[str, Any] = {
            "status": match.group(1),
            "sub_conversation_id": match.group(2),
        }
        runs = _RUNS.search(head, match.end(), cut)
        if runs is not None:
            head_fields["runs"] = int(runs.group(1))
        if match.group(1) != "running" or not journal_ends(record_path(deliverables)):
            return head_fields
    return read_record(deliverables)  # a journal line may have ended it (finalise)


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
    with folder_lock(deliverables, root):
        sub_id = record.get("sub_conversation_id") if isinstance(record, dict) else None
        stored = _stored_head(deliverables)
        if by_parent and stored is not None and stored.get("status") == "terminated":
            stored = read_record(deliverables)  # the head has no error: read it all
        runs = record.get("runs", 1) if isinstance(record, dict) else 1
        same_end = by_parent and _same_end(stored, record)  # the end, now written whole
        if not same_end and not may_replace(stored, sub_id, by_parent, runs):
            return False
        write()
        return True


def _same_end(stored: dict[str, Any] | None, record: Any) -> bool:
    """Whether ``stored`` ended as ``record`` does (status and completed_at): the
    parent's end kept as a journal line on a full disk, written whole later."""
    return (
        isinstance(stored, dict)
        and isinstance(record, dict)
        and bool(stored.get("completed_at"))
        and all(stored.get(k) == record.get(k) for k in _END_KEYS)
    )


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
        drop_journal(path.parent, root)  # the record holds it all now

    return guarded(deliverables, record, write, by_parent, root=root)


def add_to_final(
    deliverables: Path, sub_conversation_id: str, fields: dict[str, Any], *, root: Path
) -> bool:
    """Add ``fields`` to the final record of ``sub_conversation_id`` in ``deliverables``
    (the parent's notes after the end, e.g. an isolated sub-agent's ``changes`` and
    ``merged``), atomically under the folder lock; its end stays as it is. Returns
    whether it wrote (False: no final record of that sub-conversation there). Raises
    OSError (``root``: as write_record's)."""
    path = record_path(deliverables)
    with folder_lock(deliverables, root):
        record = read_record(deliverables)
        if (
            not record
            or record.get("sub_conversation_id") != sub_conversation_id
            or record.get("status") not in FINAL_STATUSES
        ):
            return False
        record.update(fields)
        write_json_atomic(path, record, root=root)
        drop_journal(path.parent, root)  # the record holds it all now
    return True


def transcript_writer(deliverables: Path, root: Path) -> TranscriptWriter:
    """Return the worker's TranscriptWriter of the record, whose every whole write
    obeys may_replace (``root``: as write_record's)."""

    def guard(head: dict[str, Any], write: Callable[[], None]) -> bool:
        return guarded(deliverables, head, write, root=root)

    return TranscriptWriter(record_path(deliverables), root, guard)


def load_record(path: Path) -> Any:
    """Return the JSON document of the record file ``path``; a running
    ``conversations.json`` comes with its journal applied (agentkit.subagent.journal),
    as the worker last saved it. Raises FileNotFoundError, or ValueError (bad JSON,
    nested too deeply: agentkit.jsonfile.read_json)."""
    for _ in range(3):
        data = read_json(path)
        if not isinstance(data, dict) or data.get("status") != "running":
            return data
        if path.name != RECORD_FILE or (journal := read_journal(path)) is None:
            return data
        if apply_journal(data, journal) is not None:
            return data
        # Written whole between the two reads: read both again.
    return data


def read_record(deliverables: Path, root: Path | None = None) -> dict[str, Any] | None:
    """Return the record (:func:`load_record`), or None when it is missing or
    unreadable. With ``root`` (the workspace), a record left running whose final
    version the parent had to write elsewhere (:data:`FALLBACK_DIR`: the folder
    refused it) comes from there."""
    try:
        data = load_record(record_path(deliverables))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        return None
    if root is not None and data.get("status") == "running":
        moved = fallback_record(root, data.get("sub_conversation_id"))
        if moved is not None:
            return moved
    return data


def fallback_path(root: Path, sub_conversation_id: object) -> Path | None:
    """Return where the parent writes the record of ``sub_conversation_id`` when its
    deliverables folder refuses it (``<workspace>/.agentkit/subagent-records/<id>.json``),
    or None for an id that is not a plain name."""
    if not isinstance(sub_conversation_id, str) or not _SUB_ID.match(sub_conversation_id):
        return None
    return state_path(root, FALLBACK_DIR, f"{sub_conversation_id}.json")


def fallback_record(root: Path, sub_conversation_id: object) -> dict[str, Any] | None:
    """Return the final record the parent wrote at :func:`fallback_path` for
    ``sub_conversation_id`` (its deliverables folder refused it), or None."""
    path = fallback_path(root, sub_conversation_id)
    if path is None:
        return None
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    same = isinstance(data, dict) and data.get("sub_conversation_id") == sub_conversation_id
    return data if same and data.get("status") in FINAL_STATUSES else None
