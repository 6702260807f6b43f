"""web_search: providers over a loopback SearXNG-style JSON server, clean-up (dedupe, redirect
unwrapping, snippets), retry and deadline, and the ddgs default failing offline
(docs/tools.md §8, web_search)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import (
    WEB_TOOLS,
    SearchHit,
    SearchProviderError,
    make_web_tools,
)


def search(ctx: ToolContext, tools: list[Any], **args: Any) -> ToolResult:
    return ToolRegistry(tools).execute("web_search", args, ctx)


class Recorder:
    """A provider that records calls and fails ``failures`` times, then answers."""

    def __init__(self, failures: int = 0, error: Exception | None = None, hits: int = 3) -> None:
        self.calls: list[tuple[str, int]] = []
        self.failures = failures
        self.error = error or RuntimeError("connection reset by peer")
        self.hits = hits

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        self.calls.append((query, max_results))
        if len(self.calls) <= self.failures:
            raise self.error
        return [SearchHit(f"T{i}", f"https://site{i}.example/", f"s{i}") for i in range(self.hits)]


def test_provider_failure_retried_once_then_unavailable(ctx: ToolContext) -> None:
    provider = Recorder(failures=99)
    result = search(ctx, make_web_tools(provider), query="anything")
    assert result.error_code == "search_unavailable"
    assert len(provider.calls) == 2
    assert "connection reset by peer" in result.output
    assert "extract_webpage" in result.output
    assert "Traceback" not in result.output


def test_one_failure_then_success(ctx: ToolContext) -> None:
    provider = Recorder(failures=1)
    result = search(ctx, make_web_tools(provider), query="flaky")
    assert result.ok, result.output
    assert len(provider.calls) == 2 and "1. T0 — https://site0.example/" in result.output


def test_ambiguous_empty_reported_honestly(ctx: ToolContext) -> None:
    provider = Recorder(
        failures=99, error=SearchProviderError("No results found.", maybe_empty=True)
    )
    result = search(ctx, make_web_tools(provider), query="nothing")
    assert result.error_code == "search_unavailable"
    assert "rate-limited" in result.output and "really no results" in result.output


def test_results_cached(ctx: ToolContext) -> None:
    provider = Recorder()
    tools = make_web_tools(provider)
    first = search(ctx, tools, query="cache me")
    second = search(ctx, tools, query="cache   me")  # same query once whitespace is normalised
    assert len(provider.calls) == 1
    assert first.output.splitlines()[2:-2] == second.output.splitlines()[2:-2]


def test_hanging_provider_stopped_at_deadline(workspace: Path) -> None:
    release = threading.Event()

    class Hanging:
        def search(self, query: str, max_results: int) -> list[SearchHit]:
            release.wait(30)
            return []

    ctx = ToolContext(workspace=workspace, settings=Settings(model="m", web_search_timeout=1))
    started = time.monotonic()
    try:
        result = search(ctx, make_web_tools(Hanging()), query="slow")
    finally:
        release.set()
    assert time.monotonic() - started < 5
    assert result.error_code == "search_unavailable" and "within 1 s" in result.output


@pytest.mark.parametrize(
    "args",
    [{"query": ""}, {"query": "   "}, {"query": "x" * 501}, {"query": "ok", "max_results": 0}],
)
def test_invalid_arguments(ctx: ToolContext, args: dict[str, Any]) -> None:
    assert search(ctx, make_web_tools(Recorder()), **args).error_code == "invalid_argument"


def test_not_a_provider_rejected() -> None:
    with pytest.raises(TypeError):
        make_web_tools(object())  # type: ignore[arg-type]


def test_tools_have_descriptions_in_both_languages() -> None:
    registry = ToolRegistry(WEB_TOOLS)
    for language in ("zh", "en"):
        for schema in registry.schemas(language):
            function = schema["function"]
            assert len(function["description"]) > 50
            assert all(p.get("description") for p in function["parameters"]["properties"].values())
    zh = registry.schemas("zh")[0]["function"]["description"]
    assert "搜索" in zh
    counters = {tool.name: tool.counter for tool in WEB_TOOLS}
    assert counters == {"web_search": "searches", "extract_webpage": "web_pages"}


def test_ddgs_default_fails_cleanly_offline(workspace: Path) -> None:
    """This machine has no internet: the real ddgs call fails; the tool must say so clearly
    within its time limit (a failure or the deadline, whichever comes first)."""
    settings = Settings(model="m", web_search_timeout=4, web_search_backend="duckduckgo")
    ctx = ToolContext(workspace=workspace, settings=settings)
    started = time.monotonic()
    result = search(ctx, WEB_TOOLS, query="agentkit python")
    elapsed = time.monotonic() - started
    if result.ok:
        pytest.skip("this machine can reach the search engine")
    assert elapsed < settings.web_search_timeout + 3, elapsed
    assert result.output.startswith("Error: search_unavailable: ")
    assert "extract_webpage" in result.output and "Traceback" not in result.output
