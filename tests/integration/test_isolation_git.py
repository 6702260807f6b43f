"""The isolation engine against real git and real files (agentkit.isolation).

Each test builds a workspace (a git repository, a folder inside one, or a plain folder),
makes sub-agents' copies, edits their files as a sub-agent would, and checks what the
engine reports and what ends up in the workspace, the user's index, HEAD and branch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from git_helpers import git, make_repo

from agentkit import isolation as iso
from agentkit.isolation.apply import stale_paths
from agentkit.isolation.snapshot import locate


def user_state(repo: Path) -> dict[str, str]:
    """What the user sees of their repository: HEAD, branch, staged and unstaged diffs,
    untracked files."""
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "staged": git(repo, "diff", "--cached"),
        "unstaged": git(repo, "diff"),
        "untracked": git(repo, "ls-files", "--others", "--exclude-standard"),
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git workspace: committed ``f.txt`` (three lines), ``.gitignore`` of ``*.log``."""
    return make_repo(
        tmp_path.resolve() / "ws", {"f.txt": "one\ntwo\nthree\n", ".gitignore": "*.log\n"}
    )


def test_uncommitted_changes_are_in_the_copy_and_ignored_files_are_not(repo: Path) -> None:
    (repo / "f.txt").write_text("one\ntwo\nthree\nstaged\n")
    git(repo, "add", "f.txt")
    (repo / "f.txt").write_text("one\ntwo\nthree\nstaged\nunstaged\n")
    (repo / "new.txt").write_text("untracked\n")
    (repo / "build.log").write_text("ignored\n")
    before = user_state(repo)
    copy = iso.create_copy(repo, "conv-1", 1)
    root = Path(copy.root)
    assert (root / "f.txt").read_text() == "one\ntwo\nthree\nstaged\nunstaged\n"
    assert (root / "new.txt").read_text() == "untracked\n"
    assert not (root / "build.log").exists()
    assert copy.kind == "worktree" and copy.branch == "agentkit/conv-1/agent-1"
    assert git(repo, "rev-parse", copy.base_ref).strip() == copy.base
    assert git(repo, "rev-parse", f"{copy.base}^").strip() == before["head"].strip()
    assert user_state(repo) == before
    assert iso.changes(copy).files == ()


def test_two_copies_editing_one_line_first_merges_second_reports_conflict(repo: Path) -> None:
    first = iso.create_copy(repo, "conv", 1)
    second = iso.create_copy(repo, "conv", 2)
    (Path(first.root) / "f.txt").write_text("one\nTWO by first\nthree\n")
    (Path(second.root) / "f.txt").write_text("one\nTWO by second\nthree\n")
    (Path(second.root) / "other.txt").write_text("would be new\n")

    merged = iso.merge(repo, first)
    assert merged.status == "merged" and merged.files == ("f.txt",)
    assert (repo / "f.txt").read_text() == "one\nTWO by first\nthree\n"

    report = iso.merge(repo, second)
    assert report.status == "conflicts" and report.files == ()
    assert [c.path for c in report.conflicts] == ["f.txt"]
    conflict = report.conflicts[0]
    assert conflict.reason == "both_modified"
    assert "+TWO by first" in conflict.workspace_change and "-two" in conflict.workspace_change
    assert "+TWO by second" in conflict.sub_agent_change
    assert report.base_moved is True
    assert (repo / "f.txt").read_text() == "one\nTWO by first\nthree\n"
    assert not (repo / "other.txt").exists()
    assert "<<<<<<<" not in (repo / "f.txt").read_text()


def test_command_output_file_and_deletion_are_merged(repo: Path) -> None:
    (repo / "old.txt").write_text("to delete\n")
    git(repo, "add", "old.txt")
    git(repo, "commit", "-q", "-m", "old")
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    subprocess.run(["sh", "-c", "mkdir out && echo built > out/result.txt"], cwd=root, check=True)
    (root / "old.txt").unlink()
    found = {c.path: c.status for c in iso.changes(copy).files}
    assert found == {"out/result.txt": "added", "old.txt": "deleted"}
    report = iso.merge(repo, copy)
    assert report.status == "merged"
    assert set(report.files) == {"out/result.txt", "old.txt"}
    assert (repo / "out" / "result.txt").read_text() == "built\n"
    assert not (repo / "old.txt").exists()
    # The user's HEAD still has old.txt: the merge changed files, committed nothing.
    assert git(repo, "status", "--short").splitlines() == [" D old.txt", "?? out/"]


def test_mode_change_is_merged(repo: Path) -> None:
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(repo / "run.sh", 0o644)
    copy = iso.create_copy(repo, "conv", 1)
    os.chmod(Path(copy.root) / "run.sh", 0o755)
    assert [(c.path, c.status) for c in iso.changes(copy).files] == [("run.sh", "modified")]
    report = iso.merge(repo, copy)
    assert report.status == "merged" and report.files == ("run.sh",)
    assert os.stat(repo / "run.sh").st_mode & 0o111
    assert (repo / "run.sh").read_text() == "#!/bin/sh\necho hi\n"


def test_dry_run_writes_nothing_and_reports_the_same(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("one\nchanged\nthree\n")
    (Path(copy.root) / "added.txt").write_text("new\n")
    dry = iso.merge(repo, copy, dry_run=True)
    assert dry.dry_run is True and dry.status == "merged"
    assert (repo / "f.txt").read_text() == "one\ntwo\nthree\n"
    assert not (repo / "added.txt").exists()
    real = iso.merge(repo, copy)
    assert (real.status, real.files, real.changes) == (dry.status, dry.files, dry.changes)
    assert (repo / "f.txt").read_text() == "one\nchanged\nthree\n"


def test_dry_run_of_a_conflict_reports_it_and_writes_nothing(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("one\nmine\nthree\n")
    (repo / "f.txt").write_text("one\nyours\nthree\n")
    report = iso.merge(repo, copy, dry_run=True)
    assert report.status == "conflicts" and report.dry_run
    assert (repo / "f.txt").read_text() == "one\nyours\nthree\n"


def test_discard_removes_worktree_branch_and_base_and_leaves_the_workspace(repo: Path) -> None:
    (repo / "mine.txt").write_text("the user's\n")
    results = repo / "sub_agent_results" / "agent_1"
    copy = iso.create_copy(repo, "conv", 1, exclude=["sub_agent_results/agent_1"])
    iso.link_deliverables(copy, "sub_agent_results/agent_1", results)
    (Path(copy.root) / "sub_agent_results" / "agent_1" / "report.md").write_text("done\n")
    (Path(copy.root) / "f.txt").write_text("edited in the copy\n")
    assert iso.changes(copy).files[0].path == "f.txt"  # the deliverables are not a change
    listing = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")
                     if ".git" not in p.parts and ".agentkit" not in p.parts)  # fmt: skip
    iso.discard(copy)
    assert not Path(copy.worktree).exists()
    assert git(repo, "branch", "--list", "agentkit/*") == ""
    assert git(repo, "for-each-ref", "refs/agentkit") == ""
    assert "agent-1" not in git(repo, "worktree", "list")
    assert iso.copy_exists(copy) is False
    after = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")
                   if ".git" not in p.parts and ".agentkit" not in p.parts)  # fmt: skip
    assert after == listing
    assert (results / "report.md").read_text() == "done\n"
    assert (repo / "f.txt").read_text() == "one\ntwo\nthree\n"
    iso.discard(copy)  # idempotent


def test_user_head_branch_index_and_edits_are_intact_after_create_and_merge(repo: Path) -> None:
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "f.txt").write_text("one\ntwo\nthree\nuser's unstaged line\n")
    before = user_state(repo)
    copy = iso.create_copy(repo, "conv", 1)
    assert user_state(repo) == before
    (Path(copy.root) / "sub.txt").write_text("by the sub-agent\n")
    assert iso.merge(repo, copy).status == "merged"
    after = user_state(repo)
    assert {k: after[k] for k in ("head", "branch", "staged", "unstaged")} == {
        k: before[k] for k in ("head", "branch", "staged", "unstaged")
    }
    assert after["untracked"] == "sub.txt\n"


def test_base_moved_and_a_non_overlapping_user_edit_survives(repo: Path) -> None:
    (repo / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text(
        "".join(("SUB 2\n" if n == 2 else f"line {n}\n") for n in range(1, 21))
    )
    (repo / "f.txt").write_text(
        "".join(("USER 19\n" if n == 19 else f"line {n}\n") for n in range(1, 21))
    )
    report = iso.merge(repo, copy)
    assert report.status == "merged" and report.base_moved is True
    text = (repo / "f.txt").read_text()
    assert "SUB 2\n" in text and "USER 19\n" in text and "line 2\n" not in text


def test_base_moved_is_false_when_the_workspace_did_not_change(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("x\n")
    assert iso.merge(repo, copy).base_moved is False


def test_plain_folder_end_to_end(tmp_path: Path) -> None:
    ws = tmp_path.resolve() / "plain"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("print('a')\n")
    (ws / "gone.txt").write_text("x\n")
    (ws / "many").mkdir()
    for n in range(30):
        (ws / "many" / f"{n}.txt").write_text(f"{n}\n")
    assert iso.workspace_repo(ws) is None
    copy = iso.create_copy(ws, "plain conversation", 4)
    assert copy.kind == "snapshot"
    assert Path(copy.git_dir) == ws / ".agentkit" / "isolation" / "snapshots.git"
    # The first snapshot stores the files in one pack, not one loose object each (the
    # loose ones are its 3 trees and the commit).
    assert list((Path(copy.git_dir) / "objects" / "pack").glob("*.pack"))
    assert len(list((Path(copy.git_dir) / "objects").glob("??/*"))) == 4
    root = Path(copy.root)
    (root / "src" / "a.py").write_text("print('A')\n")
    (root / "gone.txt").unlink()
    (root / "src" / "b.py").write_text("print('b')\n")
    assert iso.diff(copy).count("diff --git") == 3
    report = iso.merge(ws, copy)
    assert report.status == "merged"
    assert (ws / "src" / "a.py").read_text() == "print('A')\n"
    assert (ws / "src" / "b.py").read_text() == "print('b')\n"
    assert not (ws / "gone.txt").exists()
    iso.discard(copy)
    assert not root.exists() and iso.copy_exists(copy) is False
    assert (ws / "src" / "b.py").exists()


def test_workspace_in_a_repository_subfolder(tmp_path: Path) -> None:
    top = make_repo(tmp_path.resolve() / "mono",
                    {"README": "top\n", "pkg/app/main.py": "x = 1\n"})  # fmt: skip
    ws = top / "pkg" / "app"
    (top / "README").write_text("user edit outside the workspace\n")
    copy = iso.create_copy(ws, "conv", 1)
    assert copy.prefix == "pkg/app/"
    assert Path(copy.root) == Path(copy.worktree) / "pkg" / "app"
    (Path(copy.root) / "main.py").write_text("x = 2\n")
    (Path(copy.root) / "extra.py").write_text("y = 1\n")
    changed = iso.changes(copy)
    assert [f.path for f in changed.files] == ["extra.py", "main.py"]
    assert "a/main.py" in iso.diff(copy)
    report = iso.merge(ws, copy)
    assert report.status == "merged" and set(report.files) == {"main.py", "extra.py"}
    assert (ws / "main.py").read_text() == "x = 2\n"
    assert (top / "README").read_text() == "user edit outside the workspace\n"
    assert not (top / "extra.py").exists()


def test_files_left_unsaved_by_a_killed_sub_agent_are_merged(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    script = (
        "import os, pathlib, signal\n"
        "pathlib.Path('f.txt').write_text('one\\nkilled mid-work\\nthree\\n')\n"
        "pathlib.Path('half.txt').write_text('written before the kill\\n')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=copy.root, check=False)
    assert done.returncode == -signal.SIGKILL
    assert iso.copy_exists(copy)
    report = iso.merge(repo, copy)
    assert report.status == "merged" and set(report.files) == {"f.txt", "half.txt"}
    assert (repo / "half.txt").read_text() == "written before the kill\n"


def test_a_repository_without_commits(tmp_path: Path) -> None:
    ws = tmp_path.resolve() / "fresh"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("a\n")
    copy = iso.create_copy(ws, "conv", 1)
    assert git(ws, "rev-list", "--parents", "-n", "1", copy.base).split() == [copy.base]
    assert (Path(copy.root) / "a.txt").read_text() == "a\n"
    (Path(copy.root) / "b.txt").write_text("b\n")
    assert iso.merge(ws, copy).files == ("b.txt",)
    assert (ws / "b.txt").read_text() == "b\n"
    assert git(ws, "status", "--short") == "?? a.txt\n?? b.txt\n"


def test_symlinks_binary_files_and_odd_names_are_merged(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    blob = bytes(range(256)) * 4
    (root / "data.bin").write_bytes(blob)
    (root / "with space ü.txt").write_text("unicode\n")
    os.symlink("f.txt", root / "link")
    found = {c.path: c for c in iso.changes(copy).files}
    assert found["data.bin"].binary is True
    assert set(found) == {"data.bin", "with space ü.txt", "link"}
    assert iso.merge(repo, copy).status == "merged"
    assert (repo / "data.bin").read_bytes() == blob
    assert (repo / "with space ü.txt").read_text() == "unicode\n"
    assert os.readlink(repo / "link") == "f.txt"


def test_links_are_marked_and_links_leading_out_are_refused_by_the_merge(repo: Path) -> None:
    """A sub-agent's symbolic links show their target in its changes; a merge refuses
    (``unsafe_link``, nothing written) a link that is absolute or climbs out of the
    workspace, and writes links that stay inside as before (trial of issue 34:
    ``pw -> /etc/passwd`` reached the person's folder)."""
    (repo / "docs").mkdir()
    copy = iso.create_copy(repo, "conv", 1)
    root = Path(copy.root)
    (root / "docs").mkdir(exist_ok=True)
    os.symlink("/etc/passwd", root / "pw")
    os.symlink("../../outside", root / "docs" / "up")
    (root / "f.txt").write_text("one\ntwo\nthree\nfour\n")
    found = {c.path: c for c in iso.changes(copy).files}
    assert found["pw"].link_target == "/etc/passwd" and found["pw"].status == "added"
    assert found["docs/up"].link_target == "../../outside"
    assert found["f.txt"].link_target is None and "link_target" not in found["f.txt"].to_dict()
    assert found["pw"].to_dict()["link_target"] == "/etc/passwd"
    before = user_state(repo)
    for dry_run in (True, False):
        report = iso.merge(repo, copy, dry_run=dry_run)
        assert report.status == "conflicts", report
        unsafe = {c.path: c for c in report.conflicts}
        assert set(unsafe) == {"pw", "docs/up"}
        assert {c.reason for c in unsafe.values()} == {"unsafe_link"}
        assert "/etc/passwd" in unsafe["pw"].detail and "outside" in unsafe["pw"].detail
        assert not os.path.lexists(repo / "pw") and not os.path.lexists(repo / "docs" / "up")
        assert (repo / "f.txt").read_text() == "one\ntwo\nthree\n"  # nothing written
        assert user_state(repo) == before
    # The sub-agent points them inside instead: they merge as links, with the file.
    (root / "pw").unlink()
    (root / "docs" / "up").unlink()
    os.symlink("docs/../f.txt", root / "pw")
    os.symlink("../f.txt", root / "docs" / "up")
    report = iso.merge(repo, copy)
    assert report.status == "merged" and set(report.files) == {"pw", "docs/up", "f.txt"}
    assert os.readlink(repo / "pw") == "docs/../f.txt"
    assert os.readlink(repo / "docs" / "up") == "../f.txt"
    assert (repo / "f.txt").read_text() == "one\ntwo\nthree\nfour\n"


def test_a_link_climbing_out_of_a_repository_subfolder_workspace_is_refused(
    tmp_path: Path,
) -> None:
    top = make_repo(tmp_path.resolve() / "mono", {"README": "top\n", "pkg/app/main.py": "x\n"})
    ws = top / "pkg" / "app"
    copy = iso.create_copy(ws, "conv", 1)
    os.symlink("../../README", Path(copy.root) / "readme")  # inside the repository, not ws
    report = iso.merge(ws, copy)
    assert report.status == "conflicts"
    assert [(c.path, c.reason) for c in report.conflicts] == [("readme", "unsafe_link")]
    assert not os.path.lexists(ws / "readme")


def test_a_file_changed_after_the_snapshot_is_reported_stale(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("sub\n")
    (Path(copy.root) / "new.txt").write_text("sub\n")
    from agentkit.isolation.changes import raw_changes

    head = iso.save_copy(copy)
    moves = raw_changes(Path(copy.git_dir), "", (), copy.base, head)
    r = locate(repo)
    assert stale_paths(r, repo, moves) == []
    (repo / "f.txt").write_text("user typed meanwhile\n")
    (repo / "new.txt").write_text("an ignored or new file in the way\n")
    assert sorted(stale_paths(r, repo, moves)) == ["f.txt", "new.txt"]


def test_the_private_repository_is_never_seen_half_made(tmp_path: Path) -> None:
    """Outside git, four threads locate the workspace at once, twenty times over: each
    gets a repository git can read. ``git init`` writes HEAD before the rest, and a
    check of HEAD without the lock once let a thread in before config and objects."""
    for round_ in range(20):
        ws = tmp_path.resolve() / f"plain{round_}"
        ws.mkdir()
        (ws / "a.txt").write_text("x\n")
        start = threading.Barrier(4)
        failures: list[str] = []

        def use(ws: Path, start: threading.Barrier, failures: list[str]) -> None:
            start.wait()
            repo = locate(ws)
            done = subprocess.run(
                ["git", "--git-dir", str(repo.git_dir), "rev-parse", "--git-dir"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                failures.append(done.stderr)

        threads = [threading.Thread(target=use, args=(ws, start, failures)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == [], f"round {round_}: {failures}"
        assert [
            p.name for p in (ws / ".agentkit" / "isolation").iterdir() if "making" in p.name
        ] == []


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_four_copies_made_at_once(kind: str, tmp_path: Path) -> None:
    files = {f"d{n % 10}/file{n}.txt": f"{n}\n" for n in range(300)}
    if kind == "git":
        ws = make_repo(tmp_path.resolve() / "ws", files)
    else:
        ws = tmp_path.resolve() / "plain"
        for name, text in files.items():
            (ws / name).parent.mkdir(parents=True, exist_ok=True)
            (ws / name).write_text(text)
    (ws / "dirty.txt").write_text("uncommitted\n")
    copies: dict[int, iso.Copy] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def make(agent: int) -> None:
        start.wait()
        try:
            copies[agent] = iso.create_copy(ws, "conv", agent)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(n,)) for n in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(c.branch for c in copies.values()) == [
        f"agentkit/conv/agent-{n}" for n in range(1, 5)
    ]
    for n, copy in copies.items():
        assert (Path(copy.root) / "d9" / "file299.txt").read_text() == "299\n"
        assert (Path(copy.root) / "dirty.txt").read_text() == "uncommitted\n"
        (Path(copy.root) / f"by{n}.txt").write_text(f"{n}\n")
    for copy in copies.values():
        assert iso.merge(ws, copy).status == "merged"
    assert sorted(p.name for p in ws.glob("by*.txt")) == [f"by{n}.txt" for n in range(1, 5)]


def test_conversation_ids_are_made_safe_for_ref_names(repo: Path) -> None:
    copy = iso.create_copy(repo, "../we ird:id~^?*[lock].lock", 7)
    git(repo, "check-ref-format", f"refs/heads/{copy.branch}")
    assert ".." not in copy.branch and Path(copy.worktree).is_relative_to(repo / ".agentkit")
    other = iso.create_copy(repo, "../we ird:id~^?*[lock].lock!", 7)
    assert other.branch != copy.branch


def test_a_second_copy_for_the_same_agent_is_refused(repo: Path) -> None:
    iso.create_copy(repo, "conv", 1)
    with pytest.raises(iso.IsolationError, match="exists already"):
        iso.create_copy(repo, "conv", 1)


def test_save_keeps_work_when_the_worktree_folder_is_gone(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("saved\n")
    saved = iso.save_copy(copy)
    assert iso.save_copy(copy) == saved  # nothing new: no empty commit
    subprocess.run(["rm", "-rf", copy.worktree], check=True)
    assert iso.copy_exists(copy)
    assert iso.save_copy(copy) == saved
    assert iso.merge(repo, copy).files == ("f.txt",)
    assert (repo / "f.txt").read_text() == "saved\n"


def test_discard_refuses_a_record_pointing_at_the_workspace(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    damaged = iso.Copy.from_dict({**copy.to_dict(), "worktree": str(repo), "root": str(repo)})
    with pytest.raises(iso.IsolationError, match="refusing"):
        iso.discard(damaged)
    assert (repo / "f.txt").exists()


def test_merging_into_another_workspace_is_refused(repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path.resolve() / "other", {"f.txt": "x\n"})
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("y\n")
    with pytest.raises(iso.IsolationError, match="another workspace"):
        iso.merge(other, copy)
    assert (other / "f.txt").read_text() == "x\n"


def test_nothing_to_merge(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    assert iso.merge(repo, copy).status == "nothing_to_merge"


def test_an_ignored_file_where_the_sub_agent_adds_one_is_a_conflict(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "notes.log.txt").write_text("sub\n")
    (Path(copy.root) / "f.txt").write_text("sub\n")
    (repo / "notes.log.txt").write_text("the user's, untracked, made after the copy\n")
    (repo / ".gitignore").write_text("*.log\nnotes.log.txt\n")
    report = iso.merge(repo, copy)
    assert report.status == "conflicts"
    assert [(c.path, c.reason) for c in report.conflicts] == [("notes.log.txt", "file_changed")]
    assert (repo / "notes.log.txt").read_text() == "the user's, untracked, made after the copy\n"
    assert (repo / "f.txt").read_text() == "one\ntwo\nthree\n"


def test_a_symlinked_folder_on_the_way_is_never_written_through(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "out").mkdir()
    (Path(copy.root) / "out" / "x.txt").write_text("sub\n")
    (repo / ".gitignore").write_text("*.log\nout\n")
    os.symlink(outside, repo / "out")
    report = iso.merge(repo, copy)
    assert report.status == "conflicts" and report.conflicts[0].reason == "file_changed"
    assert list(outside.iterdir()) == []


def test_merge_keeps_the_workspace_before_it_until_discard(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("merged\n")
    assert iso.merge(repo, copy).status == "merged"
    before = git(repo, "rev-parse", "refs/agentkit/before-merge/conv/agent-1").strip()
    assert git(repo, "show", f"{before}:f.txt") == "one\ntwo\nthree\n"
    assert iso.copy_exists(copy)  # merged is not discarded: a person may still look
    again = iso.merge(repo, copy)
    assert again.status == "merged" and again.files == ()
    iso.discard(copy)
    assert git(repo, "for-each-ref", "refs/agentkit") == ""
    assert (repo / "f.txt").read_text() == "merged\n"


def test_a_workspace_that_is_itself_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path.resolve() / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    (linked / "f.txt").write_text("one\ntwo\nthree\nfeature's own edit\n")
    copy = iso.create_copy(linked, "conv", 1)
    assert (Path(copy.root) / "f.txt").read_text().endswith("feature's own edit\n")
    (Path(copy.root) / "g.txt").write_text("sub\n")
    assert iso.merge(linked, copy).files == ("g.txt",)
    assert (linked / "g.txt").exists() and not (repo / "g.txt").exists()
    assert git(linked, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"


def test_a_removed_worktree_comes_back_from_its_branch(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1, exclude=["results"])
    (Path(copy.root) / "f.txt").write_text("saved work\n")
    iso.save_copy(copy)
    subprocess.run(["rm", "-rf", copy.worktree], check=True)
    iso.link_deliverables(copy, "results", repo / "results")
    assert (Path(copy.root) / "f.txt").read_text() == "saved work\n"
    assert (Path(copy.root) / "results").resolve() == (repo / "results").resolve()
    assert iso.changes(copy).summary() == {"files": 1, "insertions": 1, "deletions": 3}


def test_a_nested_repository_without_a_commit_is_left_out(tmp_path: Path) -> None:
    ws = tmp_path.resolve() / "projects"
    (ws / "fresh").mkdir(parents=True)
    git(ws / "fresh", "init", "-q")
    (ws / "fresh" / "draft.txt").write_text("not committed\n")
    (ws / "notes.txt").write_text("top\n")
    copy = iso.create_copy(ws, "conv", 1)
    assert (Path(copy.root) / "notes.txt").read_text() == "top\n"
    assert not (Path(copy.root) / "fresh" / "draft.txt").exists()
    (Path(copy.root) / "notes.txt").write_text("top, edited\n")
    assert iso.merge(ws, copy).files == ("notes.txt",)
    assert (ws / "fresh" / "draft.txt").read_text() == "not committed\n"


def test_conflict_reasons_for_a_deletion_and_two_additions(repo: Path) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "f.txt").write_text("one\nedited by the sub-agent\nthree\n")
    (Path(copy.root) / "both.txt").write_text("the sub-agent's\n")
    (repo / "f.txt").unlink()
    (repo / "both.txt").write_text("the user's\n")
    report = iso.merge(repo, copy)
    assert report.status == "conflicts"
    found = {c.path: c for c in report.conflicts}
    assert found["f.txt"].reason == "modify_delete"
    assert "deleted in the workspace" in found["f.txt"].detail
    assert "modified in the sub-agent" in found["f.txt"].detail
    assert "deleted file mode" in found["f.txt"].workspace_change
    assert found["both.txt"].reason == "both_added"
    assert "+the user's" in found["both.txt"].workspace_change
    assert "+the sub-agent's" in found["both.txt"].sub_agent_change
    assert not (repo / "f.txt").exists() and (repo / "both.txt").read_text() == "the user's\n"
