"""File I/O shared by read_file, write_file and edit_file: safe opening, read snapshots,
staleness checks and atomic writes (docs/tools.md §1 "Atomic writes", read snapshot rules)."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import Any

from agentkit.errors import ToolError
from agentkit.tools.base import ToolContext
from agentkit.tools.files._text import TextFormat
from agentkit.tools.os_errors import os_error_kind
from agentkit.tools.paths import check_links, display_path

STALE_PREVIEW_LINES = 40


def _current_umask() -> int:
    # Read without changing it when the kernel tells us (os.umask() would briefly change it
    # for every thread of the process).
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_current_umask()

_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def path_lock(path: Path) -> threading.Lock:
    """A process-wide lock per absolute path: tool calls of one message run in parallel
    threads, and two edits of the same file must not both read the old content."""
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(str(path), threading.Lock())


def stat_regular(ctx: ToolContext, path: Path) -> os.stat_result:
    """Return ``os.stat(path)`` for an existing regular file with a single hard link.

    Raises:
        ToolError("is_directory"), ToolError("not_a_regular_file"),
        ToolError("outside_workspace") (several hard links, see :func:`check_links`);
        FileNotFoundError is left to the caller (each tool words its own not_found).
    """
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise ToolError("is_directory", f"{display_path(ctx, path)} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(
            "not_a_regular_file",
            f"{display_path(ctx, path)} is not a regular file (FIFO, socket or device); "
            "only regular files can be read or written",
        )
    check_links(ctx, path, st)
    return st


def open_regular(ctx: ToolContext, path: Path) -> tuple[Any, os.stat_result]:
    """Open an existing regular file for binary reading without ever blocking on a FIFO.

    Returns ``(binary file object, fstat result)``; the caller closes the file.
    Raises the errors of :func:`stat_regular` (checked again on the open descriptor, so a
    file swapped for a FIFO in between is still refused).
    """
    stat_regular(ctx, path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ToolError("not_a_regular_file", f"{display_path(ctx, path)} is not a regular file")
    try:
        check_links(ctx, path, st)  # again on the descriptor: a swap in between is caught
    except ToolError:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), st


def make_snapshot(st: os.stat_result, fmt: TextFormat | None, data: bytes | None) -> dict[str, Any]:
    """Build a read snapshot: ``{mtime_ns, size, sha256 (None when not read whole), format}``."""
    return {
        "mtime_ns": st.st_mtime_ns,
        "size": st.st_size,
        "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
        "format": fmt,
    }


def record_snapshot(ctx: ToolContext, path: Path, snap: dict[str, Any]) -> None:
    """Store ``snap`` in ``ctx.file_state[str(path)]`` (under ``ctx.lock``)."""
    with ctx.lock:
        ctx.file_state[str(path)] = snap


def get_snapshot(ctx: ToolContext, path: Path) -> dict[str, Any] | None:
    """Return the recorded snapshot of ``path`` or None."""
    with ctx.lock:
        snap = ctx.file_state.get(str(path))
    return snap if isinstance(snap, dict) else None


def is_fresh(snap: dict[str, Any], st: os.stat_result, data: bytes | None) -> bool:
    """Whether the file (``st`` and, when available, its bytes) still matches ``snap``.

    Same size and mtime means fresh; otherwise equal content (sha256) still counts as
    fresh (a ``touch`` or a rewrite with the same bytes changes nothing the model saw).
    """
    if snap.get("mtime_ns") == st.st_mtime_ns and snap.get("size") == st.st_size:
        return True
    digest = snap.get("sha256")
    if digest and data is not None and len(data) == st.st_size:
        return hashlib.sha256(data).hexdigest() == digest
    return False


def stale_error(ctx: ToolContext, path: Path, text: str | None) -> ToolError:
    """Build the ``stale_read`` error with the current first 40 lines embedded."""
    shown = display_path(ctx, path)
    parts = [
        f"{shown} changed on disk since you last read it (another program, a command or "
        "another agent wrote it). Nothing was written."
    ]
    if text is not None:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        head = lines[:STALE_PREVIEW_LINES]
        parts.append(f"Current content, lines 1-{len(head)} of {len(lines)}:")
        parts.extend(
            f"{i:>6}\t{line.removesuffix(chr(13))[:500]}" for i, line in enumerate(head, 1)
        )
    parts.append(
        "Check that your change still fits the current content (read_file for other parts), "
        "then retry."
    )
    return ToolError("stale_read", "\n".join(parts))


def atomic_write(path: Path, data: bytes, mode: int | None, root: Path) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, flush, fsync,
    rename, then fsync of the folder (agentkit.confined.write_bytes_atomic).

    Args:
        mode: permission bits to give the file (an existing file's), or None for a new
            file (0o666 minus the umask, like ``open()`` would).
        root: the workspace: the folders below it are opened without following links,
            so a folder a command swapped for a link after the path guard checked it
            is refused, not followed out of the workspace.
    Raises:
        OSError from the file system (the temp file is removed first).
    """
    from agentkit.confined import write_bytes_atomic

    write_bytes_atomic(root, path, data, mode=_NEW_FILE_MODE if mode is None else mode, fsync=True)


def os_error(ctx: ToolContext, path: Path, exc: OSError, doing: str) -> ToolError:
    """Turn an unexpected OSError into a ToolError with a readable message; the code
    is the errno class (agentkit.tools.os_errors.os_error_kind: disk_full, ...)."""
    reason = exc.strerror or type(exc).__name__
    return ToolError(os_error_kind(exc), f"cannot {doing} {display_path(ctx, path)}: {reason}")
