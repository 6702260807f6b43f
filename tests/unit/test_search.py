"""search_workspace on real trees, with both engines (ripgrep and the Python walker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from search_helpers import (
    ENGINES,
    make_ctx,
    search,
    tree_fixture,  # noqa: F401  (the tree fixture)
)

from agentkit.tools.search import preview_line


@pytest.mark.parametrize("engine", ENGINES)
def test_invalid_regex_is_an_argument_error(tree: Path, engine: str) -> None:
    result = search(make_ctx(tree, engine), pattern="def (foo")
    assert not result.ok
    assert result.error_code == "invalid_argument"
    assert "missing )" in result.output


@pytest.mark.parametrize("engine", ENGINES)
def test_paths_outside_the_workspace_refused(tree: Path, engine: str) -> None:
    ctx = make_ctx(tree, engine)
    for path in ("..", "/etc", "etc_link"):
        result = search(ctx, pattern="root", path=path)
        assert result.error_code == "outside_workspace", result.output
    assert search(ctx, pattern="x", path="missing").error_code == "not_found"


def test_preview_line_short_and_long() -> None:
    assert preview_line("short line", 3) == "short line"
    long = "x" * 1000 + "MATCH" + "y" * 1000
    cut = preview_line(long, 1000)
    assert (
        "MATCH" in cut and cut.startswith("…") and "[line is 2005 chars, match at col 1001]" in cut
    )
