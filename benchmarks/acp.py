"""``agentkit acp`` seen from an editor (issue 24): first update after a prompt, and the
latency of an update from the engine's event to the client.

The agent is a real ``agentkit acp`` process (this file run with ``--agent``: the CLI's
own entry point, plus a probe that stamps each event as the conversation publishes it);
the client is the ``acp`` library's, in this process, on the agent's stdin and stdout;
the model is agentkit.testing.FakeOpenAIServer on loopback. Stamps are CLOCK_MONOTONIC
(``time.monotonic_ns``), one clock for every process on the machine.

Prints:
- first update after a prompt: from sending ``session/prompt`` to the first
  ``session/update`` of that turn reaching the client (the model answers at once, so
  this is agentkit's own cost: the prompt, the round starting, one model request over
  HTTP, the first streamed chunk mapped and sent). The first prompt of a session
  apart, then the median and p90 of the next ``PROMPTS``.
- update latency: from the engine publishing an event (``Session.subscribe``'s
  callbacks, the probe first) to the client's ``session_update`` being called with
  its update, for ``agent_message_chunk`` (one per streamed chunk, ``CHUNKS`` chunks
  ``CHUNK_GAP`` s apart per reply) and ``tool_call`` (a read_file call per reply):
  median, p99, max. Goal: under 20 ms on loopback.

Run: python benchmarks/acp.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

REPO = Path(__file__).resolve().parents[1]
# This file is named acp.py: its folder must not shadow the acp library.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
PROMPTS = 20
CHUNKS = 25
CHUNK_GAP = 0.004


# --------------------------------------------------------------- the agent side
def run_agent(stamps_path: str) -> int:
    """``agentkit acp`` with a probe: every TextDelta and ToolCallStarted is stamped as
    it is published, before the ACP session's own callback sees it; the stamps are
    written to ``stamps_path`` when the agent exits."""
    import atexit

    from agentkit import events as ev
    from agentkit.acp.session import AcpSession
    from agentkit.cli import main

    stamps: list[tuple[str, str, int]] = []

    def probe(event: Any) -> None:
        if isinstance(event, ev.TextDelta):
            stamps.append(("text", event.text, time.monotonic_ns()))
        elif isinstance(event, ev.ToolCallStarted):
            stamps.append(("tool", event.call_id, time.monotonic_ns()))

    start = AcpSession.start

    def start_with_probe(self: AcpSession) -> None:
        self.session.subscribe(probe)  # subscribed first: called first
        start(self)

    AcpSession.start = start_with_probe  # type: ignore[method-assign]

    def dump() -> None:
        Path(stamps_path).write_text(json.dumps(stamps))

    atexit.register(dump)
    return main(["acp"])


# -------------------------------------------------------------- the client side
class Client:
    """The editor: stamps every update as the library hands it over."""

    def __init__(self) -> None:
        self.updates: list[tuple[int, dict[str, Any]]] = []
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        now = time.monotonic_ns()
        self.updates.append((now, update.model_dump(mode="json", by_alias=True)))
        self.changed.set()

    async def request_permission(self, **kwargs: Any) -> Any:
        raise AssertionError("no permission is asked in this benchmark")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def script(prompts: int) -> list[Any]:
    """Per prompt: a read_file call, then a reply streamed as CHUNKS chunks."""
    from agentkit.testing import RawChunks, Reply

    out: list[Any] = []
    for n in range(prompts + 1):
        out.append(
            Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}, "id": f"c{n}"}])
        )
        pieces = [_chunk({"role": "assistant", "content": ""})]
        pieces += [_chunk({"content": f"w{n}.{i} "}) for i in range(CHUNKS)]
        pieces += [_chunk({}, "stop"), {"__sse__": "done"}]
        out.append(RawChunks(pieces, chunk_delay=CHUNK_GAP))
    return out


def agent_env(base_url: str, stamps: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTKIT_"))}
    env.update(
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="bench-key",
        AGENTKIT_MODEL="fake-model",
        AGENTKIT_LANGUAGE="en",
        AGENTKIT_MAX_RETRIES="0",
        # Token counts estimated: tiktoken would first try to download its tables
        # (off loopback; seconds on a machine without internet), not agentkit's cost.
        AGENTKIT_TOKENIZER="estimate",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        ACP_BENCH_STAMPS=stamps,
    )
    return env


async def drive(base_url: str, workspace: Path, stamps: str) -> tuple[list[float], Client]:
    """One session, PROMPTS + 1 prompts; returns the first-update times (ms) and the client."""
    from acp import PROTOCOL_VERSION, spawn_agent_process
    from acp.schema import ClientCapabilities, FileSystemCapabilities, TextContentBlock

    client = Client()
    firsts: list[float] = []
    async with spawn_agent_process(
        client,
        sys.executable,
        str(Path(__file__).resolve()),
        "--agent",
        env=agent_env(base_url, stamps),
        cwd=str(workspace),
        transport_kwargs={"stderr": None},
    ) as (conn, _proc):
        caps = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False,
        )
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        for n in range(PROMPTS + 1):
            seen = len(client.updates)
            sent = time.monotonic_ns()
            prompt = [TextContentBlock(type="text", text=f"prompt {n}")]
            response = await conn.prompt(session_id=session.session_id, prompt=prompt)
            assert response.stop_reason == "end_turn", response
            first = client.updates[seen][0]
            firsts.append((first - sent) / 1e6)
        conn_close = getattr(conn, "close", None)
        if conn_close is not None:
            await conn_close()
    return firsts, client


def latencies(client: Client, stamps: list[tuple[str, str, int]]) -> dict[str, list[float]]:
    """Per kind, ms from the event's stamp to the client's receipt of its update."""
    published = {(kind, key): at for kind, key, at in stamps}
    out: dict[str, list[float]] = {"agent_message_chunk": [], "tool_call": []}
    for at, update in client.updates:
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk":
            key = ("text", update["content"]["text"])
        elif kind == "tool_call":
            key = ("tool", update["toolCallId"])
        else:
            continue
        if key in published:
            out[kind].append((at - published[key]) / 1e6)
    return out


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    """Run the benchmark and print its two tables."""
    from agentkit.testing import FakeOpenAIServer

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        (workspace / "a.txt").write_text("hello\n")
        stamps_path = str(Path(tmp) / "stamps.json")
        with FakeOpenAIServer(script(PROMPTS)) as server:
            firsts, client = asyncio.run(drive(server.base_url, workspace, stamps_path))
        for _ in range(100):  # the agent writes its stamps as it exits
            if os.path.exists(stamps_path):
                break
            time.sleep(0.05)
        stamps = [tuple(s) for s in json.loads(Path(stamps_path).read_text())]
    rest = firsts[1:]
    print("| first update after session/prompt | ms |")
    print("|---|---|")
    print(f"| first prompt of a session | {firsts[0]:.1f} |")
    print(f"| next {len(rest)} prompts, median | {statistics.median(rest):.1f} |")
    print(f"| next {len(rest)} prompts, p90 | {_q(rest, 0.9):.1f} |")
    print()
    print("| engine event → client update | n | median ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for kind, values in latencies(client, stamps).items():  # type: ignore[arg-type]
        if not values:
            print(f"| {kind} | 0 | - | - | - |")
            continue
        print(
            f"| {kind} | {len(values)} | {statistics.median(values):.2f} "
            f"| {_q(values, 0.99):.2f} | {max(values):.2f} |"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--agent"]:
        sys.exit(run_agent(os.environ["ACP_BENCH_STAMPS"]))
    main()
