"""The deliverables folder around a sub-agent's record.

One job: what is done to a deliverables folder besides its record
(agentkit.subagent.record): an earlier run's record set aside before a new run starts
there (:func:`archive_record`), the temp files a killed writer left beside the record
removed (:func:`clean_temp_files`), and the deliverables listed without the record
folder (:func:`list_deliverables`). Every path is opened through no link below the
workspace (agentkit.confined).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from agentkit.confined import folder as confined_folder
from agentkit.confined import list_files
from agentkit.jsonfile import write_json_atomic
from agentkit.subagent.journal import JOURNAL_FILE
from agentkit.subagent.record import RECORD_DIR, RECORD_FILE, read_record, record_path

__all__ = ["archive_record", "clean_temp_files", "list_deliverables"]


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
    journaled = bool(old) and current.with_name(JOURNAL_FILE).exists()
    if journaled:
        write_json_atomic(target, old, root=root)  # with what its journal held
    with confined_folder(root, current.parent) as fd:  # no link below root is followed
        if journaled:
            os.unlink(current.name, dir_fd=fd)
            os.unlink(JOURNAL_FILE, dir_fd=fd)
        else:
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
