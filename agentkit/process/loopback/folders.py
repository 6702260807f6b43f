"""Where the loopback relays of ``command_network = loopback`` keep their sockets, and
the sweep of folders left by a killed agent (the design: :mod:`agentkit.process.sandbox`).

Each agent process owns one parent folder, ``$TMPDIR/agentkit-loopback-PID-START``
(``PID`` and ``START``, its start time in centiseconds since the epoch, name the owner;
mode 0700, owned by this user, else refused), holding one private folder per loopback
command (:func:`command_folder`). The parent is removed at exit (a multiprocessing
worker's too, though it ends with ``os._exit``). A SIGKILLed agent cannot remove it, so
the first relay of every later process sweeps (:func:`sweep`) each
``agentkit-loopback-*`` folder whose owner is gone: no process has that pid, or it
started at another time (the pid was reused). A folder of the older layout (one folder
per process, ``mkdtemp``) is swept when its ``relay.sock`` refuses connections.

Public API: :func:`command_folder`, :func:`sweep`, :data:`PREFIX`.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.util
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
from pathlib import Path

import psutil

__all__ = ["PREFIX", "command_folder", "sweep"]

PREFIX = "agentkit-loopback-"
_OWNED = re.compile(rf"{PREFIX}(\d+)-(\d+)")
_lock = threading.Lock()
_parent: tuple[int, Path] | None = None  # (pid, folder) of this process


def _start_time(pid: int) -> int | None:
    """The process's start time in centiseconds, or None when there is no such process."""
    try:
        return round(psutil.Process(pid).create_time() * 100)
    except psutil.Error:
        return None


def _owner_alive(pid: int, started: int) -> bool:
    now = _start_time(pid)
    return now is not None and abs(now - started) <= 100  # create_time drifts under 1 s


def _legacy_dead(folder: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(folder / "relay.sock"))
        except (ConnectionRefusedError, FileNotFoundError):
            return True
        except OSError:
            return False
    return False


def sweep(base: Path | None = None) -> list[Path]:
    """Remove the ``agentkit-loopback-*`` folders in ``base`` (default: the temp folder)
    of this user whose owner process is gone (see the module docstring). Returns the
    folders removed; never raises (a folder that cannot be removed is left)."""
    base = base if base is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(base.glob(f"{PREFIX}*"))
    except OSError:
        return removed
    for folder in entries:
        try:
            info = folder.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        owned = _OWNED.fullmatch(folder.name)
        if owned is not None:
            gone = not _owner_alive(int(owned[1]), int(owned[2]))
        else:
            gone = _legacy_dead(folder)
        if gone:
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    return removed


def _make_private(folder: Path) -> None:
    """Create ``folder`` 0700, or accept it when it is already ours and private: a
    folder of that predictable name made by another user must not hold our sockets."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise PermissionError(f"{folder} is not a private folder of this user")


def _remove(pid: int, folder: Path) -> None:
    if os.getpid() == pid:  # not a forked child's inherited hook
        shutil.rmtree(folder, ignore_errors=True)


def _parent_folder() -> Path:
    global _parent
    with _lock:
        pid = os.getpid()
        if _parent is not None and _parent[0] == pid:
            return _parent[1]
        sweep()
        started = _start_time(pid)
        if started is None:
            raise OSError("cannot read this process's start time")
        folder = Path(tempfile.gettempdir()) / f"{PREFIX}{pid}-{started}"
        _make_private(folder)
        atexit.register(_remove, pid, folder)
        # A multiprocessing worker (a sub-agent) ends with os._exit: no atexit there.
        multiprocessing.util.Finalize(None, _remove, args=(pid, folder), exitpriority=0)
        _parent = (pid, folder)
        return folder


def command_folder() -> Path:
    """Return a new private folder (0700) for one command's relay, inside this process's
    parent folder (made, and older leftovers swept, on the first call in a process).
    The caller removes it when the command ends. Raises OSError when it cannot be made."""
    return Path(tempfile.mkdtemp(prefix="cmd-", dir=_parent_folder()))
