"""The web chat's ASGI application: API routes, event streams, the page, the gate.

One job: assemble the Starlette app (:func:`create_app`) from agentkit.webchat.api (the
JSON API and streams), the static page under ``static/`` and agentkit.webchat.security
(the Host/Origin/token gate and the security headers).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from agentkit.chat import Workspace
from agentkit.errors import WorkspaceFull
from agentkit.settings import Settings
from agentkit.webchat import files
from agentkit.webchat.api import ApiError, api_error, api_routes
from agentkit.webchat.approvals import page_answers
from agentkit.webchat.control import control_routes
from agentkit.webchat.deleting import deleting_routes
from agentkit.webchat.endpoint import EndpointWatch
from agentkit.webchat.fanout import Fanout
from agentkit.webchat.info import info_routes
from agentkit.webchat.isolation_api import isolation_routes
from agentkit.webchat.security import Gate, check_token, loopback_names

__all__ = ["STATIC_DIR", "WebState", "create_app"]

STATIC_DIR = Path(__file__).with_name("static")


@dataclass
class WebState:
    """What the app serves (``app.state.agentkit``): the workspace of conversations,
    whether the app created it (then it closes it at shutdown), the endpoint check,
    whether the model is the scripted demo's, and the event fan-out of each
    conversation being streamed (agentkit.webchat.fanout; used on the event loop only)."""

    workspace: Workspace
    owns_workspace: bool
    endpoint: EndpointWatch
    demo: bool = False
    check_endpoint: bool = True
    fanouts: dict[Any, Fanout] = field(default_factory=dict)
    on_close: Callable[[str], None] | None = None  # told what closing ended (serve prints it)

    def close(self) -> None:
        """Close every open conversation (their sub-agents end; their streams end);
        ``on_close`` gets one line saying what that ended (agentkit.chat.explain)."""
        from agentkit.chat.explain import closing_words

        words = closing_words(self.workspace.sessions()) if self.on_close else ""
        self.workspace.close()
        if self.on_close is not None:
            self.on_close(words)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method a route does not take): as
    ``{"error": ...}`` under ``/api/`` like every other API error (docs/web-api.md),
    plain text elsewhere (the page's files). Keeps the status and its headers
    (``Allow`` on 405)."""
    status = getattr(exc, "status_code", 500)
    detail = str(getattr(exc, "detail", "") or "error")
    headers = getattr(exc, "headers", None)
    if request.url.path.startswith("/api/"):
        if status == 404:
            detail = f"no such API route: {request.method} {request.url.path}"
        elif status == 405:
            detail = f"{request.method} is not allowed on {request.url.path}"
        return JSONResponse({"error": detail}, status_code=status, headers=headers)
    return PlainTextResponse(detail, status_code=status, headers=headers)


def create_app(
    workspace: str | Path | Workspace,
    settings: Settings | None = None,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] | None = None,
    demo: bool = False,
    check_endpoint: bool = True,
    **session_options: Any,
) -> Starlette:
    """Return the web chat as an ASGI application (mountable in another ASGI app).

    Args:
        workspace: the workspace folder, or a :class:`agentkit.chat.Workspace` to serve
            (the caller then closes it).
        settings: Settings for every conversation (default: the environment).
        token: require this token on every request (``Authorization: Bearer``, or the
            cookie a ``/?token=`` visit sets), at least 16 characters; None: no token
            (loopback use only).
        allowed_hosts: host names the ``Host`` header may carry (default: loopback
            names only; ``["*"]`` skips the check, e.g. behind a proxy that does it).
            Any name that is not loopback (``"*"`` included) needs a token.
        demo: the model is ``serve --demo``'s scripted one (the page says so).
        check_endpoint: ask the endpoint for its models at start, in a thread (``GET
            /api/info`` shows the result).
        **session_options: passed to each Session (``model``, ``tools``, ``launcher``...;
            ``on_approval`` defaults to the page answering: agentkit.webchat.approvals).

    Raises ConfigurationError for a missing workspace folder, a token under 16
    characters (empty included), or no token with a non-loopback ``allowed_hosts``.
    The app closes the workspace it created when it shuts down (ASGI lifespan), ending sub-agents.
    """
    hosts = list(allowed_hosts) if allowed_hosts is not None else loopback_names()
    check_token(token, hosts)
    if isinstance(workspace, Workspace):
        chats, owned = workspace, False
    else:
        # The page answers approval requests (agentkit.webchat.approvals).
        session_options.setdefault("on_approval", page_answers)
        chats, owned = Workspace(workspace, settings, **session_options), True
    state = WebState(chats, owned, EndpointWatch(chats.settings, demo), demo, check_endpoint)
    routes = [
        *api_routes(),
        *control_routes(),
        *deleting_routes(),
        *info_routes(),
        *isolation_routes(),
        Mount("/", app=StaticFiles(directory=STATIC_DIR, html=True), name="static"),
    ]
    errors: dict[Any, Any] = {
        ApiError: api_error,
        files.ViewError: api_error,
        WorkspaceFull: api_error,
        HTTPException: http_error,
    }
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Gate, token=token, allowed_hosts=hosts)],
        exception_handlers=errors,
        lifespan=_lifespan(state, check_endpoint),
    )
    app.state.agentkit = state
    return app


def _lifespan(state: WebState, check_endpoint: bool) -> Any:
    """The ASGI lifespan: the endpoint check at start; at shutdown, closing the
    workspace the app created (its sub-agents end)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if check_endpoint:
            state.endpoint.start()
        yield
        if state.owns_workspace:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(state.close)

    return lifespan
