"""A sub-agent's record on disk: ``<deliverables_dir>/.subagent/conversations.json`` (seed §6).

The seed's fields (agent_id, summary, created_at, completed_at, messages, stats
with token_usage) plus status (running, completed, failed, timeout, terminated),
result_summary, task, sub_conversation_id and error. Written atomically after
every turn by the worker, and finalised by the parent when it kills a worker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentkit.jsonfile import read_json, write_json_atomic

RECORD_DIR = ".subagent"
RECORD_FILE = "conversations.json"
FINAL_STATUSES = ("completed", "failed", "timeout", "terminated")


def record_path(deliverables: Path) -> Path:
    """Return ``<deliverables>/.subagent/conversations.json``."""
    return deliverables / RECORD_DIR / RECORD_FILE


def write_record(deliverables: Path, record: dict[str, Any]) -> None:
    """Atomically (temp file + rename) write ``record`` as the agent's conversations.json."""
    write_json_atomic(record_path(deliverables), record)


def read_record(deliverables: Path) -> dict[str, Any] | None:
    """Return the record, or None when it is missing or unreadable."""
    try:
        data = read_json(record_path(deliverables))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def archive_record(deliverables: Path) -> Path | None:
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
    os.replace(current, target)
    return target


def folder_in_use(deliverables: Path) -> str | None:
    """Return the sub-conversation id of a sub-agent still running in this folder
    (its record says running and its worker process is alive), else None.

    Guards folders across Agents: two conversations on one workspace must not
    both start ``sub_agent_results/agent_1``.
    """
    record = read_record(deliverables)
    if not record or record.get("status") != "running":
        return None
    pid = record.get("worker_pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return None
    import psutil

    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return str(record.get("sub_conversation_id") or "?")


def clean_temp_files(deliverables: Path) -> None:
    """Remove temp files a killed worker may have left beside the record."""
    folder = deliverables / RECORD_DIR
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(f".{RECORD_FILE}.") and name.endswith(".tmp"):
            try:
                os.unlink(folder / name)
            except OSError:
                pass


def list_deliverables(deliverables: Path, limit: int) -> tuple[list[str], int]:
    """Return ``(files, total)``: up to ``limit`` files under ``deliverables`` (relative,
    forward slashes, sorted), skipping the ``.subagent`` record folder; ``total``
    counts them all."""
    files: list[str] = []
    if not deliverables.is_dir():
        return files, 0
    for root, dirs, names in os.walk(deliverables):
        dirs[:] = sorted(d for d in dirs if not (Path(root) == deliverables and d == RECORD_DIR))
        for name in names:
            rel = (Path(root) / name).relative_to(deliverables)
            files.append(rel.as_posix())
    files.sort()
    return files[:limit], len(files)
