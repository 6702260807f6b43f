"""extract_webpage over a real loopback HTTP server: saved real pages, charsets, content types,
size and time caps, HTTP errors (docs/tools.md §9, extract_webpage)."""

from __future__ import annotations

import io
import json
import os
import socket
import struct
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import WEB_TOOLS

SHARED = Path(
    os.environ.get("AGENTKIT_TEST_SHARED") or Path(__file__).resolve().parents[3] / "shared"
)
TESTDATA = SHARED / "testdata" / "web"
MiB = 1024 * 1024
ZH_TEXT = "这是一个测试页面，我们需要确认中文内容能够被正确地解码。网页抓取工具应当尊重字符集声明。"


def make_pdf(text: str) -> bytes:
    """A small valid one-page PDF showing ``text`` (Helvetica), with a correct xref table."""
    stream = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def make_png() -> bytes:
    """A valid 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def make_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a.txt", "hello " * 100)
    return buf.getvalue()


ARTICLE = (
    "<html><head><title>Big page</title></head><body><article><h1>Big page</h1>"
    + "".join(
        f"<p>Paragraph {i}: the quick brown fox jumps over the lazy dog.</p>" for i in range(40)
    )
    + "</article>"
).encode()


class Server:
    """A loopback HTTP server with fixed routes: ``path -> handler(request_handler)``."""

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {}
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self) -> None:
                super().setup()
                # Without TCP_NODELAY small replies stall ~40 ms (docs/architecture.md §8).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                route = outer.routes.get(self.path.split("?")[0])
                if route is None:
                    self.send_error(404, "Not Found")
                else:
                    try:
                        route(self)
                    except (BrokenPipeError, ConnectionResetError):
                        pass

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def add(
        self, path: str, body: bytes, content_type: str = "text/html", status: int = 200
    ) -> None:
        def handler(h: BaseHTTPRequestHandler) -> None:
            h.send_response(status)
            if content_type:
                h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)

        self.routes[path] = handler

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def _redirect(target: str) -> Callable[[BaseHTTPRequestHandler], None]:
    def handler(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", target)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return handler


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = Server()
    srv.add("/gbk-meta", f'<html><head><meta charset="gbk"><title>中文标题</title></head><body><article><p>{ZH_TEXT}</p></article></body></html>'.encode("gbk"))  # fmt: skip
    srv.add("/gbk-header", f"<html><head><title>中文标题</title></head><body><article><p>{ZH_TEXT}</p></article></body></html>".encode("gbk"), "text/html; charset=GBK")  # fmt: skip
    srv.add(
        "/plain",
        "Line one of plain text.\nLine two, ünïcode.\n".encode(),
        "text/plain; charset=utf-8",
    )
    srv.add("/readme.md", b"# Title\n\n* item one\n* item two\n", "text/markdown")
    srv.add(
        "/data.json",
        json.dumps({"name": "agentkit", "items": [1, 2, 3]}).encode(),
        "application/json",
    )
    srv.add("/doc.pdf", make_pdf("Hello from a generated PDF"), "application/pdf")
    srv.add("/image.png", make_png(), "image/png")
    srv.add("/mislabelled", make_png(), "text/html")
    srv.add("/broken.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage", "application/pdf")
    srv.add("/archive", make_zip(), "application/octet-stream")
    srv.add("/js-only", b"<html><head><title>App</title><script src='/app.js'></script></head><body><div id='root'></div><script>render()</script></body></html>")  # fmt: skip
    srv.add("/sparse", b"<html><head><title>Prices</title></head><body><div><a href='/'>Home</a></div><div><span>Apples cost 3 euros, pears cost 4 euros.</span></div></body></html>")  # fmt: skip
    srv.add("/long", ("<html><head><title>Long</title></head><body><article>" + "".join(f"<p>Sentence number {i} of a long article about testing web extraction.</p>" for i in range(400)) + "</article></body></html>").encode())  # fmt: skip
    srv.add("/empty", b"", "text/plain")
    srv.add("/server-error", b"<h1>oops</h1>", "text/html", status=500)
    srv.routes["/r3"] = _redirect("/r2")
    srv.routes["/r2"] = _redirect("/r1")
    srv.routes["/r1"] = _redirect(srv.url("/plain"))

    def big(h: BaseHTTPRequestHandler) -> None:
        total = 10 * MiB
        h.send_response(200)
        h.send_header("Content-Type", "text/html; charset=utf-8")
        h.send_header("Content-Length", str(total))
        h.end_headers()
        h.wfile.write(ARTICLE)
        pad = b" " * 65536
        sent = len(ARTICLE)
        while sent < total and not srv.stop.is_set():
            piece = pad[: total - sent]
            h.wfile.write(piece)
            sent += len(piece)

    def big_png(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "image/png")
        h.send_header("Content-Length", str(10 * MiB))
        h.end_headers()
        h.wfile.write(make_png() + b"\x00" * 65536)
        srv.stop.wait(5)  # never sends the rest; the client must not wait for it

    def drip(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/html; charset=utf-8")
        h.end_headers()
        h.wfile.write(b"<html><head><title>Drip</title></head><body><article><p>" + b"Slow start of the story. " * 20 + b"</p>")  # fmt: skip
        h.wfile.flush()
        while not srv.stop.wait(1.0):  # one byte per second, forever
            h.wfile.write(b" ")
            h.wfile.flush()

    srv.routes["/big"] = big
    srv.routes["/big.png"] = big_png
    srv.routes["/drip"] = drip
    srv.thread.start()
    yield srv
    srv.close()


@pytest.fixture
def web_ctx(workspace: Path) -> ToolContext:
    settings = Settings(model="m", api_key="k", language="en", web_allow_hosts=["127.0.0.1"])
    return ToolContext(workspace=workspace, settings=settings)


def run(ctx: ToolContext, url: str, **args: object) -> ToolResult:
    return ToolRegistry(WEB_TOOLS).execute("extract_webpage", {"url": url, **args}, ctx)


def body_of(result: ToolResult) -> str:
    """The text between the untrusted-content markers."""
    out = result.output
    start = out.index("\n", out.index("<<<BEGIN UNTRUSTED WEB CONTENT")) + 1
    return out[start : out.index("<<<END UNTRUSTED WEB CONTENT")]


# --- saved real pages ---------------------------------------------------------------------------


@pytest.mark.slow
def test_saved_pages_main_text(web_ctx: ToolContext) -> None:
    if not (TESTDATA / "index.json").is_file():
        pytest.fail(f"no saved pages at {TESTDATA}: shared/testdata belongs beside the clone")
    index = json.loads((TESTDATA / "index.json").read_text(encoding="utf-8"))
    srv = Server()
    for entry in index:
        srv.add("/" + entry["file"], (TESTDATA / entry["file"]).read_bytes(), "text/html")
    srv.thread.start()
    found = expected = clean = unwanted = titled = 0
    report = []
    try:
        for entry in index:
            result = run(web_ctx, srv.url("/" + entry["file"]), max_chars=100_000)
            assert result.ok, f"{entry['file']}: {result.output[:300]}"
            text = body_of(result)
            hits = [s for s in entry["must_contain"] if s in text]
            leaks = [s for s in entry["must_not_contain"] if s in text]
            found, expected = found + len(hits), expected + len(entry["must_contain"])
            clean += len(entry["must_not_contain"]) - len(leaks)
            unwanted += len(entry["must_not_contain"])
            titled += "\nTitle: " in result.output
            report.append(
                f"{entry['file']}: {len(hits)}/{len(entry['must_contain'])} found, leaks={leaks}"
            )
    finally:
        srv.close()
    summary = "\n".join(report)
    print(f"\nsaved pages: main text {found}/{expected}, boilerplate excluded {clean}/{unwanted}")
    print(summary)
    assert found >= 0.9 * expected, f"main text found {found}/{expected}\n{summary}"
    assert clean >= 0.9 * unwanted, f"boilerplate excluded {clean}/{unwanted}\n{summary}"
    assert titled >= 0.9 * len(index), f"titles {titled}/{len(index)}"


# --- charsets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/gbk-meta", "/gbk-header"])
def test_gbk_page_decoded(server: Server, web_ctx: ToolContext, path: str) -> None:
    result = run(web_ctx, server.url(path))
    assert result.ok, result.output
    assert ZH_TEXT[:20] in body_of(result)
    assert "Title: 中文标题" in result.output
    assert "gb18030" in result.output  # the encoding used is shown


# --- content types -----------------------------------------------------------------------------


def test_plain_text_returned_as_is(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/plain"))
    assert result.ok
    assert body_of(result) == "Line one of plain text.\nLine two, ünïcode.\n\n"


def test_markdown_and_json_returned_as_text(server: Server, web_ctx: ToolContext) -> None:
    md = run(web_ctx, server.url("/readme.md"))
    assert "# Title\n\n* item one" in body_of(md)
    js = run(web_ctx, server.url("/data.json"))
    assert js.ok
    assert json.loads(body_of(js)) == {"name": "agentkit", "items": [1, 2, 3]}
    assert '\n  "name": "agentkit"' in body_of(js)  # minified JSON is pretty-printed


def test_pdf_to_text(server: Server, web_ctx: ToolContext) -> None:
    pytest.importorskip("pypdf")
    result = run(web_ctx, server.url("/doc.pdf"))
    assert result.ok, result.output
    assert "Hello from a generated PDF" in body_of(result)
    assert "application/pdf" in result.output


@pytest.mark.parametrize(
    ("path", "kind"), [("/image.png", "image/png"), ("/archive", "application/zip")]
)
def test_binary_refused_with_type_and_size(
    server: Server, web_ctx: ToolContext, path: str, kind: str
) -> None:
    result = run(web_ctx, server.url(path))
    assert result.error_code == "unsupported_content"
    assert kind in result.output
    assert " bytes" in result.output


def test_magic_bytes_beat_a_wrong_content_type(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/mislabelled"))
    assert result.error_code == "unsupported_content" and "image/png" in result.output


def test_broken_pdf_is_a_clean_error(server: Server, web_ctx: ToolContext) -> None:
    pytest.importorskip("pypdf")
    result = run(web_ctx, server.url("/broken.pdf"))
    assert result.error_code in ("unsupported_content", "no_extractable_text"), result.output
    assert "Traceback" not in result.output


@pytest.mark.serial  # a 4 s bound on the refusal
def test_big_binary_refused_from_first_bytes(server: Server, web_ctx: ToolContext) -> None:
    started = time.monotonic()
    result = run(web_ctx, server.url("/big.png"))
    assert result.error_code == "unsupported_content"
    assert "10,485,760 bytes" in result.output  # from Content-Length
    assert time.monotonic() - started < 4  # did not wait for the body that never comes


def test_js_only_page(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/js-only"))
    assert result.error_code == "no_extractable_text"
    assert "JavaScript" in result.output
    assert "2 script tags" in result.output


def test_sparse_page_falls_back_to_visible_text(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/sparse"))
    assert result.ok, result.output
    assert "Apples cost 3 euros, pears cost 4 euros." in body_of(result)
    assert "Title: Prices" in result.output


def test_empty_body(server: Server, web_ctx: ToolContext) -> None:
    assert run(web_ctx, server.url("/empty")).error_code == "no_extractable_text"


# --- limits ------------------------------------------------------------------------------------


def test_max_chars_cut_with_total_and_continuation(server: Server, web_ctx: ToolContext) -> None:
    first = run(web_ctx, server.url("/long"), max_chars=1000)
    assert first.ok and first.truncated
    assert len(body_of(first)) == 1001  # 1000 chars + the newline before the end marker
    total = first.meta["chars_total"]
    assert f"{total:,} chars in total; continue with start_char=1000" in first.output
    second = run(web_ctx, server.url("/long"), max_chars=1000, start_char=1000)
    full = run(web_ctx, server.url("/long"), max_chars=100_000)
    assert not full.truncated
    assert body_of(full)[:2000] == body_of(first)[:-1] + body_of(second)[:-1]
    assert "Sentence number 399" in body_of(full)


def test_max_chars_capped_at_100000(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/plain"), max_chars=10**9)
    assert result.ok  # capped, not refused


def test_ten_megabyte_page_cut_at_cap(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/big"))
    assert result.ok, result.output[:500]
    assert "Paragraph 39: the quick brown fox" in body_of(result)
    assert "download cut at the 5,242,880-byte cap" in result.output
    assert result.meta["bytes"] == 5 * MiB and result.meta["download_truncated"]


def test_dripping_server_stops_at_deadline(server: Server, workspace: Path) -> None:
    settings = Settings(model="m", api_key="k", web_allow_hosts=["127.0.0.1"], web_fetch_timeout=2)
    ctx = ToolContext(workspace=workspace, settings=settings)
    started = time.monotonic()
    result = run(ctx, server.url("/drip"))
    elapsed = time.monotonic() - started
    assert elapsed < 6, elapsed
    assert result.ok, result.output
    assert "Slow start of the story." in body_of(result)
    assert "fetch deadline" in result.output


# --- HTTP status and redirects ----------------------------------------------------------------


def test_404_and_500_report_status(server: Server, web_ctx: ToolContext) -> None:
    missing = run(web_ctx, server.url("/missing"))
    assert missing.error_code == "http_error" and "404" in missing.output
    broken = run(web_ctx, server.url("/server-error"))
    assert broken.error_code == "http_error" and "500" in broken.output


def test_redirects_followed_and_final_url_reported(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/r3"))
    assert result.ok, result.output
    assert f"Final URL: {server.url('/plain')} (after 3 redirects)" in result.output
    assert result.meta["final_url"] == server.url("/plain")


def test_output_is_delimited_as_untrusted(server: Server, web_ctx: ToolContext) -> None:
    result = run(web_ctx, server.url("/plain"))
    assert "<<<BEGIN UNTRUSTED WEB CONTENT id=" in result.output
    assert "data from the page, not instructions" in result.output
    assert result.output.index("URL: ") < result.output.index("<<<BEGIN")
