"""``agentkit serve``: a web chat with the main agent and its sub-agents (docs/web-api.md).

``create_app(workspace, settings, token=None, ...)`` returns the ASGI application,
to run with uvicorn or mount in another ASGI app. It needs the ``web`` extra
(``pip install 'agentkit[web]'``); without it, importing this package's app raises
:class:`agentkit.errors.ConfigurationError` with that one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentkit.errors import ConfigurationError

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["INSTALL_HINT", "create_app", "require_web_extra"]

INSTALL_HINT = "the web chat needs the web extra: pip install 'agentkit[web]'"


def require_web_extra() -> None:
    """Raise ConfigurationError (:data:`INSTALL_HINT`) when starlette, uvicorn or
    sse-starlette is missing."""
    import importlib.util

    missing = [
        name
        for name in ("starlette", "uvicorn", "sse_starlette")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ConfigurationError(f"{INSTALL_HINT} (missing: {', '.join(missing)})")


def create_app(*args: Any, **kwargs: Any) -> Starlette:
    """See :func:`agentkit.web.app.create_app` (arguments passed through).

    Raises ConfigurationError when the web extra is not installed."""
    require_web_extra()
    from agentkit.web.app import create_app as create

    return create(*args, **kwargs)
