"""Shared set-up for the search_workspace tests (unit and processes): the two engines, a
context per engine, a checked search call, and a realistic tree fixture.

Import ``tree_fixture`` into a test module to use the ``tree`` fixture (it needs ``workspace``
from tests/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.search import SEARCH_TOOLS
from agentkit.tools.search._ripgrep import find_rg

HAS_RG = find_rg() is not None
ENGINES = [
    "python",
    pytest.param("ripgrep", marks=pytest.mark.skipif(not HAS_RG, reason="rg not installed")),
]
REGISTRY = ToolRegistry(SEARCH_TOOLS)


def make_ctx(workspace: Path, engine: str, **overrides: object) -> ToolContext:
    settings = Settings(
        model="test-model",
        api_key="test-key",
        language="en",
        use_ripgrep=engine == "ripgrep",
        **overrides,  # type: ignore[arg-type]
    )
    return ToolContext(workspace=workspace, settings=settings)


def search(ctx: ToolContext, **args: object) -> ToolResult:
    result = REGISTRY.execute("search_workspace", args, ctx)
    target = ctx.workspace / str(args.get("path", "."))
    if result.ok and result.meta["engine"] != "none" and target.is_dir():
        # The engine asked for runs, except the Python fallback for look-around.
        expected = "ripgrep" if ctx.settings.use_ripgrep else "python"
        assert result.meta["engine"] == expected or "(?" in str(args["pattern"]), result.meta
    return result


def rows(result: ToolResult) -> list[str]:
    """The result rows without the bracketed footer notes."""
    return [line for line in result.output.splitlines() if not line.startswith("[")]


def write(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


@pytest.fixture(name="tree")
def tree_fixture(workspace: Path) -> Path:
    """A realistic project: ignore files at several depths, git exclude, unicode, long
    lines, binaries, encodings, dotfiles, a nested repository and symlink loops."""
    w = workspace
    write(w, ".gitignore", "build/\n*.log\n!keep.log\nnode_modules/\n/secret.txt\n# comment\n")
    write(w, ".git/info/exclude", "excluded_by_info/\n")
    write(w, ".git/config", "needle in git config\n")
    write(w, ".ignore", "*.tmp\n")
    write(w, "src/app.py", "import os\n\ndef needle():\n    return 'needle'  # needle twice\n")
    write(w, "src/util.py", "x = 1\nNEEDLE = 'upper'\n")
    write(w, "src/.gitignore", "generated/\n!important.log\n")
    write(w, "src/generated/gen.py", "needle generated\n")
    write(w, "src/important.log", "needle important\n")
    write(w, "src/debug.log", "needle debug\n")
    write(w, "keep.log", "needle keep\n")
    write(w, "app.log", "needle app log\n")
    write(w, "secret.txt", "needle secret\n")
    write(w, "docs/secret.txt", "needle not anchored\n")
    write(w, "scratch.tmp", "needle tmp\n")
    write(w, "build/out.py", "needle build\n")
    write(w, "node_modules/pkg/index.js", "needle module\n")
    write(w, "excluded_by_info/file.txt", "needle excluded\n")
    write(w, "docs/中文.md", "需要 needle 中文\ncafé Needle ñ\n")
    write(w, "long/min.js", "a" * 3000 + "needle" + "b" * 2000 + "\n")
    write(w, "bin/data.bin", b"needle\x00\x01\x02binary\n")
    write(w, "bin/late.bin", b"needle text\n" * 20000 + b"\x00needle\n")
    write(w, ".hidden/conf", "needle hidden\n")
    write(w, ".env", "NEEDLE_KEY=1\n")
    write(w, "enc/utf16.txt", "needle utf16\n".encode("utf-16"))
    write(w, "enc/bom8.txt", b"\xef\xbb\xbfneedle bom\n")
    write(w, "enc/latin1.txt", b"caf\xe9 needle\n")
    write(w, "enc/crlf.txt", b"needle end\r\nother\r\nneedle end\r\n")
    write(w, "enc/empty.txt", b"")
    write(w, "deep/a/b/.gitignore", "*.py\n")
    write(w, "deep/a/b/c.py", "needle deep ignored\n")
    write(w, "deep/a/b/c.txt", "needle deep kept\n")
    write(w, "deep/a/d.py", "needle deep parent\n")
    write(w, "vendor/.gitignore", "*.md\n")
    write(w, "vendor/top.md", "needle vendor md\n")
    write(w, "vendor/lib/.git/HEAD", "ref: refs/heads/main\n")
    write(w, "vendor/lib/readme.md", "needle nested repo md\n")  # vendor/.gitignore applies
    write(w, ".agentkit/outputs/cmd.log", "needle in agentkit log\n")
    os.symlink("..", w / "src" / "loop")
    os.symlink(".", w / "self")
    os.symlink("/etc", w / "etc_link")
    os.symlink("app.py", w / "src" / "alias.py")
    return w
