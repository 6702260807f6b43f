"""agentkit's own writes never leave the workspace through a link a command planted.

A sandboxed command may write only inside the workspace, but it can replace a folder
there by a symbolic link to anywhere. Here the confined primitives (agentkit.confined,
the file tools' atomic write) refuse such a link in process; the same through real
processes is tests/integration/test_confined_writes_servers.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confined_helpers import (
    outside_fixture,  # noqa: F401  (the outside fixture)
    tree,
)

from agentkit.confined import list_files, open_folder, write_text_atomic
from agentkit.tools.files._fileio import atomic_write


@pytest.mark.parametrize("where", ["top", "middle", "last"])
def test_confined_write_refuses_a_link_at_any_level(
    workspace: Path, outside: Path, where: str
) -> None:
    levels = {"top": "a", "middle": "a/b", "last": "a/b/c"}
    real = workspace / "real"
    (real / "b" / "c").mkdir(parents=True)
    link = workspace / levels[where]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    target = workspace / "a" / "b" / "c" / "file.json"
    with pytest.raises(OSError, match="symbolic link"):
        write_text_atomic(workspace, target, "{}")
    with pytest.raises(OSError, match="symbolic link"):
        atomic_write(target, b"x", None, workspace)
    assert tree(outside) == ["secret.txt"]


def test_confined_write_replaces_a_link_at_the_file_itself(workspace: Path, outside: Path) -> None:
    (workspace / "f.json").symlink_to(outside / "secret.txt")
    write_text_atomic(workspace, workspace / "f.json", "{}")
    assert not (workspace / "f.json").is_symlink()
    assert (outside / "secret.txt").read_text() == "not the model's\n"


def test_confined_paths_refuse_dot_dot_and_paths_outside(workspace: Path, outside: Path) -> None:
    with pytest.raises(OSError):
        open_folder(workspace, workspace / ".." / "outside")
    with pytest.raises(OSError):
        open_folder(workspace, outside)


def test_listing_does_not_follow_links(workspace: Path, outside: Path) -> None:
    folder = workspace / "d"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a")
    (folder / "out").symlink_to(outside)
    (folder / ".subagent").mkdir()
    assert list_files(workspace, folder, skip=".subagent") == ["out", "sub/a.txt"]
    os.rename(folder, workspace / "d2")
    (workspace / "d").symlink_to(outside)
    with pytest.raises(OSError):
        list_files(workspace, folder)
