"""A sub-agent's record made final by the parent, when its worker could not.

One job: :func:`finalise_record`, the parent's last word on a record
(agentkit.subagent.record defines the record and its rules): how the agent ended
over what the worker saved last, under the record's rules (may_replace: a final
record stands), written in the deliverables folder or, when that folder refuses
it, at the workspace's fallback place. When no whole write fits (a full disk), its
end goes into the record's journal as one line (:func:`end_in_journal`), so every
reader sees it final, and the parent keeps the whole record and writes it when
there is room (:func:`retry_final`, at the conversation's next save).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.conversation import SEED_COUNTERS, hide_runtime_folder, state_path, utc_now
from agentkit.jsonfile import write_json_atomic
from agentkit.subagent.journal import append_end
from agentkit.subagent.record import (
    FALLBACK_DIR,
    NO_TOKENS,
    Ending,
    build_record,
    fallback_path,
    folder_lock,
    may_replace,
    read_record,
    record_path,
    record_runs,
    write_record,
)
from agentkit.subagent.record_folder import clean_temp_files

if TYPE_CHECKING:
    from agentkit.subagent.contract import Status, WorkerSpec

__all__ = ["end_in_journal", "finalise_record", "retry_final", "write_end"]

_END_FIELDS = ("status", "completed_at", "result_summary", "error", "runs", "result")


def finalise_record(
    spec: WorkerSpec,
    status: Status,
    seed_stats: dict[str, int],
    token_usage: dict[str, int],
    ending: Ending,
    worker_record: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Path | None]:
    """Make the record say how the agent ended when its worker could not (killed,
    crashed, its own write failed): status, ending and the runtime of ``seed_stats``
    (the parent's clock) over ``worker_record`` (the worker's final record, sent
    when it could not write it) or else whatever the worker saved last (its journal
    applied). The counters stay those saved with the transcript, so they count what
    it shows (``seed_stats``' and ``token_usage`` only fill in a record that has
    none). Temp files a killed worker left are removed. A final record is left alone.

    Returns ``(record, path)``: the record as it now stands and where it is on disk
    whole: the deliverables folder, else ``<workspace>/.agentkit/subagent-records/<sub_id>.json``
    when that folder cannot be written (full disk), else None (kept in memory; its
    end may be in the folder's journal). Unless it is the deliverables folder, keep
    the record and :func:`retry_final` it.
    """
    deliverables = Path(spec.deliverables_path)
    root = Path(spec.workspace)
    clean_temp_files(deliverables, root=root)
    stored = read_record(deliverables)
    runs = record_runs(spec)
    if stored is not None and not may_replace(
        stored, spec.sub_conversation_id, by_parent=True, runs=runs
    ):
        return stored, record_path(deliverables)
    if stored is not None and stored.get("sub_conversation_id") != spec.sub_conversation_id:
        stored = None  # an earlier agent's (the new one never wrote): not this one's transcript
    record = worker_record or stored or build_record(spec, status, messages=[], stats={})
    record["runs"] = runs
    stats = dict(record.get("stats") or {})
    for key in SEED_COUNTERS:
        stats.setdefault(key, seed_stats.get(key, 0))
    if "runtime_seconds" in seed_stats:
        stats["runtime_seconds"] = seed_stats["runtime_seconds"]
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
    end_in_journal(deliverables, record, root)  # readers see it final at once
    fallback = fallback_path(root, spec.sub_conversation_id) or state_path(
        root, FALLBACK_DIR, "record.json"
    )
    hide_runtime_folder(root, fallback.parent)  # not in the user's git status
    try:
        write_json_atomic(fallback, record, root=root)
    except OSError:
        return record, None
    return record, fallback


def end_in_journal(deliverables: Path, record: dict[str, Any], root: Path) -> bool:
    """Append ``record``'s end (status, completed_at, result_summary, error, runs) to
    the journal of the record in ``deliverables`` when that one is the same
    sub-conversation's and still running (agentkit.subagent.journal.append_end): a
    few hundred bytes where a whole write needs room for two copies. Its messages
    stay as last saved. Returns whether it was written (never raises)."""
    head = {k: record[k] for k in _END_FIELDS if k in record}
    try:
        with folder_lock(deliverables, root):
            stored = read_record(deliverables)
            if (
                stored is None
                or stored.get("sub_conversation_id") != record.get("sub_conversation_id")
                or stored.get("status") != "running"
            ):
                return False
            append_end(record_path(deliverables), root, stored, head)
    except OSError:
        return False
    return True


def write_end(deliverables: Path, record: dict[str, Any], root: Path) -> bool:
    """Write the ended ``record`` whole as the parent (agentkit.subagent.record.write_record),
    or, when that fails (a full disk), its end as a journal line (:func:`end_in_journal`).
    Returns whether its end is on disk (False also when a final record stands)."""
    try:
        return write_record(deliverables, record, by_parent=True, root=root)
    except OSError:
        return end_in_journal(deliverables, record, root)


def retry_final(deliverables: Path, record: dict[str, Any], root: Path) -> bool:
    """Write the final ``record`` that did not fit when its agent ended (kept by the
    parent) whole into ``deliverables``, over its end kept as a journal line. Returns
    True when done (written, or another final record stands there), False when the
    write still fails (no room yet)."""
    try:
        write_record(deliverables, record, by_parent=True, root=root)
    except OSError:
        return False
    return True
