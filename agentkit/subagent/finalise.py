"""A sub-agent's record made final by the parent, when its worker could not.

One job: :func:`finalise_record`, the parent's last word on a record
(agentkit.subagent.record defines the record and its rules): how the agent ended
over what the worker saved last, under the record's rules (may_replace: a final
record stands), written in the deliverables folder or, when that folder refuses
it, at the workspace's fallback place.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.conversation import SEED_COUNTERS, state_path, utc_now
from agentkit.jsonfile import write_json_atomic
from agentkit.subagent.record import (
    FALLBACK_DIR,
    NO_TOKENS,
    Ending,
    build_record,
    clean_temp_files,
    fallback_path,
    may_replace,
    read_record,
    record_path,
    record_runs,
    write_record,
)

if TYPE_CHECKING:
    from agentkit.subagent.contract import Status, WorkerSpec

__all__ = ["finalise_record"]


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

    Returns ``(record, path)``: the record as it now stands and where it is on disk:
    the deliverables folder, else ``<workspace>/.agentkit/subagent-records/<sub_id>.json``
    when that folder cannot be written (full disk), else None (kept in memory).
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
    fallback = fallback_path(root, spec.sub_conversation_id) or state_path(
        root, FALLBACK_DIR, "record.json"
    )
    try:
        write_json_atomic(fallback, record, root=root)
    except OSError:
        return record, None
    return record, fallback
