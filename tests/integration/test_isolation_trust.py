"""What a sub-agent writes in its copy never steers agentkit's own git, and a damaged
record never names the user's branches (agentkit.isolation.copies, real git and files).

A sub-agent can write every file of its copy, its ``.git`` file included, and its
record lives in the shared deliverables folder. These tests do what such a sub-agent
can do with its file tools and commands, then check that agentkit's unsandboxed git ran
nothing of the copy's, that the work is still saved, counted and merged, and that a
discard of a damaged record refuses.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from git_helpers import git, make_repo

from agentkit import isolation as iso
from agentkit.subagent.isolated import Isolation
from agentkit.webchat.deleting import Waiting


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git workspace with ``f.txt`` and a second branch of the user's, ``feature``."""
    root = make_repo(tmp_path.resolve() / "ws", {"f.txt": "one\n"})
    git(root, "branch", "feature")
    return root


def _branch_file(repo: Path, copy: iso.Copy, name: str) -> str:
    return git(repo, "show", f"{copy.branch}:{name}")


def _fake_git_folder(root: Path, marker: Path) -> Path:
    """What a sub-agent can write with file tools only: a git folder whose config has a
    clean filter that makes ``marker``, every file routed through it, and the copy's
    ``.git`` file pointing there."""
    evil = root / "evil"
    (evil / "objects").mkdir(parents=True)
    (evil / "refs").mkdir()
    (evil / "objects" / "keep").write_text("")
    (evil / "refs" / "keep").write_text("")
    (evil / "HEAD").write_text("ref: refs/heads/x\n")
    (evil / "config").write_text(
        '[core]\n\trepositoryformatversion = 0\n[filter "pwn"]\n'
        f'\tclean = "touch {marker}; cat"\n\tsmudge = "touch {marker}; cat"\n'
    )
    (root / ".gitattributes").write_text("* filter=pwn\n")
    (root / ".git").write_text(f"gitdir: {evil}\n")
    return evil


def test_a_git_link_to_a_folder_in_the_copy_runs_none_of_its_commands(
    repo: Path, tmp_path: Path
) -> None:
    """Regression: save_copy used the folder the copy's ``.git`` file named as GIT_DIR,
    so a filter the sub-agent defined there ran at its end, outside the sandbox."""
    marker = tmp_path / "pwned"
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    (root / "f.txt").write_text("changed\n")
    _fake_git_folder(root, marker)
    found = iso.changes(copy)
    assert not marker.exists()
    assert "f.txt" in [f.path for f in found.files]
    assert _branch_file(repo, copy, "f.txt") == "changed\n"
    assert (root / ".git").read_text().startswith("gitdir: ")
    assert "evil" not in (root / ".git").read_text()  # the link is git's again
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == copy.branch
    iso.diff(copy)
    iso.merge(repo, copy, dry_run=True)
    iso.discard(copy)
    assert not marker.exists()
    assert not Path(copy.worktree).exists()
    assert git(repo, "branch", "--list", "feature").strip()


def test_a_removed_git_link_keeps_the_work(repo: Path) -> None:
    """Regression: with the copy's ``.git`` file gone, save returned the branch head,
    ``changes`` counted nothing and the merge said nothing_to_merge: work orphaned."""
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    (root / "f.txt").write_text("work\n")
    (root / "new.py").write_text("print(1)\n")
    os.remove(root / ".git")
    assert iso.changes(copy).summary()["files"] == 2
    assert (root / ".git").is_file()  # put back
    report = iso.merge(repo, copy)
    assert report.status == "merged" and report.files == ("f.txt", "new.py")
    assert (repo / "f.txt").read_text() == "work\n"


def test_a_git_init_in_the_copy_keeps_the_work_and_its_folder(repo: Path) -> None:
    """``rm .git; git init`` in the copy: the work is saved and merged, the folder git
    made is kept aside outside the copy (not deleted, not part of the change)."""
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    (root / "f.txt").write_text("work\n")
    os.remove(root / ".git")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    found = iso.changes(copy)
    assert [f.path for f in found.files] == ["f.txt"]
    aside = Path(f"{copy.worktree}{iso.copies.SET_ASIDE}-1")
    assert (aside / "HEAD").is_file() and (root / ".git").is_file()
    assert iso.merge(repo, copy).files == ("f.txt",)
    assert (repo / "f.txt").read_text() == "work\n"
    iso.discard(copy)
    assert aside.is_dir()  # what the sub-agent made is never deleted


def test_a_pruned_worktree_entry_still_saves_the_work(repo: Path) -> None:
    """The ``.git`` file removed and git's entry pruned meanwhile (another copy's
    discard runs ``git worktree prune``): the files are saved through the repository."""
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    (root / "f.txt").write_text("work\n")
    os.remove(root / ".git")
    git(repo, "worktree", "prune")
    assert iso.changes(copy).summary()["files"] == 1
    assert _branch_file(repo, copy, "f.txt") == "work\n"
    assert iso.merge(repo, copy).files == ("f.txt",)


DAMAGES = {
    "branch": {"branch": "feature"},
    "base_ref": {"base_ref": "refs/heads/main"},
    "both, worktree gone": {
        "branch": "feature",
        "base_ref": "refs/heads/main",
        "worktree": "/nowhere/.agentkit/worktrees/conv/agent-9",
    },
    "another agent's base": {"base_ref": "refs/agentkit/bases/conv/agent-2"},
    "worktree elsewhere": {"worktree": "/tmp/agent-1"},
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_record_discards_nothing_of_the_users(repo: Path, damage: str) -> None:
    """Regression: discard deleted whatever the record named as branch and base ref
    (a record with ``feature`` and ``refs/heads/main`` deleted both), and the web's
    remove commands printed ``git branch -D`` of it."""
    copy = iso.create_copy(repo, "conv", 1)
    other = iso.create_copy(repo, "conv", 2)
    damaged = iso.Copy.from_dict({**copy.to_dict(), **DAMAGES[damage]})
    refs = git(repo, "for-each-ref", "--format=%(refname)")
    waiting = Waiting(1, Isolation(copy=damaged.to_dict()), None, "s", False)
    assert waiting.remove_commands() == []
    with pytest.raises(iso.IsolationError, match="damaged record"):
        iso.discard(damaged)
    assert git(repo, "for-each-ref", "--format=%(refname)") == refs
    assert Path(copy.worktree).is_dir() and Path(other.worktree).is_dir()


def test_the_remove_commands_of_a_sound_record_drop_only_its_copy(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    waiting = Waiting(1, Isolation(copy=copy.to_dict()), None, "s", False)
    for command in waiting.remove_commands():
        subprocess.run(shlex.split(command), cwd=repo, check=True, capture_output=True)
    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    assert refs == ["refs/heads/feature", "refs/heads/main"]
    assert not Path(copy.worktree).exists()
