"""An isolated copy carried to another machine and back as git bundles
(agentkit.isolation.bundles), with real git: the base bundle unpacked in another folder,
edited there, saved and bundled back, imported into the real repository's branch. The
real workspace's files, HEAD and index stay as they were; the copy here then holds the
work, and it merges. Safety of the archives and headers: tests/unit/test_isolation_archives.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from git_helpers import git

from agentkit.isolation import changes, create_copy, link_deliverables, merge, save_copy
from agentkit.isolation.bundles import (
    import_result,
    pack_base,
    pack_result,
    transfer_ref,
    unpack,
)
from agentkit.isolation.types import Copy, IsolationError

RESULTS = "sub_agent_results/agent_1"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("one\ntwo\n")
    (ws / "b.txt").write_text("bee\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "first")
    (ws / "a.txt").write_text("one\ntwo\nuser's uncommitted line\n")
    return ws


def isolated(ws: Path) -> Copy:
    copy = create_copy(ws, "conv", 1, exclude=(RESULTS,))
    link_deliverables(copy, RESULTS, ws / RESULTS)
    return copy


def on_node(data: bytes, node: Path, copy: Copy) -> Copy:
    """What a Ray node does with the base: unpack it and link its own deliverables."""
    local = unpack(data, node / "copy", copy)
    link_deliverables(local, RESULTS, node / "results")
    return local


def state(ws: Path) -> tuple[str, str, str, str]:
    return (git(ws, "rev-parse", "HEAD"), git(ws, "symbolic-ref", "HEAD"),
            git(ws, "status", "--porcelain"), (ws / "a.txt").read_text())  # fmt: skip


def test_work_done_elsewhere_lands_on_the_branch_and_merges(repo: Path, tmp_path: Path) -> None:
    copy = isolated(repo)
    before = state(repo)
    local = on_node(pack_base(copy), tmp_path / "node", copy)
    root = Path(local.root)
    assert not root.is_relative_to(repo)  # the node's copy is its own folder
    assert (root / "a.txt").read_text() == "one\ntwo\nuser's uncommitted line\n"
    (root / "a.txt").write_text("one\ntwo\nuser's uncommitted line\nfrom the node\n")
    (root / "b.txt").unlink()
    (root / "new.txt").write_text("made on the node\n")
    (root / RESULTS / "report.md").write_text("deliverable")  # the node's own folder
    head = import_result(copy, pack_result(local))

    assert git(repo, "rev-parse", f"refs/heads/{copy.branch}").strip() == head
    assert git(repo, "show", f"{head}:new.txt") == "made on the node\n"
    tree = git(repo, "ls-tree", "-r", "--name-only", head).split()
    assert "b.txt" not in tree and not any(p.startswith("sub_agent_results") for p in tree)
    assert git(repo, "merge-base", "--is-ancestor", copy.base, head) == ""
    # The copy here holds the work (a save changes nothing), its status is clean.
    worktree = Path(copy.root)
    assert (worktree / "new.txt").read_text() == "made on the node\n"
    assert not (worktree / "b.txt").exists()
    assert save_copy(copy) == head
    status = git(worktree, "status", "--porcelain").splitlines()
    assert [line for line in status if "sub_agent_results" not in line] == []
    assert (worktree / RESULTS).is_symlink()  # the shared deliverables link is untouched
    assert not (repo / RESULTS / "report.md").exists()  # bundles carry no deliverables
    # The real workspace is as it was; the transfer ref is gone.
    assert state(repo) == before
    assert not (repo / "new.txt").exists()
    assert git(repo, "for-each-ref", "refs/agentkit/transfer") == ""
    assert {f.path for f in changes(copy).files} == {"a.txt", "b.txt", "new.txt"}
    report = merge(repo, copy)
    assert report.status == "merged"
    assert (repo / "new.txt").read_text() == "made on the node\n"
    assert (repo / "a.txt").read_text().endswith("from the node\n")


def test_no_change_imports_nothing(repo: Path, tmp_path: Path) -> None:
    copy = isolated(repo)
    branch = git(repo, "rev-parse", f"refs/heads/{copy.branch}")
    local = on_node(pack_base(copy), tmp_path / "node", copy)
    assert import_result(copy, pack_result(local)) == branch.strip()
    assert git(repo, "rev-parse", f"refs/heads/{copy.branch}") == branch


def test_a_continued_run_starts_from_the_imported_work(repo: Path, tmp_path: Path) -> None:
    copy = isolated(repo)
    local = on_node(pack_base(copy), tmp_path / "n1", copy)
    (Path(local.root) / "new.txt").write_text("first run\n")
    first = import_result(copy, pack_result(local))
    again = on_node(pack_base(copy), tmp_path / "n2", copy)
    assert (Path(again.root) / "new.txt").read_text() == "first run\n"
    (Path(again.root) / "new.txt").write_text("second run\n")
    second = import_result(copy, pack_result(again))
    assert git(repo, "rev-list", "--count", f"{copy.base}..{second}").strip() == "2"
    assert git(repo, "merge-base", "--is-ancestor", first, second) == ""
    assert (Path(copy.root) / "new.txt").read_text() == "second run\n"


def test_a_commit_of_the_deliverables_on_the_node_is_not_brought_in(
    repo: Path, tmp_path: Path
) -> None:
    copy = isolated(repo)
    local = on_node(pack_base(copy), tmp_path / "node", copy)
    work = Path(local.worktree)
    (Path(local.root) / "c.txt").write_text("c\n")
    (work / ".subagent").mkdir()
    (work / ".subagent" / "x.json").write_text("{}")
    git(work, "add", "-f", "c.txt", ".subagent/x.json", RESULTS)  # the sub-agent's own commit
    git(work, "commit", "-q", "-m", "by the sub-agent")
    head = import_result(copy, pack_result(local))
    tree = git(repo, "ls-tree", "-r", "--name-only", head).split()
    assert "c.txt" in tree
    assert not any(p.startswith(("sub_agent_results", ".subagent")) for p in tree)


def test_a_result_for_another_base_or_a_moved_branch_is_refused(repo: Path, tmp_path: Path) -> None:
    copy = isolated(repo)
    local = on_node(pack_base(copy), tmp_path / "n1", copy)
    (Path(local.root) / "x.txt").write_text("x\n")
    stale = pack_result(local)
    (Path(copy.root) / "z.txt").write_text("a person's edit before the next run\n")
    pack_base(copy)  # a newer state was sent since
    with pytest.raises(IsolationError, match="starts from"):
        import_result(copy, stale)
    local = on_node(pack_base(copy), tmp_path / "n2", copy)
    assert (Path(local.root) / "z.txt").exists()
    (Path(local.root) / "y.txt").write_text("y\n")
    result = pack_result(local)
    (Path(copy.root) / "here.txt").write_text("edited on this machine meanwhile\n")
    moved = save_copy(copy)
    with pytest.raises(IsolationError, match="changed here since"):
        import_result(copy, result)
    assert git(repo, "rev-parse", f"refs/heads/{copy.branch}").strip() == moved


def test_a_file_name_that_is_not_utf8_comes_back_from_the_node(repo: Path, tmp_path: Path) -> None:
    copy = isolated(repo)
    local = on_node(pack_base(copy), tmp_path / "node", copy)
    latin = os.fsdecode(b"caf\xe9.txt")
    (Path(local.root) / latin).write_text("a Latin-1 name\n")
    (Path(local.root) / "b.txt").write_text("bee from the node\n")
    head = import_result(copy, pack_result(local))
    assert (Path(copy.root) / latin).read_text() == "a Latin-1 name\n"
    assert (Path(copy.root) / "b.txt").read_text() == "bee from the node\n"
    assert save_copy(copy) == head  # the worktree holds the branch's files: nothing undone
    assert {f.path for f in changes(copy).files} == {latin, "b.txt"}
    assert merge(repo, copy).status == "merged"
    assert (repo / latin).read_text() == "a Latin-1 name\n"


def test_a_failed_write_into_the_copy_leaves_the_branch_as_it_was(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "sub").mkdir()
    (repo / "sub" / "x.txt").write_text("x\n")
    copy = isolated(repo)
    local = on_node(pack_base(copy), tmp_path / "node", copy)
    (Path(local.root) / "sub" / "x.txt").unlink()
    (Path(local.root) / "b.txt").write_text("bee from the node\n")
    data = pack_result(local)
    branch = git(repo, "rev-parse", f"refs/heads/{copy.branch}").strip()
    # The copy's folder became a link here: the deletion is refused, never followed.
    outside = tmp_path / "outside"
    shutil.move(Path(copy.root) / "sub", outside)
    (Path(copy.root) / "sub").symlink_to(outside)
    with pytest.raises(IsolationError, match="could not remove"):
        import_result(copy, data)
    assert git(repo, "rev-parse", f"refs/heads/{copy.branch}").strip() == branch
    assert (outside / "x.txt").read_text() == "x\n"
    (Path(copy.root) / "sub").unlink()  # put right, the same result imports
    shutil.move(outside, Path(copy.root) / "sub")
    head = import_result(copy, data)
    assert git(repo, "show", f"{head}:b.txt") == "bee from the node\n"
    assert not (Path(copy.root) / "sub" / "x.txt").exists()
    assert save_copy(copy) == head


def test_outside_git_the_snapshot_copy_travels_too(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    (ws / "notes.txt").write_text("plain folder\n")
    copy = isolated(ws)
    assert copy.kind == "snapshot"
    local = on_node(pack_base(copy), tmp_path / "node", copy)
    (Path(local.root) / "notes.txt").write_text("plain folder\nedited elsewhere\n")
    import_result(copy, pack_result(local))
    assert (Path(copy.root) / "notes.txt").read_text().endswith("edited elsewhere\n")
    assert (ws / "notes.txt").read_text() == "plain folder\n"
    assert merge(ws, copy).status == "merged"
    assert (ws / "notes.txt").read_text().endswith("edited elsewhere\n")


def test_the_transfer_ref_names_the_branch(repo: Path) -> None:
    copy = isolated(repo)
    pack_base(copy)
    assert transfer_ref(copy) == f"refs/agentkit/transfer/{copy.branch}"
    assert git(repo, "rev-parse", transfer_ref(copy))
