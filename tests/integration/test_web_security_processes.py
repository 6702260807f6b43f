"""extract_webpage security: schemes, private/loopback/link-local/metadata addresses, allow-list,
redirect re-validation, loops, connection pinning (docs/tools.md, docs/architecture.md §6).

No test connects to a non-loopback address: a refusal must happen before connecting,
and the tests would otherwise hang on the connect timeout and fail with another code.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from loopback import serve_loopback

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import WEB_TOOLS


class Handler(BaseHTTPRequestHandler):
    """Routes: /go?to=URL (302), /loop-a <-> /loop-b, /chain/N -> /chain/N-1 -> ... /chain/0,
    /host (echoes the Host header and the local address the request came in on)."""

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _redirect(self, target: str) -> None:
        self.send_response(302)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/go":
            self._redirect(query.removeprefix("to="))
        elif path == "/loop-a":
            self._redirect("/loop-b")
        elif path == "/loop-b":
            self._redirect("/loop-a")
        elif path.startswith("/chain/"):
            n = int(path.rsplit("/", 1)[1])
            if n:
                self._redirect(f"/chain/{n - 1}")
            else:
                self._text("end of chain")
        elif path == "/host":
            self._text(f"host={self.headers['Host']} local={self.connection.getsockname()[0]}")
        else:
            self.send_error(404)

    def _text(self, text: str) -> None:
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serve_loopback(Handler) as number:
        yield number


def make_ctx(workspace: Path, allow: list[str], **extra: Any) -> ToolContext:
    settings = Settings(model="m", api_key="k", language="en", web_allow_hosts=allow, **extra)
    return ToolContext(workspace=workspace, settings=settings)


def run(ctx: ToolContext, url: str) -> ToolResult:
    return ToolRegistry(WEB_TOOLS).execute("extract_webpage", {"url": url}, ctx)


def test_allowed_loopback_is_fetched(workspace: Path, port: int) -> None:
    result = run(make_ctx(workspace, ["127.0.0.1"]), f"http://127.0.0.1:{port}/host")
    assert result.ok, result.output
    assert f"host=127.0.0.1:{port}" in result.output


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.2:{port}/host",  # loopback, but only 127.0.0.1 is allowed
        "http://10.0.0.5/admin",
        "http://169.254.169.254/latest/meta-data/iam/",
        "http://[::1]:{port}/host",
    ],
)
def test_redirect_into_private_address_blocked(workspace: Path, port: int, target: str) -> None:
    url = f"http://127.0.0.1:{port}/go?to={target.format(port=port)}"
    result = run(make_ctx(workspace, ["127.0.0.1"]), url)
    assert result.error_code == "blocked_host", result.output
    assert "redirected from" in result.output


def test_redirect_to_file_scheme_refused(workspace: Path, port: int) -> None:
    result = run(
        make_ctx(workspace, ["127.0.0.1"]), f"http://127.0.0.1:{port}/go?to=file:///etc/passwd"
    )
    assert result.error_code == "invalid_argument", result.output


def test_redirect_loop_reports_chain(workspace: Path, port: int) -> None:
    result = run(make_ctx(workspace, ["127.0.0.1"]), f"http://127.0.0.1:{port}/loop-a")
    assert result.error_code == "redirect_loop", result.output
    assert "/loop-a -> " in result.output and "/loop-b -> " in result.output


def test_redirect_chain_too_long(workspace: Path, port: int) -> None:
    ctx = make_ctx(workspace, ["127.0.0.1"], web_max_redirects=3)
    assert run(ctx, f"http://127.0.0.1:{port}/chain/3").ok  # exactly the limit
    result = run(ctx, f"http://127.0.0.1:{port}/chain/4")
    assert result.error_code == "redirect_loop", result.output
    assert "more than 3 redirects" in result.output


def test_connects_to_the_checked_address(
    workspace: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name resolves to an allowed address when checked and to another
    one afterwards (127.0.0.3: not allowed, nothing listens there, so a second lookup would
    fail fast without leaving the machine); the request must go to the checked address,
    with the real name in the Host header."""
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"] + ["127.0.0.3"] * 20)

    def fake_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.test":
            return real(next(answers), *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake_dns)
    result = run(make_ctx(workspace, ["127.0.0.1"]), f"http://rebind.test:{port}/host")
    assert result.ok, result.output
    assert f"host=rebind.test:{port} local=127.0.0.1" in result.output


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_certificate_checked_against_host_name(workspace: Path, tmp_path: Path) -> None:
    """Pinning the IP must not weaken TLS: a self-signed certificate is refused (http_error,
    TLS named), proving verification still runs for the real host name."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        result = run(
            make_ctx(workspace, ["127.0.0.1"]), f"https://localhost:{httpd.server_address[1]}/host"
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    assert result.error_code == "http_error", result.output
    assert "TLS" in result.output and "CERTIFICATE" in result.output.upper()
