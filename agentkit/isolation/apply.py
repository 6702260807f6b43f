"""Writing a merge's result into the workspace's files, all or nothing.

One job: given the changes from the workspace's snapshot W to the merged tree T, check
that every file to replace or delete still is what W read (and that every file to add
is not there, e.g. an ignored file), have git write the new versions into a temporary
folder beside the workspace (``checkout-index``: modes, symlinks and the repository's
filters as git would write them), then move the old files aside and the new ones in.
Any failure moves everything back. Only the workspace's files change: the user's index,
HEAD and branch are never written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentkit.isolation._parse import RawChange, blob_id
from agentkit.isolation.snapshot import Repo, hide_from_git, private_folder, repo_run, temp_index
from agentkit.isolation.types import IsolationError

__all__ = ["apply_changes", "stale_paths"]

ABSENT = "000000"
SYMLINK = "120000"
EXECUTABLE = "100755"
GITLINK = "160000"


@dataclass(frozen=True)
class _Move:
    rel: str  # workspace-relative
    top: str  # repository-relative (where checkout-index wrote it)
    old: bool  # the workspace has a file there now
    new: bool  # the merged tree has one
    new_mode: str


def stale_paths(repo: Repo, workspace: Path, changes: Sequence[RawChange]) -> list[str]:
    """Top-relative paths whose file in the workspace is no longer what the snapshot W
    read (edited, deleted or created meanwhile; a file to add that already exists, such
    as an ignored one). Empty when every change can be applied."""
    stale: list[str] = []
    unsure: list[str] = []
    for change in changes:
        target = workspace / _rel(change.path, repo.prefix)
        if _through_symlink(target, workspace):
            stale.append(change.path)  # writing there would leave the workspace
            continue
        if change.old_mode == ABSENT:
            if os.path.lexists(target):
                stale.append(change.path)
            continue
        verdict = _matches(target, change.old_mode, change.old_id, repo.object_format)
        if verdict is False:
            stale.append(change.path)
        elif verdict is None:
            unsure.append(change.path)
    if unsure:  # bytes differ from the blob: maybe only the repository's filters (eol, LFS)
        out = repo_run(repo, ["hash-object", "--stdin-paths"], None,
                       stdin="\n".join(unsure).encode() + b"\n").decode().split()  # fmt: skip
        wanted = {c.path: c.old_id for c in changes}
        stale += [p for p, got in zip(unsure, out, strict=False) if wanted[p] != got]
    return stale


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
    top-relative paths) say they become. All or nothing: on any failure every file is put back and
    IsolationError raised (naming the file and the cause). Call :func:`stale_paths`
    first."""
    moves = [
        _Move(
            _rel(c.path, repo.prefix),
            c.path,
            c.old_mode != ABSENT,
            c.new_mode != ABSENT,
            c.new_mode,
        )  # fmt: skip
        for c in changes
    ]
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
        _swap(workspace, scratch, moves)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _swap(workspace: Path, scratch: Path, moves: list[_Move]) -> None:
    """Old files aside into ``scratch/old``, new ones from ``scratch/new`` into place;
    undone in reverse on the first failure."""
    undo: list[tuple[str, Path, Path | None]] = []
    try:
        for move in moves:
            if move.old:
                target = workspace / move.rel
                aside = scratch / "old" / move.rel
                aside.parent.mkdir(parents=True, exist_ok=True)
                perms = target.lstat().st_mode
                os.rename(target, aside)
                undo.append(("rename", aside, target))
                if move.new and not stat.S_ISLNK(perms):
                    _keep_permissions(scratch / "new" / move.top, perms, move.new_mode)
        for move in moves:
            if move.new:
                target = workspace / move.rel
                for folder in _missing_parents(target, workspace):
                    folder.mkdir()
                    undo.append(("rmdir", folder, None))
                os.rename(scratch / "new" / move.top, target)
                undo.append(("rename", target, scratch / "new" / move.top))
    except OSError as exc:
        for action, path, back in reversed(undo):
            with contextlib.suppress(OSError):
                if action == "rmdir":
                    path.rmdir()
                elif back is not None:
                    os.rename(path, back)
        raise IsolationError(f"could not write {exc.filename or 'a file'}: {exc.strerror}; "
                             "nothing was changed") from None  # fmt: skip
    for move in moves:  # as git does: a folder left empty by a deletion goes too
        if move.old and not move.new:
            _remove_empty_parents(workspace / move.rel, workspace)


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
