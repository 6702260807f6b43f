"""A sub-agent's own copy: made, linked to its deliverables, saved, checked, dropped.

One job: the copy's life. ``create_copy`` snapshots the workspace (agentkit.isolation.
snapshot), keeps the base on a private ref and adds a git worktree on a branch of the
sub-agent's own; ``link_deliverables`` shares the deliverables folder with the
workspace; ``save_copy`` commits the copy's files on its branch; ``copy_exists`` says
whether the work is still there; ``discard`` drops worktree, branch and refs, and never
touches the workspace's files; ``check_names`` refuses a record whose names are not the
ones ``create_copy`` gives.

The copy's ``.git`` file is the sub-agent's to write, so it is never read: the
worktree's git folder is found under ``<git_dir>/worktrees`` (whose ``gitdir`` files
name their worktrees), and a ``.git`` that does not point there is put back.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from agentkit.isolation._git import git
from agentkit.isolation._parse import ref_component, snapshot_pathspecs
from agentkit.isolation.snapshot import (
    hide_from_git,
    locate,
    locked,
    private_folder,
    snapshot,
    temp_index,
)
from agentkit.isolation.types import Copy, IsolationError

__all__ = [
    "check_names",
    "copy_exists",
    "create_copy",
    "discard",
    "link_deliverables",
    "save_copy",
]

WORKTREES = "worktrees"
BASES = "refs/agentkit/bases"
BEFORE_MERGE = "refs/agentkit/before-merge"
WORKTREE_LOCK = "agentkit-worktrees.lock"
SET_ASIDE = ".git-set-aside"
"""Suffix of ``<worktree>.git-set-aside-<n>``, next to the worktree (outside the copy):
where a ``.git`` folder or link the sub-agent made in place of the copy's ``.git`` file
is kept."""
_AGENT = re.compile(r"agent-(?:0|[1-9][0-9]*)", re.ASCII)


def names(conversation_id: str, agent_id: int) -> tuple[str, str, str]:
    """``(branch, base_ref, folder)`` for a sub-agent: ``agentkit/<conv>/agent-<id>``,
    ``refs/agentkit/bases/<conv>/agent-<id>`` and ``<conv>/agent-<id>`` (the worktree's
    place under ``.agentkit/worktrees``), the conversation id made ref-safe."""
    if not isinstance(conversation_id, str):
        raise IsolationError(f"conversation id must be text, not {conversation_id!r}")
    if isinstance(agent_id, bool) or not isinstance(agent_id, int) or agent_id < 0:
        raise IsolationError(f"agent id must be a whole number >= 0, not {agent_id!r}")
    tail = f"{ref_component(conversation_id)}/agent-{agent_id}"
    return f"agentkit/{tail}", f"{BASES}/{tail}", tail


def create_copy(
    workspace: Path, conversation_id: str, agent_id: int, *, exclude: Sequence[str] = ()
) -> Copy:
    """Make sub-agent ``agent_id``'s own copy of ``workspace`` as it is now.

    Args:
        workspace: the caller's workspace (an existing folder; in a git repository or not).
        conversation_id: the conversation the sub-agent belongs to (any text; made safe
            for ref names).
        agent_id: the sub-agent's id (>= 0).
        exclude: workspace-relative paths that are never part of the change (the
            sub-agent's deliverables folder; see :func:`link_deliverables`).

    Returns:
        The :class:`Copy`: its ``root`` is where the sub-agent works. The user's HEAD,
        branch, index and files are unchanged.

    Raises:
        IsolationError: the workspace is missing, a copy for this sub-agent exists
        already, or git failed (its message). Nothing of the user's is changed.
    """
    workspace = Path(workspace).resolve()
    if not workspace.is_dir():
        raise IsolationError(f"the workspace {workspace} is not a folder")
    excluded = tuple(_relative(p, "exclude path") for p in exclude)
    branch, base_ref, tail = names(conversation_id, agent_id)
    repo = locate(workspace)
    folder = private_folder(workspace) / WORKTREES / tail
    if folder.exists() or _ref_exists(repo.git_dir, f"refs/heads/{branch}"):
        raise IsolationError(
            f"a copy for agent {agent_id} exists already ({folder}); merge or discard it first"
        )
    message = f"agentkit: base of agent {agent_id} ({conversation_id[:80]})"
    base = snapshot(repo, excluded, repo.head, message)
    _git_dir(repo.git_dir, ["update-ref", "-m", "agentkit base", base_ref, base, ""])
    hide_from_git(private_folder(workspace) / WORKTREES)
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        _git_dir(repo.git_dir, ["worktree", "add", "-q", "-b", branch, str(folder), base],
                 cwd=folder.parent)  # fmt: skip
    except IsolationError:
        with contextlib.suppress(IsolationError):
            _git_dir(repo.git_dir, ["update-ref", "-d", base_ref, base])
        raise
    root = folder / repo.prefix if repo.prefix else folder
    root.mkdir(parents=True, exist_ok=True)
    return Copy(
        kind=repo.kind, root=str(root), worktree=str(folder), git_dir=str(repo.git_dir),
        prefix=repo.prefix, branch=branch, base=base, base_ref=base_ref, exclude=excluded,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )  # fmt: skip


def link_deliverables(copy: Copy, deliverables_dir: str, deliverables_path: Path) -> None:
    """Make ``<copy.root>/<deliverables_dir>`` a symlink to the real deliverables folder.

    Args:
        copy: the sub-agent's copy.
        deliverables_dir: the folder's workspace-relative path; it must be covered by
            ``copy.exclude`` (so it is never part of a change or a merge).
        deliverables_path: the real folder in the workspace (created if missing).

    What the base had at that path inside the copy is replaced (it stays in the base
    commit). A copy whose worktree folder was removed while its branch was kept gets
    the folder back first, checked out at the branch's last saved state (a continued
    sub-agent goes on from there). Raises IsolationError for a path outside the copy,
    one not excluded, or a copy that is gone (no branch).
    """
    rel = _relative(deliverables_dir, "deliverables folder")
    if not any(rel == ex or rel.startswith(ex + "/") for ex in copy.exclude):
        raise IsolationError(f"{rel} is not in the copy's exclude list; pass it to create_copy")
    _ensure_worktree(copy)
    root = Path(copy.root)
    if not root.is_dir():
        raise IsolationError(f"the copy {root} is gone")
    link = root / rel
    _inside(link.parent, root)
    link.parent.mkdir(parents=True, exist_ok=True)
    Path(deliverables_path).mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to(Path(deliverables_path).resolve(), target_is_directory=True)


def save_copy(copy: Copy) -> str:
    """Commit the copy's current files on its branch and return that commit's id.

    Files under ``copy.exclude`` and any ``.subagent`` folder are left out. When
    nothing changed since the branch's last commit, that commit is returned (no empty
    commit). When the worktree is gone but the branch is there, the branch's head is
    returned. A copy's ``.git`` that the sub-agent removed or replaced is put back
    first (a folder or link in its place kept aside, see :data:`SET_ASIDE`); git's own
    entry for the worktree gone too, the files are saved through the repository.
    Raises IsolationError when neither worktree nor branch exists (discarded) or git
    fails.
    """
    git_dir = Path(copy.git_dir)
    head = _branch_head(copy)
    worktree = Path(copy.worktree)
    if not worktree.is_dir() or worktree.is_symlink():
        return head
    admin = _worktree_admin(copy)
    if admin is not None:
        _relink(worktree, admin)
    specs = snapshot_pathspecs(copy.prefix, copy.exclude)
    with temp_index(git_dir, admin / "index" if admin else None) as index:
        env = {"cwd": worktree, "git_dir": admin or git_dir, "work_tree": worktree,
               "index_file": index}  # fmt: skip
        if admin is None:
            git(["read-tree", head], **env)  # type: ignore[arg-type]
        git(["add", "-A", "--", *specs], **env)  # type: ignore[arg-type]
        tree = git(["write-tree"], **env).text.strip()  # type: ignore[arg-type]
        if tree == _git_dir(git_dir, ["rev-parse", f"{head}^{{tree}}"]).strip():
            return head
        commit = _git_dir(git_dir, ["commit-tree", tree, "-p", head, "-m", "agentkit: saved"])
        commit = commit.strip()
        _git_dir(git_dir, ["update-ref", "-m", "agentkit save", f"refs/heads/{copy.branch}",
                           commit, head])  # fmt: skip
        if admin is not None and _head_is_branch(admin, copy.branch):
            # The worktree's own index then matches its HEAD: a clean `git status` there.
            with contextlib.suppress(OSError):
                shutil.copyfile(index, admin / "index.agentkit")
                os.replace(admin / "index.agentkit", admin / "index")
    return commit


def copy_exists(copy: Copy) -> bool:
    """True while the sub-agent's work is kept: its branch or its worktree exists."""
    if Path(copy.worktree).is_dir():
        return True
    if not Path(copy.git_dir).is_dir():
        return False
    return _ref_exists(Path(copy.git_dir), f"refs/heads/{copy.branch}")


def discard(copy: Copy) -> None:
    """Drop the copy: its worktree (the copy's files), branch, base ref and the
    pre-merge ref. Idempotent. Never touches the workspace's own files or the user's
    branches: a record whose names are not the ones :func:`create_copy` gives
    (:func:`check_names`), or whose worktree folder is not a registered worktree of
    ``copy.git_dir``, is refused (a damaged record). Raises IsolationError then, or
    when git fails."""
    check_names(copy)
    git_dir = Path(copy.git_dir)
    worktree = Path(copy.worktree)
    if worktree.is_dir() or worktree.is_symlink():
        admin = _worktree_admin(copy) if not worktree.is_symlink() else None
        if admin is None:
            raise IsolationError(f"refusing to discard {worktree}: not a worktree of {git_dir}")
        _relink(worktree, admin)  # git checks the link before it removes a worktree
        for rel in copy.exclude:  # the shared deliverables folder: never followed
            link = Path(copy.root) / rel
            if link.is_symlink():
                link.unlink()
        _git_dir(git_dir, ["worktree", "remove", "--force", "--force", str(worktree)])
    if not git_dir.is_dir():
        return
    _git_dir(git_dir, ["worktree", "prune"])
    tail = copy.branch.removeprefix("agentkit/")
    for ref in (f"refs/heads/{copy.branch}", copy.base_ref, f"{BEFORE_MERGE}/{tail}"):
        if _ref_exists(git_dir, ref):
            _git_dir(git_dir, ["update-ref", "-d", ref])
    for folder in (worktree.parent, worktree.parent.parent):
        with contextlib.suppress(OSError):
            if folder.name != ".agentkit":
                folder.rmdir()  # only when empty


def check_names(copy: Copy) -> None:
    """Raise IsolationError unless the recorded ``copy`` names only what
    :func:`create_copy` made for one sub-agent: ``branch`` is
    ``agentkit/<conversation>/agent-<id>``, ``base_ref`` is
    ``refs/agentkit/bases/<same>`` and ``worktree`` an absolute path ending in
    ``.agentkit/worktrees/<same>``. A damaged record (or one the sub-agent rewrote:
    it lives in the shared deliverables folder) then never names the user's branches."""
    tail = copy.branch.removeprefix("agentkit/")
    conversation, _, agent = tail.partition("/")
    parts = Path(copy.worktree).parts
    if not (
        copy.branch.startswith("agentkit/")
        and conversation
        and ref_component(conversation) == conversation
        and _AGENT.fullmatch(agent)
        and copy.base_ref == f"{BASES}/{tail}"
        and Path(copy.worktree).is_absolute()
        and ".." not in parts
        and parts[-4:] == (".agentkit", WORKTREES, conversation, agent)
    ):
        raise IsolationError(
            f"refusing the recorded copy (branch {copy.branch[:200]!r}, base ref "
            f"{copy.base_ref[:200]!r}, worktree {copy.worktree[:300]!r}): not the names "
            "agentkit gives a sub-agent's copy (a damaged record)"
        )


# ------------------------------------------------------------------ helpers


def _ensure_worktree(copy: Copy) -> None:
    """Add the copy's worktree again from its branch when its folder is gone."""
    worktree = Path(copy.worktree)
    if worktree.exists() or f"/.agentkit/{WORKTREES}/" not in worktree.as_posix():
        return
    git_dir = Path(copy.git_dir)
    _branch_head(copy)  # raises when the branch is gone too
    _git_dir(git_dir, ["worktree", "prune"])
    worktree.parent.mkdir(parents=True, exist_ok=True)
    _git_dir(git_dir, ["worktree", "add", "-q", str(worktree), copy.branch], cwd=worktree.parent)
    Path(copy.root).mkdir(parents=True, exist_ok=True)


def _git_dir(git_dir: Path, args: list[str], cwd: Path | None = None) -> str:
    """git on the repository ``git_dir`` (no work tree needed); stdout as text.
    ``worktree`` commands run one at a time per repository: git 2.39's read the other
    worktrees' folders, and one being made meanwhile fails them ("failed to read
    .../commondir") or, for ``prune``, could be taken for a stale one."""
    if args and args[0] == "worktree":
        with locked(git_dir / WORKTREE_LOCK):
            return git(args, cwd=cwd or git_dir, git_dir=git_dir).text
    return git(args, cwd=cwd or git_dir, git_dir=git_dir).text


def _ref_exists(git_dir: Path, ref: str) -> bool:
    result = git(["rev-parse", "-q", "--verify", ref], cwd=git_dir, git_dir=git_dir, check=False)
    return result.returncode == 0


def _branch_head(copy: Copy) -> str:
    result = git(
        ["rev-parse", "-q", "--verify", f"refs/heads/{copy.branch}^{{commit}}"],
        cwd=Path(copy.git_dir), git_dir=Path(copy.git_dir), check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise IsolationError(f"the copy's branch {copy.branch} is gone (discarded?)")
    return result.text.strip()


def _worktree_admin(copy: Copy) -> Path | None:
    """The copy's worktree's own git folder, ``<git_dir>/worktrees/<name>``: the entry
    whose ``gitdir`` file (git's, outside the copy) names ``<copy.worktree>/.git``;
    ``None`` when git has none. The copy's ``.git`` file is never read: the sub-agent
    can write it, and a git folder it names would bring that folder's config (filters,
    commands git runs) to agentkit's own git."""
    entries = Path(copy.git_dir) / WORKTREES
    wanted = os.path.realpath(copy.worktree)
    try:
        admins = sorted(entries.iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            with open(admin / "gitdir", encoding="utf-8", errors="replace") as handle:
                named = handle.read(8192).strip()
        except OSError:
            continue
        if os.path.isabs(named) and os.path.realpath(os.path.dirname(named)) == wanted:
            return admin if admin.is_dir() and not admin.is_symlink() else None
    return None


def _relink(worktree: Path, admin: Path) -> None:
    """Make ``<worktree>/.git`` the file ``gitdir: <admin>`` again when the sub-agent
    removed or changed it. A folder or link there (``git init`` in the copy) is moved
    next to the worktree, outside the copy (``<worktree>.git-set-aside-<n>``), never
    deleted. Raises IsolationError when the file cannot be written."""
    link = worktree / ".git"
    text = f"gitdir: {os.path.realpath(admin)}\n"  # as git writes it
    try:
        if not link.is_symlink() and link.is_file():
            with open(link, encoding="utf-8", errors="replace") as handle:
                if handle.read(8192) == text:
                    return
        elif link.is_symlink() or link.exists():
            for n in range(1, 1000):
                aside = worktree.parent / f"{worktree.name}{SET_ASIDE}-{n}"
                if not aside.exists() and not aside.is_symlink():
                    os.rename(link, aside)
                    break
        temp = worktree.parent / f".{worktree.name}.gitlink.tmp"
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, link)
    except OSError as exc:
        raise IsolationError(f"the copy's git link {link} is damaged: {exc}") from None


def _head_is_branch(admin: Path, branch: str) -> bool:
    try:
        return (admin / "HEAD").read_text()[:1000].strip() == f"ref: refs/heads/{branch}"
    except OSError:
        return False


def _relative(path: str, what: str) -> str:
    """``path`` as a clean workspace-relative POSIX path; IsolationError if it escapes."""
    pure = PurePosixPath(str(path).replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or str(pure) == ".":
        raise IsolationError(f"the {what} {path!r} must be a relative path inside the workspace")
    return str(pure)


def _inside(path: Path, root: Path) -> None:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        raise IsolationError(f"{path} leads outside the copy {root}") from None
