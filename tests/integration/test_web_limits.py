"""The web chat under load and abuse (issue 20 items 11a, 13, 16, 17, 19, 21, 22): a
real server (uvicorn in a thread, or ``agentkit serve`` as a process), real sockets,
a scripted model on FakeOpenAIServer. No timings are asserted (benchmarks/web_server.py
measures them)."""

from __future__ import annotations

import asyncio
import json
import logging
import select
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from subagent_helpers import Gate, call, calls, wait_until
from web_helpers import JSON, running_web, serve_process

from agentkit import events as ev
from agentkit import prompts
from agentkit.chat.store import conversations_dir
from agentkit.testing import FakeOpenAIServer
from agentkit.webchat.api import MAX_BODY
from agentkit.webchat.fanout import MAX_BEHIND

pytestmark = pytest.mark.slow
NO_PREWARM = {"AGENTKIT_SUBAGENT_START_METHOD": "spawn"}
"""For a server whose conversations start no sub-agent: with the spawn start method
no worker process server is prewarmed when a conversation opens (1-2 s of CPU,
each ``agentkit serve`` process once)."""


def session_of(web: Any, cid: str) -> Any:
    return web.server.app.state.agentkit.workspace.get(cid)


def user_texts(detail: dict[str, Any]) -> list[str]:
    return [m["content"] for m in detail["messages"] if m["kind"] == "user"]


def quick_wait(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """``wait_until`` polling every 5 ms, not 50: for a wait repeated many times on
    something that takes milliseconds (a scripted round)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


class CountedReader:
    """Reads one event stream in a thread until ``count`` events have come, then
    closes its connection (the server sees the reader leave at once). ``events`` as
    web_helpers.SseReader parses them. It leaves by itself after ``count`` events, so
    the server sees many readers come and go (an SseReader stays until closed)."""

    def __init__(self, url: str, headers: dict[str, str], count: int) -> None:
        self.events: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._run, args=(url, headers, count))
        self.thread.daemon = True
        self.thread.start()

    def _run(self, url: str, headers: dict[str, str], count: int) -> None:
        with (
            httpx.Client(timeout=httpx.Timeout(30, read=60)) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            kind, data = "message", list[str]()
            for line in response.iter_lines():
                if line == "" and data:
                    event = json.loads("\n".join(data))
                    self.events.append({"type": "reset", **event} if kind == "reset" else event)
                    if len(self.events) == count:
                        return
                if line == "":
                    kind, data = "message", list[str]()
                elif line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())

    def close(self) -> None:
        """Wait (a bound on a hang) for the reader to have read its events and left."""
        self.thread.join(30)
        assert not self.thread.is_alive(), f"the reader stopped at {len(self.events)} events"


# ------------------------------------------------------- resource limits (13)
def test_serve_under_a_low_descriptor_limit_keeps_creating_conversations(
    workspace: Path,
) -> None:
    """Regression: under ``ulimit -n 1024`` every create failed after about 500 (each
    conversation held 2 descriptors and 2 threads for the server's life), and failed
    creates left empty conversations behind. Here the limit is 128: the old server
    ran out after about 55."""
    count = 90
    with (
        FakeOpenAIServer([f"answer {i}" for i in range(count)]) as model,
        serve_process(workspace, model.base_url, nofile=128) as serve,
    ):

        def answered(cid: str) -> bool:
            detail = serve.client.get(f"/api/conversations/{cid}").json()
            return detail["state"] == "idle" and detail["messages"][-1]["kind"] == "assistant"

        ids = []
        for i in range(count):
            created = serve.post("/api/conversations", {})
            assert created.status_code == 201, (i, created.text, serve.output()[-2000:])
            cid = created.json()["id"]
            sent = serve.post(f"/api/conversations/{cid}/messages", {"text": f"hello {i}"})
            assert sent.status_code == 202, (i, sent.text)
            assert quick_wait(partial(answered, cid)), (i, serve.output()[-2000:])
            ids.append(cid)
        listed = serve.client.get("/api/conversations").json()["conversations"]
        assert sorted(c["id"] for c in listed) == sorted(ids)
        assert all(c["state"] != "damaged" for c in listed)
        first = serve.client.get(f"/api/conversations/{ids[0]}").json()
        assert user_texts(first) == ["hello 0"]
        reopened = serve.post("/api/switch", {"leaving": None, "to": ids[0]})
        assert reopened.status_code == 200 and user_texts(reopened.json()) == ["hello 0"]


def test_a_full_server_answers_503_and_leaves_nothing_behind(workspace: Path) -> None:
    gate = Gate()
    script = [gate.hold("late"), gate.hold("late"), "ok", "ok"]
    with running_web(workspace, script, max_open_conversations=2) as web:
        busy = [web.new_conversation() for _ in range(2)]
        for cid in busy:
            assert (
                web.post(f"/api/conversations/{cid}/messages", {"text": "work"}).status_code == 202
            )
        assert wait_until(lambda: all(session_of(web, c).state == "running" for c in busy))
        files = sorted(p.name for p in conversations_dir(workspace).iterdir())
        for refused in (
            web.post("/api/conversations", {}),
            web.post("/api/switch", {"leaving": None, "to": None}),
        ):
            assert refused.status_code == 503, refused.text
            assert "busy" in refused.json()["error"] and refused.headers["retry-after"]
        assert sorted(p.name for p in conversations_dir(workspace).iterdir()) == files
        listed = web.client.get("/api/conversations").json()["conversations"]
        assert sorted(c["id"] for c in listed) == sorted(busy)
        gate.event.set()
        assert wait_until(lambda: all(session_of(web, c).wait_idle(0) for c in busy))
        assert web.post("/api/conversations", {}).status_code == 201  # room again


# ---------------------------------------------- answers not held back (Nagle)
def test_serves_connections_send_without_waiting_for_the_clients_ack() -> None:
    """Regression: ``agentkit serve``'s listening socket was made with protocol 0, and
    asyncio turns Nagle off (TCP_NODELAY) only on connections whose socket says
    IPPROTO_TCP: a response's body, written after its headers, waited for the
    client's delayed ACK, 40 ms on every keep-alive request. The listener is served
    as uvicorn serves it (``create_server(sock=...)``)."""
    from agentkit.webchat.serve import listen

    async def nodelay_of_a_connection() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = listen("127.0.0.1", 0)
        server = await asyncio.start_server(on_connect, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(*listener.getsockname())
            try:
                return await asyncio.wait_for(accepted, 30)
            finally:
                writer.close()

    assert asyncio.run(nodelay_of_a_connection()) != 0


# ----------------------------------------------- accepted means saved (16)
def test_messages_accepted_before_ctrl_c_are_delivered_after_a_restart(workspace: Path) -> None:
    gate = Gate()
    script = [gate.hold("never seen"), "answered two three four"]
    with FakeOpenAIServer(script) as model:
        with serve_process(workspace, model.base_url, env=NO_PREWARM) as serve:
            cid = serve.post("/api/conversations", {}).json()["id"]
            assert (
                serve.post(f"/api/conversations/{cid}/messages", {"text": "one"}).status_code == 202
            )
            assert wait_until(lambda: len(model.requests) == 1)
            for text in ("two", "three", "four"):
                sent = serve.post(f"/api/conversations/{cid}/messages", {"text": text})
                assert sent.status_code == 202
            assert serve.stop(signal.SIGINT) == 130
        gate.event.set()
        with serve_process(workspace, model.base_url, env=NO_PREWARM) as serve:
            shown = serve.client.get(f"/api/conversations/{cid}").json()
            assert shown["queued"] == ["two", "three", "four"]  # shown before it is opened
            assert serve.post("/api/switch", {"leaving": None, "to": cid}).status_code == 200

            def done() -> dict[str, Any] | None:
                detail = serve.client.get(f"/api/conversations/{cid}").json()
                return detail if detail["state"] == "idle" and not detail["queued"] else None

            assert wait_until(lambda: done() is not None, 30)
            detail = done()
            assert detail is not None
            assert user_texts(detail) == ["one", "two", "three", "four"]
            assert detail["messages"][-1]["content"] == "answered two three four"


def test_a_message_whose_round_runs_survives_kill_9(workspace: Path) -> None:
    """Regression: the running round's own user message was saved only when its first
    turn ended; kill -9 during that turn lost it."""
    gate = Gate()
    with FakeOpenAIServer([gate.hold("never seen"), "answered"]) as model:
        with serve_process(workspace, model.base_url, env=NO_PREWARM) as serve:
            cid = serve.post("/api/conversations", {}).json()["id"]
            sent = serve.post(f"/api/conversations/{cid}/messages", {"text": "keep me"})
            assert sent.status_code == 202
            assert wait_until(lambda: len(model.requests) == 1)
            assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
        gate.event.set()
        with serve_process(workspace, model.base_url, env=NO_PREWARM) as serve:
            serve.post("/api/switch", {"leaving": None, "to": cid})

            def answered() -> bool:
                detail = serve.client.get(f"/api/conversations/{cid}").json()
                return (
                    detail["messages"][-1:] != []
                    and detail["messages"][-1]["content"] == "answered"
                )

            assert wait_until(answered, 30)
            detail = serve.client.get(f"/api/conversations/{cid}").json()
            assert user_texts(detail) == ["keep me"]


def test_a_round_cut_off_by_kill_9_is_noted_to_the_model_when_reopened(
    workspace: Path,
) -> None:
    """Regression: the server was killed during a round's second request (its tool
    call done); the reopened conversation's next request read as if that round had
    been answered. The model now hears that it was interrupted, before the new message."""
    gate = Gate()
    script = [calls(call("read_file", path="notes.txt")), gate.hold("never seen"), "again"]
    with FakeOpenAIServer(script) as model:
        with serve_process(workspace, model.base_url, env=NO_PREWARM) as serve:
            cid = serve.post("/api/conversations", {}).json()["id"]
            assert (
                serve.post(f"/api/conversations/{cid}/messages", {"text": "one"}).status_code == 202
            )
            assert wait_until(lambda: len(model.requests) == 2)
            assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
        gate.event.set()
        with serve_process(workspace, model.base_url, env=NO_PREWARM) as serve:
            serve.post("/api/switch", {"leaving": None, "to": cid})
            assert (
                serve.post(f"/api/conversations/{cid}/messages", {"text": "two"}).status_code == 202
            )
            assert wait_until(lambda: len(model.requests) == 3, 30)
    sent = model.requests[2]["messages"]
    assert [m["role"] for m in sent[-4:]] == ["assistant", "tool", "system", "user"]
    assert sent[-2]["content"] == prompts.phrase("en", "interrupted_request")
    assert sent[-1]["content"] == "two"


# ------------------------------------------- numbering across sessions (17)
def test_a_resumed_stream_of_a_reopened_conversation_gets_reset_not_a_silent_gap(
    workspace: Path,
) -> None:
    with running_web(workspace, ["first answer", "second answer"]) as web:
        cid = web.new_conversation()
        web.post(f"/api/conversations/{cid}/messages", {"text": "hello"})
        assert session_of(web, cid).wait_idle(20)
        ended_at = session_of(web, cid).bus.last_seq
        assert ended_at > 5
        assert web.post("/api/switch", {"leaving": cid, "to": None}).status_code == 200
        again = web.post("/api/switch", {"leaving": None, "to": cid}).json()
        assert again["last_seq"] == ended_at  # the numbering goes on
        session = session_of(web, cid)
        for i in range(40):
            session.publish(ev.TextDelta(text=f"new {i}"))
        url = f"{web.url}/api/conversations/{cid}/events"
        # It missed events since 5: a reset, then the live one. The other had them all.
        stale = CountedReader(url, {"Last-Event-ID": "5"}, count=2)
        current = CountedReader(url, {"Last-Event-ID": str(ended_at)}, count=41)
        assert wait_until(lambda: len(stale.events) >= 1 and len(current.events) >= 40)
        session.publish(ev.TextDelta(text="live"))
        assert wait_until(lambda: len(stale.events) >= 2 and len(current.events) >= 41)
        stale.close()
        current.close()
        assert stale.events[0] == {"type": "reset", "last_seq": ended_at + 40}
        assert [e["text"] for e in stale.events[1:]] == ["live"]
        # The reader that had everything goes on with no reset and no gap.
        assert [e["seq"] for e in current.events] == list(range(ended_at + 1, ended_at + 42))


# --------------------------------------------------------- damaged files (19)
def test_one_damaged_file_does_not_break_the_list(workspace: Path) -> None:
    folder = conversations_dir(workspace)
    folder.mkdir(parents=True)
    (folder / "conv_numbers.json").write_text('{"messages": [1, 2, 3]}')
    (folder / "conv_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        web.post(f"/api/conversations/{cid}/messages", {"text": "still listed"})
        listed = web.client.get("/api/conversations")
        assert listed.status_code == 200
        states = {c["id"]: c["state"] for c in listed.json()["conversations"]}
        assert states == {cid: states[cid], "conv_numbers": "damaged", "conv_deep": "damaged"}
        for bad in ("conv_numbers", "conv_deep"):
            shown = web.client.get(f"/api/conversations/{bad}")
            assert shown.status_code == 400 and "damaged" in shown.json()["error"]
    assert (folder / "conv_numbers.json").read_text() == '{"messages": [1, 2, 3]}'


# ------------------------------------------------------------ body size (21)
def _send_huge(port: int, head: bytes, chunk: bytes, total: int) -> tuple[bytes, int]:
    """Send ``head`` then ``chunk`` repeatedly (up to ``total`` bytes) until the server
    answers or closes; returns (what it answered, body bytes sent)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setblocking(False)
    sent, answer = 0, b""
    pending = memoryview(head)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if sent < total else [], [], 1)
            if readable:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
                if b"\r\n\r\n" in answer:
                    break
                continue
            if writable:
                if not pending:
                    pending = memoryview(chunk)
                try:
                    n = sock.send(pending)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    break  # the server closed the connection
                if pending.obj is chunk:
                    sent += n
                pending = pending[n:]
    finally:
        sock.close()
    return answer, sent


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_huge_body_is_refused_without_being_read(workspace: Path, framing: str) -> None:
    """Regression: a 300 MB body was read whole (644 MB of server memory) before the 413."""
    total = 300_000_000
    block = b"x" * 65536
    with running_web(workspace, ["ok"]) as web:
        port = web.server.port
        if framing == "content-length":
            head = (
                "POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {total}\r\n\r\n"
            ).encode()
            chunk = block
        else:
            head = (
                b"POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"%x\r\n" % len(block) + block + b"\r\n"
        answer, sent = _send_huge(port, head, chunk, total)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert sent < 50 * MAX_BODY, sent  # refused early, not after reading it all
        # A body just under the limit is still read.
        fine = web.client.post(
            "/api/conversations", content=json.dumps({"title": "t" * 10}), headers=JSON
        )
        assert fine.status_code == 201
        assert web.client.get("/api/conversations").status_code == 200


# ---------------------------------------------------- stream fan-out (11a, 22)
def test_readers_that_vanish_mid_burst_log_nothing(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: about 75 "socket.send() raised exception." lines (asyncio's) after
    SSE clients disconnected, from writes to connections already lost."""
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        session = session_of(web, cid)
        sockets = []
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", web.server.port))
            sock.sendall(
                f"GET /api/conversations/{cid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            )
            assert sock.recv(100).startswith(b"HTTP/1.1 200")
            sockets.append(sock)
        assert wait_until(lambda: session.bus.subscribers >= 1)
        with caplog.at_level(logging.WARNING):
            for sock in sockets:  # a reset, as a closed tab or a dropped network gives
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            for i in range(2000):
                session.publish(ev.TextDelta(text=f"burst {i} " * 10))
            assert wait_until(lambda: session.bus.subscribers == 0)
        noisy = [r for r in caplog.records if "socket.send() raised exception" in r.getMessage()]
        assert noisy == []


async def _follow(url: str, count: int) -> list[int]:
    seqs: list[int] = []
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(30, read=None)) as client,
        client.stream("GET", url) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                seqs.append(int(line[3:]))
                if len(seqs) == count:
                    break
    return seqs


def test_many_readers_get_every_event_in_order(workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        session = session_of(web, cid)
        url = f"{web.url}/api/conversations/{cid}/events?after=0"
        count, readers = 600, 40

        async def run() -> list[list[int]]:
            tasks = [asyncio.create_task(_follow(url, count)) for _ in range(readers)]
            while session.bus.subscribers < 1 or not all_joined():
                await asyncio.sleep(0.05)
            for i in range(count):
                session.publish(ev.TextDelta(text=f"t{i}"))
                if i % 50 == 0:
                    await asyncio.sleep(0)
            return await asyncio.wait_for(asyncio.gather(*tasks), 60)

        def all_joined() -> bool:
            fanout = web.server.app.state.agentkit.fanouts.get(session.bus)
            return fanout is not None and fanout.readers == readers

        got = asyncio.run(run())
    assert all(seqs == list(range(1, count + 1)) for seqs in got)


def test_a_reader_that_stops_reading_is_cut_and_told_on_reconnect(workspace: Path) -> None:
    with running_web(workspace, ["ok"]) as web:
        cid = web.new_conversation()
        session = session_of(web, cid)
        fanouts = web.server.app.state.agentkit.fanouts
        stuck = socket.create_connection(("127.0.0.1", web.server.port))
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(
            f"GET /api/conversations/{cid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        )
        assert wait_until(lambda: session.bus.subscribers >= 1)
        for i in range(5):
            session.publish(ev.TextDelta(text=f"small {i}"))
        assert wait_until(lambda: fanouts[session.bus].delivered == 5)
        payload = "y" * 10_000
        for i in range(5, 3000):  # far more than MAX_BEHIND plus the socket buffers
            session.publish(ev.TextDelta(text=f"{i}:{payload}"))
        assert 10 * MAX_BEHIND < 3000 * 10_000
        # Cut: its stream has ended, or ends as soon as it can write again.
        assert wait_until(lambda: session.bus not in fanouts or _cut(fanouts[session.bus]))
        # Reading again: what was written arrives, then the stream ends (a gap follows).
        stuck.settimeout(10)
        received = b""
        while not received.endswith(b"\r\n0\r\n\r\n"):  # the last chunk
            data = stuck.recv(1 << 20)
            if not data:
                break
            received += data
        stuck.close()
        ids = [int(line[3:]) for line in received.decode().splitlines() if line.startswith("id:")]
        assert ids and ids == list(range(1, len(ids) + 1)) and len(ids) < 2000
        reader = CountedReader(
            f"{web.url}/api/conversations/{cid}/events", {"Last-Event-ID": str(ids[-1])}, count=1
        )
        assert wait_until(lambda: len(reader.events) >= 1)
        reader.close()
        assert reader.events[0] == {"type": "reset", "last_seq": 3000}
        assert session.bus.subscribers == 0 or wait_until(lambda: session.bus.subscribers == 0)


def _cut(fanout: Any) -> bool:
    return any(r.cut for r in list(fanout._readers))  # noqa: SLF001 - the test looks inside
