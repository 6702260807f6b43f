"""``agentkit serve``: a web chat with the main agent and its sub-agents (docs/web-api.md).

``create_app(workspace, settings, token=None, ...)`` returns the ASGI application,
to run with uvicorn or mount in another ASGI app. It needs the ``web`` extra
(``pip install 'agentkit-subagents[web]'``, or as agentkit.extras.install_hint says for
a source checkout); without it, importing this package's app raises
:class:`agentkit.errors.ConfigurationError` with that one line.

Map: ``app.py`` (create_app), ``api.py`` and ``views.py`` (conversations and how they
are shown), ``bodies.py`` (the request bodies' models and the API's error),
``control.py`` and ``approvals.py`` (the control plane's and the approvals' routes),
``isolation_api.py`` (an isolated sub-agent's changes, merge, discard),
``deleting.py`` (deleting a conversation, its unmerged copies decided first),
``info.py`` and ``endpoint.py`` (the server's facts, the endpoint check),
``stream.py`` and ``fanout.py`` (the event stream), ``security.py`` (token, Origin,
Host), ``files.py`` (the read-only viewer), ``text.py``, ``serve.py``; ``static/``
is the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentkit.errors import ConfigurationError
from agentkit.extras import install_hint

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["INSTALL_HINT", "create_app", "require_web_extra"]

INSTALL_HINT = f"the web chat needs the web extra: {install_hint('web')}"


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
    """See :func:`agentkit.webchat.app.create_app` (arguments passed through).

    Raises ConfigurationError when the web extra is not installed."""
    require_web_extra()
    from agentkit.webchat.app import create_app as create

    return create(*args, **kwargs)
