"""File tools and hard links to files outside the workspace; agentkit's own .agentkit folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from link_helpers import (
    SECRET,
    linked_fixture,  # noqa: F401  (the linked fixture)
    make_ctx,
)

from agentkit.errors import ToolError
from agentkit.tools.files import (
    EditFileParams,
    ReadFileParams,
    WriteFileParams,
    edit_file,
    read_file,
    write_file,
)


def _error(fn, *args) -> ToolError:  # type: ignore[no-untyped-def]
    with pytest.raises(ToolError) as info:
        fn(*args)
    return info.value


def test_read_edit_write_refuse_a_hard_link(linked: Path, workspace: Path) -> None:
    ctx = make_ctx(workspace)
    calls = [
        (read_file, ReadFileParams(path="notes.txt")),
        (edit_file, EditFileParams(path="notes.txt", old_string="root", new_string="toor")),
        (write_file, WriteFileParams(path="notes.txt", content="x\n")),
    ]
    for fn, params in calls:
        err = _error(fn, params, ctx)
        assert err.code == "outside_workspace", fn
        assert "2 hard links" in err.message and "allow_hard_links" in err.message
        assert "topsecret" not in err.message
    assert linked.read_text() == SECRET and (workspace / "notes.txt").read_text() == SECRET


def test_allow_hard_links_setting_opens_them(linked: Path, workspace: Path) -> None:
    ctx = make_ctx(workspace, allow_hard_links=True)
    assert "topsecrethash" in read_file(ReadFileParams(path="notes.txt"), ctx).output


def test_files_written_by_the_tools_stay_editable(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    write_file(WriteFileParams(path="a.py", content="x = 1\ny = 2\n"), ctx)
    edit_file(EditFileParams(path="a.py", old_string="x = 1", new_string="x = 10"), ctx)
    edit_file(EditFileParams(path="a.py", old_string="y = 2", new_string="y = 20"), ctx)
    write_file(WriteFileParams(path="a.py", content="x = 10\ny = 20\nz = 3\n"), ctx)
    assert "z = 3" in read_file(ReadFileParams(path="a.py"), ctx).output
    assert os.stat(workspace / "a.py").st_nlink == 1


@pytest.mark.parametrize(
    "path",
    [
        ".agentkit/conversations/forged.json",
        ".agentkit/outputs/cmd-1.log",
        "src/../.agentkit/x.txt",
        ".AgentKit/x.txt",
    ],
)
def test_state_folder_is_not_writable(workspace: Path, path: str) -> None:
    ctx = make_ctx(workspace)
    log = workspace / ".agentkit" / "outputs" / "cmd-1.log"
    log.parent.mkdir(parents=True)
    log.write_text("spilled output\n")
    (workspace / "src").mkdir()
    err = _error(write_file, WriteFileParams(path=path, content="{}"), ctx)
    assert err.code == "outside_workspace" and "state folder" in err.message
    err = _error(edit_file, EditFileParams(path=path, old_string="spilled", new_string="x"), ctx)
    assert err.code == "outside_workspace"
    assert log.read_text() == "spilled output\n"
    assert not (workspace / ".agentkit" / "conversations").exists()
    # Reads stay allowed: run_command's trailer points the model at these logs.
    assert (
        "spilled output"
        in read_file(ReadFileParams(path=".agentkit/outputs/cmd-1.log"), ctx).output
    )


def test_a_nested_agentkit_folder_is_ordinary(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    write_file(WriteFileParams(path="docs/.agentkit/notes.md", content="ok\n"), ctx)
    assert (workspace / "docs" / ".agentkit" / "notes.md").read_text() == "ok\n"
