"""File tools and hard links to files outside the workspace; agentkit's own .agentkit folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from link_helpers import (
    linked_fixture,  # noqa: F401  (the linked fixture)
    make_ctx,
)

from agentkit.tools.registry import ToolRegistry
from agentkit.tools.search import SEARCH_TOOLS
from agentkit.tools.search._ripgrep import find_rg

ENGINES = [
    "python",
    pytest.param("ripgrep", marks=pytest.mark.skipif(find_rg() is None, reason="no rg")),
]


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
