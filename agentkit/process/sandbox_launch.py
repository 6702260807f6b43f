"""Whether bubblewrap works here, and how it is started so that it dies with its owner.

:func:`bwrap_works` probes a bubblewrap program once (about 15 ms) and remembers how it
starts: :func:`launcher` wraps its argv for the sandbox of :mod:`agentkit.process.sandbox`.

Why bubblewrap runs inside a pid namespace of its own (``setpriv --pdeathsig KILL --
unshare --pid --fork --kill-child -- bwrap …``, the :func:`agentkit.process.spawn.owned_argv`
spelling) where :func:`agentkit.process.spawn.launch_mode` is ``"pidns"``: bubblewrap is
two processes, its parent outside the sandbox and its child, pid 1 inside. The child
first waits on an eventfd for the parent's go, and only then sets its own parent-death
signal (``--die-with-parent``). A parent killed in between (the agent SIGKILLed as a
command starts, so the parent-death signal setpriv gave it fires) never writes the go,
and the child waits for ever, holding the command's output pipe and control socket:
the control socket's end cannot reach it, since the namespace's init has not started.
Seen on CI with bubblewrap 0.8.0. In a pid namespace whose pid 1 is bubblewrap's
parent, the parent's death makes the kernel SIGKILL every process of that namespace,
the waiting child included, whatever stage it is at. Where that namespace cannot be
made (``"marks"`` mode, or a bubblewrap that fails inside it), bubblewrap starts under
``setpriv --pdeathsig KILL`` alone, as before, and that narrow window stays.

Public API: :func:`bwrap_works`, :func:`launcher`, :func:`base_flags`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

from agentkit.process.spawn import launch_mode, owned_argv

__all__ = ["base_flags", "bwrap_works", "launcher"]

_lock = threading.Lock()
# bubblewrap's absolute path -> whether it starts inside its own pid namespace (True),
# under setpriv alone (False), or does not work here (None).
_probed: dict[str, bool | None] = {}


def base_flags() -> list[str]:
    """The namespace and session flags every sandbox gets (capabilities dropped as root)."""
    flags = ["--unshare-pid", "--unshare-ipc", "--as-pid-1", "--die-with-parent", "--new-session"]
    return [*flags, "--cap-drop", "ALL"] if os.geteuid() == 0 else flags


def launcher(bwrap: str, argv: list[str]) -> list[str]:
    """Return ``argv`` (bubblewrap's, starting with ``bwrap``, an absolute path) wrapped as
    the module docstring says: inside its own pid namespace when :func:`bwrap_works`
    found that it works there, else under ``setpriv --pdeathsig KILL`` alone (where
    setpriv exists). A program never probed gets the latter."""
    return owned_argv(argv, pid_namespace=_probed.get(bwrap) is True)


def bwrap_works(program: str) -> str | None:
    """Return the absolute path of bubblewrap ``program`` when it can start a sandbox
    here (probed once per path, about 15 ms), else None (missing, or namespaces off).
    The probe also settles how :func:`launcher` starts it."""
    found = shutil.which(program)
    if found is None or not sys.platform.startswith("linux"):
        return None
    with _lock:
        if found not in _probed:
            _probed[found] = _probe(found)
        return found if _probed[found] is not None else None


def _probe(bwrap: str) -> bool | None:
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--unshare-net", *base_flags(), "--", "/bin/sh", "-c", "exit 7"]  # fmt: skip
    tries = [True, False] if launch_mode() == "pidns" else [False]
    for nested in tries:
        try:
            done = subprocess.run(
                owned_argv(argv, pid_namespace=nested),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 7:
            return nested
    return None
