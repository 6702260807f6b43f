"""The web chat under load (issue 12): event latency, server memory, page weight, first paint.

Prints:
- event latency from the engine (``Session.publish`` on the conversation's bus) to a
  reader of the SSE stream in another process, with 50 conversations open at once,
  each followed by its own event stream, while a background sub-agent works in 10 of
  them (scripted model, 50 ms per reply): median and p99 over ~2,500 probe events.
- the server process's resident memory (RSS) before and with the 50 conversations.
- page weight: the bytes of the page and its files as served. Goal: under 200 KB.
- first paint in headless Chromium (Performance API ``first-contentful-paint``),
  median of 5 loads on loopback. Goal: under 300 ms. Skipped without Playwright or
  /usr/bin/chromium.
- many readers of one conversation (issue 20 item 22): ``READERS`` (200) streams of
  one conversation, followed from another process, while ``RATE`` (200) events a
  second are published for ``SECONDS`` (8); meanwhile a third process times
  ``GET /api/conversations`` every 50 ms. Prints that API latency (median, p90, max)
  idle and under the load, and whether every reader got every event, in order.

Run: python benchmarks/web_server.py [--readers-only]
(benchmarks/web.py measures web_search, not this)
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from subagent_helpers import Router, call, calls, finish  # noqa: E402

from agentkit import events as ev  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.testing import FakeOpenAIServer, Reply  # noqa: E402
from agentkit.webchat import create_app  # noqa: E402
from agentkit.webchat.app import STATIC_DIR  # noqa: E402
from agentkit.webchat.serve import BackgroundServer  # noqa: E402

CONVERSATIONS = 50
WITH_SUBAGENT = 10
PROBE_HZ = 10
PROBE_SECONDS = 5.0
CHROMIUM = "/usr/bin/chromium"
READERS = 200
RATE = 200
SECONDS = 8.0


async def _read(
    url: str, cid: str, expected: int, out: list[float], connected: list[str], total: int
) -> None:
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(60, read=None)) as client,
        client.stream("GET", f"{url}/api/conversations/{cid}/events") as response,
    ):
        connected.append(cid)
        if len(connected) == total:
            print("ready", flush=True)  # every stream is open: the probes may start
        got = 0
        async for line in response.aiter_lines():
            if line.startswith("data:") and '"probe:' in line:
                now = time.monotonic()
                data = json.loads(line[5:])
                out.append(now - float(data["text"].split(":", 1)[1]))
                got += 1
                if got >= expected:
                    return


async def _readers(url: str, ids: list[str], expected: int) -> list[float]:
    latencies: list[float] = []
    connected: list[str] = []
    readers = (_read(url, cid, expected, latencies, connected, len(ids)) for cid in ids)
    try:
        await asyncio.wait_for(asyncio.gather(*readers), 120)
    except TimeoutError:
        print(f"reader: {len(latencies)} probe events arrived in time", file=sys.stderr)
    return latencies


def reader_main() -> None:
    """``--reader URL EXPECTED ID...``: follow the streams, print latencies as JSON."""
    url, expected, ids = sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    print(json.dumps(asyncio.run(_readers(url, ids, expected))), flush=True)


def _router() -> Router:
    work = [calls(call("read_file", path="notes.txt")) for _ in range(60)]
    return Router(
        main=[
            lambda r: (
                calls(
                    call(
                        "create_sub_agent",
                        agent_id=1,
                        summary="background work",
                        task="read notes.txt many times",
                        run_in_background=True,
                    )
                )
                if "background" in r["messages"][-1].get("content", "")
                else "ok"
            ),
            "started",
            "done",
        ],
        subs={1: [*[Reply(tool_calls=w["tool_calls"], latency=0.05) for w in work], finish()]},
    )


def first_paint(url: str) -> list[float] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not os.path.exists(CHROMIUM):
        return None
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"]  # fmt: skip
    paints = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        for _ in range(6):
            context = browser.new_context(bypass_csp=True)  # the probe below is evaluated text
            page = context.new_page()
            page.goto(url)
            page.wait_for_function(
                "performance.getEntriesByName('first-contentful-paint').length > 0"
            )
            paints.append(
                page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
            )
            context.close()
        browser.close()
    return paints[1:]  # the first load warms the browser's own caches


def main() -> None:
    process = psutil.Process()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(_router()) as model:
        workspace = Path(tmp)
        (workspace / "notes.txt").write_text("alpha\n" * 20)
        settings = Settings(
            model="m", base_url=model.base_url, api_key="k", language="en", max_retries=0
        )
        app = create_app(workspace, settings)
        with BackgroundServer(app) as server:
            client = httpx.Client(base_url=server.url, timeout=30)
            headers = {"Content-Type": "application/json"}
            rss_before = process.memory_info().rss
            ids = [
                client.post("/api/conversations", content="{}", headers=headers).json()["id"]
                for _ in range(CONVERSATIONS)
            ]
            expected = int(PROBE_HZ * PROBE_SECONDS)
            reader = subprocess.Popen(
                [sys.executable, __file__, "--reader", server.url, str(expected), *ids],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert reader.stdout is not None
            assert reader.stdout.readline().strip() == "ready"
            for cid in ids[:WITH_SUBAGENT]:
                body = json.dumps({"text": "do it in the background"})
                client.post(f"/api/conversations/{cid}/messages", content=body, headers=headers)
            time.sleep(1.5)  # the streams connect; the sub-agents start
            sessions = [app.state.agentkit.workspace.get(cid) for cid in ids]
            running = sum(
                1 for s in sessions if any(r["status"] == "running" for r in s.subagents())
            )
            rss_peak = process.memory_info().rss
            for _ in range(expected):
                tick = time.monotonic()
                for session in sessions:
                    session.publish(ev.TextDelta(text=f"probe:{time.monotonic()}"))
                rss_peak = max(rss_peak, process.memory_info().rss)
                time.sleep(max(0.0, 1 / PROBE_HZ - (time.monotonic() - tick)))
            out, _ = reader.communicate(timeout=120)
            latencies = sorted(json.loads(out.strip().splitlines()[-1]))
            # The page and every file beside it (what a first visit can load).
            paths = ["/"] + [f"/{f.name}" for f in STATIC_DIR.iterdir() if f.name != "index.html"]
            weight = sum(len(client.get(path).content) for path in paths)
            paints = first_paint(server.url + "/")
            client.close()
    ms = [x * 1000 for x in latencies]
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"conversations open with streams: {CONVERSATIONS} ({running} with a running sub-agent)")
    print(
        f"event latency engine -> SSE reader: median {statistics.median(ms):.1f} ms, "
        f"p99 {p99:.1f} ms over {len(ms)} events"
    )
    print(
        f"server RSS: {rss_before / 2**20:.0f} MB before, {rss_peak / 2**20:.0f} MB "
        f"peak with the conversations open"
    )
    print(f"page weight: {weight / 1024:.1f} KB (goal < 200 KB)")
    if paints is None:
        print("first paint: skipped (no Playwright or no /usr/bin/chromium)")
    else:
        print(
            f"first contentful paint: median {statistics.median(paints):.0f} ms "
            f"(min {min(paints):.0f}, max {max(paints):.0f}; goal < 300 ms)"
        )


# ------------------------------------------------ many readers of one conversation
async def _follow(url: str, expected: int, out: list[list[int]], connected: list[int]) -> None:
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(60, read=None)) as client,
        client.stream("GET", url) as response,
    ):
        connected.append(1)
        if len(connected) == READERS:
            print("ready", flush=True)
        seqs: list[int] = []
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                seqs.append(int(line[3:]))
                if len(seqs) >= expected:
                    break
        out.append(seqs)


def followers_main() -> None:
    """``--followers URL EXPECTED``: READERS streams; prints what they got as JSON."""
    url, expected = sys.argv[2], int(sys.argv[3])
    out: list[list[int]] = []
    connected: list[int] = []

    async def run() -> None:
        readers = (_follow(url, expected, out, connected) for _ in range(READERS))
        try:
            await asyncio.wait_for(asyncio.gather(*readers), 300)
        except TimeoutError:
            pass

    asyncio.run(run())
    in_order = sum(1 for s in out if s and s == list(range(s[0], s[0] + len(s))))
    lost = sum(expected - len(s) for s in out) + (READERS - len(out)) * expected
    print(json.dumps({"finished": len(out), "in_order": in_order, "lost": lost}), flush=True)


def timer_main() -> None:
    """``--timer URL SECONDS``: time GET /api/conversations every 50 ms; prints seconds."""
    url, seconds = sys.argv[2], float(sys.argv[3])
    times: list[float] = []
    with httpx.Client(base_url=url, timeout=120) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.monotonic()
            client.get("/api/conversations")
            times.append(time.monotonic() - start)
            time.sleep(0.05)
    print(json.dumps(times), flush=True)


def _ms(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"median {statistics.median(ms):.1f} ms, p90 {p90:.1f}, max {ms[-1]:.1f} (n={len(ms)})"


def readers() -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(["ok"]) as model:
        settings = Settings(model="m", base_url=model.base_url, api_key="k", language="en")
        app = create_app(Path(tmp), settings)
        with BackgroundServer(app) as server, httpx.Client(base_url=server.url) as client:
            body = json.dumps({"title": "followed"})
            cid = client.post(
                "/api/conversations", content=body, headers={"Content-Type": "application/json"}
            ).json()["id"]
            session = app.state.agentkit.workspace.get(cid)
            expected = int(RATE * SECONDS)
            url = f"{server.url}/api/conversations/{cid}/events"
            followers = subprocess.Popen(
                [sys.executable, __file__, "--followers", url, str(expected)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert followers.stdout is not None
            assert followers.stdout.readline().strip() == "ready"
            idle = subprocess.run(
                [sys.executable, __file__, "--timer", server.url, "2"],
                stdout=subprocess.PIPE, text=True, check=True,
            )  # fmt: skip
            timer = subprocess.Popen(
                [sys.executable, __file__, "--timer", server.url, str(SECONDS)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            start = time.monotonic()
            for i in range(expected):
                session.publish(ev.TextDelta(text=f"token {i} "))
                time.sleep(max(0.0, start + (i + 1) / RATE - time.monotonic()))
            took = time.monotonic() - start
            loaded = json.loads(timer.communicate()[0])
            got = json.loads(followers.communicate()[0].strip().splitlines()[-1])
    print(f"{READERS} readers of one conversation, {RATE} events/s for {SECONDS:.0f} s "
          f"(published in {took:.1f} s)")  # fmt: skip
    print(f"GET /api/conversations from another process, idle:  {_ms(json.loads(idle.stdout))}")
    print(f"GET /api/conversations from another process, load:  {_ms(loaded)}")
    print(f"readers: {got['finished']} finished, {got['in_order']} got every event in order, "
          f"{got['lost']} events lost")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--reader":
        reader_main()
    elif len(sys.argv) > 1 and sys.argv[1] == "--followers":
        followers_main()
    elif len(sys.argv) > 1 and sys.argv[1] == "--timer":
        timer_main()
    else:
        threading.current_thread().name = "bench"
        if "--readers-only" not in sys.argv:
            main()
        readers()
