"""Safe HTTP fetching for extract_webpage: SSRF guard, manual redirects, size and time caps.

Rules from docs/tools.md §9 (extract_webpage) and docs/architecture.md §6:

* only http/https; before connecting, and again at every redirect hop, the host is
  resolved and checked (``_guard.check_url``);
* the request is sent **to the checked address** (the URL's host replaced by the IP,
  ``Host`` header and TLS SNI/certificate check kept on the real name), so DNS
  rebinding between check and connect cannot reach a private address;
* redirects are followed by hand (at most ``Settings.web_max_redirects``), a loop
  gives ``redirect_loop`` with the chain;
* timeouts: connect 5 s, read 10 s (per socket read, as httpx defines them), and an
  overall deadline ``Settings.web_fetch_timeout`` enforced in the read loop and by a
  watchdog that shuts the socket down, so a server dripping a byte per second cannot
  hold the call;
* the body is read as a stream and cut at ``Settings.web_max_bytes`` (Content-Length
  is checked first, then a running count); what came is kept and flagged ``truncated``.

Environment proxies (HTTP_PROXY...) are deliberately ignored: a proxy would resolve
the name itself and defeat the address check.
"""

from __future__ import annotations

import functools
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.web._guard import Target, check_url

USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Safari/537.36"
)
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"
ACCEPT_LANGUAGE = {"zh": "zh-CN,zh;q=0.9,en;q=0.8", "en": "en-US,en;q=0.9,*;q=0.5"}
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0
SNIFF_BYTES = 4096
_REDIRECT_CODES = (301, 302, 303, 307, 308)

Inspector = Callable[[str, bytes, "int | None"], None]
"""``inspect(content_type, first_bytes, declared_length)``: called once the first
bytes are in; raises ToolError to stop the download (e.g. unsupported_content)."""


@dataclass
class FetchedPage:
    """A downloaded response.

    Attributes:
        url: the URL asked for.
        final_url: the URL after redirects (host name form, not the IP).
        status / reason: HTTP status code and reason phrase of the final response.
        content_type: media type in lower case without parameters ("" when absent).
        charset: the ``charset`` parameter of Content-Type, or None.
        body: the decoded (gzip/deflate removed) bytes, at most ``web_max_bytes``.
        declared_length: Content-Length of the final response, or None.
        truncated: True when the body was cut at the byte cap or the deadline.
        stop_reason: "" or a sentence saying why the body is incomplete.
        chain: every URL visited, the first one included.
        seconds: wall time of the whole fetch.
    """

    url: str
    final_url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    declared_length: int | None = None
    truncated: bool = False
    stop_reason: str = ""
    chain: list[str] = field(default_factory=list)
    seconds: float = 0.0


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~40 ms; one context serves every fetch (thread-safe).
    return httpx.create_ssl_context()


def _split_content_type(value: str) -> tuple[str, str | None]:
    mime, _, rest = value.partition(";")
    charset = None
    for param in rest.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'").lower()
    return mime.strip().lower(), charset


def _declared_length(response: httpx.Response) -> int | None:
    if response.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
        return None  # the length is of the compressed bytes
    try:
        return int(response.headers["content-length"])
    except (KeyError, ValueError):
        return None


def _pinned_request(
    client: httpx.Client, target: Target, remaining: float, language: str
) -> httpx.Request:
    url = httpx.URL(target.url).copy_with(fragment=None)
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": ACCEPT,
        "Accept-Language": ACCEPT_LANGUAGE.get(language, ACCEPT_LANGUAGE["en"]),
    }
    timeout = httpx.Timeout(
        connect=min(CONNECT_TIMEOUT, remaining),
        read=min(READ_TIMEOUT, remaining),
        write=min(READ_TIMEOUT, remaining),
        pool=min(CONNECT_TIMEOUT, remaining),
    )
    extensions = {"sni_hostname": url.raw_host.decode("ascii")} if target.scheme == "https" else {}
    return client.build_request(
        "GET",
        url.copy_with(host=target.ip),
        headers=headers,
        timeout=timeout,
        extensions=extensions,
    )


def _watchdog(
    response: httpx.Response, seconds: float, fired: threading.Event
) -> threading.Timer | None:
    """Shut the socket down at the deadline, so a read blocked on a silent server returns."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return None

    def fire() -> None:
        fired.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    timer = threading.Timer(max(seconds, 0.0), fire)
    timer.daemon = True
    timer.start()
    return timer


_STATUS_HINTS = {
    401: "login required",
    403: "the site refuses this request: login required or automated access blocked",
    404: "no such page; check the URL or search for the current address",
    410: "the page was removed",
    429: "rate limited; retry later",
}


def _status_message(response: httpx.Response, url: str) -> str:
    code = response.status_code
    hint = _STATUS_HINTS.get(code) or ("server error; retry later" if code >= 500 else "")
    reason = f" {response.reason_phrase}" if response.reason_phrase else ""
    return f"HTTP {code}{reason} for {url}" + (f" ({hint})" if hint else "")


def _transport_error(exc: httpx.HTTPError, url: str, elapsed: float) -> ToolError:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return ToolError(
            "timeout", f"{url}: no answer in time ({type(exc).__name__} after {elapsed:.1f} s)"
        )
    if "CERTIFICATE" in text.upper() or "SSL" in text.upper():
        return ToolError("http_error", f"{url}: TLS error: {text}")
    return ToolError("http_error", f"{url}: connection failed: {text}")


def _read_body(
    page: FetchedPage,
    response: httpx.Response,
    max_bytes: int,
    deadline: float,
    fired: threading.Event,
    cancel: threading.Event | None,
    inspect: Inspector | None,
) -> None:
    chunks: list[bytes] = []
    size = 0
    pending = inspect  # called once, with the first SNIFF_BYTES (or the whole short body)
    try:
        for chunk in response.iter_bytes():
            if pending is not None and size + len(chunk) >= SNIFF_BYTES:
                pending(page.content_type, b"".join(chunks) + chunk, page.declared_length)
                pending = None
            room = max_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                size += room
                page.truncated = True
                page.stop_reason = f"download cut at the {max_bytes:,}-byte cap (web_max_bytes)"
                break
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() >= deadline:
                break
            if cancel is not None and cancel.is_set():
                raise ToolError("cancelled", "the run was cancelled")
    except (httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
        if not size:
            raise
        if not fired.is_set() and time.monotonic() < deadline:
            page.truncated = True
            page.stop_reason = f"the server stopped sending ({type(exc).__name__})"
    late = fired.is_set() or time.monotonic() >= deadline
    complete = page.declared_length is not None and size >= page.declared_length
    if not page.truncated and late and not complete:
        page.truncated = True
        page.stop_reason = "download stopped at the fetch deadline (web_fetch_timeout)"
    page.body = b"".join(chunks)
    if pending is not None:
        pending(page.content_type, page.body, page.declared_length)


def fetch(
    url: str,
    settings: Settings,
    *,
    cancel: threading.Event | None = None,
    inspect: Inspector | None = None,
) -> FetchedPage:
    """Download ``url`` safely and return the final response's body.

    Args:
        url: an http(s) URL given by the model.
        settings: uses web_allow_hosts, web_fetch_timeout (seconds, whole call),
            web_max_redirects, web_max_bytes (bytes), language (Accept-Language).
        cancel: polled between chunks.
        inspect: see :data:`Inspector`; lets the caller refuse a binary type after
            the first bytes instead of downloading it whole.

    Returns:
        a FetchedPage (status < 400).

    Raises:
        ToolError with code invalid_argument (scheme), blocked_host, redirect_loop
        (loop or more than web_max_redirects hops, with the chain), http_error
        (status >= 400, connection or TLS failure), timeout, or whatever ``inspect``
        raises.
    """
    started = time.monotonic()
    deadline = started + settings.web_fetch_timeout
    chain: list[str] = []
    seen: set[str] = set()
    current = url.strip()
    with httpx.Client(follow_redirects=False, trust_env=False, verify=_ssl_context()) as client:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ToolError("timeout", f"{url}: gave up after {settings.web_fetch_timeout:g} s")
            target = _check_hop(current, chain, seen, settings, remaining)
            request = _pinned_request(client, target, remaining, settings.language)
            try:
                response = client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise _transport_error(exc, current, time.monotonic() - started) from None
            try:
                following = _redirect(response, current)
                if following is not None:
                    current = following
                    continue
                page = _page(url, current, response, chain)
                _download(page, response, settings, deadline, cancel, inspect, started)
                return page
            finally:
                response.close()


def _check_hop(
    current: str, chain: list[str], seen: set[str], settings: Settings, remaining: float
) -> Target:
    """Check the next URL to visit (the address guard, loops, the redirect cap) and
    add it to ``chain``; raise the ToolError of docs/tools.md §9 otherwise."""
    try:
        target = check_url(current, settings.web_allow_hosts, remaining)
        key = str(httpx.URL(current).copy_with(fragment=None))
    except ToolError as exc:
        if chain:  # say it was a redirect that went somewhere bad
            raise ToolError(exc.code, f"redirected from {chain[-1]}: {exc.message}") from None
        raise
    except httpx.InvalidURL as exc:
        raise ToolError("invalid_argument", f"not a valid URL: {current!r} ({exc})") from None
    shown = " -> ".join([*chain, current])
    if key in seen:
        raise ToolError("redirect_loop", f"redirect loop: {shown}")
    if len(chain) > settings.web_max_redirects:
        raise ToolError(
            "redirect_loop",
            f"more than {settings.web_max_redirects} redirects (web_max_redirects): {shown}",
        )
    seen.add(key)
    chain.append(current)
    return target


def _redirect(response: httpx.Response, current: str) -> str | None:
    """The URL ``response`` redirects to, or None; a ToolError for an invalid one."""
    location = response.headers.get("location")
    if response.status_code not in _REDIRECT_CODES or not location:
        return None
    try:
        return str(httpx.URL(current).join(location.strip()))
    except httpx.InvalidURL:
        raise ToolError(
            "http_error", f"{current} redirects to an invalid URL: {location!r}"
        ) from None


def _page(url: str, current: str, response: httpx.Response, chain: list[str]) -> FetchedPage:
    """The FetchedPage of a final response, its body still to read; ToolError for
    a status of 400 or more."""
    if response.status_code >= 400:
        raise ToolError("http_error", _status_message(response, current))
    content_type, charset = _split_content_type(response.headers.get("content-type", ""))
    return FetchedPage(
        url=url,
        final_url=current,
        status=response.status_code,
        reason=response.reason_phrase or "",
        content_type=content_type,
        charset=charset,
        body=b"",
        declared_length=_declared_length(response),
        chain=chain,
    )


def _download(
    page: FetchedPage,
    response: httpx.Response,
    settings: Settings,
    deadline: float,
    cancel: threading.Event | None,
    inspect: Inspector | None,
    started: float,
) -> None:
    """Read the body into ``page`` under the deadline's watchdog; ToolError
    ``timeout`` when nothing came in time, ``http_error`` for a broken transfer."""
    fired = threading.Event()
    timer = _watchdog(response, deadline - time.monotonic(), fired)
    try:
        _read_body(page, response, settings.web_max_bytes, deadline, fired, cancel, inspect)
    except httpx.HTTPError as exc:
        raise _transport_error(exc, page.final_url, time.monotonic() - started) from None
    finally:
        if timer is not None:
            timer.cancel()
    if page.truncated and not page.body:
        raise ToolError(
            "timeout",
            f"{page.final_url}: no content within {settings.web_fetch_timeout:g} s "
            "(web_fetch_timeout)",
        )
    page.seconds = time.monotonic() - started
