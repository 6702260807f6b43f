"""Writing a merge's result into the workspace's files, all or nothing.

One job: given the changes from the workspace's snapshot W to the merged tree T, check
that every file to replace or delete still is what W read (and that every file to add
is not there, e.g. an ignored file), have git write the new versions into a temporary
folder beside the workspace (``checkout-index``: modes, symlinks and the repository's
filters as git would write them), then move the old files aside, check each one moved is still
what W read (a save in between is caught, not lost), and put the new ones in, never over
a file that appeared meanwhile. Any failure moves everything back. Only the workspace's
files change: the user's index, HEAD and branch are never written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentkit.isolation._parse import RawChange, blob_id
from agentkit.isolation.snapshot import Repo, hide_from_git, private_folder, repo_run, temp_index
from agentkit.isolation.types import IsolationError

__all__ = ["ChangedMeanwhile", "apply_changes", "stale_paths"]

ABSENT = "000000"
SYMLINK = "120000"
EXECUTABLE = "100755"
GITLINK = "160000"
HASH_CHUNK_BYTES = 32_000
"""Bytes of paths per ``git hash-object`` command line (well under the system's limit)."""


class ChangedMeanwhile(IsolationError):
    """A file to replace or delete changed, or a file appeared where one is added, after
    :func:`stale_paths` checked it; every file was put back. ``paths``: top-relative."""

    def __init__(self, paths: Sequence[str], kept: Path | None = None) -> None:
        self.paths = tuple(paths)
        shown = ", ".join(repr(p) for p in self.paths[:5])
        more = f"; the earlier versions of some files are kept in {kept}" if kept else ""
        super().__init__(f"{shown} changed while the merge wrote it; nothing was changed{more}")


@dataclass(frozen=True)
class _Move:
    rel: str  # workspace-relative
    top: str  # repository-relative (where checkout-index wrote it)
    old: bool  # the workspace has a file there now
    new: bool  # the merged tree has one
    new_mode: str
    old_mode: str
    old_id: str


def stale_paths(repo: Repo, workspace: Path, changes: Sequence[RawChange]) -> list[str]:
    """Top-relative paths whose file in the workspace is no longer what the snapshot W
    read (edited, deleted or created meanwhile; a file to add that already exists, such
    as an ignored one, or a folder there that this change does not empty). Empty when
    every change can be applied. Raises IsolationError when git fails."""
    deleted = {_rel(c.path, repo.prefix) for c in changes
               if c.old_mode != ABSENT and c.new_mode == ABSENT}  # fmt: skip
    stale: list[str] = []
    unsure: list[str] = []
    for change in changes:
        target = workspace / _rel(change.path, repo.prefix)
        if _through_symlink(target, workspace):
            stale.append(change.path)  # writing there would leave the workspace
            continue
        if change.old_mode == ABSENT:
            # A folder whose every file this change deletes is no obstacle (d/ -> d).
            if os.path.lexists(target) and not _emptied(target, workspace, deleted, [0]):
                stale.append(change.path)
            continue
        verdict = _matches(target, change.old_mode, change.old_id, repo.object_format)
        if verdict is False:
            stale.append(change.path)
        elif verdict is None:
            unsure.append(change.path)
    if unsure:  # bytes differ from the blob: maybe only the repository's filters (eol, LFS)
        wanted = {c.path: c.old_id for c in changes}
        got = _filtered_ids(repo, unsure)
        stale += [p for p in unsure if got.get(p) != wanted[p]]
    return stale


def _emptied(folder: Path, workspace: Path, deleted: set[str], seen: list[int]) -> bool:
    """True when ``folder`` is a real folder holding files only from ``deleted``
    (workspace-relative) and folders of the same kind: the deletions leave it empty.
    Gives up (False) after more files than there are deletions (``seen`` counts them)."""
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):
            return False
        entries = list(os.scandir(folder))
    except OSError:
        return False
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            if not _emptied(path, workspace, deleted, seen):
                return False
            continue
        seen[0] += 1
        if seen[0] > len(deleted) or path.relative_to(workspace).as_posix() not in deleted:
            return False
    return bool(entries)


def _filtered_ids(repo: Repo, paths: list[str]) -> dict[str, str]:
    """``{path: blob id}`` as ``git hash-object`` computes it (the repository's filters
    applied); a file git cannot read is left out. Paths go as arguments (any byte but
    NUL is safe there), a chunk at a time."""
    ids: dict[str, str] = {}
    for chunk in _chunks(paths):
        try:
            out = repo_run(repo, ["hash-object", "--", *chunk], None).decode("ascii", "replace")
        except IsolationError:  # one file went missing: ask per file
            if len(chunk) == 1:
                continue
            ids.update(_filtered_ids_one_by_one(repo, chunk))
            continue
        got = out.split()
        if len(got) != len(chunk):
            raise IsolationError(f"git hash-object gave {len(got)} ids for {len(chunk)} files")
        ids.update(zip(chunk, got, strict=True))
    return ids


def _filtered_ids_one_by_one(repo: Repo, paths: list[str]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for path in paths:
        ids.update(_filtered_ids(repo, [path]))
    return ids


def _chunks(paths: list[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for path in paths:
        length = len(os.fsencode(path)) + 1
        if chunk and size + length > HASH_CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += length
    if chunk:
        yield chunk


def _through_symlink(target: Path, workspace: Path) -> bool:
    """True when a folder between ``workspace`` and ``target`` is a symlink."""
    folder = target.parent
    while folder != workspace and workspace in folder.parents:
        if folder.is_symlink():
            return True
        folder = folder.parent
    return False


def _matches(target: Path, mode: str, object_id: str, fmt: str) -> bool | None:
    """True: ``target`` holds exactly that blob and mode; False: it does not; None: same
    kind and mode but other bytes (ask git, which applies the repository's filters)."""
    try:
        info = target.lstat()
        if mode == SYMLINK:
            return stat.S_ISLNK(info.st_mode) and blob_id(os.fsencode(os.readlink(target)),
                                                          fmt) == object_id  # fmt: skip
        if mode == GITLINK or not stat.S_ISREG(info.st_mode):
            return False
        if bool(info.st_mode & stat.S_IXUSR) != (mode == EXECUTABLE):
            return False
        return True if blob_id(target.read_bytes(), fmt) == object_id else None
    except OSError:
        return False


def apply_changes(repo: Repo, workspace: Path, changes: Sequence[RawChange]) -> None:
    """Make the workspace's files what ``changes`` (from W to the merged tree,
    top-relative paths) say they become. Call :func:`stale_paths` first.

    All or nothing: on any failure every file is put back. Raises ChangedMeanwhile (an
    IsolationError) when a file changed or appeared after :func:`stale_paths` looked;
    IsolationError on any other failure (naming the file and the cause)."""
    moves = [_Move(_rel(c.path, repo.prefix), c.path, c.old_mode != ABSENT,
                   c.new_mode != ABSENT, c.new_mode, c.old_mode, c.old_id)
             for c in changes]  # fmt: skip
    if any(GITLINK in (c.old_mode, c.new_mode) for c in changes):
        raise IsolationError("the change includes a submodule; merge it by hand")
    scratch_root = private_folder(workspace) / "isolation"
    hide_from_git(scratch_root)
    scratch = Path(tempfile.mkdtemp(prefix="merge-", dir=scratch_root))
    try:
        written = [c for c in changes if c.new_mode != ABSENT]
        if written:
            # An index of just the files to write (its size is the change's, not the
            # tree's); git then writes them with their modes, symlinks and filters.
            info = b"".join(
                f"{c.new_mode} {c.new_id}\t".encode() + os.fsencode(c.path) + b"\0" for c in written
            )
            paths = b"".join(os.fsencode(c.path) + b"\0" for c in written)
            with temp_index(repo.git_dir, None) as index:
                repo_run(repo, ["update-index", "-z", "--index-info"], index, stdin=info)
                repo_run(repo, ["checkout-index", "-z", "--stdin", f"--prefix={scratch}/new/"],
                         index, stdin=paths)  # fmt: skip
        _swap(repo, workspace, scratch, moves)
    finally:
        # A file that could not be put back stays in scratch/old: never deleted here.
        shutil.rmtree(scratch / "new", ignore_errors=True)
        if not _holds_files(scratch / "old"):
            shutil.rmtree(scratch, ignore_errors=True)


_Undo = list[tuple[str, Path, Path | None]]


def _swap(repo: Repo, workspace: Path, scratch: Path, moves: list[_Move]) -> None:
    """Old files aside into ``scratch/old`` (each checked to be still what W read), new
    ones from ``scratch/new`` into place; undone in reverse on the first failure."""
    undo: _Undo = []
    try:
        _move_aside(workspace, scratch, moves, undo)
        changed = _changed_aside(repo, scratch, moves)
        if changed:
            raise ChangedMeanwhile(changed)
        _place_new(workspace, scratch, moves, undo)
    except Exception as exc:  # git failing in _changed_aside too: put everything back
        kept = scratch / "old" if _undo(undo) else None
        if isinstance(exc, ChangedMeanwhile):
            raise ChangedMeanwhile(exc.paths, kept) from None
        if not isinstance(exc, OSError):
            raise
        more = f"; the earlier versions of some files are kept in {kept}" if kept else ""
        raise IsolationError(f"could not write {exc.filename or 'a file'}: {exc.strerror}; "
                             f"nothing was changed{more}") from None  # fmt: skip
    for move in moves:  # as git does: a folder left empty by a deletion goes too
        if move.old and not move.new:
            _remove_empty_parents(workspace / move.rel, workspace)


def _move_aside(workspace: Path, scratch: Path, moves: list[_Move], undo: _Undo) -> None:
    for move in moves:
        if move.old:
            target = workspace / move.rel
            aside = scratch / "old" / move.rel
            aside.parent.mkdir(parents=True, exist_ok=True)
            try:
                perms = target.lstat().st_mode
                os.rename(target, aside)
            except FileNotFoundError:  # deleted since stale_paths looked
                raise ChangedMeanwhile([move.top]) from None
            undo.append(("aside", aside, target))
            if move.new and not stat.S_ISLNK(perms):
                _keep_permissions(scratch / "new" / move.top, perms, move.new_mode)


def _changed_aside(repo: Repo, scratch: Path, moves: list[_Move]) -> list[str]:
    """Top-relative paths of the files moved aside that are no longer what W read: a
    save between :func:`stale_paths` and the move."""
    changed: list[str] = []
    for move in moves:
        if not move.old:
            continue
        aside = scratch / "old" / move.rel
        verdict = _matches(aside, move.old_mode, move.old_id, repo.object_format)
        if verdict is None:  # the filters of the file's real path decide
            args = ["hash-object", f"--path={move.top}", "--", str(aside)]
            verdict = repo_run(repo, args, None).decode("ascii", "replace").strip() == move.old_id
        if not verdict:
            changed.append(move.top)
    return changed


def _place_new(workspace: Path, scratch: Path, moves: list[_Move], undo: _Undo) -> None:
    for move in moves:
        if not move.new:
            continue
        target = workspace / move.rel
        source = scratch / "new" / move.top
        for folder in _missing_parents(target, workspace):
            folder.mkdir()
            undo.append(("mkdir", folder, None))
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                _clear_folder(target, undo)  # d/ -> d: its files were moved aside above
            _put(source, target)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):  # it appeared meanwhile
                raise ChangedMeanwhile([move.top]) from None
            raise
        undo.append(("placed", target, source))


def _clear_folder(folder: Path, undo: _Undo) -> None:
    """Remove ``folder`` and the empty folders in it; OSError (ENOTEMPTY) when any
    file is left."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            _clear_folder(Path(entry.path), undo)
    folder.rmdir()
    undo.append(("rmdir", folder, None))


def _put(source: Path, target: Path) -> None:
    """Move ``source`` to ``target``, never over anything there (FileExistsError)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # a folder, or a file system without hard links
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
        os.rename(source, target)
        return
    os.unlink(source)


def _undo(undo: _Undo) -> bool:
    """Undo ``undo`` in reverse; True when a file moved aside could not go back (it
    stays in the scratch folder)."""
    kept = False
    for action, path, back in reversed(undo):
        try:
            if action == "mkdir":
                path.rmdir()
            elif action == "rmdir":
                path.mkdir()
            elif action == "placed" and back is not None:
                os.rename(path, back)
            elif back is not None:
                _put(path, back)  # a file saved there meanwhile is not overwritten
        except OSError:
            kept = kept or action == "aside"
    return kept


def _holds_files(folder: Path) -> bool:
    """True when anything but folders is under ``folder`` (links to folders count)."""
    for root, dirs, files in os.walk(folder):
        if files or any(os.path.islink(os.path.join(root, d)) for d in dirs):
            return True
    return False


def _keep_permissions(path: Path, old_mode: int, new_git_mode: str) -> None:
    """The new file keeps the old one's read/write bits; git's mode says executable."""
    with contextlib.suppress(OSError):
        perms = stat.S_IMODE(old_mode) & 0o666
        if new_git_mode == EXECUTABLE:
            perms |= (perms & 0o444) >> 2
        os.chmod(path, perms)


def _missing_parents(target: Path, workspace: Path) -> list[Path]:
    missing = []
    folder = target.parent
    while folder != workspace and not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))


def _remove_empty_parents(target: Path, workspace: Path) -> None:
    folder = target.parent
    while folder != workspace and workspace in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _rel(top_path: str, prefix: str) -> str:
    return top_path[len(prefix) :] if prefix and top_path.startswith(prefix) else top_path
