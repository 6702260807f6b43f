"""Bringing a sub-agent's work back: a three-way merge onto the workspace as it is now.

One job: ``merge``. The copy is saved (its branch head C); the workspace is snapshotted
as commit W whose parent is the copy's base, so the merge base of W and C is the base;
``git merge-tree --write-tree -z W C`` merges in git's object store (nothing on disk).
Clean: the difference W → merged tree is written into the workspace's files, all or
nothing (agentkit.isolation.apply), and W is kept on
``refs/agentkit/before-merge/<conversation>/agent-<id>`` (the workspace as it was, for
a person to go back to). Conflicts: nothing is written; each conflict is reported with
both sides' diffs against the base. The user's index, HEAD and branch are never written.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from agentkit.isolation._git import first_lines, git
from agentkit.isolation._parse import RawChange, conflict_reason, link_leaves, parse_merge_tree
from agentkit.isolation.apply import ChangedMeanwhile, apply_changes, stale_paths
from agentkit.isolation.changes import (
    SYMLINK,
    link_targets,
    raw_changes,
    relative_path,
    unified_diff,
)
from agentkit.isolation.copies import BEFORE_MERGE, save_copy
from agentkit.isolation.snapshot import (
    Repo,
    hide_from_git,
    locate,
    locked,
    private_folder,
    snapshot,
)
from agentkit.isolation.types import Conflict, Copy, IsolationError, MergeReport

__all__ = ["merge"]

_ABSENT = "000000"
_NO_ID = "0" * 40

MAX_SIDE = 8_000
"""Characters of each side's diff in a conflict report."""
MAX_DETAILED = 50
"""Conflicts reported with diffs; further ones name the path and reason only."""


def merge(workspace: Path, copy: Copy, *, dry_run: bool = False) -> MergeReport:
    """Apply the sub-agent's changes (its base to its saved state) onto ``workspace``
    as it is now, by a three-way merge against the base.

    Args:
        workspace: the caller's workspace (the one the copy was made from).
        copy: the sub-agent's copy (saved first, so files it left unsaved count).
        dry_run: report what would happen, write nothing.

    Returns:
        A :class:`MergeReport`: ``merged`` with the files written (or that would be),
        ``conflicts`` with one :class:`Conflict` per file (nothing written), or
        ``nothing_to_merge``; ``base_moved`` says the workspace changed since the copy
        was made; ``changes`` is the sub-agent's change summary.

    Raises:
        IsolationError: the copy is gone or belongs to another workspace, git failed,
        or a file could not be written (then every file is as it was).
    """
    workspace = Path(workspace).resolve()
    repo = locate(workspace)
    _same_repository(repo, copy)
    # One merge at a time per workspace: each one's snapshot is then still what it writes on.
    hide_from_git(private_folder(workspace) / "isolation")
    with locked(private_folder(workspace) / "isolation" / "merge.lock"):
        return _merge(repo, workspace, copy, dry_run)


def _merge(repo: Repo, workspace: Path, copy: Copy, dry_run: bool) -> MergeReport:
    git_dir = Path(copy.git_dir)
    head = save_copy(copy)
    theirs = raw_changes(git_dir, copy.prefix, copy.exclude, copy.base, head)
    summary = {"files": len(theirs), "insertions": sum(c.insertions or 0 for c in theirs),
               "deletions": sum(c.deletions or 0 for c in theirs)}  # fmt: skip
    ours = snapshot(repo, copy.exclude, copy.base, "agentkit: the workspace before a merge")
    base_moved = bool(raw_changes(git_dir, copy.prefix, copy.exclude, copy.base, ours))
    report = {"base_moved": base_moved, "dry_run": dry_run, "changes": summary}
    if not theirs:
        return MergeReport("nothing_to_merge", **report)  # type: ignore[arg-type]
    result = git(["merge-tree", "--write-tree", "-z", ours, head], cwd=git_dir, git_dir=git_dir,
                 check=False)  # fmt: skip
    if result.returncode not in (0, 1):
        raise IsolationError(f"git merge-tree failed: {first_lines(result.stderr)}")
    parsed = parse_merge_tree(result.stdout)
    if result.returncode == 1:
        conflicts = _conflicts(copy, parsed.stages, parsed.messages, ours, head)
        return MergeReport("conflicts", conflicts=conflicts, **report)  # type: ignore[arg-type]
    to_apply = raw_changes(git_dir, copy.prefix, copy.exclude, ours, parsed.tree)
    files = tuple(relative_path(c.path, copy.prefix) for c in to_apply)
    unsafe = _unsafe_links(copy, workspace, to_apply, parsed.tree, (ours, head))
    stale = stale_paths(repo, workspace, to_apply)
    if unsafe or stale:  # an ignored file where the sub-agent adds one, a symlinked folder
        conflicts = unsafe + tuple(_changed_meanwhile(copy, p, ours, head) for p in stale)
        return MergeReport("conflicts", conflicts=conflicts, **report)  # type: ignore[arg-type]
    if dry_run or not to_apply:  # nothing to apply: its changes are in already
        return MergeReport("merged", files=files, **report)  # type: ignore[arg-type]
    _keep_before(copy, ours)
    try:
        apply_changes(repo, workspace, to_apply)
    except ChangedMeanwhile as exc:  # saved between the check and the write: all put back
        conflicts = tuple(_changed_meanwhile(copy, p, ours, head) for p in exc.paths)
        return MergeReport("conflicts", conflicts=conflicts, **report)  # type: ignore[arg-type]
    return MergeReport("merged", files=files, **report)  # type: ignore[arg-type]


def _keep_before(copy: Copy, ours: str) -> None:
    """Keep W on the copy's before-merge ref, created only: a later merge of the same
    copy leaves the first one's record (the workspace before any of its changes)."""
    git_dir = Path(copy.git_dir)
    ref = f"{BEFORE_MERGE}/{copy.branch.removeprefix('agentkit/')}"
    made = git(["update-ref", "-m", "agentkit: workspace before merge", ref, ours, ""],
               cwd=git_dir, git_dir=git_dir, check=False)  # fmt: skip
    if made.returncode != 0:
        there = git(["rev-parse", "-q", "--verify", ref], cwd=git_dir, git_dir=git_dir,
                    check=False)  # fmt: skip
        if there.returncode != 0:
            raise IsolationError(f"could not keep the workspace on {ref}: "
                                 f"{first_lines(made.stderr)}")  # fmt: skip


def _same_repository(repo: Repo, copy: Copy) -> None:
    if repo.git_dir.resolve() != Path(copy.git_dir).resolve() or repo.prefix != copy.prefix:
        raise IsolationError(
            f"the copy was made from another workspace (its repository is {copy.git_dir})"
        )


def _conflicts(
    copy: Copy,
    stages: dict[str, set[int]],
    messages: dict[str, list[tuple[str, str]]],
    ours: str,
    theirs: str,
) -> tuple[Conflict, ...]:
    """One Conflict per conflicted path (stages, or a ``CONFLICT`` message), sorted."""
    paths = set(stages)
    for path, items in messages.items():
        if any(kind.startswith("CONFLICT") for kind, _ in items):
            paths.add(path)
    out = []
    for n, path in enumerate(sorted(paths)):
        kinds = [kind for kind, _ in messages.get(path, []) if kind.startswith("CONFLICT")]
        texts = [msg for kind, msg in messages.get(path, []) if kind.startswith("CONFLICT")]
        detail = _words(" ".join(texts), ours, theirs)
        out.append(
            _with_sides(
                copy,
                path,
                conflict_reason(stages.get(path, set()), kinds),
                detail,
                ours,
                theirs,
                detailed=n < MAX_DETAILED,
            )  # fmt: skip
        )
    return tuple(out)


def _unsafe_links(
    copy: Copy, workspace: Path, to_apply: list[RawChange], tree: str, sides: tuple[str, str]
) -> tuple[Conflict, ...]:
    """A conflict (``unsafe_link``) per symbolic link the merge would write whose target
    is absolute or leads out of the workspace: written into the person's folder, it
    would make a path there reach outside (``pw -> /etc/passwd``). Targets are followed
    through the links of the merged ``tree`` and the workspace's others (``q -> .``,
    ``pw -> q/q/../../etc/passwd``)."""
    targets = link_targets(Path(copy.git_dir), to_apply)
    if not targets:
        return ()
    link_at = _links_after(copy, workspace, tree)
    out = []
    for path, target in sorted(targets.items()):
        if link_leaves(relative_path(path, copy.prefix), target, link_at):
            shown = target if len(target) <= 200 else target[:200] + "…"
            detail = (f"the symbolic link points to {shown!r}, outside the workspace; "
                      "nothing was written")  # fmt: skip
            out.append(_with_sides(copy, path, "unsafe_link", detail, *sides, detailed=True))
    return tuple(out)


def _links_after(copy: Copy, workspace: Path, tree: str) -> Callable[[str], str | None]:
    """Where a workspace-relative path will point after the merge: the merged ``tree``'s
    link there, nothing when the tree has a file or folder there, else the link on disk
    (an ignored or excluded path the merge does not write)."""
    git_dir = Path(copy.git_dir)
    out = git(["ls-tree", "-r", "-z", "--full-tree", tree], cwd=git_dir, git_dir=git_dir)
    in_tree: set[str] = set()
    links: list[RawChange] = []
    for entry in out.stdout.split(b"\0"):
        meta, _, raw_path = entry.partition(b"\t")
        path = raw_path.decode("utf-8", "surrogateescape")
        if not path.startswith(copy.prefix) or not path:
            continue
        rel = relative_path(path, copy.prefix)
        in_tree.update(str(p) for p in PurePosixPath(rel).parents if str(p) != ".")
        in_tree.add(rel)
        mode, _, object_id = meta.decode("ascii", "replace").partition(" blob ")
        if mode == SYMLINK:
            links.append(RawChange(_ABSENT, SYMLINK, _NO_ID, object_id, "A", path))
    targets = {relative_path(p, copy.prefix): t for p, t in link_targets(git_dir, links).items()}

    def link_at(rel: str) -> str | None:
        if rel in in_tree:
            return targets.get(rel)
        with contextlib.suppress(OSError):
            return os.readlink(workspace / rel)
        return None

    return link_at


def _changed_meanwhile(copy: Copy, path: str, ours: str, theirs: str) -> Conflict:
    return _with_sides(copy, path, "file_changed",
                       "the workspace's file changed while the merge ran; nothing was written",
                       ours, theirs, detailed=True)  # fmt: skip


def _with_sides(
    copy: Copy, path: str, reason: str, detail: str, ours: str, theirs: str, *, detailed: bool
) -> Conflict:
    git_dir = Path(copy.git_dir)
    sides = ("", "")
    if detailed:
        sides = tuple(  # type: ignore[assignment]
            unified_diff(git_dir, copy.prefix, (), copy.base, side, MAX_SIDE, paths=(path,))
            for side in (ours, theirs)
        )
    return Conflict(
        path=relative_path(path, copy.prefix),
        reason=reason,
        workspace_change=sides[0],
        sub_agent_change=sides[1],
        detail=detail,
    )


def _words(text: str, ours: str, theirs: str) -> str:
    """git's message with the commit ids named (``the workspace``, ``the sub-agent``),
    one line, at most 500 characters."""
    text = text.replace(ours, "the workspace").replace(theirs, "the sub-agent")
    text = re.sub(r"\s+", " ", text).strip()
    return text[:500]
