"""agentkit's own files inside a workspace: written and listed without following links.

One job: the workspace may be changed under agentkit by the commands it runs. A
sandboxed command can write only inside the workspace, but it can replace a folder
there by a symbolic link to anywhere (``mv sub_agent_results/agent_5 x && ln -s
/elsewhere sub_agent_results/agent_5``); agentkit's own writes into that folder (a
sub-agent's record, its deliverables folder) would then land outside the workspace,
with rights the command does not have. So these writes open every folder below the
workspace root with ``O_NOFOLLOW`` from a descriptor of the folder above it
(``openat``), and create, write and rename through those descriptors: a link
anywhere below the root, placed before or during the write, is refused with
``OSError`` naming it, never followed. The root itself is trusted (it was resolved
when the session opened).

Public API: :func:`open_folder`, :func:`folder`, :func:`write_bytes_atomic`,
:func:`write_fragments_atomic` (and :func:`writev_all`), :func:`write_text_atomic`,
:func:`open_append`, :func:`create_file`, :func:`list_files`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "create_file",
    "folder",
    "list_files",
    "open_append",
    "open_folder",
    "write_bytes_atomic",
    "write_fragments_atomic",
    "write_text_atomic",
    "writev_all",
]

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _parts(root: Path, path: Path) -> tuple[str, ...]:
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise OSError(errno.EXDEV, f"{path} is not inside {root}") from None
    if ".." in parts:
        raise OSError(errno.EXDEV, f"{path} leaves {root} by '..'")
    return parts


def open_folder(root: Path, path: Path, *, create: bool = False) -> int:
    """Open the folder ``path`` (absolute, inside ``root``) and return its descriptor.

    Args:
        root: the trusted root (a workspace); opened as it is.
        path: the folder, ``root`` or below it.
        create: make missing folders (mode 0777 before the umask).

    Raises:
        OSError: a component is a symbolic link or not a folder (errno ELOOP or
            ENOTDIR; the message names it), ``path`` is not inside ``root``, a folder
            is missing (``create`` False), or the file system refused.
    """
    parts = _parts(root, path)
    fd = os.open(root, _DIR_FLAGS)
    try:
        here = root
        for part in parts:
            here = here / part
            try:
                next_fd = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                next_fd = _open_checked(part, fd, here)
            except OSError as exc:
                raise _link_error(exc, here) from exc
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_checked(part: str, fd: int, here: Path) -> int:
    try:
        return os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
    except OSError as exc:
        raise _link_error(exc, here) from exc


def _link_error(exc: OSError, here: Path) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return OSError(
            exc.errno,
            f"{here} is a symbolic link or not a folder; agentkit does not follow links "
            "with its own files (was the folder replaced by a command?)",
        )
    return exc


@contextlib.contextmanager
def folder(root: Path, path: Path, *, create: bool = False) -> Iterator[int]:
    """``with folder(root, path) as fd:`` :func:`open_folder`, closed at the end."""
    fd = open_folder(root, path, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def write_bytes_atomic(
    root: Path, path: Path, data: bytes, *, mode: int = 0o600, fsync: bool = False
) -> None:
    """Replace the file ``path`` (inside ``root``) with ``data`` atomically: a temp file
    beside it, then a rename, both through the folder's descriptor; missing folders
    are made. A link at ``path`` itself is replaced, not followed.

    Args:
        mode: the new file's permission bits.
        fsync: flush the file and its folder to disk (survives power loss).

    Raises:
        OSError: as :func:`open_folder`, or the write failed (the temp file is removed).
    """
    write_fragments_atomic(root, path, [data], mode=mode, fsync=fsync)


def write_fragments_atomic(
    root: Path, path: Path, fragments: Sequence[bytes], *, mode: int = 0o600, fsync: bool = False
) -> int:
    """:func:`write_bytes_atomic` of the concatenation of ``fragments``, written with
    ``os.writev`` as they are (no joined copy). Returns the bytes written."""
    with folder(root, path.parent, create=True) as dir_fd:
        tmp = f".{path.name}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        try:
            try:
                size = writev_all(fd, fragments)
                os.fchmod(fd, mode)  # exactly, whatever the umask
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        if fsync:
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)
    return size


_IOV_MAX = 1024  # Linux's limit on buffers per writev call


def writev_all(fd: int, fragments: Sequence[bytes]) -> int:
    """Write every byte of ``fragments``, in order, to ``fd`` with as few ``os.writev``
    calls as the system allows (a short write continues where it stopped). Returns the
    bytes written; raises OSError."""
    pending = [memoryview(f) for f in fragments if f]
    total = 0
    while pending:
        batch = pending[:_IOV_MAX]
        written = os.writev(fd, batch)
        if not written:
            raise OSError(errno.EIO, "writev wrote nothing")
        total += written
        done = 0
        for piece in batch:
            if written < len(piece):
                break
            written -= len(piece)
            done += 1
        pending = pending[done:]
        if written:
            pending[0] = pending[0][written:]
    return total


def open_append(root: Path, path: Path, *, create_new: bool = False) -> int:
    """Open the file ``path`` inside ``root`` for appending (``O_APPEND``), mode 0600,
    through no link below ``root`` and not through a link at ``path``; returns the
    descriptor (close-on-exec). ``create_new``: it must not exist yet
    (``FileExistsError`` otherwise). Raises OSError as :func:`open_folder`."""
    with folder(root, path.parent, create=True) as dir_fd:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        if create_new:
            flags |= os.O_EXCL
        try:
            return os.open(path.name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            raise _link_error(exc, path) from exc


def write_text_atomic(root: Path, path: Path, text: str, *, fsync: bool = False) -> None:
    """:func:`write_bytes_atomic` of ``text`` as UTF-8 (a lone surrogate becomes ``?``:
    it must not lose the save), mode 0600."""
    write_bytes_atomic(root, path, text.encode("utf-8", "replace"), fsync=fsync)


def create_file(root: Path, path: Path) -> BinaryIO:
    """Create (or truncate) the file ``path`` inside ``root`` for writing, mode 0600,
    through no link below ``root`` and not through a link at ``path``.
    Raises OSError as :func:`open_folder`."""
    with folder(root, path.parent, create=True) as dir_fd:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path.name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            raise _link_error(exc, path) from exc
    return os.fdopen(fd, "wb")


def list_files(root: Path, path: Path, *, skip: str | None = None) -> list[str]:
    """Every file below the folder ``path`` (inside ``root``), relative with forward
    slashes, sorted; links are listed as files, never followed; ``skip`` names a
    folder directly in ``path`` to leave out. Raises OSError as :func:`open_folder`."""
    found: list[str] = []

    def walk(fd: int, prefix: str, top: bool) -> None:
        with os.scandir(fd) as entries:
            items = sorted(entries, key=lambda e: e.name)
        for entry in items:
            if entry.is_dir(follow_symlinks=False):
                if top and entry.name == skip:
                    continue
                try:
                    child = os.open(entry.name, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue  # replaced meanwhile: not listed
                try:
                    walk(child, f"{prefix}{entry.name}/", False)
                finally:
                    os.close(child)
            else:
                found.append(prefix + entry.name)

    with folder(root, path) as fd:
        walk(fd, "", True)
    found.sort()
    return found
