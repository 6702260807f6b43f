"""The command sandbox: what run_command's commands may see, write and reach (docs/architecture.md §6).

Settings: ``command_sandbox`` (``auto``/``bwrap``/``none``), ``command_sandbox_mode``
(``read-only``/``workspace-write``/``full``), ``subagent_command_sandbox_mode``,
``command_network`` (``none``/``loopback``/``all``), ``command_writable_paths``,
``command_bwrap_path``, and the existing ``read_only_roots``.

Why bubblewrap rather than Landlock: the lifetime guarantees of
:mod:`agentkit.process.spawn` rest on a pid namespace, and bubblewrap gives the
pid namespace, a mount namespace (hide folders, private ``/tmp``, read-only binds, a
fresh ``/proc`` that shows no process of the agent, so ``/proc/<agent>/environ`` and
``kill <agent>`` reach nothing) and a network namespace in one small, widely packaged
program, as root or unprivileged (user namespaces). Landlock only restricts file (and,
from ABI 4, TCP port) access: it has no pid or network isolation by address, no private
``/tmp``, and cannot *hide* a folder while re-exposing one inside it (a toolchain in
``~/.pyenv`` under a hidden home).

The bubblewrap argv (:func:`bwrap_argv`) takes the place of the command's own
``unshare``; the init and control socket of :mod:`agentkit.process.spawn` stay.
``--as-pid-1``: the init is pid 1. bubblewrap itself runs inside a pid namespace tied to
the spawner thread (:mod:`agentkit.process.sandbox_launch` says why), and
``--die-with-parent`` ties the sandbox to bubblewrap, so the agent's death SIGKILLs the
whole namespace. Policy, in mount order (later wins):

* ``/`` read-only; ``--dev /dev``; a new ``/proc``; ``/etc/shadow`` and ``/etc/gshadow``
  replaced by an empty file.
* Hidden (an empty, private, writable tmpfs, gone when the command ends): ``/tmp``,
  ``/var/tmp``, ``/run`` (sockets: docker, dbus, ssh-agent), ``/home``, ``/root``, the
  user's home and the temporary folder (``TMPDIR``). ``HOME`` still points there, so
  tools that write caches work. Hidden last, after every bind below, so that nothing
  can show them again: the folders of the agent's Unix sockets, above all the
  multiprocessing forkserver's, which runs any pickle sent to it (reaching it would be
  an escape). The folder policy lives in :mod:`agentkit.process.sandbox_folders`.
* Re-exposed read-only: the agent's Python (``sys.prefix``, ``sys.base_prefix``), each
  ``PATH`` folder inside a hidden one (plus its toolchain-manager root, e.g.
  ``~/.pyenv`` for ``~/.pyenv/shims``), ``read_only_roots``, and with network
  ``/run/systemd/resolve`` (DNS). Secrets in those folders are the user's choice.
* Writable (``workspace-write``): the main agent's workspace; a sub-agent's deliverables
  folder and the files it has claimed (its :class:`WriteScope`, which the worker puts in
  ``ToolContext.write_scope`` and run_command passes to :func:`confine`; the rest of the
  workspace read-only); ``command_writable_paths``. ``<workspace>/.agentkit`` and a
  sub-agent's ``.subagent`` record folder stay read-only. ``read-only``: nothing.
* An isolated sub-agent (agentkit.isolation; its scope's ``hidden`` and ``shown``): its
  real workspace is hidden (a read-only tmpfs), its copy and its deliverables folder are
  bound writable on top, the copy's git folder read-only (git status and diff work; no
  commit can move the repository's branches or change its configuration and hooks).
* ``--unshare-pid --unshare-ipc``; ``--unshare-net`` unless ``command_network = all``
  (a private loopback works: a test suite may start its own servers); capabilities
  dropped when run as root; ``TMPDIR=/tmp``.

``command_network = loopback`` (the host's local services, a dev database on
``127.0.0.1:5432`` or a local model, and nothing else): the namespace stays private
and one Unix socket, served by a per-command relay in the agent, is the one way out
(how, what the relay enforces, its limits and cost: :mod:`agentkit.process.loopback`).

``auto`` falls back to running unconfined when bubblewrap is missing or cannot start
(no user namespaces): said once at start (:func:`missing_notice`: the chat's banner,
the page's header, ACP's modes, a log warning for the Python API), else by one log
warning at the first command; ``bwrap`` refuses commands instead; a
``read-only`` mode is never run unconfined.

Public API: :func:`confine`, :class:`Confinement`, :func:`bwrap_argv`, :func:`bwrap_works`,
:func:`missing_notice` (said at start by every front end), :func:`narrow_mode`, :class:`WriteScope`, :func:`refusal_notes`, :func:`is_bridge`, MODES.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.conversation import STATE_DIR
from agentkit.errors import ToolError
from agentkit.process.loopback import relay as _relay
from agentkit.process.loopback.ports import listening_ports
from agentkit.process.sandbox_folders import (
    BLANKED,
    WriteScope,
    ancestors,
    hidden_folders,
    socket_folders,
    toolchain_paths,
)
from agentkit.process.sandbox_launch import base_flags, bwrap_works, launcher
from agentkit.process.sandbox_notes import missing_note, refusal_notes

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = [
    "MODES",
    "Confinement",
    "bwrap_argv",
    "bwrap_works",
    "confine",
    "is_bridge",
    "missing_notice",
    "narrow_mode",
    "told_at_start",
    "refusal_notes",
    "WriteScope",
]

log = logging.getLogger(__name__)

MODES = ("read-only", "workspace-write", "full")
"""Sandbox modes, narrowest first."""

_BRIDGE_FOLDER = "agentkit-loopback"


def narrow_mode(*modes: str | None) -> str:
    """Return the narrowest of ``modes`` (None entries ignored; all None: the default,
    ``workspace-write``). A sub-agent's mode is ``narrow_mode(main, requested)``, so a
    request can narrow but never widen. Raises ValueError on an unknown mode."""
    given = [m for m in modes if m is not None]
    for mode in given:
        if mode not in MODES:
            raise ValueError(f"unknown sandbox mode {mode!r}: one of {', '.join(MODES)}")
    return min(given, key=MODES.index) if given else "workspace-write"


@dataclass(frozen=True)
class Confinement:
    """A sandbox for one command.

    Attributes:
        argv: bubblewrap's argv up to and including ``--``; the command follows.
        mode: the sandbox mode applied.
        network: ``none``, ``loopback`` or ``all``.
        writable: where writes are allowed, in words for the model.
        relay: with ``loopback``, the command's relay: ``watch(pid)`` it, ``close()`` it.
        user_namespace: its own user namespace (non-root, bwrap not setuid): RLIMIT_NPROC binds.
    """

    argv: list[str]
    mode: str
    network: str
    writable: str = ""
    relay: _relay.Relay | None = None
    user_namespace: bool = False


_warned = threading.Event()


def bwrap_argv(
    bwrap: str,
    *,
    workspace: Path,
    cwd: Path,
    mode: str,
    network: str,
    read_only: Iterable[str | Path] = (),
    writable: Iterable[str | Path] = (),
    scope: WriteScope | None = None,
    relay: Path | None = None,
    ports: Sequence[int] = (),
) -> list[str]:
    """Return the bubblewrap argv (up to ``--``) for the policy in the module docstring.

    Args:
        bwrap: the program's absolute path.
        workspace: absolute, resolved workspace root.
        cwd: the command's folder (inside the workspace).
        mode: ``read-only`` or ``workspace-write``.
        network: ``none``, ``loopback`` or ``all``.
        read_only: extra folders shown read-only (``read_only_roots``).
        writable: extra writable folders (``command_writable_paths``; workspace-write).
        scope: a sub-agent's write scope (with an isolated sub-agent's hidden and shown
            folders); None: the whole workspace is writable.
        relay: with ``loopback``, the relay's folder
            (:attr:`agentkit.process.loopback.relay.Relay.folder`); the argv then ends with
            the bridge, ``python -I -S BRIDGE SOCKET PORT... --``, which execs what follows.
        ports: with ``relay``, the host's loopback ports the bridge offers inside.
    """
    # launcher ties bwrap to the spawner thread (its own parent-death signal was seen
    # to miss), inside a pid namespace of its own where it can (sandbox_launch says why);
    # --die-with-parent then ties the sandbox to bwrap.
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for secret in BLANKED:
        if os.path.exists(secret):
            argv += ["--ro-bind", "/dev/null", secret]
    hidden = hidden_folders()
    if scope is not None:  # after the usual ones: a real workspace may lie below /tmp
        hidden += [h for h in scope.hidden if h not in hidden]
    for folder in hidden:
        argv += ["--tmpfs", str(folder)]
    # "/" is read-only already: binding it again would undo /dev, /proc and the hiding.
    roots = [r for r in (Path(p).resolve() for p in read_only) if r != Path("/")]
    shown = [*toolchain_paths(hidden), *roots, *(scope.shown if scope is not None else ())]
    if network == "all":
        shown.append(Path("/run/systemd/resolve"))
    for path in dict.fromkeys(shown):
        if _bindable(path):
            argv += ["--ro-bind-try", str(path), str(path)]
    extra = [Path(p).expanduser().resolve() for p in writable]
    argv += _workspace_binds(workspace, mode == "workspace-write", extra, scope)
    bridge: list[str] = []
    if network == "loopback" and relay is not None:
        mount_at = _relay_mount(hidden)
        argv += ["--ro-bind", str(relay), mount_at]
        bridge = [sys.executable, "-I", "-S", f"{mount_at}/{_relay.BRIDGE_NAME}",
                  f"{mount_at}/{_relay.SOCKET_NAME}", *map(str, ports), "--"]  # fmt: skip
    argv += _socket_tmpfs(hidden, {str(b) for b in (*shown, workspace, *extra)})
    for folder in scope.hidden if scope is not None else ():
        # Last, once every mount inside it is made: a write there fails at once
        # ("Read-only file system") instead of vanishing with the tmpfs.
        argv += ["--remount-ro", str(folder)]
    argv += base_flags()
    if network != "all":
        argv.append("--unshare-net")
    argv += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd), "--"]
    return [*launcher(bwrap, argv), *bridge]


def _workspace_binds(
    workspace: Path, write: bool, extra: list[Path], scope: WriteScope | None
) -> list[str]:
    """The workspace's mounts: writable (or ``scope``'s places) plus ``extra``, or read-only."""
    argv = ["--bind" if write and scope is None else "--ro-bind", str(workspace), str(workspace)]
    if not write:
        return argv
    places = [*scope.folders, *scope.files()] if scope is not None else []
    for path in dict.fromkeys([*places, *extra]):
        if _bindable(path):
            argv += ["--bind-try", str(path), str(path)]
    protected = [workspace / STATE_DIR]
    if scope is not None:
        protected += [f / ".subagent" for f in scope.folders]
    for path in protected:
        argv += ["--ro-bind-try", str(path), str(path)]
    return argv


def _bindable(path: Path) -> bool:
    """False when bubblewrap could not bind ``path`` and would refuse the whole command:
    ``-try`` passes over a missing path only, not one this user may not reach (a
    ``PATH`` entry under another user's home) or one below a file. Such a path is
    left out: what it would show or make writable stays hidden or read-only."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True  # -try passes over it
    except (OSError, ValueError):
        return False
    return True


def _socket_tmpfs(hidden: list[Path], binds: set[str]) -> list[str]:
    """Hide the agent's socket folders: last, so no bind (``binds``) can show them again;
    one already under a hidden folder that no bind reaches into needs no mount of its own.
    Checked by ancestor sets, not pairwise: a busy /tmp holds hundreds of socket folders."""
    above_binds = {a for b in binds for a in ancestors(b)}  # a bind is at or below these
    covers = {str(h) for h in hidden}
    argv: list[str] = []
    for sockets in socket_folders():
        up = ancestors(sockets)
        hidden_above = not covers.isdisjoint(up)
        if not hidden_above or sockets in above_binds or not binds.isdisjoint(up):
            argv += ["--tmpfs", sockets]
    return argv


def _relay_mount(hidden: list[Path]) -> str:
    """Where the relay's folder appears inside: under a hidden tmpfs (covering nothing)."""
    base = next((b for b in ("/run", "/tmp") if Path(b) in hidden), "/tmp")
    return f"{base}/{_BRIDGE_FOLDER}"


def is_bridge(cmdline: Sequence[str]) -> bool:
    """True when ``cmdline`` is the loopback bridge of a sandbox (part of the sandbox,
    not of the command: never listed as a leftover; it dies with the namespace)."""
    return len(cmdline) > 3 and list(cmdline[1:3]) == ["-I", "-S"] and (
        cmdline[3].endswith(f"/{_BRIDGE_FOLDER}/{_relay.BRIDGE_NAME}")
    )  # fmt: skip


def confine(
    settings: Settings, workspace: Path, cwd: Path, scope: WriteScope | None = None
) -> Confinement | None:
    """Return the sandbox for a command run in ``cwd`` (inside ``workspace``, absolute
    and resolved), or None to run it unconfined (mode ``full``, ``command_sandbox =
    none``, or ``auto`` without a working bubblewrap: logged once per process).
    ``settings``: the fields of the module docstring; ``scope``: a sub-agent's write
    scope (``ToolContext.write_scope``), None: the whole workspace (workspace-write).

    Raises:
        ToolError("sandbox_unavailable"): ``command_sandbox = bwrap``, or mode
            ``read-only``, and bubblewrap cannot run here.
    """
    mode = narrow_mode(settings.command_sandbox_mode)
    if mode == "full":
        return None
    bwrap = _bubblewrap(settings, mode)
    if bwrap is None:
        return None
    network = settings.command_network
    relay: _relay.Relay | None = None
    ports: list[int] = []
    if network == "loopback":
        ports = listening_ports()
        try:
            relay = _relay.start_relay(ports)
        except OSError as exc:  # the command still runs, with its own loopback only
            log.warning("agentkit: the loopback relay cannot start (%s)", exc)
    try:
        argv = bwrap_argv(
            bwrap,
            workspace=workspace,
            cwd=cwd,
            mode=mode,
            network=network,
            read_only=[str(p) for p in settings.read_only_paths()],  # with the user's skills
            writable=settings.command_writable_paths,
            scope=scope,
            relay=relay.folder if relay is not None else None,
            ports=ports,
        )
    except BaseException:  # no command will use the relay: close it now
        if relay is not None:
            relay.close()
        raise
    where = _writable_words(settings, mode, scope)
    own_userns = os.geteuid() != 0 and not os.stat(bwrap).st_mode & stat.S_ISUID
    return Confinement(argv, mode, network, where, relay, own_userns)


def missing_notice(settings: Settings) -> str | None:
    """What a person must hear at start when commands cannot be confined as the
    settings ask (:func:`agentkit.process.sandbox_notes.missing_note`: unconfined, or
    refused), else None: bubblewrap works, or no sandbox was asked for (mode ``full``,
    ``command_sandbox = none``). Probes bubblewrap (cached). The per-command log
    warning is then not repeated: the person was told."""
    mode = narrow_mode(settings.command_sandbox_mode)
    if mode == "full" or settings.command_sandbox == "none":
        return None
    if bwrap_works(settings.command_bwrap_path) is not None:
        return None
    _warned.set()
    required = settings.command_sandbox == "bwrap" or mode == "read-only"
    return missing_note(settings.command_bwrap_path, required)


def told_at_start() -> None:
    """Say nothing more about a missing bubblewrap in this process: its owner told the
    person at the start (:func:`missing_notice`; a sub-agent's worker, whose main
    process did). Otherwise the first command's warning would come mid-conversation."""
    _warned.set()


def _bubblewrap(settings: Settings, mode: str) -> str | None:
    """The bubblewrap to confine with, or None to run unconfined (``none``; ``auto``
    without one: warned once). ToolError when a sandbox is required and none works."""
    s = settings
    bwrap = bwrap_works(s.command_bwrap_path) if s.command_sandbox != "none" else None
    if bwrap is not None:
        return bwrap
    if s.command_sandbox == "bwrap" or mode == "read-only":
        why = "command_sandbox = none" if s.command_sandbox == "none" else (
            f"bubblewrap ({s.command_bwrap_path}) is missing or cannot create namespaces here"
        )  # fmt: skip
        raise ToolError(
            "sandbox_unavailable",
            f"commands must run in a sandbox (mode {mode}, command_sandbox = "
            f"{s.command_sandbox}) but {why}; the command was not run",
        )
    if s.command_sandbox == "auto" and not _warned.is_set():
        _warned.set()
        log.warning("agentkit: %s", missing_note(s.command_bwrap_path, required=False))
    return None


def _writable_words(settings: Settings, mode: str, scope: WriteScope | None) -> str:
    """Where a confined command may write, in words for the model."""
    if mode == "read-only":
        return "nothing (read-only mode)"
    where = scope.label if scope is not None else "the workspace"
    if settings.command_writable_paths:
        where += " and " + ", ".join(settings.command_writable_paths)
    return where
