"""The workspace path guard (agentkit/tools/paths.py): real folders and symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.paths import display_path, resolve_path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace (not inside it) holding one file."""
    folder = (tmp_path / "outside").resolve()
    folder.mkdir()
    (folder / "secret.txt").write_text("secret\n")
    return folder


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(ToolError) as info:
        fn(*args, **kwargs)
    return info.value.code


def test_relative_and_absolute_paths_inside(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("x\n")
    assert resolve_path(ctx, "src/a.py") == workspace / "src" / "a.py"
    assert resolve_path(ctx, str(workspace / "src" / "a.py")) == workspace / "src" / "a.py"
    assert resolve_path(ctx, "src/../src/./a.py") == workspace / "src" / "a.py"
    assert resolve_path(ctx, ".") == workspace


def test_missing_components_are_allowed_for_new_files(ctx: ToolContext, workspace: Path) -> None:
    assert (
        resolve_path(ctx, "new/deep/file.txt", write=True)
        == workspace / "new" / "deep" / "file.txt"
    )
    assert resolve_path(ctx, "new/x/../file.txt", write=True) == workspace / "new" / "file.txt"


def test_dotdot_leaving_the_workspace_is_refused(ctx: ToolContext, workspace: Path) -> None:
    with pytest.raises(ToolError) as info:
        resolve_path(ctx, "../outside/secret.txt")
    assert info.value.code == "outside_workspace"
    assert str(workspace) in info.value.message  # names the workspace
    assert _code(resolve_path, ctx, "a/../../x") == "outside_workspace"
    assert _code(resolve_path, ctx, "/etc/passwd") == "outside_workspace"


def test_sibling_with_common_prefix_is_outside(ctx: ToolContext, workspace: Path) -> None:
    # A string startswith() check would accept ".../ws2" for the workspace ".../ws".
    sibling = workspace.parent / (workspace.name + "2")
    sibling.mkdir()
    assert _code(resolve_path, ctx, str(sibling / "f.txt")) == "outside_workspace"
    assert _code(resolve_path, ctx, f"../{sibling.name}/f.txt", write=True) == "outside_workspace"


def test_symlink_to_outside_is_refused(ctx: ToolContext, workspace: Path, outside: Path) -> None:
    (workspace / "link").symlink_to(outside)
    (workspace / "filelink").symlink_to(outside / "secret.txt")
    with pytest.raises(ToolError) as info:
        resolve_path(ctx, "link/secret.txt")
    assert info.value.code == "outside_workspace"
    assert "symbolic link" in info.value.message
    assert _code(resolve_path, ctx, "filelink") == "outside_workspace"
    assert _code(resolve_path, ctx, "link/new.txt", write=True) == "outside_workspace"


def test_dangling_symlink_to_outside_is_refused_for_writing(
    ctx: ToolContext, workspace: Path, outside: Path
) -> None:
    (workspace / "dangling").symlink_to(outside / "not-yet.txt")
    assert _code(resolve_path, ctx, "dangling", write=True) == "outside_workspace"


def test_symlink_inside_resolves_to_its_target(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "f.txt").write_text("x")
    (workspace / "alias").symlink_to(workspace / "real")
    assert resolve_path(ctx, "alias/f.txt") == workspace / "real" / "f.txt"


def test_read_only_root_readable_not_writable(
    workspace: Path, settings: Settings, outside: Path
) -> None:
    ro = settings.model_copy(update={"read_only_roots": [str(outside)]})
    ctx = ToolContext(workspace=workspace, settings=ro)
    assert resolve_path(ctx, str(outside / "secret.txt")) == outside / "secret.txt"
    with pytest.raises(ToolError) as info:
        resolve_path(ctx, str(outside / "secret.txt"), write=True)
    assert info.value.code == "outside_workspace"
    assert "read-only" in info.value.message
    # The same root reached through a symlink inside the workspace: still read-only.
    (workspace / "ref").symlink_to(outside)
    assert resolve_path(ctx, "ref/secret.txt") == outside / "secret.txt"
    assert _code(resolve_path, ctx, "ref/secret.txt", write=True) == "outside_workspace"


def test_invalid_paths(ctx: ToolContext) -> None:
    assert _code(resolve_path, ctx, "") == "invalid_argument"
    assert _code(resolve_path, ctx, "   ") == "invalid_argument"
    assert _code(resolve_path, ctx, "a\x00b") == "invalid_argument"


def test_home_relative_path_is_not_a_folder_named_tilde(ctx: ToolContext, workspace: Path) -> None:
    if Path.home().resolve().is_relative_to(workspace):
        pytest.skip("home folder inside the workspace")
    assert _code(resolve_path, ctx, "~/notes.txt", write=True) == "outside_workspace"


def test_stray_whitespace_is_trimmed_only_when_needed(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x")
    assert resolve_path(ctx, "a.txt\n") == workspace / "a.txt"
    (workspace / " spaced").write_text("x")
    assert resolve_path(ctx, " spaced") == workspace / " spaced"


def test_workspace_given_through_a_symlink(tmp_path: Path, settings: Settings) -> None:
    real = (tmp_path / "real-ws").resolve()
    real.mkdir()
    (tmp_path / "ws-link").symlink_to(real)
    ctx = ToolContext(workspace=tmp_path / "ws-link", settings=settings)
    assert resolve_path(ctx, "f.txt", write=True) == real / "f.txt"
    assert resolve_path(ctx, str(tmp_path / "ws-link" / "f.txt")) == real / "f.txt"
    assert display_path(ctx, real / "sub" / "f.txt") == "sub/f.txt"


def test_display_path(ctx: ToolContext, workspace: Path, outside: Path) -> None:
    assert display_path(ctx, workspace / "src" / "a.py") == "src/a.py"
    assert display_path(ctx, workspace) == "."
    assert display_path(ctx, Path("rel/x.txt")) == "rel/x.txt"
    assert display_path(ctx, outside / "secret.txt") == (outside / "secret.txt").as_posix()


def test_symlink_loop_does_not_hang(ctx: ToolContext, workspace: Path) -> None:
    os.symlink("loop2", workspace / "loop1")
    os.symlink("loop1", workspace / "loop2")
    try:
        result = resolve_path(ctx, "loop1/x")
    except ToolError as exc:  # either refused or left inside; never outside, never a hang
        assert exc.code == "outside_workspace"
    else:
        assert result.is_relative_to(workspace)
