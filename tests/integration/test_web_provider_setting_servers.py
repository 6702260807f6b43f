"""Choosing the web_search engine through Settings (so sub-agent workers use it too)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from loopback import serve_loopback

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import WEB_TOOLS


class _Searx(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps(
            {
                "results": [
                    {
                        "title": "Loopback result",
                        "url": "https://example.org/a",
                        "content": "from searxng",
                    }
                ]
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def run_search(settings: Settings, workspace: Path, query: str = "agentkit") -> str:
    ctx = ToolContext(workspace=workspace, settings=settings)
    return ToolRegistry(list(WEB_TOOLS)).execute("web_search", {"query": query}, ctx).output


def test_searxng_named_in_settings(workspace: Path) -> None:
    with serve_loopback(_Searx) as port:
        url = f"http://127.0.0.1:{port}"
        out = run_search(Settings(language="en", web_search_provider=f"searxng:{url}"), workspace)
    assert "Loopback result" in out and "https://example.org/a" in out
