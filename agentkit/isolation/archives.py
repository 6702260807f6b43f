"""A deliverables folder carried between machines: a capped, safe tar archive.

One job: :func:`pack_folder` turns a folder into tar bytes (folders, regular files,
symbolic links that stay inside it; nothing else), :func:`unpack_folder` writes such
bytes into a folder. Unpacking checks every member before it writes anything: a name
that is absolute or holds ``..``, a link that leads outside the folder (or a member
below a link), a hard link, a device or a pipe refuses the whole archive, as does one
over :data:`MAX_ARCHIVE_BYTES` or :data:`MAX_MEMBERS`. Writes go through
agentkit.confined (no link in the destination is followed; each file replaced
atomically). Unpacking never deletes: a file the archive lacks stays.

An isolated sub-agent on a Ray node streams its deliverables folder back this way
(agentkit.subagent.launchers.ray_isolation).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import secrets
import stat
import tarfile
from pathlib import Path, PurePosixPath

from agentkit.isolation._parse import link_leaves
from agentkit.isolation.types import IsolationError

__all__ = ["MAX_ARCHIVE_BYTES", "MAX_MEMBERS", "pack_folder", "unpack_folder"]

MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
"""Largest archive made or read, and largest sum of its files' sizes (bytes)."""
MAX_MEMBERS = 100_000
"""Most files, folders and links in one archive."""
# agentkit.confined's temp files (".<name>.<8 hex>.tmp"): a write caught half done.
_TEMP = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp$")
_MiB = 1024 * 1024


def pack_folder(path: Path) -> bytes:
    """Archive the folder ``path`` (tar, names relative to it).

    Folders, regular files (mode 0644, or 0755 when executable) and symbolic links
    whose target is relative and stays inside ``path`` are taken; other links, devices,
    pipes and agentkit's half-written temp files are left out. A missing folder gives
    an empty archive.

    Raises:
        IsolationError: the files sum to more than :data:`MAX_ARCHIVE_BYTES`, there are
            more than :data:`MAX_MEMBERS` entries, or a file cannot be read.
    """
    buffer = io.BytesIO()
    budget = [MAX_ARCHIVE_BYTES, MAX_MEMBERS]
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if Path(path).is_dir() and not Path(path).is_symlink():
            _add_tree(tar, Path(path), "", budget)
    return buffer.getvalue()


def _add_tree(tar: tarfile.TarFile, top: Path, rel: str, budget: list[int]) -> None:
    try:
        entries = sorted(os.scandir(top / rel if rel else top), key=lambda e: e.name)
    except OSError as exc:
        raise IsolationError(f"cannot read {top / rel}: {exc.strerror or exc}") from None
    for entry in entries:
        name = f"{rel}/{entry.name}" if rel else entry.name
        budget[1] -= 1
        if budget[1] < 0:
            raise IsolationError(f"{top} holds more than {MAX_MEMBERS} entries to send")
        info = tarfile.TarInfo(name)
        if entry.is_symlink():
            target = os.readlink(entry.path)
            if _link_escapes(name, target, top):
                continue  # leads outside the folder: not carried
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        elif entry.is_dir(follow_symlinks=False):
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
            _add_tree(tar, top, name, budget)
        elif entry.is_file(follow_symlinks=False) and not _TEMP.match(entry.name):
            data = _read_capped(Path(entry.path), budget[0])
            budget[0] -= len(data)
            info.size = len(data)
            mode = entry.stat(follow_symlinks=False).st_mode
            info.mode = 0o755 if mode & stat.S_IXUSR else 0o644
            info.mtime = int(entry.stat(follow_symlinks=False).st_mtime)
            tar.addfile(info, io.BytesIO(data))


def _read_capped(path: Path, room: int) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise IsolationError(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(room + 1)
    if len(data) > room:
        raise IsolationError(
            f"the deliverables folder is over {MAX_ARCHIVE_BYTES // _MiB} MiB "
            f"(at {path}); it cannot travel between machines"
        )
    return data


def _link_escapes(
    name: str, target: str, top: Path, archived: dict[str, str | None] | None = None
) -> bool:
    """True when a link at ``name`` (folder-relative) pointing to ``target`` leads
    outside the folder ``top``: absolute, or ``..`` past its top once the links on the
    way are followed (``q -> .`` then ``pw -> q/q/../../etc/passwd``). ``archived``
    maps each archive member's name to its link target (None for a file or folder);
    a name not in it is looked up on disk below ``top``."""

    def link_at(rel: str) -> str | None:
        if archived is not None and rel in archived:
            return archived[rel]
        with contextlib.suppress(OSError):
            return os.readlink(top / rel)
        return None

    return link_leaves(name, target, link_at)


def unpack_folder(data: bytes, dest: Path, *, root: Path | None = None) -> list[str]:
    """Write the archive ``data`` (from :func:`pack_folder`) into the folder ``dest``.

    Args:
        data: tar bytes.
        dest: the folder to fill (created); files there the archive lacks stay.
        root: a trusted folder ``dest`` lies in (a workspace); no link between it and
            ``dest`` is followed. Default: ``dest`` itself.

    Returns:
        The names written (folder-relative, files and links).

    Raises:
        IsolationError: the archive is damaged, over the caps, or holds an unsafe
            member (nothing is written then), or a write failed (earlier members stay).
    """
    if len(data) > MAX_ARCHIVE_BYTES + MAX_MEMBERS * 1024:
        raise IsolationError(f"the archive is over {MAX_ARCHIVE_BYTES // _MiB} MiB")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = _checked_members(tar)
            _check_links(members, Path(dest))
            return _write_members(tar, members, Path(dest), root)
    except (tarfile.TarError, EOFError) as exc:
        raise IsolationError(f"the archive is damaged: {exc}") from None


def _write_members(
    tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path, root: Path | None
) -> list[str]:
    from agentkit.confined import folder

    trusted = Path(root) if root is not None else dest
    written: list[str] = []
    try:
        if root is None:
            dest.mkdir(parents=True, exist_ok=True)
        with folder(trusted, dest, create=True):
            pass
        for member in members:
            _write_member(tar, member, dest, trusted)
            if not member.isdir():
                written.append(member.name)
    except OSError as exc:
        raise IsolationError(f"could not write the archive into {dest}: {exc}") from None
    return written


def _checked_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Every member, checked; IsolationError names the first unsafe one."""
    members: list[tarfile.TarInfo] = []
    links: set[str] = set()
    total = 0
    for member in tar:
        if len(members) >= MAX_MEMBERS:
            raise IsolationError(f"the archive holds more than {MAX_MEMBERS} entries")
        name = _safe_name(member.name)
        if any(str(parent) in links for parent in PurePosixPath(name).parents):
            raise IsolationError(f"the archive's member {name!r} lies below a link")
        if member.issym():
            links.add(name)
        elif member.isfile():
            total += member.size
            if total > MAX_ARCHIVE_BYTES:
                raise IsolationError(
                    f"the archive's files are over {MAX_ARCHIVE_BYTES // _MiB} MiB"
                )
        elif not member.isdir():
            raise IsolationError(
                f"the archive's member {name!r} is not a file, folder or link "
                "(hard links, devices and pipes are refused)"
            )
        member.name = name
        members.append(member)
    return members


def _check_links(members: list[tarfile.TarInfo], dest: Path) -> None:
    """IsolationError for the first link that would lead outside ``dest``, judged with
    every link of the archive (and those already in ``dest``) followed."""
    archived = {m.name: (m.linkname if m.issym() else None) for m in members}
    for member in members:
        if member.issym() and _link_escapes(member.name, member.linkname, dest, archived):
            raise IsolationError(
                f"the archive's link {member.name!r} leads outside the folder "
                f"({member.linkname[:200]!r})"
            )


def _safe_name(name: str) -> str:
    """The member's name as a clean relative path, or IsolationError."""
    pure = PurePosixPath(name)
    if (
        not name
        or "\0" in name
        or "\\" in name
        or pure.is_absolute()
        or ".." in pure.parts
        or str(pure) in (".", "")
    ):
        raise IsolationError(f"the archive's member {name!r} is not a safe relative path")
    return str(pure)


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, root: Path) -> None:
    from agentkit.confined import folder, write_bytes_atomic

    target = dest / member.name
    if member.isdir():
        with folder(root, target, create=True):
            return
    if member.isfile():
        handle = tar.extractfile(member)
        data = handle.read() if handle is not None else b""
        mode = 0o755 if member.mode & 0o100 else 0o644
        write_bytes_atomic(root, target, data, mode=mode)
        return
    with folder(root, target.parent, create=True) as fd:  # a link, replaced atomically
        tmp = f".{target.name}.{secrets.token_hex(4)}.tmp"
        os.symlink(member.linkname, tmp, dir_fd=fd)
        try:
            os.replace(tmp, target.name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
