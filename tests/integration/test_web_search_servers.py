"""web_search: providers over a loopback SearXNG-style JSON server, clean-up (dedupe, redirect
unwrapping, snippets), retry and deadline, and the ddgs default failing offline
(docs/tools.md §8, web_search)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from loopback import serve_loopback

from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import (
    SearxngProvider,
    make_web_tools,
)

LONG = "word " * 200  # 1000 chars
RESULTS = [
    {
        "title": "Python <b>docs</b>",
        "url": "https://docs.python.org/3/",
        "content": "The official &amp; complete docs.",
    },
    {
        "title": "Python docs again",
        "url": "https://docs.python.org/3#intro",
        "content": "same page, other anchor",
    },
    {
        "title": "Wrapped",
        "url": "https://duckduckgo.com/l/?uddg="
        + quote("https://example.org/page?a=1", safe="")
        + "&rut=x",
        "content": "redirect wrapper",
    },  # fmt: skip
    {
        "title": "Ad",
        "url": "https://duckduckgo.com/y.js?ad_domain=shop.example",
        "content": "sponsored",
    },
    {"title": "Long", "url": "https://www.example.net/long", "content": LONG},
    {"title": "Same without www", "url": "https://example.net/long/", "content": "duplicate"},
    {"title": "", "url": "https://no-title.example/", "content": ""},
]


class SearxHandler(BaseHTTPRequestHandler):
    """``/search?q=...&format=json`` → RESULTS; ``/limited/search`` → 429; records queries."""

    queries: list[dict[str, list[str]]] = []

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        SearxHandler.queries.append(parse_qs(parts.query))
        if parts.path == "/limited/search":
            self.send_response(429)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if parts.path == "/empty/search":
            body = json.dumps({"results": []}).encode()
        else:
            body = json.dumps({"query": "x", "results": RESULTS}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def searx_url() -> Iterator[str]:
    with serve_loopback(SearxHandler) as port:
        yield f"http://127.0.0.1:{port}"


def search(ctx: ToolContext, tools: list[Any], **args: Any) -> ToolResult:
    return ToolRegistry(tools).execute("web_search", args, ctx)


def test_searxng_results_numbered_deduped_unwrapped(searx_url: str, ctx: ToolContext) -> None:
    result = search(
        ctx, make_web_tools(SearxngProvider(searx_url)), query="python docs", max_results=10
    )
    assert result.ok, result.output
    lines = result.output.splitlines()
    numbered = [line for line in lines if line[:1].isdigit()]
    assert numbered == [
        "1. Python docs — https://docs.python.org/3/",
        "2. Wrapped — https://example.org/page?a=1",
        "3. Long — https://www.example.net/long",
        "4. https://no-title.example/ — https://no-title.example/",
    ]
    assert "   The official & complete docs." in lines
    snippet = next(line for line in lines if line.startswith("   word"))
    assert len(snippet.strip()) == 300 and snippet.endswith("…")
    assert "sponsored" not in result.output and "duplicate" not in result.output
    assert "UNTRUSTED WEB CONTENT" in result.output
    sent = SearxHandler.queries[-1]
    assert sent["q"] == ["python docs"] and sent["format"] == ["json"]


def test_max_results_respected_and_capped(searx_url: str, ctx: ToolContext) -> None:
    tools = make_web_tools(SearxngProvider(searx_url))
    two = search(ctx, tools, query="cap test", max_results=2)
    assert [line[:2] for line in two.output.splitlines() if line[:1].isdigit()] == ["1.", "2."]
    many = search(ctx, tools, query="cap test 2", max_results=500)
    assert many.ok  # capped at 20, not refused


def test_rate_limited_searxng(searx_url: str, ctx: ToolContext) -> None:
    result = search(ctx, make_web_tools(SearxngProvider(searx_url + "/limited")), query="x")
    assert result.error_code == "search_unavailable"
    assert "rate-limiting" in result.output and "429" in result.output


def test_genuinely_empty_is_not_an_error(searx_url: str, ctx: ToolContext) -> None:
    result = search(ctx, make_web_tools(SearxngProvider(searx_url + "/empty")), query="zzzz")
    assert result.ok and "No web results" in result.output
