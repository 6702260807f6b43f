"""The web chat's gate: Host, Origin, token and security headers (docs/web-api.md "Security").

One job: an ASGI middleware that every request passes before any route.

- ``Host`` must name the server (the bound host, or a loopback name when it is bound
  to loopback; on a wildcard bind the machine's own names and the names the user
  lists), or be the IP address the connection arrived on: a page on another site whose
  name was re-pointed at this machine (DNS rebinding) sends its own name and is
  refused. A token does not relax this: the page's cookie would ride along with a
  rebound request, so the Host check is what keeps it from other sites.
- Every API request (reads and the event stream included) and every state change
  must come from the page itself: an ``Origin`` other than the server's own, or a
  ``Sec-Fetch-Site`` other than ``same-origin``/``none``, is refused. Requests
  with a body must be JSON, which a plain HTML form cannot send.
- With a token, every request needs it: ``Authorization: Bearer <token>``, or the
  cookie set by a one-time visit to ``/?token=<token>``, which then redirects to the
  clean URL (EventSource cannot send headers, so the page relies on the cookie:
  HttpOnly, SameSite=Strict).
- An exception no handler caught is logged and answered as a JSON 500 (never a
  bare one).
- Every response carries a strict Content-Security-Policy (no inline script, no
  other origin), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "COOKIE",
    "CSP",
    "MIN_TOKEN_CHARS",
    "Gate",
    "RedactTokens",
    "check_token",
    "is_loopback",
    "loopback_names",
]

COOKIE = "agentkit_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
SAFE_METHODS = ("GET", "HEAD")
logger = logging.getLogger("agentkit.webchat")
MIN_TOKEN_CHARS = 16
"""Shortest token accepted (a generated one has 32 characters)."""
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """True for a loopback address or ``localhost`` (``127.x.y.z``, ``::1``)."""
    return host in _LOOPBACK or host.startswith("127.")


def loopback_names() -> list[str]:
    """Host names a loopback-bound server answers to."""
    return ["127.0.0.1", "localhost", "[::1]"]


def check_token(token: str | None, hosts: Iterable[str]) -> None:
    """Refuse a weak access setup with one clear line (ConfigurationError).

    Args:
        token: the token to require, or None for none.
        hosts: the host names the server answers to (``"*"``: any).

    A given token must have at least :data:`MIN_TOKEN_CHARS` characters (an empty
    one is refused, not taken as "no token"); a server answering to any name that is
    not loopback must have a token, since anyone who reaches it could run commands.
    """
    from agentkit.errors import ConfigurationError

    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigurationError(
            f"the token is too short ({len(token)} characters): give at least "
            f"{MIN_TOKEN_CHARS}, or leave --token out to have one generated"
        )
    public = [h for h in hosts if not is_loopback(h.strip("[]").lower())]
    if token is None and public:
        raise ConfigurationError(
            f"a server reachable as {public[0]} needs a token (of at least "
            f"{MIN_TOKEN_CHARS} characters)"
        )


def _host_name(host_header: str) -> str:
    """``example.com:8765`` -> ``example.com``; ``[::1]:80`` -> ``[::1]``."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class Gate:
    """ASGI middleware applying the module's rules before ``app``.

    Args:
        app: the application behind the gate.
        token: the access token, or None (no token needed: loopback use only).
        allowed_hosts: host names (no port) the ``Host`` header may carry; ``"*"``
            allows any (a server behind a trusted proxy that checks it).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Iterable[str],
    ) -> None:
        self.app = app
        self.token = token
        self.allowed_hosts = {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _reply(send, refusal[0], {"error": refusal[1]})
            return
        if self.token and scope["path"] == "/" and _query(scope).get("token"):
            await self._token_visit(scope, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send_with_headers(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception:
            # The catch-all: no handler answers a bare 500. Logged with its traceback;
            # the reply says only that something failed (no paths, no details).
            logger.exception("agentkit web: %s %s failed", scope["method"], scope["path"])
            if not started:
                await _reply(send, 500, {"error": "internal error (logged on the server)"})

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if not self._host_allowed(scope, _host_name(host).lower()):
            return 421, "unknown Host header (DNS rebinding protection)"
        method = scope["method"]
        # Every API route, reads included (a page on another site must not read
        # conversations either), and every state change; the page itself (a
        # navigation: Sec-Fetch-Site none) stays open to links.
        guarded = method not in SAFE_METHODS or scope["path"].startswith("/api/")
        if guarded:
            origin = headers.get("origin")
            scheme = scope.get("scheme", "http")
            if origin is not None and origin != f"{scheme}://{host}":
                return 403, "cross-origin request refused"
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return 403, "cross-site request refused"
        if method not in SAFE_METHODS and method != "DELETE":
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return 415, "send JSON (Content-Type: application/json)"
        if self.token and not self._has_token(scope, headers):
            if scope["path"] == "/" and not _query(scope).get("token"):
                return 401, "a token is needed: open the URL agentkit serve printed"
            return 401, "a token is needed (Authorization: Bearer, or the page's cookie)"
        return None

    def _host_allowed(self, scope: Scope, name: str) -> bool:
        if "*" in self.allowed_hosts or name in self.allowed_hosts:
            return True
        # The address the connection arrived on, as an IP literal: a browser sends a
        # literal only when the page's own origin is that address, never after DNS
        # rebinding (which needs a name).
        server = scope.get("server")
        local = str(server[0]).lower() if server else ""
        return bool(local) and name in (local, f"[{local}]")

    def _has_token(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        given = ""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        elif "cookie" in headers:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(headers["cookie"])
            except Exception:  # a malformed cookie header is no token
                cookie = SimpleCookie()
            if COOKIE in cookie:
                given = cookie[COOKIE].value
        if not given and scope["path"] == "/":
            given = _query(scope).get("token", "")
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    async def _token_visit(self, scope: Scope, send: Send) -> None:
        """Set the cookie and redirect to the same URL without the token."""
        rest = [
            (k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode()) if k != "token"
        ]
        location = "/" + (f"?{urlencode(rest)}" if rest else "")
        cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode()),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _query(scope: Scope) -> dict[str, str]:
    return dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))


async def _reply(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


_TOKEN_IN_TEXT = re.compile(r"(token=)[^&\s\"']+")


class RedactTokens(logging.Filter):
    """A logging filter that replaces ``token=...`` in log records (uvicorn's access
    log prints the first visit's URL) with ``token=***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_TEXT.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args
            )
        if isinstance(record.msg, str):
            record.msg = _TOKEN_IN_TEXT.sub(r"\1***", record.msg)
        return True
