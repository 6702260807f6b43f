"""What the command sandbox hides and shows of the file system (agentkit.process.sandbox).

One job: the folder policy behind bubblewrap's mounts. Hidden (an empty tmpfs):
``/tmp``, ``/var/tmp``, ``/run``, ``/home``, ``/root``, the user's home and the
temporary folder (``TMPDIR``). Hidden last, after every bind, so that neither the
workspace nor a shown folder can show them again: the folders of the agent's Unix
sockets (:func:`socket_folders`), above all the multiprocessing forkserver's, which
runs any pickle sent to it: reaching it would be an escape, as trials showed with
``TMPDIR`` outside ``/tmp``, inside the workspace, or under ``read_only_roots``. Shown again
inside hidden ones, read-only: the agent's Python and the ``PATH`` folders with their
toolchain-manager roots. Blanked: the shadow password files. :class:`WriteScope`: where a
sub-agent's commands may write, and what an isolated one's sandbox hides and shows.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from agentkit.process.loopback.folders import PREFIX as LOOPBACK_PREFIX
from agentkit.process.mp_tempdir import PREFIX as MP_PREFIX

__all__ = [
    "BLANKED",
    "WriteScope",
    "ancestors",
    "SOCKET_DIRS_VAR",
    "hidden_folders",
    "inside",
    "socket_folders",
    "temp_folder",
    "toolchain_paths",
]


@dataclass(frozen=True)
class WriteScope:
    """Where a sub-agent's commands may write in the workspace (workspace-write mode).

    Attributes:
        folders: absolute folders (the deliverables folder), shown as ``label``.
        files: returns the absolute files claimed so far (called per command).
        label: how notes name the scope to the model.
        hidden: absolute folders covered by an empty tmpfs before the workspace and
            ``folders`` are bound (an isolated sub-agent's real workspace: its copy and
            deliverables folder, inside it, are bound again on top), made read-only
            once every mount is made; the agent's Python and ``PATH`` folders inside
            them are shown again read-only.
        shown: absolute folders shown read-only after ``hidden`` is covered (the
            copy's git folder, so that git works in the copy but cannot change the
            repository's branches, configuration or hooks).
    """

    folders: tuple[Path, ...]
    files: Callable[[], Iterable[Path]]
    label: str
    hidden: tuple[Path, ...] = ()
    shown: tuple[Path, ...] = ()


_HIDDEN = ("/tmp", "/var/tmp", "/run", "/home", "/root")
BLANKED = ("/etc/shadow", "/etc/gshadow")
"""Files replaced by an empty one inside the sandbox."""
_SYSTEM = tuple(Path(p) for p in ("/usr", "/etc", "/bin", "/lib", "/sbin", "/var/lib", "/opt"))
# Roots of toolchain managers whose bin/shims folder is on PATH (bin alone does not run).
_TOOLCHAIN_ROOTS = frozenset({".pyenv", ".rbenv", ".nodenv", ".asdf", ".nvm", ".cargo",
                              ".rustup", ".sdkman", ".volta", ".bun", ".deno", "go", "mise"})  # fmt: skip
_COMPANIONS = {".cargo": ".rustup"}  # cargo's bin holds rustup proxies


def inside(path: Path | str, folder: Path | str) -> bool:
    """Whether ``path`` is ``folder`` or below it; both absolute and normalised
    (resolved). Compared as strings: a command's launch checks every socket folder
    against every bind, and pathlib's comparisons cost ~10 µs each."""
    p, f = str(path), str(folder)
    return p == f or p.startswith(f if f.endswith("/") else f + "/")


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
            if real == root or not inside(real, root):
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


SOCKET_DIRS_VAR = "AGENTKIT_SOCKET_DIRS"
"""Folders holding the agent's own Unix sockets (``os.pathsep``-separated), set before
the forkserver starts so that workers, forked from it, know its socket's folder."""
# multiprocessing's own name, agentkit's worker servers' (mp_tempdir), the relays'.
_SOCKET_PREFIXES = ("pymp-", MP_PREFIX, LOOPBACK_PREFIX)
_SCAN_MAX = 4096  # entries of the temp folder looked at per command


def _usable(item: str | os.PathLike[str] | None) -> Path | None:
    if not item:
        return None
    path = Path(item).resolve()
    if len(path.parts) < 2 or any(inside(s, path) for s in _SYSTEM):
        return None  # hiding it would break the toolchain
    return path


def temp_folder() -> Path | None:
    """This process's temporary folder (``tempfile.gettempdir()``, i.e. ``TMPDIR``),
    hidden with the others unless it holds system folders."""
    return _usable(tempfile.gettempdir())


def socket_folders() -> list[str]:
    """Folders holding Unix sockets a command must never reach, mounted over last (after
    the workspace and every shown folder, so none can show them again): the
    multiprocessing forkserver's, which unpickles whatever a connecting process sends,
    and the loopback relays'. Found by :data:`SOCKET_DIRS_VAR`, this process's
    multiprocessing state, and every ``pymp-*``, ``akmp-*`` and ``agentkit-loopback-*`` folder in
    the temporary folder (other programs' forkservers included, and those that killed
    programs left: hundreds on a busy machine, so the scan stays cheap: one
    ``scandir``, no path resolution per entry). Returns absolute, resolved paths."""
    from multiprocessing import forkserver, process

    found: list[str | None] = [*os.environ.get(SOCKET_DIRS_VAR, "").split(os.pathsep)]
    found.append(getattr(process.current_process(), "_config", {}).get("tempdir"))
    address = getattr(forkserver._forkserver, "_forkserver_address", None)
    if isinstance(address, str) and address.startswith("/"):
        found.append(os.path.dirname(address))
    named = [str(p) for p in map(_usable, found) if p is not None and p.is_dir()]
    scanned: list[str] = []
    try:
        # Entries of the resolved folder are real paths already (symlinks are skipped).
        with os.scandir(os.path.realpath(tempfile.gettempdir())) as entries:
            for i, entry in enumerate(entries):
                if i >= _SCAN_MAX:
                    break
                if entry.name.startswith(_SOCKET_PREFIXES) and entry.is_dir(follow_symlinks=False):
                    scanned.append(entry.path)
    except OSError:
        pass
    return list(dict.fromkeys([*named, *scanned]))


def ancestors(path: str) -> list[str]:
    """``path`` and every folder above it, as strings (``/a/b`` gives ``/a/b``, ``/a``, ``/``)."""
    found = [path]
    while path not in ("/", ""):
        path = os.path.dirname(path)
        found.append(path)
    return found


def hidden_folders() -> list[Path]:
    """The folders the sandbox covers with an empty tmpfs (the list in the module
    docstring), those that exist as real folders."""
    folders = [Path(p) for p in _HIDDEN]
    home = os.environ.get("HOME")
    if home and Path(home).is_absolute():
        folders.append(Path(home))
    temp = temp_folder()
    if temp is not None:
        folders.append(temp)
    return [
        p for p in dict.fromkeys(folders) if p.is_dir() and not p.is_symlink() and p != Path("/")
    ]
