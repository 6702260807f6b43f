"""ToolContext.shared_roots: an isolated sub-agent works in its own copy of the
workspace, and reaches its real deliverables folder through a link at the same
relative path (agentkit.tools.paths). Through that link the file tools read and write
the real folder; the real workspace stays outside, a ``.subagent`` record stays
unwritable, and a link turned elsewhere leads nowhere."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentkit.errors import ToolError
from agentkit.process.sandbox import bwrap_argv
from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.worker.isolated import (
    check_deliverables_link,
    isolated_writes,
    own_copy,
    workspace_of,
)
from agentkit.tools.base import ToolContext
from agentkit.tools.files import (
    EditFileParams,
    ReadFileParams,
    WriteFileParams,
    edit_file,
    read_file,
    write_file,
)
from agentkit.tools.paths import display_path, resolve_path, resolved_subject

DELIVERABLES = "sub_agent_results/agent_1"


@dataclass
class Layout:
    real: Path  # the real workspace
    copy: Path  # the sub-agent's copy, inside the real workspace's .agentkit
    deliverables: Path  # the real deliverables folder
    ctx: ToolContext  # the sub-agent's tools: the copy, with the shared root


@pytest.fixture
def layout(workspace: Path, settings: Settings) -> Layout:
    real = workspace
    (real / "src").mkdir()
    (real / "src/app.py").write_text("real = 1\n")
    deliverables = real / DELIVERABLES
    deliverables.mkdir(parents=True)
    (deliverables / ".subagent").mkdir()
    (deliverables / ".subagent/conversations.json").write_text("{}\n")
    copy = real / ".agentkit/worktrees/conv/agent-1"
    (copy / "src").mkdir(parents=True)
    (copy / "src/app.py").write_text("copy = 1\n")
    (copy / "sub_agent_results").mkdir()
    (copy / DELIVERABLES).symlink_to(deliverables, target_is_directory=True)
    ctx = ToolContext(workspace=copy, settings=settings, shared_roots=(deliverables,))
    return Layout(real, copy, deliverables, ctx)


def test_a_write_through_the_link_lands_in_the_real_folder(layout: Layout) -> None:
    done = write_file(
        WriteFileParams(path=f"{DELIVERABLES}/report.md", content="# R\n"), layout.ctx
    )
    assert done.ok, done.output
    assert (layout.deliverables / "report.md").read_text() == "# R\n"
    assert (layout.copy / DELIVERABLES).is_symlink()  # the link is still a link
    # Shown by the spelling the sub-agent used, not the real absolute path.
    assert done.meta["path"] == f"{DELIVERABLES}/report.md"
    nested = WriteFileParams(path=f"{DELIVERABLES}/data/table.csv", content="a,b\n")
    assert write_file(nested, layout.ctx).ok
    assert (layout.deliverables / "data/table.csv").read_text() == "a,b\n"
    edited = edit_file(
        EditFileParams(path=f"{DELIVERABLES}/report.md", old_string="# R", new_string="# Report"),
        layout.ctx,
    )
    assert edited.ok, edited.output
    assert (layout.deliverables / "report.md").read_text() == "# Report\n"
    shown = read_file(ReadFileParams(path=f"{DELIVERABLES}/report.md"), layout.ctx)
    assert shown.ok and "# Report" in shown.output
    assert shown.output.startswith(f"{DELIVERABLES}/report.md")


def test_without_the_shared_root_the_link_is_an_escape(layout: Layout, settings: Settings) -> None:
    plain = ToolContext(workspace=layout.copy, settings=settings)
    with pytest.raises(ToolError) as caught:
        resolve_path(plain, f"{DELIVERABLES}/report.md", write=True)
    assert caught.value.code == "outside_workspace"


def test_a_path_in_the_shared_root_is_shown_from_the_workspace(layout: Layout) -> None:
    real_file = layout.deliverables / "report.md"
    assert display_path(layout.ctx, real_file) == f"{DELIVERABLES}/report.md"
    assert display_path(layout.ctx, layout.deliverables) == DELIVERABLES
    # The approval rules see the same spelling, whichever way the call named it.
    for spelled in (f"{DELIVERABLES}/report.md", str(real_file)):
        subject = resolved_subject(layout.ctx, "write_file", {"path": spelled})
        assert subject == f"{DELIVERABLES}/report.md"
    # The absolute real path is the same folder: allowed too.
    assert resolve_path(layout.ctx, str(real_file), write=True) == real_file


def test_the_real_workspace_is_refused(layout: Layout) -> None:
    for spelled in (str(layout.real / "src/app.py"), "../../../../src/app.py"):
        for write in (False, True):
            with pytest.raises(ToolError) as caught:
                resolve_path(layout.ctx, spelled, write=write)
            assert caught.value.code == "outside_workspace"
    with pytest.raises(ToolError):
        write_file(WriteFileParams(path=str(layout.real / "src/app.py"), content="x\n"), layout.ctx)
    assert (layout.real / "src/app.py").read_text() == "real = 1\n"
    # The copy's own file of the same name is the one the tools reach.
    assert write_file(WriteFileParams(path="src/app.py", content="copy = 2\n"), layout.ctx).ok
    assert (layout.copy / "src/app.py").read_text() == "copy = 2\n"
    assert (layout.real / "src/app.py").read_text() == "real = 1\n"


def test_the_record_folder_in_the_shared_root_stays_unwritable(layout: Layout) -> None:
    record = layout.deliverables / ".subagent/conversations.json"
    for spelled in (f"{DELIVERABLES}/.subagent/conversations.json", str(record)):
        with pytest.raises(ToolError) as caught:
            resolve_path(layout.ctx, spelled, write=True)
        assert caught.value.code == "outside_workspace" and ".subagent" in caught.value.message
        assert resolve_path(layout.ctx, spelled) == record  # reading stays allowed
    # A link inside the deliverables folder to the record folder: the file it reaches counts.
    (layout.deliverables / "innocent").symlink_to(layout.deliverables / ".subagent")
    with pytest.raises(ToolError):
        resolve_path(layout.ctx, f"{DELIVERABLES}/innocent/conversations.json", write=True)
    assert record.read_text() == "{}\n"


def test_a_link_turned_elsewhere_is_refused(layout: Layout) -> None:
    link = layout.copy / DELIVERABLES
    link.unlink()
    link.symlink_to(layout.real / "src", target_is_directory=True)  # a command swapped it
    for write in (False, True):
        with pytest.raises(ToolError) as caught:
            resolve_path(layout.ctx, f"{DELIVERABLES}/app.py", write=write)
        assert caught.value.code == "outside_workspace"
    with pytest.raises(ToolError):
        write_file(WriteFileParams(path=f"{DELIVERABLES}/app.py", content="x\n"), layout.ctx)
    assert (layout.real / "src/app.py").read_text() == "real = 1\n"
    # A link inside the shared root that leads out of it is refused the same way.
    link.unlink()
    link.symlink_to(layout.deliverables, target_is_directory=True)
    (layout.deliverables / "out").symlink_to(layout.real / "src", target_is_directory=True)
    with pytest.raises(ToolError):
        resolve_path(layout.ctx, f"{DELIVERABLES}/out/app.py", write=True)
    # Shown absolute once no spelling from the workspace reaches the shared root.
    link.unlink()
    assert display_path(layout.ctx, layout.deliverables / "r.md") == str(
        layout.deliverables / "r.md"
    )


def _spec(layout: Layout, extra: dict[str, object]) -> WorkerSpec:
    return WorkerSpec(1, "s", "t", 60, DELIVERABLES, str(layout.deliverables), str(layout.real),
                      "c", {}, "m", "now", extra)  # fmt: skip


def _copy_dict(layout: Layout) -> dict[str, object]:
    return {"kind": "worktree", "root": str(layout.copy), "worktree": str(layout.copy),
            "git_dir": str(layout.real / ".git"), "prefix": "", "branch": "agentkit/c/agent-1",
            "base": "0" * 40, "base_ref": "refs/agentkit/bases/c/agent-1",
            "exclude": [DELIVERABLES]}  # fmt: skip


def test_the_worker_reads_its_copy_from_the_spec(layout: Layout) -> None:
    from agentkit.isolation.types import IsolationError

    assert own_copy(_spec(layout, {})) is None
    assert workspace_of(_spec(layout, {})) == layout.real
    spec = _spec(layout, {"isolation": _copy_dict(layout)})
    copy = own_copy(spec)
    assert copy is not None and workspace_of(spec) == layout.copy
    check_deliverables_link(spec, copy)
    (layout.copy / DELIVERABLES).unlink()
    with pytest.raises(IsolationError, match="does not lead to its deliverables folder"):
        check_deliverables_link(spec, copy)
    with pytest.raises(IsolationError):
        own_copy(_spec(layout, {"isolation": {"kind": "worktree"}}))
    gone = {**_copy_dict(layout), "root": str(layout.real / "gone")}
    with pytest.raises(IsolationError, match="missing"):
        own_copy(_spec(layout, {"isolation": gone}))


def test_an_isolated_sandbox_hides_the_real_workspace_and_binds_the_copy(layout: Layout) -> None:
    spec = _spec(layout, {"isolation": _copy_dict(layout)})
    copy = own_copy(spec)
    assert copy is not None
    claim, scope = isolated_writes(spec, copy)
    claim(layout.real / "src/app.py")  # asks nobody, refuses nothing
    argv = bwrap_argv("/usr/bin/bwrap", workspace=layout.copy, cwd=layout.copy,
                      mode="workspace-write", network="none", scope=scope)  # fmt: skip
    pairs = list(zip(argv, argv[1:], strict=False))
    at = {pair: i for i, pair in enumerate(pairs)}
    real, copy_root, deliverables = str(layout.real), str(layout.copy), str(layout.deliverables)
    hidden = at[("--tmpfs", real)]
    assert hidden < at[("--ro-bind-try", str(layout.real / ".git"))]
    assert hidden < at[("--bind-try", copy_root)] and hidden < at[("--bind-try", deliverables)]
    assert at[("--bind-try", deliverables)] < at[("--ro-bind-try", f"{deliverables}/.subagent")]
    assert at[("--remount-ro", real)] > at[("--ro-bind-try", f"{deliverables}/.subagent")]
    # The real workspace is never bound writable (only its copy and deliverables folder).
    assert not any(flag in ("--bind", "--bind-try") and path == real for flag, path in pairs)
    # Without isolation the argv is what it was: no tmpfs on the workspace.
    plain = bwrap_argv("/usr/bin/bwrap", workspace=layout.real, cwd=layout.real,
                       mode="workspace-write", network="none")  # fmt: skip
    assert ("--tmpfs", real) not in list(zip(plain, plain[1:], strict=False))
    assert os.path.realpath(layout.real) == real
