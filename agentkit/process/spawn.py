"""How run_command starts a command so that it cannot outlive its owner (docs/architecture.md §4).

Two modes, picked once per process (:func:`launch_mode`, probe cached):

``"pidns"`` (Linux with ``setpriv`` and ``unshare``; as non-root also unprivileged user
namespaces): the argv is::

    setpriv --pdeathsig KILL -- unshare [--user --map-current-user] --pid --fork \\
        --kill-child -- /bin/sh -c INIT agentkit-init SHELL COMMAND

The command's shell runs as pid 2 of a fresh pid namespace whose pid 1 is a tiny
``sh`` (:data:`_INIT`). Why a pid namespace rather than an environment mark, a cgroup or
a watchdog: every process of the command, however it detaches (``setsid``, ``nohup``,
double fork, ``env -i``), stays in the namespace and is re-parented to its init, so a
walk of the init's descendants finds all of them, and when the init exits the kernel
SIGKILLs everything left in the namespace: no race, nothing a command can shed.
A cgroup needs write access to the cgroup tree (root or systemd delegation) and does
not die with its owner; a watchdog process can itself be killed.
Lifetime chain: the agent process dies → ``unshare`` gets SIGKILL (``--pdeathsig``) →
``--kill-child`` SIGKILLs the init → the kernel kills the namespace. The shell is not
pid 1, so ``kill $$``, ``abort()`` and signal deaths behave as usual (a pid-1 process
ignores signals it has no handler for); ``$$``/``$!`` are namespace pids, ``ps`` still
shows the host's.

The init's stdin is a socket pair whose other end the caller holds
(:attr:`Launched.control`): the init writes the command's status there (the shell's
``$?``: 128+N after signal N) and then waits for EOF. The caller lists what is left in
the namespace, then closes ``control`` to end it, or, for
background services (``Settings.command_background_services``), keeps it open
(:func:`keep_alive`) so they live on until the owner process ends.

PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. So every
launch is forked by one long-lived thread (:func:`spawn`), never by a short-lived
tool thread; the signal therefore means "the agent process ended", whatever ended it.
The signal cannot cover a death before it is set (between ``fork`` and setpriv's
``prctl``, or inside bubblewrap's or unshare's own start): then the namespace ends by
the control socket instead. The agent's end closes with the agent, and the init's
watcher, at that EOF, kills everything in the namespace and the init exits (see
:data:`_INIT`). Every launch therefore ends with its owner, however early it dies.

``"marks"`` (elsewhere): ``SHELL -c COMMAND`` in its own session; leftovers are found
by the environment mark (:mod:`agentkit.process.tree`) and the agent process is made a
child subreaper (Linux) so orphans stay in its tree. Weaker: ``env -i`` escapes the
scan and a SIGKILL of the agent orphans its commands. A log line says so once.

``"sandbox"`` (a per-command choice, :mod:`agentkit.process.sandbox`): bubblewrap's argv
(``bwrap … --unshare-pid --as-pid-1 --die-with-parent … --``) replaces ``setpriv … unshare
… --``; the same init, control socket and lifetime chain follow (``--die-with-parent``
plays ``--pdeathsig``: the agent dies → bwrap and the init get SIGKILL → the kernel kills
the namespace), whatever :func:`launch_mode` says. With ``command_network = loopback``
the sandbox argv ends with the loopback bridge, which binds its ports, forks its server
and execs the init as pid 1 (the command's shell is then pid 3); the server is the
sandbox's, not the command's (``_sandbox.is_bridge``), and dies with the namespace.

Limits (:mod:`agentkit.process.limits`): the entry into the command's cgroup comes
first (the whole launch is inside), ``prlimit … --`` just before the init (inside the
user namespace, where RLIMIT_NPROC counts only the command's processes).

Public API: :func:`launch_mode`, :func:`launch_argv`, :func:`owned_argv`, :func:`spawn`,
:func:`start_owned`, :func:`user_namespace`, :func:`is_init`, :class:`Launched`, :func:`keep_alive`,
:func:`end_background_services`, :func:`end_all`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkit.process.spawner import on_spawner

if TYPE_CHECKING:
    from agentkit.process.limits import Bounds

__all__ = [
    "launch_mode",
    "launch_argv",
    "owned_argv",
    "spawn",
    "start_owned",
    "user_namespace",
    "is_init",
    "Launched",
    "keep_alive",
    "end_background_services",
]

log = logging.getLogger(__name__)

# pid 1 of the namespace: start the watcher (below), run the command (stdin closed, no
# control socket), let go of the output pipe, report $? on our stdin (a socket, so
# writable), then wait for the caller to close it. The watcher, a subshell of the init
# (same command line, no output), blocks on the control socket; at EOF (the caller
# released it, or the owner died, even before any parent-death signal was set) it
# SIGKILLs every process of the namespace but the init, again and again (then once a
# second: an init stuck in the kernel must not cost a spinning core), so a command
# started after the EOF dies too, until the init, woken by the same EOF, exits and
# the kernel ends the namespace. It ignores SIGTERM, SIGHUP and SIGINT (a timeout
# signals the init's whole group); a command can still SIGKILL it (``kill -9 0``),
# so the caller also ends the launcher when the namespace outlives the release
# (agentkit.tools.shell._run). The command runs in the foreground: an
# asynchronous command would start with SIGINT and SIGQUIT ignored.
_INIT = (
    "exec 3<&0; { trap '' TERM HUP INT; read -r _; n=0; while [ $n -lt 100 ]; do "
    "kill -9 -1; n=$((n+1)); done; while :; do kill -9 -1; sleep 1; done; } "
    "<&3 >/dev/null 2>&1 & "
    '"$1" -c "$2" </dev/null 3<&-; s=$?; exec >/dev/null 2>&1 3<&-; echo $s >&0; '
    "read -r _; exit 0"
)

_mode: str | None = None
_userns: list[str] = []
_mode_lock = threading.Lock()
# Namespaces of background services by owner (a conversation id, or None): their
# control socket is closed when their owner ends or at exit, then the launcher reaped.
_kept: dict[str | None, list[Launched]] = {}
_kept_lock = threading.Lock()


_DEATH_SIGNAL = ["setpriv", "--pdeathsig", "KILL", "--"]
_USERNS = ["--user", "--map-current-user"]


def _pidns_argv(userns: list[str], argv: list[str]) -> list[str]:
    # The one spelling of the pid-namespace launch (the module docstring's argv).
    return [*_DEATH_SIGNAL, "unshare", *userns, "--pid", "--fork", "--kill-child", "--", *argv]


def _probe(extra: list[str]) -> bool:
    argv = _pidns_argv(extra, ["/bin/sh", "-c", "exit 7"])
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 7


def _become_subreaper() -> None:
    # PR_SET_CHILD_SUBREAPER (36): orphans of our commands re-parent to us, not to init,
    # so the descendants walk still finds them.
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def launch_mode() -> str:
    """Return ``"pidns"`` or ``"marks"`` (see the module docstring); probed once per process.

    The probe runs ``unshare`` once (about 10 ms). Falling back logs one warning and makes
    this process a child subreaper.
    """
    global _mode
    with _mode_lock:
        if _mode is None:
            _mode = "marks"
            if (
                sys.platform.startswith("linux")
                and shutil.which("setpriv")
                and shutil.which("unshare")
            ):
                if os.geteuid() == 0 and _probe([]):
                    _mode = "pidns"
                elif _probe(_USERNS):
                    _userns[:] = _USERNS
                    _mode = "pidns"
            if _mode == "marks":
                _become_subreaper()
                log.warning(
                    "agentkit: pid namespaces are unavailable (no setpriv/unshare, or user "
                    "namespaces disabled); run_command falls back to environment marks, and "
                    "a command's detached processes may outlive a killed agent"
                )
        return _mode


def launch_argv(
    shell: str, command: str, sandbox: list[str] | None = None, limits: Bounds | None = None
) -> list[str]:
    """Return the argv that runs ``shell -c command`` under the current :func:`launch_mode`,
    or inside ``sandbox`` (a bubblewrap argv ending with ``--``) when given, within
    ``limits`` (the module docstring). In ``"pidns"`` mode and in a sandbox the process
    started must get a socket as stdin (:func:`spawn`).
    """
    enter = limits.enter if limits is not None else []
    inside = limits.rlimits if limits is not None else []
    init = [*inside, "/bin/sh", "-c", _INIT, "agentkit-init", shell, command]
    if sandbox is not None:
        return [*enter, *sandbox, *init]
    if launch_mode() != "pidns":
        return [*enter, *inside, shell, "-c", command]
    return [*enter, *owned_argv(init)]


def is_init(cmdline: Sequence[str]) -> bool:
    """True when ``cmdline`` (a process's argv) is a namespace's init (:data:`_INIT`)."""
    return list(cmdline[1:4]) == ["-c", _INIT, "agentkit-init"]


def user_namespace() -> bool:
    """True when a command gets a user namespace of its own without a sandbox (pidns, non-root)."""
    return launch_mode() == "pidns" and bool(_userns)


def owned_argv(argv: Sequence[str], *, pid_namespace: bool = True) -> list[str]:
    """Return ``argv`` wrapped so that the program dies with this process: the one spelling
    of the launch, for commands, MCP stdio servers and the local model server.

    ``pid_namespace`` (default): in ``"pidns"`` mode the module docstring's argv with
    ARGV as pid 1 (everything it starts dies with it), elsewhere ``argv`` unchanged (the
    caller's marks find it); False (bubblewrap, which makes its own): only ``setpriv
    --pdeathsig KILL --``, where setpriv exists. Fork the result from a thread that
    lives as long as the process (:func:`start_owned`; the MCP client's loop thread).
    """
    if not pid_namespace:
        return [*_DEATH_SIGNAL, *argv] if shutil.which("setpriv") else list(argv)
    if launch_mode() != "pidns":
        return list(argv)
    return _pidns_argv(_userns, list(argv))


def start_owned(argv: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``owned_argv(argv)`` by ``subprocess.Popen(..., **popen)`` on the spawner
    thread: it dies with this process whatever ends it, SIGKILL included (the local
    model server; commands use :func:`spawn`). Raises OSError when it cannot start."""
    wrapped = owned_argv(argv)
    proc: subprocess.Popen[bytes] = on_spawner(lambda: subprocess.Popen(wrapped, **popen))
    return proc


@dataclass
class Launched:
    """A started command.

    Attributes:
        proc: the process started (``unshare`` in ``"pidns"`` mode, the shell otherwise).
        control: in ``"pidns"`` mode, our end of a socket pair that is the init's stdin:
            it yields the shell's exit status as decimal text and a newline; closing it
            ends the namespace. None in ``"marks"`` mode, and once released.
        namespaced: True when started in a pid namespace (``"pidns"`` mode).
    """

    proc: subprocess.Popen[bytes]
    control: socket.socket | None
    namespaced: bool = False

    def status(self) -> int | None:
        """Return the shell's exit status once the init reported it (non-blocking), else None.

        Reads what is available; call when ``control`` is readable.
        """
        if self.control is None:
            return None
        self._buffer += self.control.recv(64) if self._readable() else b""
        text = self._buffer.decode("ascii", "replace")
        if not text.endswith("\n") and len(text) < 16:
            return None
        # Anything but "N\n" with N in 0-255 was not written by the init alone (a
        # command can reach its descriptor): report a failure, never a made-up value.
        value = text.strip()
        return int(value) if value.isdigit() and int(value) <= 255 else 255

    def _readable(self) -> bool:
        assert self.control is not None
        ready, _, _ = select.select([self.control], [], [], 0)
        return bool(ready)

    def release(self) -> None:
        """End the namespace (if any): the init reads EOF and exits. Idempotent."""
        if self.control is not None:
            with contextlib.suppress(OSError):
                self.control.close()
            self.control = None

    def reap(self, timeout: float = 1.0) -> None:
        """Collect the launcher (``unshare``, bwrap) after :meth:`release`, so that no
        zombie child is left behind once a command returned: wait at most ``timeout``
        seconds for it to exit, else SIGKILL it (``--kill-child`` / ``--die-with-parent``
        then end the namespace) and collect it. Idempotent; never raises."""
        try:
            self.proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)

    _buffer: bytes = b""


def spawn(
    shell: str,
    command: str,
    cwd: os.PathLike[str] | str,
    env: dict[str, str],
    sandbox: list[str] | None = None,
    limits: Bounds | None = None,
) -> Launched:
    """Start ``shell -c command`` in ``cwd`` with ``env``, stdout+stderr on one pipe,
    stdin closed, in its own session, forked by the long-lived spawner thread; inside
    ``sandbox`` (a bubblewrap argv ending with ``--``, see :func:`launch_argv`) when
    given, within ``limits`` (see :func:`launch_argv`).

    Returns:
        A :class:`Launched`. Raises OSError when the program cannot be started.
    """
    argv = launch_argv(shell, command, sandbox, limits)
    ours: socket.socket | None = None
    theirs: socket.socket | None = None
    if sandbox is not None or launch_mode() == "pidns":
        ours, theirs = socket.socketpair()
    stdin: Any = theirs.fileno() if theirs is not None else subprocess.DEVNULL
    try:
        proc = on_spawner(
            lambda: _tracked(
                lambda: subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
            )
        )
    except BaseException:
        if ours is not None:
            ours.close()
        raise
    finally:
        if theirs is not None:
            theirs.close()
    return Launched(proc, ours, namespaced=ours is not None)


_live: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()
_spawn_lock = threading.Lock()
_ending = False


def _tracked(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run ``start`` unless the process is ending, and remember what it started."""
    with _spawn_lock:
        if _ending:
            raise OSError("this agent is ending; no new command is started")
        proc = start()
        _live.add(proc)
        return proc


def end_all() -> None:
    """Kill every command this process started that still runs, and start no more.

    For an agent process that is ending (a worker told to stop), so that its commands
    end before it records its end, not only when it exits (the parent-death signal
    and the control socket). A command being launched right now is waited for here
    (the spawn holds the lock) and killed with the rest, process group first.
    """
    global _ending
    with _spawn_lock:
        _ending = True
        procs = list(_live)
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                proc.kill()
    end_background_services()


def keep_alive(launched: Launched, owner: str | None = None) -> None:
    """Keep a finished command's namespace (its background services) until
    :func:`end_background_services` ends ``owner``'s (a conversation id; None: the
    process's own), or the process ends."""
    if launched.control is not None:
        kept = Launched(launched.proc, launched.control, launched.namespaced)
        with _kept_lock:
            _kept.setdefault(owner, []).append(kept)
        launched.control = None


def end_background_services(owner: str | None = None, *, every: bool = True) -> None:
    """End the namespaces kept by :func:`keep_alive` (their processes are SIGKILLed):
    every one (``every``, the default), or only ``owner``'s (``every=False``); their
    launchers are collected (at most about a second each when one lingers)."""
    with _kept_lock:
        if every:
            ending = [k for group in _kept.values() for k in group]
            _kept.clear()
        else:
            ending = _kept.pop(owner, [])
    for kept in ending:
        kept.release()
    for kept in ending:
        kept.reap()
