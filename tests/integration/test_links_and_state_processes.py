"""File tools and hard links to files outside the workspace; agentkit's own .agentkit folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.search import SEARCH_TOOLS
from agentkit.tools.search._ripgrep import find_rg

SECRET = "root:$6$topsecrethash:19000:0:99999:7:::\n"
ENGINES = [
    "python",
    pytest.param("ripgrep", marks=pytest.mark.skipif(find_rg() is None, reason="no rg")),
]


def make_ctx(workspace: Path, **overrides: object) -> ToolContext:
    settings = Settings(model="m", api_key="k", language="en", **overrides)  # type: ignore[arg-type]
    return ToolContext(workspace=workspace, settings=settings)


@pytest.fixture
def linked(tmp_path: Path, workspace: Path) -> Path:
    """A file outside the workspace (like /etc/shadow) with a hard link inside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "shadow"
    secret.write_text(SECRET)
    os.link(secret, workspace / "notes.txt")
    (workspace / "plain.txt").write_text("root is fine here\n")
    return secret


@pytest.mark.parametrize("engine", ENGINES)
def test_search_skips_hard_linked_files(linked: Path, workspace: Path, engine: str) -> None:
    ctx = make_ctx(workspace, use_ripgrep=engine == "ripgrep")
    registry = ToolRegistry(SEARCH_TOOLS)
    result = registry.execute("search_workspace", {"pattern": "root"}, ctx)
    assert result.ok and result.meta["engine"] == engine
    assert "topsecret" not in result.output
    assert result.output.splitlines()[0] == "plain.txt:1:root is fine here"
    if engine == "python":  # ripgrep's path cannot count them without telling what matched
        assert "skipped 1 file with several hard links" in result.output
    one = registry.execute("search_workspace", {"pattern": "root", "path": "notes.txt"}, ctx)
    assert "topsecret" not in one.output
    allowed = make_ctx(workspace, use_ripgrep=engine == "ripgrep", allow_hard_links=True)
    assert (
        "topsecrethash" in registry.execute("search_workspace", {"pattern": "root"}, allowed).output
    )
