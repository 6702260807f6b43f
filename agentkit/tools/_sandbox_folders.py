"""What the command sandbox hides and shows of the file system (agentkit.tools._sandbox).

One job: the folder policy behind bubblewrap's mounts. Hidden (an empty tmpfs):
``/tmp``, ``/var/tmp``, ``/run``, ``/home``, ``/root``, the user's home, and the
agent's own temporary folders wherever ``TMPDIR`` puts them (they hold the
multiprocessing forkserver's socket, which runs any pickle sent to it: reaching it
would be an escape, as a trial showed with ``TMPDIR`` outside ``/tmp``). Shown again
inside hidden ones, read-only: the agent's Python and the ``PATH`` folders with their
toolchain-manager roots. Blanked: the shadow password files.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["BLANKED", "agent_temp_folders", "hidden_folders", "toolchain_paths"]

_HIDDEN = ("/tmp", "/var/tmp", "/run", "/home", "/root")
BLANKED = ("/etc/shadow", "/etc/gshadow")
"""Files replaced by an empty one inside the sandbox."""
_SYSTEM = tuple(Path(p) for p in ("/usr", "/etc", "/bin", "/lib", "/sbin", "/var/lib", "/opt"))
# Roots of toolchain managers whose bin/shims folder is on PATH (bin alone does not run).
_TOOLCHAIN_ROOTS = frozenset({".pyenv", ".rbenv", ".nodenv", ".asdf", ".nvm", ".cargo",
                              ".rustup", ".sdkman", ".volta", ".bun", ".deno", "go", "mise"})  # fmt: skip
_COMPANIONS = {".cargo": ".rustup"}  # cargo's bin holds rustup proxies


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def toolchain_paths(hidden: list[Path]) -> list[Path]:
    """Folders inside hidden ones that the user's tools need: the agent's Python and the
    PATH folders, each with its toolchain-manager root (``~/.pyenv`` for
    ``~/.pyenv/shims``; ``~/.rustup`` with ``~/.cargo``)."""
    found: list[Path] = []
    candidates = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent]
    candidates += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    for path in candidates:
        if not path.is_absolute():
            continue
        real = path.resolve()
        for root in hidden:
            if real == root or not _inside(real, root):
                continue
            found.append(real)
            parts = real.relative_to(root).parts
            for i, part in enumerate(parts):
                if part in _TOOLCHAIN_ROOTS:
                    found.append(root.joinpath(*parts[: i + 1]))
                    if part in _COMPANIONS:
                        found.append(root.joinpath(*parts[:i], _COMPANIONS[part]))
                    break
    return list(dict.fromkeys(found))


def agent_temp_folders() -> list[Path]:
    """This process's temporary folders: ``tempfile.gettempdir()`` (``TMPDIR``), the
    multiprocessing temp folder, and the folder of the forkserver's socket, whose server
    unpickles whatever a connecting process sends. A folder holding system folders
    (``/``, ``/usr``...) is left out: hiding it would break the toolchain."""
    from multiprocessing import forkserver, process

    found = [
        tempfile.gettempdir(),
        getattr(process.current_process(), "_config", {}).get("tempdir"),
    ]
    address = getattr(forkserver._forkserver, "_forkserver_address", None)
    if isinstance(address, str) and address.startswith("/"):
        found.append(os.path.dirname(address))
    folders = []
    for item in found:
        if not item:
            continue
        path = Path(item).resolve()
        if len(path.parts) > 1 and not any(path in s.parents or path == s for s in _SYSTEM):
            folders.append(path)
    return folders


def hidden_folders() -> list[Path]:
    """The folders the sandbox covers with an empty tmpfs (the list in the module
    docstring), those that exist as real folders."""
    folders = [Path(p) for p in _HIDDEN]
    home = os.environ.get("HOME")
    if home and Path(home).is_absolute():
        folders.append(Path(home))
    folders += agent_temp_folders()
    return [
        p for p in dict.fromkeys(folders) if p.is_dir() and not p.is_symlink() and p != Path("/")
    ]
