"""Where a workspace's snapshots go, and taking one: a commit of the files as they are.

One job: find the repository a workspace belongs to (its own git repository, or for a
folder outside git a private one, ``<workspace>/.agentkit/isolation/snapshots.git``),
and commit the workspace's current files (tracked and untracked, not ignored; never its
``.agentkit`` or ``.subagent`` folders) without touching the user's index, HEAD or
branch: git writes a TEMPORARY index that starts as a copy of the user's, so unchanged
files are not read again (git's stat cache), then ``write-tree`` and ``commit-tree``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentkit.isolation._git import first_lines, git
from agentkit.isolation._parse import snapshot_pathspecs
from agentkit.isolation.types import CopyKind, IsolationError

__all__ = [
    "Repo",
    "locate",
    "locked",
    "private_folder",
    "snapshot",
    "temp_index",
    "workspace_repo",
]

SNAPSHOTS = Path(".agentkit") / "isolation" / "snapshots.git"
CACHE_INDEX = "agentkit-index"
"""In the snapshots repository: the index of the last snapshot, kept for its stat cache."""


@dataclass(frozen=True)
class Repo:
    """The repository a workspace's snapshots and copies live in.

    ``git_dir``: the common git folder (absolute); ``top``: the work tree a snapshot
    reads (the repository's top, or the workspace itself outside git); ``prefix``: the
    workspace inside ``top`` (``""`` or ``"a/b/"``); ``index``: the index a snapshot's
    temporary index starts from (may not exist yet); ``head``: the commit the snapshot's
    parent is (``None``: no commits yet, or outside git); ``discover``: git finds the
    repository from ``top`` (a git workspace, so a linked worktree's own HEAD and index
    are used) rather than from ``GIT_DIR``; ``object_format``: ``sha1`` or ``sha256``.
    """

    kind: CopyKind
    git_dir: Path
    top: Path
    prefix: str
    index: Path
    head: str | None
    discover: bool
    object_format: str = "sha1"

    def run(self, args: Sequence[str], **kwargs: object) -> bytes:
        """``git <args>`` against this repository's work tree; returns stdout."""
        env_dir = None if self.discover else self.git_dir
        work_tree = None if self.discover else self.top
        return git(args, cwd=self.top, git_dir=env_dir, work_tree=work_tree, **kwargs).stdout  # type: ignore[arg-type]


def workspace_repo(workspace: Path) -> Path | None:
    """The top folder of the git repository ``workspace`` is in, or ``None`` outside git
    (or when git is missing or the folder does not exist)."""
    if not Path(workspace).is_dir():
        return None
    try:
        result = git(["rev-parse", "--show-toplevel"], cwd=Path(workspace), check=False)
    except IsolationError:
        return None
    if result.returncode != 0 or not result.text.strip():
        return None
    return Path(result.text.strip())


def private_folder(workspace: Path) -> Path:
    """``<workspace>/.agentkit``: agentkit's own folder, never part of a snapshot."""
    return workspace / ".agentkit"


def locate(workspace: Path) -> Repo:
    """The :class:`Repo` for ``workspace`` (absolute, an existing folder). Outside git
    the private snapshots repository is created on first use. Raises IsolationError when
    git is missing or fails (a bare repository, a damaged ``.git``)."""
    probe = git(
        ["rev-parse", "--path-format=absolute", "--show-toplevel", "--show-prefix",
         "--git-common-dir", "--git-path", "index", "--show-object-format"],
        cwd=workspace, check=False,
    )  # fmt: skip
    if probe.returncode == 0:
        top, prefix, common, index, fmt = (probe.text.split("\n") + [""] * 5)[:5]
        if not top:
            raise IsolationError(f"{workspace} is inside a git folder, not a work tree")
        head = git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], cwd=Path(top), check=False)
        return Repo(
            "worktree", Path(common), Path(top), prefix, Path(index),
            head.text.strip() if head.returncode == 0 else None, True, fmt or "sha1",
        )  # fmt: skip
    if "not a git repository" not in probe.stderr:
        raise IsolationError(f"git cannot read {workspace}: {probe.stderr.strip()[:300]}")
    git_dir = workspace / SNAPSHOTS
    _ensure_snapshots_repo(git_dir)
    return Repo("snapshot", git_dir, workspace, "", git_dir / CACHE_INDEX, None, False)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ensure_snapshots_repo(git_dir: Path) -> None:
    """Create the private bare repository once (a file lock: two copies made at once).

    It is made beside its place and renamed into it, so that nobody who checks without
    the lock sees a half-made one: ``git init`` writes HEAD before config and objects.
    """
    if (git_dir / "HEAD").is_file():
        return
    hide_from_git(git_dir.parent)
    with locked(git_dir.parent / "init.lock"):
        if (git_dir / "HEAD").is_file():
            return
        if git_dir.exists():  # left half-made by a start that died in git init
            git(["init", "-q", "--bare", str(git_dir)], cwd=git_dir.parent)
            return
        making = git_dir.with_name(f"{git_dir.name}.making-{os.getpid()}")
        shutil.rmtree(making, ignore_errors=True)  # a start that died before its rename
        git(["init", "-q", "--bare", str(making)], cwd=git_dir.parent)
        os.rename(making, git_dir)


def hide_from_git(folder: Path) -> None:
    """Make ``folder`` (one of agentkit's own, inside the workspace) invisible to the
    user's ``git status``: a ``.gitignore`` of ``*`` in it."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / ".gitignore"
    if not marker.exists():
        with contextlib.suppress(OSError):
            marker.write_text("# agentkit's own files (isolated sub-agents)\n*\n")


@contextlib.contextmanager
def temp_index(git_dir: Path, start_from: Path | None) -> Iterator[Path]:
    """A temporary index file in ``git_dir``, a copy of ``start_from`` when that exists
    (git then re-reads only files whose size or time changed), removed afterwards."""
    handle, name = tempfile.mkstemp(prefix="agentkit-index-", dir=git_dir)
    os.close(handle)
    path = Path(name)
    try:
        if start_from is not None and start_from.is_file():
            shutil.copyfile(start_from, path)
            # Keep the index's own time: git re-reads an entry whose file time is not
            # older than the index's ("racily clean"). A copy dated now trusted a
            # same-size edit made in the clock tick of the checkout, and missed it.
            st = start_from.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            path.unlink()  # an empty file is not a valid index; git creates it
        yield path
    finally:
        for leftover in (path, path.with_name(path.name + ".lock")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def snapshot(repo: Repo, exclude: Sequence[str], parent: str | None, message: str) -> str:
    """Commit the workspace's files as they are now and return the commit id.

    Args:
        repo: where (see :func:`locate`).
        exclude: workspace-relative paths left out (besides ``.agentkit`` and
            ``.subagent``): what those paths hold in ``parent``'s tree stays.
        parent: the commit's parent (``None``: a root commit).
        message: the commit message.

    The user's index is only read (copied). Raises IsolationError when git fails (an
    unreadable file, a full disk).
    """
    specs = snapshot_pathspecs(repo.prefix, tuple(exclude))
    add = ["add", "-A", "--", *specs]
    if not repo.index.is_file():
        # Every file is new to git (a plain folder's first snapshot): one pack instead of
        # a loose object per file, much faster to write and to check out from.
        add = ["-c", "core.bigFileThreshold=1", *add]
    with temp_index(repo.git_dir, repo.index) as index:
        if parent is not None and not repo.index.is_file():
            repo_run(repo, ["read-tree", parent], index)
        _add(repo, add, index)
        tree = repo_run(repo, ["write-tree"], index).decode().strip()
        if repo.kind == "snapshot":
            with contextlib.suppress(OSError):
                shutil.copyfile(index, index.with_name(index.name + ".keep"))
                os.replace(index.with_name(index.name + ".keep"), repo.index)
    args = ["commit-tree", tree, "-m", message]
    if parent is not None:
        args += ["-p", parent]
    return repo.run(args).decode().strip()


_NO_COMMIT = re.compile(r"error: '(.+?)/?' does not have a commit checked out")


def _add(repo: Repo, add: list[str], index: Path) -> None:
    """``git add``; a folder that is a git repository without a commit (git refuses to
    add it) is left out and the add run again."""
    for _ in range(20):
        result = git(add, cwd=repo.top, git_dir=None if repo.discover else repo.git_dir,
                     work_tree=None if repo.discover else repo.top, index_file=index,
                     check=False)  # fmt: skip
        empty = _NO_COMMIT.findall(result.stderr)
        if result.returncode == 0 or not empty:
            break
        add = [*add, *(f":(top,literal,exclude){path}" for path in empty)]
    if result.returncode != 0:
        raise IsolationError(f"git add failed: {first_lines(result.stderr)}")


def repo_run(
    repo: Repo, args: Sequence[str], index: Path | None, *, stdin: bytes | None = None
) -> bytes:
    """``git <args>`` on ``repo``'s work tree with ``index`` as its index (``None``: the
    repository's own, for commands that do not write it); stdout."""
    env_dir = None if repo.discover else repo.git_dir
    work_tree = None if repo.discover else repo.top
    return git(args, cwd=repo.top, git_dir=env_dir, work_tree=work_tree, index_file=index,
               stdin=stdin).stdout  # fmt: skip
