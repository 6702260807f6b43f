"""Choosing the web_search engine through Settings (so sub-agent workers use it too)."""

from __future__ import annotations

from pathlib import Path

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import WEB_TOOLS, SearchHit


class StaticProvider:
    """A provider importable by name, as a deployment would configure it."""

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        return [SearchHit(f"About {query}", "https://example.com/static", "static provider")]


def run_search(settings: Settings, workspace: Path, query: str = "agentkit") -> str:
    ctx = ToolContext(workspace=workspace, settings=settings)
    return ToolRegistry(list(WEB_TOOLS)).execute("web_search", {"query": query}, ctx).output


def test_provider_imported_by_module_path(workspace: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    out = run_search(
        Settings(language="en", web_search_provider="test_web_provider_setting:StaticProvider"),
        workspace,
        "cats",
    )
    assert "About cats" in out and "https://example.com/static" in out


def test_unknown_provider_is_a_clear_error(workspace: Path) -> None:
    out = run_search(Settings(language="en", web_search_provider="no_such_module:Thing"), workspace)
    assert out.startswith("Error: search_unavailable:") and "no_such_module" in out
