"""What a sub-agent changed in its copy: the list of files and the readable diff.

One job: read the difference between the copy's base and its saved state (each call
saves first, so work still only on disk is counted), restricted to the workspace's part
of the repository, without the copy's excluded paths (its deliverables folder).
"""

from __future__ import annotations

from pathlib import Path

from agentkit.isolation._git import git
from agentkit.isolation._parse import (
    MAX_LINK_TARGET,
    RawChange,
    parse_batch,
    parse_raw_numstat,
    snapshot_pathspecs,
)
from agentkit.isolation.copies import save_copy
from agentkit.isolation.types import Changes, Copy, FileChange, IsolationError

__all__ = ["SYMLINK", "changes", "diff", "link_targets", "raw_changes", "relative_path"]

_STATUS = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}
SYMLINK = "120000"
"""git's mode of a symbolic link."""


def raw_changes(
    git_dir: Path, prefix: str, exclude: tuple[str, ...], old: str, new: str
) -> list[RawChange]:
    """``git diff --raw --numstat`` from commit ``old`` to ``new``, for the workspace's
    part (``prefix``) without ``exclude``; paths top-relative."""
    specs = snapshot_pathspecs(prefix, exclude)
    out = git(
        ["diff-tree", "-r", "-z", "--raw", "--numstat", "--no-renames", old, new, "--", *specs],
        cwd=git_dir, git_dir=git_dir,
    ).stdout  # fmt: skip
    return parse_raw_numstat(out)


def link_targets(git_dir: Path, changes: list[RawChange]) -> dict[str, str]:
    """Where each symbolic link that ``changes`` leave (new mode ``120000``) points:
    ``{top-relative path: target as written}``, read from git's objects in one
    ``cat-file --batch``. Empty when no change leaves a link."""
    links = {c.path: c.new_id for c in changes if c.new_mode == SYMLINK}
    if not links:
        return {}
    ids = "".join(f"{object_id}\n" for object_id in dict.fromkeys(links.values()))
    out = git(["cat-file", "--batch"], cwd=git_dir, git_dir=git_dir, stdin=ids.encode()).stdout
    blobs = parse_batch(out)
    return {path: blobs[object_id] for path, object_id in links.items() if object_id in blobs}


def relative_path(top_path: str, prefix: str) -> str:
    """A repository-relative path as a workspace-relative one (``prefix`` removed)."""
    return top_path[len(prefix) :] if prefix and top_path.startswith(prefix) else top_path


def changes(copy: Copy) -> Changes:
    """What the sub-agent changed, base to its saved state (saved first).

    Returns :class:`Changes`: one :class:`FileChange` per file (workspace-relative
    path, ``added``/``modified``/``deleted``/``type_changed``, lines added and removed,
    ``binary``, ``link_target`` for a symbolic link), sorted by path, and ``head`` (the
    saved commit). A mode change alone
    (``chmod +x``) is ``modified`` with no lines. Raises IsolationError when the copy is
    gone or git fails.
    """
    head = save_copy(copy)
    files = []
    found = raw_changes(Path(copy.git_dir), copy.prefix, copy.exclude, copy.base, head)
    targets = link_targets(Path(copy.git_dir), found)
    for raw in found:
        status = _STATUS.get(raw.status, "modified")
        binary = raw.insertions is None
        target = targets.get(raw.path)
        files.append(
            FileChange(
                path=relative_path(raw.path, copy.prefix),
                status=status,  # type: ignore[arg-type]
                insertions=raw.insertions or 0,
                deletions=raw.deletions or 0,
                binary=binary,
                link_target=target[:MAX_LINK_TARGET] if target is not None else None,
            )
        )
    files.sort(key=lambda f: f.path)
    return Changes(files=tuple(files), head=head)


def diff(copy: Copy, *, max_chars: int = 200_000) -> str:
    """The unified diff from the copy's base to its saved state (saved first), paths
    workspace-relative (``a/x.py``, ``b/x.py``), binary files named only. At most
    ``max_chars`` characters; a longer diff ends with a line saying it was cut. Raises
    IsolationError when the copy is gone or git fails."""
    if max_chars < 1:
        raise IsolationError("max_chars must be at least 1")
    head = save_copy(copy)
    return unified_diff(Path(copy.git_dir), copy.prefix, copy.exclude, copy.base, head,
                        max_chars)  # fmt: skip


def unified_diff(
    git_dir: Path, prefix: str, exclude: tuple[str, ...], old: str, new: str, max_chars: int,
    paths: tuple[str, ...] = (),
) -> str:  # fmt: skip
    """``git diff old new`` for the workspace's part (or only ``paths``, top-relative),
    paths shown workspace-relative, capped at ``max_chars`` characters."""
    specs = [f":(top,literal){p}" for p in paths] if paths else snapshot_pathspecs(prefix, exclude)
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames"]
    if prefix:
        args.append(f"--relative={prefix}")
    result = git([*args, old, new, "--", *specs], cwd=git_dir, git_dir=git_dir,
                 limit=max_chars * 4 + 4)  # fmt: skip
    text = result.text
    if len(text) > max_chars or result.truncated:
        return text[:max_chars] + f"\n[diff cut at {max_chars} characters]\n"
    return text
