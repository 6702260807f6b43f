"""The web chat's ASGI application: API routes, event streams, the page, the gate.

One job: assemble the Starlette app (:func:`create_app`) from agentkit.web.api (the
JSON API and streams), the static page under ``static/`` and agentkit.web.security
(the Host/Origin/token gate and the security headers).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from agentkit.chat import Workspace
from agentkit.settings import Settings
from agentkit.web import files
from agentkit.web.api import ApiError, api_error, api_routes
from agentkit.web.security import Gate, check_token, loopback_names

__all__ = ["STATIC_DIR", "WebState", "create_app"]

STATIC_DIR = Path(__file__).with_name("static")


@dataclass
class WebState:
    """What the app serves (``app.state.agentkit``): the workspace of conversations,
    and whether the app created it (then it closes it at shutdown)."""

    workspace: Workspace
    owns_workspace: bool

    def close(self) -> None:
        """Close every open conversation (their sub-agents end; their streams end)."""
        self.workspace.close()


def create_app(
    workspace: str | Path | Workspace,
    settings: Settings | None = None,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] | None = None,
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
        **session_options: passed to each Session (``model``, ``tools``, ``launcher``...).

    Raises ConfigurationError for a missing workspace folder, a token under 16
    characters (empty included), or no token with a non-loopback ``allowed_hosts``.
    The app closes the workspace it created when it shuts down (ASGI lifespan), ending sub-agents.
    """
    hosts = list(allowed_hosts) if allowed_hosts is not None else loopback_names()
    check_token(token, hosts)
    if isinstance(workspace, Workspace):
        state = WebState(workspace=workspace, owns_workspace=False)
    else:
        state = WebState(Workspace(workspace, settings, **session_options), owns_workspace=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if state.owns_workspace:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(state.close)

    routes = [
        *api_routes(),
        Mount("/", app=StaticFiles(directory=STATIC_DIR, html=True), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Gate, token=token, allowed_hosts=hosts)],
        exception_handlers={ApiError: api_error, files.ViewError: api_error},
        lifespan=lifespan,
    )
    app.state.agentkit = state
    return app
