"""One live session per conversation, across threads and processes.

One job: a conversation file written by two live sessions loses messages (the
last writer wins), so opening a conversation claims it. Across processes the
claim is an OS advisory lock (``flock``, exclusive, non-blocking) on a small file
beside the conversation, ``<id>.lock``, held for the session's life; the file
also names the holder (pid, process start time) for the refusal message. The
kernel takes the lock and refuses a second taker atomically, and drops it when
the holder's descriptor closes: at release, or when the process ends in any way
(SIGKILL too, before it is even reaped). Within this process a table of open
sessions gives its own message, and lets a session that was left without being
closed hand the claim on.

Release unlinks the lock file while still holding the lock, so a closed
conversation leaves no file behind; an opener therefore checks, once it holds a
lock, that the file it locked is still the one at the path (else it locked a
file just released and unlinked, and tries again).

The descriptor is close-on-exec, so commands and workers (started by exec or
the forkserver) never carry the lock; a bare ``os.fork`` child would share it.

Where ``fcntl`` is missing (Windows) or the folder cannot hold the lock file,
the claim is only the in-process table (the first save then fails with its own
message when the folder is unwritable).

A lock file that still names a holder when it is taken was left by a process
that ended without releasing it (killed): :func:`claim_saved_conversation` then
treats the file's ``last_event_seq`` as unknown, since that session may have
streamed events it never saved (agentkit.chat.eventbus.numbering_start).
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentkit.chat.store import conversation_path, load_conversation
from agentkit.conversation import Conversation
from agentkit.errors import ConfigurationError

try:
    import fcntl
except ImportError:  # Windows: in-process claims only
    fcntl = None  # type: ignore[assignment]

__all__ = ["claim_conversation", "claim_saved_conversation"]


@dataclass(frozen=True)
class _Claim:
    """This process's claim: the locked descriptor (None: in-process only) and
    whether the session holding it is still open."""

    fd: int | None
    still_open: Callable[[], bool]


_held: dict[str, _Claim] = {}  # lock path -> this process's claim on it
_table_lock = threading.Lock()


def _start_time(pid: int) -> float | None:
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:  # gone, or not ours to see
        return None


def _holder_pid(path: Path) -> int | None:
    """The pid named in the lock file, or None when it cannot be read. A holder
    that just took the lock may not have written it yet: read again briefly."""
    for _ in range(10):
        try:
            return int(json.loads(path.read_text())["pid"])
        except FileNotFoundError:
            return None  # released meanwhile
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(0.002)
    return None


def _refusal(conversation_id: str, pid: int | None) -> ConfigurationError:
    if pid == os.getpid():
        return ConfigurationError(
            f"conversation {conversation_id} is already open in this process; "
            "use that session (Workspace.open returns it) or close it first"
        )
    who = f"pid {pid}" if pid is not None else "pid unknown"
    return ConfigurationError(
        f"conversation {conversation_id} is open in another agentkit process "
        f"({who}); close it there first"
    )


def _open_lock_file(path: Path) -> int | None:
    """A descriptor on ``path`` (created 0600 when missing), or None when the
    folder cannot hold it (read-only, no permission). Raises OSError when the
    process is out of descriptors (that is no reason to claim without a lock)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise
        try:  # flock also works on a descriptor opened for reading
            return os.open(path, os.O_RDONLY)
        except OSError:
            return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _lock(path: Path, conversation_id: str) -> tuple[int | None, bool]:
    """Take the OS lock on ``path``; returns its descriptor (None: no OS lock here)
    and whether the file still named a holder (one that ended without releasing).

    Raises ConfigurationError when a live process holds it."""
    if fcntl is None:
        return None, False
    while True:
        fd = _open_lock_file(path)
        if fd is None:
            return None, False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                return None, False  # a file system without locks: in-process only
            if _same_file(fd, path):
                os.close(fd)
                raise _refusal(conversation_id, _holder_pid(path)) from None
        else:
            if _same_file(fd, path):
                break
        os.close(fd)  # released and unlinked meanwhile: try the file now there
    try:
        stale = bool(os.pread(fd, 64, 0).strip())  # a release unlinks it: a holder died
    except OSError:
        stale = False
    me = {"pid": os.getpid(), "started": _start_time(os.getpid()) or 0.0}
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(me).encode())
    except OSError:
        pass  # read-only descriptor: the lock holds, the message lacks the pid
    return fd, stale


def _unlock(path: Path, fd: int) -> None:
    # Unlink first, while the lock is held: an opener that locks the old file
    # afterwards sees it is no longer at the path and tries again.
    try:
        if _same_file(fd, path):
            path.unlink()
    except OSError:
        pass
    os.close(fd)  # closing the last descriptor drops the lock


def claim_conversation(
    path: Path, conversation_id: str, still_open: Callable[[], bool]
) -> Callable[[], None]:
    """Claim the conversation whose lock file is ``path``; returns the release function.

    Args:
        path: ``<conversations folder>/<id>.lock`` (created, mode 0600, with its
            folder when missing).
        conversation_id: for messages.
        still_open: tells whether the session holding the claim in this process is
            still open (a closed or abandoned one no longer holds it: its claim,
            lock included, passes to the new session).

    Returns:
        ``release()``: frees the claim (unlocks, closes, removes the lock file);
        idempotent, and a no-op once the claim has passed to another session.

    Raises:
        ConfigurationError: a live session of this process, or a live process
            (named by pid), has the conversation open.
    """
    return _claim(path, conversation_id, still_open)[0]


def _claim(
    path: Path, conversation_id: str, still_open: Callable[[], bool]
) -> tuple[Callable[[], None], bool]:
    """:func:`claim_conversation`, and whether the lock was left by a holder that
    never released it."""
    key = str(path)
    with _table_lock:
        held = _held.get(key)
        if held is not None and held.still_open():
            raise _refusal(conversation_id, os.getpid())
        fd, stale = (held.fd, False) if held is not None else _lock(path, conversation_id)
        claim = _Claim(fd, still_open)
        _held[key] = claim

    def release() -> None:
        with _table_lock:
            if _held.get(key) is not claim:
                return
            del _held[key]
            if claim.fd is not None:
                _unlock(path, claim.fd)

    return release, stale


def claim_saved_conversation(
    workspace: Path, conversation_id: str, still_open: Callable[[], bool]
) -> tuple[Conversation, Callable[[], None]]:
    """Claim, then load, the saved conversation ``conversation_id`` of ``workspace``.

    Claiming first: loading first could read a file its holder in another process
    is still writing. A conversation open in another process but not saved yet (no
    message) is refused as open there, not reported unknown.

    Returns:
        (the conversation, its release function: see :func:`claim_conversation`).

    Raises:
        ConfigurationError: a bad id, the conversation is open (here or in another
            process), or its file is damaged.
        FileNotFoundError: no such conversation (the claim is released).
    """
    path = conversation_path(workspace, conversation_id)
    if not path.parent.is_dir():  # nothing saved or open: create no folder
        return load_conversation(workspace, conversation_id), lambda: None
    release, stale = _claim(path.with_suffix(".lock"), conversation_id, still_open)
    try:
        conversation = load_conversation(workspace, conversation_id)
    except BaseException:
        release()
        raise
    if stale:  # its last session was killed: what it streamed after its last save is unknown
        conversation.last_event_seq = None
    return conversation, release
