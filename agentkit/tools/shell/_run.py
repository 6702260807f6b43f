"""A running command of run_command: its output pipe, its processes, what it left.

One job: :class:`CommandRun` reads the shell's output pipe (and, in pid-namespace
mode, the init's status socket) and remembers the shell's descendants;
:func:`leftovers` lists what still runs after the shell exited and :func:`kill` ends
it (the whole namespace in pidns mode; the marked processes and remembered
descendants otherwise). The loopback bridge belongs to the sandbox, not to the
command: it is never listed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass, field

import psutil

from agentkit.process import limits, sandbox
from agentkit.process import spawn as launch
from agentkit.process import tree as proctree
from agentkit.tools.shell._output import OutputCapture

__all__ = ["COMMAND_ID_VAR", "CommandRun", "describe", "kill", "leftovers", "list_procs"]

COMMAND_ID_VAR = "AGENTKIT_COMMAND_ID"
"""Per-command mark: finds the leftovers of one command even when several run at once
(the environment variable every process of the command inherits)."""


@dataclass
class CommandRun:
    launched: launch.Launched
    capture: OutputCapture
    command_id: str
    started: float
    confinement: sandbox.Confinement | None = None
    bounds: limits.Bounds | None = None
    captured: dict[int, psutil.Process] = field(default_factory=dict)
    eof: bool = False
    code: int | None = None  # the shell's exit status, once known
    kept: bool = False  # the namespace lives on (command_background_services)

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.launched.proc

    def exited(self) -> bool:
        """True once the shell has exited (its status reported by the namespace init, or
        the shell reaped in marks mode); sets :attr:`code`."""
        if self.code is None and self.launched.control is not None:
            with contextlib.suppress(OSError, ValueError):
                self.code = self.launched.status()
        if self.code is None and self.proc.poll() is not None:
            self.code = self.proc.returncode  # marks mode, or the namespace ended early
        return self.code is not None

    def read_some(self, wait: float) -> None:
        """Read what the pipe has within ``wait`` seconds; after EOF, wait for the shell."""
        assert self.proc.stdout is not None
        watched: list[int] = [] if self.eof else [self.proc.stdout.fileno()]
        if self.launched.control is not None and self.code is None:
            watched.append(self.launched.control.fileno())  # wake up when the shell exits
        if not watched:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(max(0.0, wait))
            return
        ready, _, _ = select.select(watched, [], [], max(0.0, wait))
        if not self.eof and watched[0] in ready:
            data = os.read(watched[0], 1 << 16)
            if data:
                self.capture.feed(data)
            else:
                self.eof = True

    def drain_ready(self) -> None:
        """Read what is already in the pipe, without waiting (up to 64 MiB per call)."""
        assert self.proc.stdout is not None
        for _ in range(1024):
            if self.eof or not select.select([self.proc.stdout.fileno()], [], [], 0)[0]:
                return
            self.read_some(0)

    def drain(self, seconds: float) -> None:
        """Read until EOF or ``seconds`` elapse."""
        end = time.monotonic() + seconds
        while not self.eof and time.monotonic() < end:
            self.read_some(min(0.05, end - time.monotonic()))

    def snapshot_children(self) -> None:
        """Remember the shell's descendants (to kill them even if they drop the mark)."""
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self.captured.setdefault(child.pid, child)


def describe(procs: list[psutil.Process]) -> dict[int, str]:
    names: dict[int, str] = {}
    for proc in procs:
        try:
            names[proc.pid] = proc.name()
        except psutil.Error:
            names[proc.pid] = "?"
    return names


def namespace(run: CommandRun) -> tuple[psutil.Process | None, list[psutil.Process]]:
    """Return the namespace init and every other live process in the command's namespace
    (pidns mode: all of them are descendants of the init, whatever they did)."""
    init = _init_below(run.proc.pid)
    if init is None:
        return None, []
    members = proctree.descendants([init])
    machinery = _watchers(init, members)
    return init, [
        p
        for p in members
        if not proctree.is_gone(p) and not is_bridge(p) and p.pid not in machinery
    ]


def _init_below(launcher: int) -> psutil.Process | None:
    """The namespace's init below the launcher: its child (``unshare``), or its
    grandchild (bubblewrap's child, bubblewrap itself in a namespace of its own).
    None when it is gone or has not started."""
    try:
        level = psutil.Process(launcher).children()
        for _ in range(3):
            if not level:
                return None
            if launch.is_init(level[0].cmdline()):
                return level[0]
            level = level[0].children()
    except psutil.Error:
        return None
    return None


def _watchers(init: psutil.Process | None, members: list[psutil.Process]) -> set[int]:
    """The init's watcher (agentkit.process.spawn._INIT) among ``members``: a
    child of the init with the init's own command line. Part of the namespace's
    machinery, not of the command; it ends with the namespace. (A command's process
    that copies that command line is not listed either; it still ends with the
    namespace.)"""
    found: set[int] = set()
    if init is None:
        return found
    try:
        line = init.cmdline()
    except psutil.Error:
        return found
    for proc in members:
        with contextlib.suppress(psutil.Error):
            if proc.ppid() == init.pid and proc.cmdline() == line:
                found.add(proc.pid)
    return found


def is_bridge(proc: psutil.Process) -> bool:
    """The loopback bridge is the sandbox's, not the command's: it ends with the namespace."""
    try:
        return sandbox.is_bridge(proc.cmdline())
    except psutil.Error:
        return False


def leftovers(run: CommandRun) -> list[psutil.Process]:
    """Processes of the command still running after its shell exited."""
    if run.launched.control is not None:
        return namespace(run)[1]
    live = [p for p in run.captured.values() if not proctree.is_gone(p)]
    marked = proctree.processes_with_mark(run.command_id, COMMAND_ID_VAR)
    found = {p.pid: p for p in [*marked, *live]}
    found.update((p.pid, p) for p in proctree.descendants(list(found.values())))
    return list(found.values())


def kill(run: CommandRun, grace: float, include_shell: bool) -> tuple[list[int], dict[int, str]]:
    if run.launched.control is not None:
        return _end_namespace(run, grace, include_shell)
    live = [p for p in run.captured.values() if not proctree.is_gone(p)]
    marked = proctree.processes_with_mark(run.command_id, COMMAND_ID_VAR)
    if not include_shell and not live and not marked:
        return [], {}  # the common case: nothing left behind, skip the process scan
    names = describe(marked + live)
    pids = proctree.kill_tree(
        run.proc.pid if include_shell else None,
        run.command_id,
        grace,
        var=COMMAND_ID_VAR,
        extra=live,
    )
    return pids, names


GRACE_MEMBERS_MAX = 512
"""A namespace with more processes than this (a fork bomb) ends at once, without the
grace: signalling and waiting for each would take minutes on a loaded machine."""


def _end_namespace(
    run: CommandRun, grace: float, include_shell: bool
) -> tuple[list[int], dict[int, str]]:
    """End a pidns command: SIGTERM to the init's process group (every process that
    stayed in it, in one call) and to each other member, a wait of at most ``grace``
    seconds that ends as soon as they are gone, then the namespace ends: the control
    socket closes, the init's watcher SIGKILLs whatever is left, however many, and the
    init exits (agentkit.process.spawn._INIT). The init ignores SIGTERM (a
    namespace's init takes only signals it handles), so it is never waited for.
    Bounded whatever the command did."""
    init, members = namespace(run)
    if not include_shell and not members:
        return [], {}
    names = describe(members[:GRACE_MEMBERS_MAX])
    signalled = {p.pid for p in members}
    if len(members) <= GRACE_MEMBERS_MAX and grace > 0:
        if init is not None and include_shell:
            with contextlib.suppress(OSError):
                os.killpg(init.pid, signal.SIGTERM)
        for proc in members:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        proctree.wait_gone(members, grace)
    # The init's watcher SIGKILLs everything left at this EOF, then the init exits.
    run.launched.release()
    if init is not None and include_shell:
        signalled.add(init.pid)
    _end_launcher(run)
    return sorted(signalled), names


LAUNCHER_WAIT = 1.0
"""Seconds the namespace may take to end after its control socket closed."""


def _end_launcher(run: CommandRun) -> None:
    """When the namespace is still there a moment after the release (the command
    SIGKILLed the init's watcher with ``kill -9 0``, or ignored SIGTERM after a
    timeout signalled the watcher's group), SIGKILL the launcher (bwrap, unshare):
    ``--die-with-parent`` / ``--kill-child`` then kill the init, and the kernel
    the rest."""
    run.launched.reap(LAUNCHER_WAIT)


def list_procs(pids: list[int], names: dict[int, str], shell_pid: int) -> str:
    shown = [f"{names.get(pid, '?')} (pid {pid})" for pid in pids if pid != shell_pid]
    if len(shown) > 8:
        shown = [*shown[:8], f"… {len(shown) - 8} more"]
    return ", ".join(shown)
