"""Deliverables folders claimed across processes while their sub-agents run.

One job: two Agents on one workspace (two processes, or two conversations of one
server) must never both run a sub-agent in the same deliverables folder, nor in
folders nested in each other (docs/specification.md §8.2). The in-process table
(agentkit.subagent.claims) cannot see another process, and a record says
``running`` only once the worker wrote it, after both had been admitted; so the
claim is an OS advisory lock, taken atomically by the kernel and dropped when its
holder's descriptors close, however the holder ends (SIGKILL too):

- an exclusive ``flock`` on the deliverables folder itself (its directory
  descriptor, opened through no link: agentkit.confined);
- a shared ``flock`` on every folder between the workspace and it, so a claim on a
  folder around it (exclusive there) or inside it (shared here) is refused too.

The holder names itself in ``<folder>/.subagent/owner.json`` (pid, process start
time, conversation id, agent id) for the refusal message, and removes it at
release while still holding the lock. The descriptors are close-on-exec: commands
and workers never carry the claim. Where ``fcntl`` is missing (Windows) or the file
system has no locks, the claim is the in-process table and the records only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentkit.confined import folder as confined_folder
from agentkit.confined import open_folder, write_bytes_atomic
from agentkit.errors import AgentkitError
from agentkit.process.tree import process_alive

try:
    import fcntl
except ImportError:  # Windows: no cross-process claim
    fcntl = None  # type: ignore[assignment]

OWNER_FILE = "owner.json"
_RECORD_DIR = ".subagent"  # agentkit.subagent.record.RECORD_DIR (record imports nothing of this)

__all__ = ["FolderBusy", "FolderHold", "FolderOwner", "hold_folder"]


@dataclass(frozen=True)
class FolderOwner:
    """Who holds a folder: ``pid`` (with ``started``, its start time in seconds since
    the epoch), its ``conversation_id`` (None when unknown) and ``agent_id``."""

    pid: int
    started: float
    conversation_id: str | None
    agent_id: int

    @classmethod
    def here(cls, conversation_id: str | None, agent_id: int) -> FolderOwner:
        """This process, for its conversation ``conversation_id``'s agent ``agent_id``."""
        try:
            import psutil

            started = float(psutil.Process().create_time())
        except Exception:
            started = 0.0
        return cls(os.getpid(), started, conversation_id, agent_id)


class FolderBusy(AgentkitError):
    """Another live sub-agent holds the folder, or one inside or around it.

    ``owner``: who, as its owner file says (None when the holder is in a nested
    folder or has not named itself yet); ``nested``: the holder's folder is inside or
    around the one asked for."""

    def __init__(self, owner: FolderOwner | None, nested: bool) -> None:
        super().__init__(f"the folder is in use by {owner or 'another sub-agent'}")
        self.owner = owner
        self.nested = nested


class FolderHold:
    """A held claim: its descriptors (locked) and the owner file to remove."""

    def __init__(self, fds: list[int], root: Path, folder: Path | None) -> None:
        self._fds = fds
        self._root = root
        self._folder = folder

    def release(self) -> None:
        """Remove the owner file and drop the locks; idempotent, never raises."""
        fds, self._fds = self._fds, []
        if self._folder is not None and fds:
            with (
                contextlib.suppress(OSError),
                confined_folder(self._root, self._folder / _RECORD_DIR) as fd,
            ):
                os.unlink(OWNER_FILE, dir_fd=fd)
        for fd in reversed(fds):
            os.close(fd)


def _lock(fd: int, mode: int) -> bool | None:
    """Take ``mode`` (LOCK_SH or LOCK_EX) without waiting: True when taken, False when
    held elsewhere, None when this file system has no locks."""
    assert fcntl is not None
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        return None


OWNER_MAX_BYTES = 4096
"""Most of an owner file read (it is a few dozen bytes)."""


def read_owner(root: Path, folder: Path) -> FolderOwner | None:
    """The owner ``folder``'s owner file names, or None (none yet, or unreadable).
    The file sits in a folder a sub-agent's commands can write: it is read through no
    link below ``root`` (agentkit.confined), only when it is a regular file, at most
    :data:`OWNER_MAX_BYTES`, without waiting (a FIFO there blocks nothing), and it only
    names the holder in a message."""
    try:
        with confined_folder(root, folder / _RECORD_DIR) as dir_fd:
            flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(OWNER_FILE, flags, dir_fd=dir_fd)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                data: Any = json.loads(os.read(fd, OWNER_MAX_BYTES))
            finally:
                os.close(fd)
        conversation = data.get("conversation_id")
        return FolderOwner(
            pid=int(data["pid"]),
            started=float(data.get("started") or 0.0),
            conversation_id=conversation if isinstance(conversation, str) else None,
            agent_id=int(data["agent_id"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def hold_folder(
    root: Path, folder: Path, owner: FolderOwner, *, name_holder: bool = True
) -> FolderHold:
    """Claim ``folder`` (absolute, below the workspace ``root``; made when missing) for
    ``owner`` until :meth:`FolderHold.release` (or the process ends).

    Raises:
        FolderBusy: a live holder has it, or a folder inside or around it (named
            when found; ``name_holder`` False: only what its owner file says at once,
            for a caller that tries another folder).
        OSError: a folder on the way is a link or cannot be made (agentkit.confined).
    """
    if fcntl is None:
        return FolderHold([], root, None)
    parts = folder.relative_to(root).parts
    fds: list[int] = []
    hold = FolderHold(fds, root, None)
    try:
        for depth in range(1, len(parts) + 1):
            here = root.joinpath(*parts[:depth])
            fds.append(open_folder(root, here, create=True))
            last = depth == len(parts)
            taken = _lock(fds[-1], fcntl.LOCK_EX if last else fcntl.LOCK_SH)
            if taken is None:  # no locks here: the in-process table and the records only
                hold.release()
                return FolderHold([], root, None)
            if not taken:
                raise _busy(root, here, last, OWNER_WAIT_SECONDS if name_holder else 0.0)
        data = json.dumps(asdict(owner)).encode()
        # Only a name for refusals: a folder that takes no file (read-only, full)
        # keeps the lock unnamed.
        with contextlib.suppress(OSError):
            write_bytes_atomic(root, folder / _RECORD_DIR / OWNER_FILE, data)
    except BaseException:
        hold.release()
        raise
    return FolderHold(fds, root, folder)


def _live(owner: FolderOwner | None) -> FolderOwner | None:
    """``owner`` when its process still runs (a killed holder's file is stale)."""
    return owner if owner is not None and process_alive(owner.pid, owner.started) else None


OWNER_WAIT_SECONDS = 1.0
"""How long a refused claim looks for its holder's owner file: the holder writes it
just after locking, and a loaded machine may keep it a while."""


def _busy(root: Path, here: Path, last: bool, wait: float) -> FolderBusy:
    """The refusal for ``here``, whose lock is held elsewhere (``last``: ``here`` is
    the folder asked for, locked exclusively; else a folder around it): its live
    holder (the owner file of ``here``), else the live holder of a folder inside it,
    looked for until ``wait`` seconds pass; unnamed when none is found."""
    deadline = time.monotonic() + wait
    while True:
        named = _live(read_owner(root, here))
        if named is not None:
            return FolderBusy(named, nested=not last)
        inner = _nested_owner(root, here) if last else None
        if inner is not None:
            return FolderBusy(inner, nested=True)
        if time.monotonic() >= deadline:
            return FolderBusy(None, nested=not last)
        time.sleep(0.01)


NESTED_SEARCH_MAX = 2000
"""Most folders looked at for the owner of a folder nested in a refused one."""


def _nested_owner(root: Path, folder: Path) -> FolderOwner | None:
    """The live owner of a folder inside ``folder`` (whose shared lock refused the
    claim), found by its owner file; None when none is found within
    :data:`NESTED_SEARCH_MAX` folders. Links are not followed."""
    for seen, (here, dirs, _) in enumerate(os.walk(folder)):
        if seen >= NESTED_SEARCH_MAX:
            return None
        if _RECORD_DIR in dirs:
            dirs.remove(_RECORD_DIR)
            found = _live(read_owner(root, Path(here))) if Path(here) != folder else None
            if found is not None:
                return found
    return None
