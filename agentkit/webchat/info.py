"""The web chat's server facts: ``GET /api/info`` and ``POST /api/info/check``
(docs/web-api.md).

One job: tell the page what it talks to: the workspace folder, the model and its
endpoint (without secrets), whether this is the scripted demo, the result of the
endpoint check (agentkit.webchat.endpoint) and the start notices (agentkit.chat.notices:
the command sandbox is off, a cost cap that cannot trip), shown in the page's header.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentkit.chat.explain import shown_url
from agentkit.chat.notices import start_notices
from agentkit.webchat.text import JSONResponse

__all__ = ["info_routes", "shown_workspace"]


def shown_workspace(path: Path) -> str:
    """The workspace folder as shown on the page: absolute, the home folder as ``~``."""
    home = Path.home()
    try:
        return "~/" + path.relative_to(home).as_posix() if path != home else "~"
    except ValueError:
        return str(path)


def _info(request: Request) -> dict[str, Any]:
    state = request.app.state.agentkit
    settings = state.workspace.settings
    from agentkit import __version__

    return {
        "version": __version__,
        "workspace": shown_workspace(state.workspace.path),
        "model": settings.model,
        "base_url": shown_url(settings.base_url),
        "language": settings.language,
        "demo": state.demo,
        "endpoint": state.endpoint.result.to_dict(),
        "notices": start_notices(settings),
    }


def get_info(request: Request) -> Response:
    """The server's facts and the last endpoint check (``status`` ``checking`` until
    the first one ends). An app whose lifespan never ran (mounted in another ASGI
    app) starts its first check here."""
    state = request.app.state.agentkit
    if state.check_endpoint:
        state.endpoint.start(once=True)
    return JSONResponse(_info(request))


def check_again(request: Request) -> Response:
    """Start another endpoint check (202); the page polls ``GET /api/info``."""
    request.app.state.agentkit.endpoint.start()
    return JSONResponse(_info(request), status_code=202)


def info_routes() -> list[BaseRoute]:
    """The routes, under ``/api/info``."""
    return [
        Route("/api/info", get_info, methods=["GET"]),
        Route("/api/info/check", check_again, methods=["POST"]),
    ]
