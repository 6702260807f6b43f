"""Process-tree utilities shared by run_command and the sub-agent manager.

Every process agentkit starts carries an environment variable (a *mark*, by default
``AGENTKIT_PROCESS_MARK=<id>``). Children inherit it, so processes that left the tree
(``setsid``, double-fork daemons, re-parented orphans) can still be found by scanning
``/proc/<pid>/environ`` (docs/architecture.md §4 item 7, "No orphans"; docs/tools.md §7 run_command).

Public API: :data:`AGENT_MARK_VAR`, :func:`mark_env`, :func:`processes_with_mark`,
:func:`descendants`, :func:`kill_tree`, :func:`is_gone`, :func:`process_alive`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable

import psutil

AGENT_MARK_VAR = "AGENTKIT_PROCESS_MARK"
"""Name of the environment variable that marks every process started for an agent."""

_HAS_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc/self")

__all__ = [
    "AGENT_MARK_VAR",
    "mark_env",
    "processes_with_mark",
    "descendants",
    "kill_tree",
    "is_gone",
    "process_alive",
    "wait_gone",
    "signal_name",
]


def signal_name(num: int) -> str:
    """Return the name of signal ``num`` (``SIGKILL``), or ``signal N`` for one this
    platform does not name."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def mark_env(mark: str, var: str = AGENT_MARK_VAR) -> dict[str, str]:
    """Return ``{var: mark}``, to merge into a child's environment."""
    return {var: mark}


def _marked_pids_proc(needle: bytes) -> list[int]:
    # Reading /proc directly is ~10x faster than psutil.Process.environ() (no parsing
    # into a dict): a few ms for a few hundred processes.
    own = os.getpid()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == own:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                data = fh.read()
        except OSError:  # gone, or another user's process
            continue
        if needle in b"\0" + data:
            found.append(pid)
    return found


def _marked_pids_psutil(var: str, mark: str) -> list[int]:
    own = os.getpid()
    found: list[int] = []
    for proc in psutil.process_iter():
        if proc.pid == own:
            continue
        try:
            if proc.environ().get(var) == mark:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def processes_with_mark(mark: str, var: str = AGENT_MARK_VAR) -> list[psutil.Process]:
    """Return the live processes whose environment has ``var=mark`` (the caller excluded).

    Args:
        mark: the mark value (a uuid, a sub-agent id...). Empty returns ``[]``.
        var: the variable name (default :data:`AGENT_MARK_VAR`).

    Returns:
        psutil.Process objects (pid reuse is guarded by their create time). Processes that
        cannot be read (other users) or vanish during the scan are skipped; zombies have an
        empty environment and are never returned. Linux reads ``/proc``; elsewhere psutil.
    """
    if not mark:
        return []
    if _HAS_PROC:
        pids = _marked_pids_proc(b"\0" + f"{var}={mark}".encode() + b"\0")
    else:
        pids = _marked_pids_psutil(var, mark)
    procs: list[psutil.Process] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    return procs


def descendants(roots: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Return every live descendant of ``roots`` (roots excluded), from one process scan."""
    root_pids = {p.pid for p in roots}
    if not root_pids:
        return []
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if ppid is not None:
            children.setdefault(ppid, []).append(proc.pid)
    found: list[psutil.Process] = []
    seen = set(root_pids)
    stack = list(root_pids)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
                with contextlib.suppress(psutil.Error):
                    found.append(psutil.Process(child))
    return found


def is_gone(proc: psutil.Process) -> bool:
    """Return True when ``proc`` has exited (a zombie counts as gone: it runs nothing).

    Orphaned zombies can linger when PID 1 does not reap (some containers); they hold no
    resources but a pid, so they are treated as dead.
    """
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def process_alive(pid: object, started: object = None) -> bool:
    """Whether process ``pid`` runs (exists and is not a zombie) and, when ``started``
    (its start time in seconds since the epoch, as a record or a lock file names it)
    is a number, started within a second of it: a reused pid does not count."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if (
            isinstance(started, (int, float))
            and started
            and abs(process.create_time() - started) > 1.0
        ):
            return False
    except psutil.Error:
        return False
    return True


def _collect(
    root_pid: int | None, mark: str | None, var: str, extra: Iterable[psutil.Process]
) -> dict[int, psutil.Process]:
    found: dict[int, psutil.Process] = {}
    if root_pid is not None:
        with contextlib.suppress(psutil.Error):
            found[root_pid] = psutil.Process(root_pid)
    if mark:
        for proc in processes_with_mark(mark, var):
            found.setdefault(proc.pid, proc)
    for proc in extra:
        # is_running() compares create times, so a recycled pid is not mistaken for ours.
        with contextlib.suppress(psutil.Error):
            if proc.is_running():
                found.setdefault(proc.pid, proc)
    for proc in descendants(list(found.values())):
        found.setdefault(proc.pid, proc)
    found.pop(os.getpid(), None)
    return found


def _own_groups(procs: Iterable[psutil.Process]) -> set[int]:
    # Process groups led by a target (start_new_session / setsid); killpg reaches members
    # that cleared their environment. Never our own group.
    mine = os.getpgrp()
    groups: set[int] = set()
    for proc in procs:
        with contextlib.suppress(OSError):
            pgid = os.getpgid(proc.pid)
            if pgid == proc.pid and pgid != mine:
                groups.add(pgid)
    return groups


def _signal_all(procs: Iterable[psutil.Process], groups: Iterable[int], sig: int) -> None:
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for proc in procs:
        with contextlib.suppress(psutil.Error, OSError):
            proc.send_signal(sig)


def wait_gone(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds for ``procs`` to end (is_gone, polled every
    20 ms); returns those still alive."""
    deadline = time.monotonic() + max(0.0, timeout)
    alive = [p for p in procs if not is_gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if not is_gone(p)]
    return alive


def kill_tree(
    root_pid: int | None,
    mark: str | None,
    grace: float,
    *,
    var: str = AGENT_MARK_VAR,
    extra: Iterable[psutil.Process] = (),
) -> list[int]:
    """Kill a process, all its descendants and every process carrying the mark.

    Sends SIGTERM to every target (and to process groups a target leads), waits up to
    ``grace`` seconds, rescans (a process may have forked meanwhile) and sends SIGKILL
    to what is left, then waits up to 2 s more. The calling process is never a target.

    Args:
        root_pid: pid of the tree's root (e.g. the shell of a command), or None.
        mark: value of ``var`` to search for, or None.
        grace: seconds between SIGTERM and SIGKILL (0: SIGKILL at once after SIGTERM).
        var: environment variable holding the mark (default :data:`AGENT_MARK_VAR`).
        extra: processes captured earlier (e.g. ``children(recursive=True)`` while the
            root was alive); stale ones are skipped safely.

    Returns:
        Sorted pids that were signalled. Already-gone processes, zombies and permission
        errors are tolerated silently; this function does not raise for them. It does not
        reap: the parent of ``root_pid`` must still ``wait()`` for it.
    """
    extra = list(extra)
    found = _collect(root_pid, mark, var, extra)
    # Groups are read before filtering: an exited (zombie) shell still names its group.
    groups = _own_groups(found.values())
    targets = [p for p in found.values() if not is_gone(p)]
    if not targets:
        return []
    signalled = {p.pid for p in targets}
    _signal_all(targets, groups, signal.SIGTERM)
    alive = wait_gone(targets, grace)
    again = [p for p in _collect(None, mark, var, [*alive, *extra]).values() if not is_gone(p)]
    signalled.update(p.pid for p in again)
    if again:
        groups |= _own_groups(again)
        _signal_all(again, groups, signal.SIGKILL)
        wait_gone(again, 2.0)
    return sorted(signalled)
