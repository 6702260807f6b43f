"""Symbolic link chains in a merge, against real git and real files (agentkit.isolation).

A link whose target reads as inside the workspace may still lead out once the kernel
follows another link on its way (review: ``q -> .`` then
``pw -> q/q/q/q/../../../../etc/passwd``). The merge follows the merged tree's links
and the workspace's own; such a link is refused (``unsafe_link``) and nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from git_helpers import git

from agentkit import isolation as iso


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git workspace: committed ``f.txt``, ``.gitignore`` of ``*.log``."""
    root = tmp_path.resolve() / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "f.txt").write_text("one\n")
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def climb(workspace: Path) -> str:
    """``q/`` and ``../`` enough times to reach ``/`` from ``workspace`` through ``q -> .``."""
    depth = len(workspace.parts)
    return "q/" * depth + "../" * depth + "etc/passwd"


def test_a_link_chain_leading_out_is_refused_and_nothing_is_written(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    os.symlink(".", root / "q")
    os.symlink(climb(repo), root / "pw")  # its text alone says "etc/passwd", inside
    (root / "f.txt").write_text("two\n")
    for dry_run in (True, False):
        report = iso.merge(repo, copy, dry_run=dry_run)
        assert report.status == "conflicts", report
        assert [(c.path, c.reason) for c in report.conflicts] == [("pw", "unsafe_link")]
        assert not os.path.lexists(repo / "pw") and not os.path.lexists(repo / "q")
        assert (repo / "f.txt").read_text() == "one\n"
    assert git(repo, "for-each-ref", "refs/agentkit/before-merge") == ""


def test_a_workspace_link_git_does_not_see_counts_on_the_way(repo: Path) -> None:
    """``q.log -> .`` is ignored, so only the workspace's disk knows it; a sub-agent's
    ``pw -> q.log/q.log/../../f.txt`` climbs out through it."""
    os.symlink(".", repo / "q.log")
    copy = iso.create_copy(repo, "conv", 1)
    os.symlink("q.log/q.log/../../f.txt", Path(copy.root) / "pw")  # text: f.txt
    report = iso.merge(repo, copy)
    assert [(c.path, c.reason) for c in report.conflicts] == [("pw", "unsafe_link")]
    assert not os.path.lexists(repo / "pw")


def test_a_link_chain_that_stays_inside_merges(repo: Path) -> None:
    (repo / "a" / "b").mkdir(parents=True)
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    (root / "a" / "b").mkdir(parents=True, exist_ok=True)
    os.symlink("a/b", root / "d")
    os.symlink("d/../../f.txt", root / "pw")  # d is a/b: a/b/../../f.txt is f.txt
    report = iso.merge(repo, copy)
    assert report.status == "merged" and set(report.files) == {"d", "pw"}
    assert (repo / "pw").read_text() == "one\n"
