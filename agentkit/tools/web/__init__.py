"""Web tools: ``web_search`` and ``extract_webpage`` (docs/architecture.md §3, docs/tools.md).

Default use: register ``WEB_TOOLS`` (web_search through the ``ddgs`` package, its
backend/region/safesearch read from Settings at each call, plus extract_webpage).

Another search engine: write a class with ``search(query, max_results) ->
list[SearchHit]`` (see :class:`SearchProvider`) and build the tools with it::

    from agentkit.tools.web import SearchHit, SearxngProvider, make_web_tools

    tools = make_web_tools(SearxngProvider("http://localhost:8888"))

    class MyApi:
        def search(self, query: str, max_results: int) -> list[SearchHit]:
            data = httpx.get("https://api.example/search", params={"q": query}).json()
            return [SearchHit(r["name"], r["link"], r["summary"]) for r in data["items"]]

    tools = make_web_tools(MyApi())

Every provider gets the same deadline (Settings.web_search_timeout, whole call),
one retry, URL clean-up, dedupe and numbering. Safety of extract_webpage (SSRF
guard, caps) is described in :mod:`agentkit.tools.web.fetch`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentkit.errors import ToolError
from agentkit.tools.base import Tool, ToolContext, ToolResult
from agentkit.tools.web.providers import DdgsProvider, SearxngProvider, provider_from_settings
from agentkit.tools.web.search import (
    MAX_RESULTS_CAP,
    SearchCache,
    SearchHit,
    SearchProvider,
    SearchProviderError,
    format_hits,
    run_search,
)

__all__ = [
    "WEB_TOOLS",
    "DdgsProvider",
    "ExtractWebpageParams",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxngProvider",
    "WebSearchParams",
    "extract_webpage",
    "make_web_tools",
]

MAX_QUERY_CHARS = 500
MAX_CHARS_CAP = 100_000


def _drop_docstring(schema: dict[str, Any]) -> None:
    # The class docstring is for Python readers; the model reads prompts/<lang>/tools/*.md.
    schema.pop("description", None)


class WebSearchParams(BaseModel):
    """web_search arguments: ``query`` (1-500 chars), ``max_results`` (default 5, capped at 20)."""

    model_config = ConfigDict(json_schema_extra=_drop_docstring)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    max_results: int = Field(default=5, ge=1)

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("query is empty")
        return value

    @field_validator("max_results")
    @classmethod
    def _cap_results(cls, value: int) -> int:
        return min(value, MAX_RESULTS_CAP)


class ExtractWebpageParams(BaseModel):
    """extract_webpage arguments: ``url`` (http/https), ``max_chars`` (default 20 000,
    capped at 100 000) and ``start_char`` (default 0, to read a long page in parts)."""

    model_config = ConfigDict(json_schema_extra=_drop_docstring)

    url: str = Field(min_length=1, max_length=8000)
    max_chars: int = Field(default=20_000, ge=1)
    start_char: int = Field(default=0, ge=0)

    @field_validator("max_chars")
    @classmethod
    def _cap_chars(cls, value: int) -> int:
        return min(value, MAX_CHARS_CAP)


def extract_webpage(params: ExtractWebpageParams, ctx: ToolContext) -> ToolResult:
    """Tool function: fetch ``params.url`` and return its main text (see extract.py).

    Raises ToolError (invalid_argument, blocked_host, redirect_loop, http_error,
    timeout, too_large, unsupported_content, no_extractable_text).
    """
    from agentkit.tools.web.extract import run_extract  # httpx/trafilatura load on first use

    return run_extract(
        params.url,
        ctx.settings,
        max_chars=params.max_chars,
        start_char=params.start_char,
        cancel=ctx.cancel,
    )


def _configured_provider(ctx: ToolContext) -> SearchProvider:
    try:
        return provider_from_settings(ctx.settings)
    except ValueError as exc:
        raise ToolError(
            "search_unavailable", f"{exc}. Fetch a known URL with extract_webpage instead."
        ) from exc


def _make_search(provider: SearchProvider | None) -> Callable[[WebSearchParams, ToolContext], str]:
    cache = SearchCache()

    def web_search(params: WebSearchParams, ctx: ToolContext) -> str:
        """Search the web; returns numbered ``title — url`` lines with snippets.

        Raises ToolError("search_unavailable") after one retry or at the deadline.
        """
        engine = provider if provider is not None else _configured_provider(ctx)
        key_fn = getattr(engine, "cache_key", None)
        key = (
            key_fn() if callable(key_fn) else ("instance", id(engine)),
            params.query,
            params.max_results,
        )
        hits = cache.get(key)
        if hits is None:
            hits = run_search(
                engine,
                params.query,
                params.max_results,
                ctx.settings.web_search_timeout,
                ctx.cancel,
            )
            cache.put(key, hits)
        return format_hits(params.query, hits)

    return web_search


def make_web_tools(provider: SearchProvider | None = None) -> list[Tool]:
    """Return ``[web_search, extract_webpage]`` tools.

    Args:
        provider: the search engine; None means ddgs configured from Settings
            (web_search_backend, web_search_region, web_search_safesearch).

    Raises TypeError when ``provider`` has no ``search`` method.
    """
    if provider is not None and not isinstance(provider, SearchProvider):
        raise TypeError(f"{provider!r} is not a SearchProvider (needs search(query, max_results))")
    return [
        Tool(
            name="web_search",
            params=WebSearchParams,
            func=_make_search(provider),
            counter="searches",
        ),
        Tool(
            name="extract_webpage",
            params=ExtractWebpageParams,
            func=extract_webpage,
            counter="web_pages",
        ),
    ]


WEB_TOOLS: list[Tool] = make_web_tools()
