"""What tracing costs a turn, on and off, and what the span queue holds (issue 23, docs/tracing.md).

1. Per-turn CPU of this process (time.process_time: every thread, the exporter's too)
   with tracing off and on, in the same run, interleaved (off, on, off, on...) so that
   the machine's load hits both alike; the median of the off runs and of each pair's
   difference (a shared machine's load drifts: neighbours differ least). Two loops: the engine with the real
   client against FakeOpenAIServer (another process, zero latency), and the engine
   alone (a canned model, no HTTP). Spans go over OTLP/HTTP to a receiver in another
   process that answers 200. Goal: on costs under 5 % of the engine's own per-turn
   cost; off costs nothing (the no-op calls a turn makes are timed on their own). The
   SDK's own cost for the same two spans, without agentkit, is timed too: the floor.
2. The span queue over a 1,000-turn run (canned model, a tool call per turn): its
   largest length and the memory held by spans (tracemalloc, allocations made in
   opentelemetry and agentkit/tracing), with a live collector, a dead one (refused
   port: the BatchSpanProcessor's queue fills to its bound, 2048), and a dead one with
   message content captured (each chat span then holds the conversation, capped).

Run: python benchmarks/tracing.py   (needs the otel extra)
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import tracemalloc
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_overhead import SERVER, history  # noqa: E402  (the same fake model, same history)

RECEIVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
"""
TURNS = 100
ROUNDS = 15
LONG_RUN = 1000


def refused() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def tracing_on(endpoint: str, content: bool = False) -> None:
    from agentkit import tracing

    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true" if content else ""
    assert tracing.configure()


def tracing_off() -> None:
    from agentkit import tracing

    tracing.shutdown(5)


def cpu_ms(fn: Any) -> tuple[float, float]:
    """CPU ms of ``fn()``: the whole process's (every thread), and this thread's alone."""
    process, thread = time.process_time(), time.thread_time()
    fn()
    return (time.process_time() - process) * 1000, (time.thread_time() - thread) * 1000


def interleaved(fn: Any, endpoint: str) -> list[tuple[float, float]]:
    """CPU ms of ``fn`` with tracing off, and what tracing adds, from runs in alternation
    (off, on, off, on...): ``[(off, on - off)]`` for the whole process and for this
    thread alone; medians of the runs and of the pairs' differences (the load of a
    shared machine drifts: neighbours differ least)."""
    fn()  # warm up
    off, on = [], []
    for _ in range(ROUNDS):
        off.append(cpu_ms(fn))
        tracing_on(endpoint)
        on.append(cpu_ms(lambda: (fn(), tracing_off())))  # the export's CPU is counted
    return [
        (
            statistics.median(o[i] for o in off),
            statistics.median(b[i] - a[i] for a, b in zip(off, on, strict=True)),
        )
        for i in (0, 1)
    ]


def sdk_floor_us(endpoint: str) -> tuple[float, float]:
    """Microseconds of CPU (all threads, this thread) the SDK alone takes for one turn's
    two spans with the attributes agentkit gives them (a chat span made after the fact,
    a tool span made current), exported through the same BatchSpanProcessor and
    OTLP/HTTP exporter: the floor under what tracing can cost a turn."""
    from opentelemetry import context, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{endpoint}/v1/traces")))
    tracer = provider.get_tracer("floor")
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "bench",
        "server.address": "127.0.0.1",
        "server.port": 8080,
        "gen_ai.request.stream": True,
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.response.model": "bench",
        "gen_ai.response.id": "chatcmpl-1",
    }
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "noop"}

    def one_turn() -> None:
        span = tracer.start_span(
            "chat bench", kind=SpanKind.CLIENT, attributes=dict(chat), start_time=time.time_ns()
        )
        span.end()
        span = tracer.start_span(
            "execute_tool noop", attributes={**tool, "gen_ai.tool.call.id": "c"}
        )
        token = context.attach(trace.set_span_in_context(span))
        context.detach(token)
        span.end()

    runs = []
    for _ in range(ROUNDS):
        runs.append(cpu_ms(lambda: ([one_turn() for _ in range(TURNS)], provider.force_flush())))
    provider.shutdown()
    return tuple(statistics.median(r[i] for r in runs) / TURNS * 1000 for i in (0, 1))  # type: ignore[return-value]


def noop_cost_us(engine: Any, call: Any, settings: Any) -> float:
    """Microseconds a turn spends in agentkit.tracing while tracing is off: one chat
    span and one tool span, each entered, given its result, and left."""
    from agentkit import tracing

    def one_turn() -> None:
        with tracing.chat_span(engine) as span:
            span.turn(None)  # type: ignore[arg-type]
        with tracing.tool_span(call, settings) as span:
            span.result(None)  # type: ignore[arg-type]

    n = 100_000
    return min(timeit.repeat(one_turn, number=n, repeat=5)) / n * 1e6


def queue_of(live: Any) -> Any:
    processor = live.provider._active_span_processor._span_processors[0]
    return processor._batch_processor._queue


def long_run(make_engine: Any, endpoint: str, content: bool) -> tuple[int, float]:
    """A LONG_RUN-turn run: (largest queue length, MiB held by spans at its largest)."""
    from agentkit import tracing

    tracing_on(endpoint, content)
    live = tracing._live
    queue, largest, peak = queue_of(live), 0, 0
    tracemalloc.start()
    filters = [
        tracemalloc.Filter(True, "*opentelemetry*"),
        tracemalloc.Filter(True, "*agentkit/tracing*"),
    ]
    engine = make_engine(LONG_RUN)
    original = engine._call_tool

    def sample(call: Any) -> Any:
        nonlocal largest, peak
        result = original(call)
        largest = max(largest, len(queue))
        if engine.conversation.stats.turns % 50 == 0:
            snapshot = tracemalloc.take_snapshot().filter_traces(filters)
            peak = max(peak, sum(s.size for s in snapshot.statistics("filename")))
        return result

    engine._call_tool = sample
    engine.run()
    tracemalloc.stop()
    tracing.shutdown(1)
    return largest, peak / 2**20


def main() -> None:
    from pydantic import BaseModel

    from agentkit.conversation import Conversation
    from agentkit.engine import Engine
    from agentkit.llm import LLMClient
    from agentkit.llm.turns import AssistantTurn, ToolCall, Usage
    from agentkit.settings import Settings
    from agentkit.tools.base import Tool, ToolContext
    from agentkit.tools.registry import ToolRegistry

    class NoopParams(BaseModel):
        note: str = ""

    registry = ToolRegistry([Tool("noop", NoopParams, lambda p, ctx: "ok", description="Nothing.")])
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    client: Any = None
    try:
        base_url = server.stdout.readline().strip()  # type: ignore[union-attr]
        endpoint = receiver.stdout.readline().strip()  # type: ignore[union-attr]
        settings = Settings(
            model="bench", base_url=base_url, api_key="k", language="en", stream=True
        )
        client = LLMClient(settings)

        class Canned:
            def complete(self, messages: Any, tools: Any, **_: Any) -> AssistantTurn:
                call = ToolCall(id=f"c{len(messages)}", name="noop", arguments={"note": "x"})
                return AssistantTurn(
                    content=None, tool_calls=[call], usage=Usage(10, 5, 15), response_model="bench"
                )

        with tempfile.TemporaryDirectory() as tmp:
            workspace = Path(tmp)

            def engine(model: Any, messages: list[dict[str, Any]], turns: int) -> Engine:
                return Engine(
                    model=model,
                    registry=registry,
                    conversation=Conversation(messages=[dict(m) for m in messages]),
                    ctx=ToolContext(workspace=workspace, settings=settings),
                    max_turns=turns,
                )

            base = history(100)
            with_http = interleaved(lambda: engine(client, base, TURNS).run(), endpoint)
            alone = interleaved(lambda: engine(Canned(), base, TURNS).run(), endpoint)
            assert "opentelemetry" in " ".join(sys.modules)  # on was really on
            probe = engine(Canned(), base, 1)
            call = ToolCall(id="c", name="noop", arguments={})
            noop = noop_cost_us(probe, call, settings)
            floor = sdk_floor_us(endpoint)

            def long_engine(turns: int) -> Engine:
                return engine(Canned(), history(2), turns)

            live = long_run(long_engine, endpoint, content=False)
            dead = long_run(long_engine, refused(), content=False)
            dead_content = long_run(long_engine, refused(), content=True)
    finally:
        if client is not None:
            client.close()
        server.stdin.close()  # type: ignore[union-attr]
        receiver.terminate()
        for process in (server, receiver):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    print(
        f"CPU ms per turn from 100 messages on, tracing off and what on adds ({ROUNDS} "
        f"interleaved pairs of runs of {TURNS} turns, medians; on includes exporting the spans)"
    )
    print(f"{'loop':>46} | {'off':>7} | {'on adds':>8} | {'share':>6}")
    for label, (process, thread) in (
        ("engine + client over HTTP", with_http),
        ("engine alone (canned model)", alone),
    ):
        for what, (off, added) in (("all threads", process), ("the loop's thread", thread)):
            name = f"{label}, {what}"
            print(f"{name:>46} | {off / TURNS:7.3f} | {added / TURNS:8.3f} | {added / off:6.1%}")
    print(f"off: the no-op tracing calls of one turn take {noop:.2f} us")
    print(
        f"the SDK alone, one turn's two spans with these attributes, exported: "
        f"{floor[0]:.0f} us all threads, {floor[1]:.0f} us on the calling thread"
    )
    print(f"span queue over a {LONG_RUN}-turn run (a chat and a tool span per turn):")
    for label, (largest, mib) in (
        ("live collector", live),
        ("dead collector (refused port)", dead),
        ("dead collector, content captured", dead_content),
    ):
        print(f"{label:>34} | largest queue {largest:5d} spans | spans hold at most {mib:7.1f} MiB")


if __name__ == "__main__":
    main()
