"""Running the web chat: ``agentkit serve`` in the foreground, or a server in a thread.

One job: start uvicorn on the app of :func:`agentkit.webchat.create_app` with the
security rules of docs/web-api.md: loopback by default; any other address needs a
token of at least 16 characters (given, or generated and printed once) and answers
only to its own names; the token never reaches the logs.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentkit.errors import ConfigurationError
from agentkit.settings import Settings
from agentkit.webchat import create_app, require_web_extra
from agentkit.webchat.security import RedactTokens, check_token, is_loopback, loopback_names

__all__ = [
    "BackgroundServer",
    "access_token",
    "check_access",
    "free_port",
    "hosts_for",
    "listen",
    "serve",
]


def access_token(host: str, token: str | None) -> str | None:
    """The token a server on ``host`` requires: ``token`` when given; else None on a
    loopback address, and a fresh random one (32 URL-safe characters) on any other."""
    if token is None and not is_loopback(host):
        return secrets.token_urlsafe(24)
    return token


def hosts_for(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The names a server bound to ``host`` answers to (the ``Host`` check): loopback
    names on loopback; on a wildcard address (``0.0.0.0``, ``::``) loopback names and
    the machine's own names (its host name and fully qualified name); else the bound
    address. ``extra`` (``--allowed-host``) adds names. The address a connection
    arrived on is accepted as well (agentkit.webchat.security.Gate)."""
    if is_loopback(host):
        names = loopback_names()
    elif host in ("0.0.0.0", "::", ""):
        # Still strict on every interface: a token does not stop DNS rebinding,
        # since the page's cookie rides along with a rebound request.
        names = [*loopback_names(), socket.gethostname(), socket.getfqdn()]
    else:
        names = [host if ":" not in host else f"[{host}]"]
    extras = [h.strip().lower() for h in extra if h.strip()]
    return list(dict.fromkeys([n.lower() for n in names] + extras))


def _quiet_tokens() -> None:
    for name in ("uvicorn.access", "uvicorn.error", "uvicorn"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


def serve(
    workspace: str | Path,
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: Iterable[str] = (),
    demo: bool = False,
    listener: socket.socket | None = None,
    **session_options: Any,
) -> int:
    """Serve the web chat until Ctrl-C (KeyboardInterrupt propagates after a clean
    shutdown: the CLI exits 130); returns 0 when uvicorn stops otherwise.

    A non-loopback ``host`` without ``token`` gets a generated one, printed once in the
    URL to open; ``port`` 0 picks a free one. ``allowed_hosts``: more names the ``Host`` header may carry (see
    :func:`hosts_for`). ``demo``: the settings point at ``--demo``'s scripted model
    (the page says so). ``listener``: a socket :func:`listen` bound for ``host`` and
    ``port`` already (closed when serving ends). The model endpoint is checked as the server starts; the
    result is printed and shown in the page's header, and the server starts either
    way. Raises ConfigurationError (missing extra, bad workspace, no model, a token
    under 16 characters).
    """
    require_web_extra()
    import uvicorn

    from agentkit.chat.assembly import check

    check(workspace, settings)  # what each conversation's Session checks, once up front
    token = check_access(host, token, allowed_hosts)
    # Bound before the URL is printed: a busy port is one clear line, not the URL of
    # whatever else listens there followed by uvicorn's own error (a trial saw that).
    listener = listener or listen(host, port)
    port = listener.getsockname()[1]  # 0: the free one picked, so the URL is real
    app = create_app(
        workspace,
        settings,
        token=token,
        allowed_hosts=hosts_for(host, allowed_hosts),
        demo=demo,
        **session_options,
    )
    # Said later, from a thread or the shutdown: a reader of stdout that has gone
    # (`agentkit serve | head -1`) must not break either.
    app.state.agentkit.endpoint.on_result = lambda result: _say(
        f"agentkit serve: model endpoint: {result.message}"
    )
    app.state.agentkit.on_close = lambda words: _say(f"agentkit serve: stopped: {words}")
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"agentkit serve: open {url}", flush=True)
    if token:
        print("agentkit serve: the token is shown only here; keep it secret", flush=True)
    from agentkit.chat.notices import claim_notices

    for text in claim_notices(settings):  # also in the page's header (GET /api/info)
        print(f"agentkit serve: {text}", flush=True)
    _quiet_tokens()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    with listener:
        _server_class()(config).run(sockets=[listener])
    return 0


def _say(text: str) -> None:
    """Print a status line; one that cannot be written is dropped."""
    try:
        print(text, flush=True)
    except (OSError, ValueError):
        pass


def _server_class() -> Any:
    """uvicorn's Server, but a signal ignored when serving starts (``nohup``, a job
    started with ``&`` ignores SIGINT) stays ignored: uvicorn puts its own handler on
    SIGINT and SIGTERM whatever they were."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            main = threading.current_thread() is threading.main_thread()
            handled = (signal.SIGINT, signal.SIGTERM)
            ignored = [s for s in handled if main and signal.getsignal(s) == signal.SIG_IGN]
            with super().capture_signals():
                for signum in ignored:
                    signal.signal(signum, signal.SIG_IGN)
                yield

    return Server


def check_access(host: str, token: str | None, allowed_hosts: Iterable[str] = ()) -> str | None:
    """The token a server on ``host`` requires (:func:`access_token`), checked against
    the names it answers to (agentkit.webchat.security.check_token). Raises
    ConfigurationError for a token under 16 characters, or none off loopback."""
    required = access_token(host, token)
    check_token(required, hosts_for(host, allowed_hosts))
    return required


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: a free port) and listening, as
    uvicorn binds its own (``SO_REUSEADDR``; an IPv6 address gets an IPv6 socket).

    Made with ``IPPROTO_TCP`` (not 0), as getaddrinfo gives it to uvicorn's own
    socket: asyncio turns Nagle off (``TCP_NODELAY``) only on connections whose
    socket says so, and a response's headers and body are two writes; with Nagle on,
    the body waited for the client's delayed ACK, 40 ms on every keep-alive request.

    Raises ConfigurationError naming the address and what to do (the port in use, an
    address this machine does not have, a port that needs privileges)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        hint = (
            "another server uses it: stop it, or pick another --port (0: a free one)"
            if exc.errno == errno.EADDRINUSE
            else "check --host and --port"
        )
        raise ConfigurationError(
            f"cannot listen on {shown}: {exc.strerror or exc}; {hint}"
        ) from None
    return sock


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class BackgroundServer:
    """The web chat served by uvicorn in a thread on a free loopback port (tests,
    benchmarks, embedding). ``with BackgroundServer(app) as server: server.url``.

    ``stop()`` first closes the app's conversations (so event streams end), then
    stops uvicorn and joins its thread. Raises RuntimeError when it does not start
    within 20 seconds.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None) -> None:
        import uvicorn

        self.app = app
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(
            app,
            host=host,
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=3,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="agentkit-web", daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        """Start serving; returns self once the socket listens."""
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the web server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Close the conversations, stop the server, join its thread. Idempotent."""
        state = getattr(self.app.state, "agentkit", None)
        if state is not None:
            state.close()
        self.server.should_exit = True
        self.thread.join(15)
        if self.thread.is_alive():
            print("agentkit web: the server thread did not stop", file=sys.stderr)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
