"""Writing a merge into the workspace (agentkit.isolation.apply) with real git and files:
a save made while the merge writes is never lost, a folder a sub-agent turned into a
file merges, and file names git would quote or that are not UTF-8 are checked right
under the repository's filters.

A user's save "while the merge writes" is made deterministic by running it right after
git wrote the new versions into the scratch folder: the module's git runner is wrapped
(git itself still runs), as the person's editor would save at that moment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import agentkit.isolation.apply as apply_module
from agentkit import isolation as iso


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    out = subprocess.run(
        ["git", "-c", "user.name=User", "-c", "user.email=user@example.com", *args],
        cwd=cwd, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return out.stdout.decode("utf-8", "surrogateescape")


def make_repo(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for name, data in files.items():
        path = Path(os.fsdecode(os.fsencode(root) + b"/" + os.fsencode(name)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


SIX = b"one\ntwo\nthree\nfour\nfive\nsix\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git workspace: ``a.txt`` (six lines), ``b.txt``, ``.gitignore`` of ``*.log``."""
    return make_repo(tmp_path.resolve() / "ws", {"a.txt": SIX, "b.txt": b"bee\n",
                                                  ".gitignore": b"*.log\n"})  # fmt: skip


def after_git_writes(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run ``action`` once, right after git wrote the merge's new versions aside."""
    real = apply_module.repo_run

    def run(repo: object, args: list[str], index: object, **kw: object) -> bytes:
        out = real(repo, args, index, **kw)  # type: ignore[arg-type]
        if args[0] == "checkout-index":
            action()
        return out

    monkeypatch.setattr(apply_module, "repo_run", run)


def test_a_file_saved_while_the_merge_writes_is_kept_and_reported(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "a.txt").write_bytes(SIX.replace(b"one", b"one by the sub-agent"))
    (Path(copy.root) / "b.txt").write_text("bee by the sub-agent\n")
    saved = SIX.replace(b"six", b"six USER")
    after_git_writes(monkeypatch, lambda: (repo / "a.txt").write_bytes(saved))
    report = iso.merge(repo, copy)
    assert report.status == "conflicts"
    assert [(c.path, c.reason) for c in report.conflicts] == [("a.txt", "file_changed")]
    assert (repo / "a.txt").read_bytes() == saved
    assert (repo / "b.txt").read_text() == "bee\n"  # all or nothing: b.txt put back
    assert not any(p.is_file() for p in (repo / ".agentkit" / "isolation").rglob("*")
                   if "merge-" in str(p))  # fmt: skip
    monkeypatch.undo()  # the person saved; the next merge applies on top of their edit
    assert iso.merge(repo, copy).status == "merged"
    assert (repo / "a.txt").read_bytes() == saved.replace(b"one", b"one by the sub-agent")


def test_a_file_made_where_the_merge_adds_one_is_not_overwritten(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "new.txt").write_text("by the sub-agent\n")
    (Path(copy.root) / "b.txt").write_text("bee by the sub-agent\n")
    after_git_writes(monkeypatch, lambda: (repo / "new.txt").write_text("the user's\n"))
    report = iso.merge(repo, copy)
    assert [(c.path, c.reason) for c in report.conflicts] == [("new.txt", "file_changed")]
    assert (repo / "new.txt").read_text() == "the user's\n"
    assert (repo / "b.txt").read_text() == "bee\n"


def test_a_file_deleted_while_the_merge_writes_is_reported(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = iso.create_copy(repo, "conv", 1)
    (Path(copy.root) / "a.txt").write_text("changed by the sub-agent\n")
    (Path(copy.root) / "b.txt").write_text("bee by the sub-agent\n")
    after_git_writes(monkeypatch, lambda: (repo / "a.txt").unlink())
    report = iso.merge(repo, copy)
    assert [(c.path, c.reason) for c in report.conflicts] == [("a.txt", "file_changed")]
    assert not (repo / "a.txt").exists()
    assert (repo / "b.txt").read_text() == "bee\n"


def test_a_folder_the_sub_agent_turned_into_a_file_merges(tmp_path: Path) -> None:
    ws = make_repo(tmp_path.resolve() / "ws", {"d/x.txt": b"x\n", "d/sub/y.txt": b"y\n",
                                                "keep": b"k\n"})  # fmt: skip
    copy = iso.create_copy(ws, "conv", 1)
    shutil.rmtree(Path(copy.root) / "d")
    (Path(copy.root) / "d").write_text("now a file\n")
    report = iso.merge(ws, copy)
    assert (report.status, report.conflicts) == ("merged", ())
    assert (ws / "d").read_text() == "now a file\n"
    assert git(ws, "status", "--porcelain") == " D d/sub/y.txt\n D d/x.txt\n?? d\n"


def test_a_folder_holding_a_file_the_change_keeps_is_not_removed(tmp_path: Path) -> None:
    ws = make_repo(tmp_path.resolve() / "ws", {"d/x.txt": b"x\n", ".gitignore": b"*.log\n"})
    copy = iso.create_copy(ws, "conv", 1)
    shutil.rmtree(Path(copy.root) / "d")
    (Path(copy.root) / "d").write_text("now a file\n")
    (ws / "d" / "build.log").write_text("the user's ignored file\n")  # not in the snapshot
    report = iso.merge(ws, copy)
    assert [(c.path, c.reason) for c in report.conflicts] == [("d", "file_changed")]
    assert (ws / "d" / "build.log").read_text() == "the user's ignored file\n"
    assert (ws / "d" / "x.txt").read_text() == "x\n"


def test_names_git_would_quote_or_not_utf8_are_checked_under_eol_filters(
    tmp_path: Path,
) -> None:
    names = ['"quoted.txt', "new\nline.txt", "plain.txt", os.fsdecode(b"caf\xe9.txt")]
    ws = make_repo(tmp_path.resolve() / "ws",
                   {".gitattributes": b"*.txt text eol=crlf\n",
                    **{n: b"one\ntwo\n" for n in names}})  # fmt: skip
    for name in names:  # as git checks them out here: CRLF on disk, LF in the blobs
        (ws / name).unlink()
    git(ws, "checkout", "--", ".")
    assert (ws / "plain.txt").read_bytes() == b"one\r\ntwo\r\n"
    copy = iso.create_copy(ws, "conv", 1)
    for name in names:
        (Path(copy.root) / name).write_bytes(b"one\r\ntwo changed\r\n")
    report = iso.merge(ws, copy)
    assert (report.status, report.conflicts) == ("merged", ())
    assert sorted(report.files) == sorted(names)
    for name in names:
        assert (ws / name).read_bytes() == b"one\r\ntwo changed\r\n"
