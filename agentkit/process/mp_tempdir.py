"""multiprocessing's temp folder (the forkserver's socket), named by its owner's pid.

One job: :func:`owned_temp_dir` gives this process's multiprocessing temp folder
before the forkserver starts. multiprocessing names it ``pymp-XXXX`` and removes it at
a clean exit; a process killed with SIGKILL leaves it, with the dead socket inside,
once per kill. Here it is ``akmp-<pid>-XXXX`` instead (short: the socket's path must
fit in 108 bytes), and each new one first removes those whose process no longer
exists (same user, same temp folder). A folder of a live process, or of a pid reused
since, is left alone.
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from multiprocessing import util
from pathlib import Path

from agentkit.process.tree import process_alive

__all__ = ["PREFIX", "owned_temp_dir"]

PREFIX = "akmp-"
"""The start of the folder's name; the owner's pid and a dash follow."""
SOCKET_PATH_MAX = 108
"""Bytes of a Unix socket's path, its final NUL included (Linux's sun_path)."""

_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")


def owned_temp_dir() -> str:
    """Return this process's multiprocessing temp folder, making it (as above) when
    multiprocessing has none yet; it is removed at a clean exit as multiprocessing's
    own is. Where multiprocessing's internals differ (another Python), its own folder."""
    config = getattr(multiprocessing.process.current_process(), "_config", None)
    if not isinstance(config, dict) or config.get("tempdir"):
        return str(util.get_temp_dir())
    sweep_dead()
    folder = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    if len(os.fsencode(folder)) + len("/listener-12345678") >= SOCKET_PATH_MAX:
        os.rmdir(folder)  # its socket's path would not fit: multiprocessing's own name
        return str(util.get_temp_dir())
    # As util.get_temp_dir does for its own folder: removed at exit, late (rmtree held
    # as an argument: the finalizer may run when the shutil module is torn down).
    util.Finalize(None, _remove, args=(shutil.rmtree, folder), exitpriority=-100)
    config["tempdir"] = folder
    return folder


def sweep_dead(root: str | None = None) -> list[str]:
    """Remove the folders :func:`owned_temp_dir` made in ``root`` (default: the temp
    folder) whose process is gone and that belong to this user; return their paths.
    Never raises."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(root or tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        found = _NAME.match(entry.name)
        if found is None or process_alive(int(found.group(1))):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False) and entry.stat().st_uid == os.getuid():
                shutil.rmtree(entry.path)
                removed.append(str(Path(entry.path)))
    return removed


def _remove(rmtree: Callable[..., None], folder: str) -> None:
    rmtree(folder, ignore_errors=True)
