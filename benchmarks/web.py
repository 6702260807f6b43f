"""Benchmark extract_webpage over the saved real pages (shared/testdata/web).

Prints, per page: size, extraction time alone (decode + trafilatura + fallbacks), its rate
in ms per MB, and fetch + extract over a loopback HTTP server (the whole tool path:
SSRF check, pinned connection, streamed read, extraction, rendering); then totals.

Run: ``python benchmarks/web.py [--repeat N]`` (best of N runs per page, default 3).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentkit.settings import Settings  # noqa: E402
from agentkit.tools.web.extract import extract_html, run_extract  # noqa: E402

TESTDATA = ROOT.parent / "shared" / "testdata" / "web"
MB = 1_000_000


class _Handler(SimpleHTTPRequestHandler):
    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: object) -> None:
        pass


def _best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    """Run the benchmark; returns the process exit code (1 when the test data is missing)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per page; the best counts")
    args = parser.parse_args()
    index_path = TESTDATA / "index.json"
    if not index_path.exists():
        print(f"saved pages not found at {TESTDATA}", file=sys.stderr)
        return 1
    index = json.loads(index_path.read_text(encoding="utf-8"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(TESTDATA)))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    settings = Settings(model="bench", language="en", web_allow_hosts=["127.0.0.1"])
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    try:
        first = index[0]
        extract_html((TESTDATA / first["file"]).read_bytes(), first["url"], None)  # imports, caches
        rows = []
        for entry in index:
            body = (TESTDATA / entry["file"]).read_bytes()
            only = _best(lambda b=body, u=entry["url"]: extract_html(b, u, None), args.repeat)
            full = _best(
                lambda f=entry["file"]: run_extract(base + f, settings, max_chars=100_000),
                args.repeat,
            )
            rows.append((Path(entry["file"]).name, len(body), only, full))
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)

    print(f"{'page':44} {'KB':>7} {'extract ms':>11} {'ms/MB':>7} {'fetch+extract ms':>17}")
    for name, size, only, full in rows:
        print(f"{name[:44]:44} {size / 1000:7.1f} {only * 1000:11.1f} {only * 1000 / (size / MB):7.0f} {full * 1000:17.1f}")  # fmt: skip
    total_bytes = sum(r[1] for r in rows)
    total_only = sum(r[2] for r in rows)
    total_full = sum(r[3] for r in rows)
    print("-" * 90)
    print(
        f"{len(rows)} pages, {total_bytes / MB:.2f} MB: extraction {total_only:.2f} s "
        f"({total_only * 1000 / len(rows):.0f} ms/page, {total_only / (total_bytes / MB) * 1000:.0f} ms/MB, "
        f"median {statistics.median(r[2] for r in rows) * 1000:.0f} ms); fetch+extract {total_full:.2f} s "
        f"({total_full * 1000 / len(rows):.0f} ms/page; fetch overhead "
        f"{(total_full - total_only) * 1000 / len(rows):.1f} ms/page)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
