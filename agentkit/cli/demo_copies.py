"""The demo's copies of its sample project in the temp folder: made, marked, said, swept.

One job: ``agentkit demo``, ``chat --demo`` and ``serve --demo`` without ``-w`` work on a
fresh copy of the sample project in ``<temp>/agentkit-demo-XXXX/inventory-project``
(:func:`make_copy`). Each copy's folder holds a marker file (:data:`MARKER`), so that
only agentkit's own demo copies are ever recognised. At exit the demo says where its
copy is and how to remove it (:func:`farewell`); at the next demo start, marked copies
untouched for more than a day are removed (:func:`sweep_old_copies`). Nothing else in
the temp folder is touched: a folder without the marker, with a marker that is not a
plain file, owned by another user, or used within the day stays.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from importlib import resources
from pathlib import Path

__all__ = ["MARKER", "MAX_AGE_SECONDS", "PREFIX", "farewell", "make_copy", "sweep_old_copies"]

PREFIX = "agentkit-demo-"
"""The name of every demo copy's temp folder starts so (tempfile.mkdtemp's prefix)."""

MARKER = ".agentkit-demo-copy"
"""The file in a copy's temp folder that marks it as agentkit's own demo copy."""

MAX_AGE_SECONDS = 24 * 3600
"""A marked copy not used for this long is removed at the next demo start."""

_MARKER_TEXT = (
    "agentkit's demo made this folder: a copy of its sample project.\n"
    "agentkit removes it at a demo start once it has not been used for a day.\n"
)


def make_copy(temp_root: str | Path | None = None) -> Path:
    """Copy the shipped sample project into a new marked temp folder; returns the
    project's path (``<temp>/agentkit-demo-XXXX/inventory-project``). Marked copies
    older than a day are swept first (:func:`sweep_old_copies`). OSError: the copy
    could not be made."""
    root = Path(temp_root or tempfile.gettempdir())
    sweep_old_copies(root)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    (folder / MARKER).write_text(_MARKER_TEXT, encoding="utf-8")
    target = folder / "inventory-project"
    source = resources.files("agentkit").joinpath("demo_project")
    with resources.as_file(source) as src:
        shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def sweep_old_copies(temp_root: str | Path, now: float | None = None) -> list[Path]:
    """Remove agentkit's demo copies in ``temp_root`` unused for more than a day;
    returns the folders removed. A folder counts only when its name starts with
    :data:`PREFIX`, it is this user's, and it holds :data:`MARKER` as a plain file;
    "used" is the newest change of the marker and of the copy's saved conversations.
    Never raises: what cannot be read or removed stays."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        candidates = [p for p in Path(temp_root).iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return removed
    for folder in candidates:
        try:
            if not _ours(folder) or now - _last_used(folder) <= MAX_AGE_SECONDS:
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _ours(folder: Path) -> bool:
    """A real folder of this user holding the marker as a plain file (no links)."""
    info = folder.lstat()
    uid = getattr(os, "getuid", lambda: info.st_uid)()  # no owners to compare on Windows
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        return False
    marker = (folder / MARKER).lstat()
    return stat.S_ISREG(marker.st_mode)


def _last_used(folder: Path) -> float:
    """The newest modification time of the marker and the copy's conversations."""
    times = [(folder / MARKER).lstat().st_mtime]
    for conversations in folder.glob("*/.agentkit/conversations"):
        times.append(conversations.lstat().st_mtime)
        times += [f.lstat().st_mtime for f in conversations.iterdir()]
    return max(times)


def farewell(project: Path) -> str:
    """The line said at a demo's exit: where its copy is and how to remove it."""
    folder = project.parent
    return (
        f"the demo's copy of the sample project stays in {project}; remove it with"
        f" `rm -rf {folder}` (demo copies unused for a day are removed at the next demo start)"
    )
