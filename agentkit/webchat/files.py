"""Read-only views of a sub-agent's deliverables folder and transcript, for the web chat.

One job: list and read the files under ``<workspace>/<deliverables_dir>`` without
ever leaving it. Every path goes through the tools' workspace guard
(agentkit.tools.paths.resolve_path: ``..`` and symlinks resolved, then checked
against the workspace), and is then checked against the deliverables folder itself,
so a symlink pointing out of it (even elsewhere in the workspace) is refused.
Text is returned as text up to :data:`MAX_TEXT_BYTES`; anything else is described
by its type and size only.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from pathlib import Path
from typing import Any

from agentkit.errors import AgentkitError, ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.paths import check_links, resolve_path

__all__ = ["MAX_FILES", "MAX_TEXT_BYTES", "ViewError", "list_files", "read_file", "transcript"]

MAX_TEXT_BYTES = 256 * 1024
"""Largest part of a file shown (bytes); longer files are cut and say so."""
MAX_FILES = 2000
"""Most files listed in one folder view."""
RECORD_DIR = ".subagent"


class ViewError(AgentkitError):
    """A refused or failed view: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _folder(workspace: Path, settings: Settings, deliverables_dir: str | None) -> Path:
    if not deliverables_dir:
        raise ViewError(404, "this sub-agent has no deliverables folder")
    ctx = ToolContext(workspace=workspace, settings=settings)
    try:
        folder = resolve_path(ctx, deliverables_dir)
    except ToolError:  # its message names absolute paths: say it without them
        raise ViewError(403, "the deliverables folder is outside the workspace") from None
    if not folder.is_relative_to(Path(os.path.realpath(workspace))):
        raise ViewError(403, "the deliverables folder is outside the workspace")
    return folder


def _inside(folder: Path, relative: str, workspace: Path, settings: Settings) -> Path:
    """Resolve ``relative`` (a path inside the deliverables folder) safely."""
    if not relative or relative.startswith("/") or "\x00" in relative:
        raise ViewError(400, "give a path relative to the deliverables folder")
    ctx = ToolContext(workspace=workspace, settings=settings)
    try:
        path = resolve_path(ctx, str(folder / relative))
    except ToolError:  # its message names absolute paths: say it without them
        raise ViewError(403, f"{relative} leads outside the workspace") from None
    if not path.is_relative_to(folder):
        raise ViewError(403, "that path leaves the deliverables folder")
    return path


def list_files(workspace: Path, settings: Settings, deliverables_dir: str | None) -> dict[str, Any]:
    """List the files of a deliverables folder (its ``.subagent`` record folder left
    out). Symlinks are listed, files and folders alike, marked ``symlink``, and never
    walked into; following one to read a file still must stay inside the folder.

    Returns ``{"dir": str, "files": [{"path", "size", "type", "symlink", "dir"}],
    "truncated": bool}`` with paths relative to the folder, sorted; ``size`` in bytes
    (a symlink's target's size when the target is a file inside the folder, else None).
    Raises ViewError (403 outside, 404 missing).
    """
    folder = _folder(workspace, settings, deliverables_dir)
    if not folder.is_dir():
        raise ViewError(404, f"no folder {deliverables_dir}")
    files: list[dict[str, Any]] = []
    for root, dirs, names in os.walk(folder, followlinks=False):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not (here == folder and d == RECORD_DIR))
        # os.walk puts a symlink to a folder among ``dirs`` (and does not follow it).
        linked = [d for d in dirs if (here / d).is_symlink()]
        dirs[:] = [d for d in dirs if d not in linked]
        for name in sorted([*names, *linked]):
            if len(files) >= MAX_FILES:
                return {"dir": deliverables_dir, "files": files, "truncated": True}
            entry = _entry(folder, here / name)
            if entry is not None:
                files.append(entry)
    return {"dir": deliverables_dir, "files": files, "truncated": False}


def _entry(folder: Path, full: Path) -> dict[str, Any] | None:
    try:
        info = full.lstat()
    except OSError:
        return None
    link = stat.S_ISLNK(info.st_mode)
    size: int | None = info.st_size
    is_dir = False
    if link:
        target = Path(os.path.realpath(full))
        inside = target.is_relative_to(folder)
        is_dir = inside and target.is_dir()
        size = target.stat().st_size if inside and target.is_file() else None
    return {
        "path": full.relative_to(folder).as_posix(),
        "size": None if is_dir else size,
        "type": "inode/directory" if is_dir else _mime(full),
        "symlink": link,
        "dir": is_dir,
    }


def read_file(
    workspace: Path, settings: Settings, deliverables_dir: str | None, relative: str
) -> dict[str, Any]:
    """Read one file of a deliverables folder.

    Returns ``{"path", "size", "type", "binary": bool, "text": str | None,
    "truncated": bool}``: text (UTF-8, undecodable bytes replaced) for text files, cut at
    MAX_TEXT_BYTES; ``text`` None for binary files. Raises ViewError: 400 bad path,
    403 outside the folder (a symlink out included) or a file with several hard links
    (the file tools' rule, agentkit.tools.paths.check_links), 404 missing or not a file.
    """
    folder = _folder(workspace, settings, deliverables_dir)
    path = _inside(folder, relative, workspace, settings)
    if not path.is_file():
        raise ViewError(404, f"no file {relative}")
    with path.open("rb") as handle:
        # The file tools' rule, on what was opened: a file with several hard links may
        # have its other name outside the workspace (unless allow_hard_links).
        st = os.fstat(handle.fileno())
        _check_links(workspace, settings, path, st)
        size = st.st_size
        data = handle.read(MAX_TEXT_BYTES)
    binary = b"\x00" in data[:8192] or not _decodes(data)
    return {
        "path": relative,
        "size": size,
        "type": _mime(path),
        "binary": binary,
        "text": None if binary else data.decode("utf-8", errors="replace"),
        "truncated": not binary and size > MAX_TEXT_BYTES,
    }


def transcript(
    workspace: Path,
    settings: Settings,
    deliverables_dir: str | None,
    sub_conversation_id: str | None = None,
) -> dict[str, Any]:
    """Return a sub-agent's record (``<deliverables>/.subagent/conversations.json``,
    docs/specification.md §6) as last saved (a running one with its journal applied:
    agentkit.subagent.record.load_record); when the folder refused its final record
    and the parent wrote it under the workspace's state folder, that one. Raises
    ViewError 404 when there is none yet."""
    from agentkit.subagent.record import fallback_record, load_record

    folder = _folder(workspace, settings, deliverables_dir)
    path = _inside(folder, f"{RECORD_DIR}/conversations.json", workspace, settings)
    if not path.is_file():
        raise ViewError(404, "no transcript yet")
    _check_links(workspace, settings, path, path.stat())
    try:
        data = load_record(path)
    except (OSError, ValueError) as exc:
        raise ViewError(500, f"the transcript could not be read: {exc}") from None
    if not isinstance(data, dict):
        raise ViewError(500, "the transcript is not a JSON object")
    same = sub_conversation_id is None or data.get("sub_conversation_id") == sub_conversation_id
    if data.get("status") == "running" and same:
        return fallback_record(workspace, data.get("sub_conversation_id")) or data
    return data


def _check_links(workspace: Path, settings: Settings, path: Path, st: os.stat_result) -> None:
    """ViewError 403 for a file with several hard links: the file tools' rule (its
    other names may be outside the workspace), from the one place it lives."""
    try:
        check_links(ToolContext(workspace=workspace, settings=settings), path, st)
    except ToolError as exc:
        raise ViewError(403, str(exc)) from None


def _mime(path: Path) -> str:
    kind, _ = mimetypes.guess_type(path.name)
    return kind or "application/octet-stream"


def _decodes(data: bytes) -> bool:
    """True when ``data`` is UTF-8 text (a character cut at the end is allowed)."""
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        return exc.start >= len(data) - 3
