"""Memory of a long streamed answer: RSS growth per MB of answer text (issue 20 item 24).

A model streams its answer a few characters per event. The FakeOpenAIServer runs in
its own process and sends ``MB`` megabytes of text in 4-character deltas (262,144
events per MB, as a model writing one token per event); a fresh child process
receives it and reports its peak RSS above the level it had before the request:

- ``client``: one ``LLMClient.complete`` (the reply assembled into an AssistantTurn);
- ``agent``: ``Agent.run`` with an event callback, so the engine, the events, the
  transcript and its save are included.

Before the fix the assembler kept every delta as its own string (about 17 bytes of
memory per byte of text); ``agentkit/llm/_pieces.py`` joins them in batches. What
``agent`` adds is mostly transient copies of the finished text: the transcript's
save encodes ``final_text`` and the messages, then joins them (agentkit/jsonfile.py).
Compare with another checkout: ``PYTHONPATH=<checkout> python benchmarks/stream_memory.py``.

Run: python benchmarks/stream_memory.py [MB ...]   (default: 1 4)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

SERVER = r"""
import sys
from agentkit.testing import FakeOpenAIServer, RawChunks
events = int(float(sys.argv[1]) * 1024 * 1024 / 4)
chunk = {"choices": [{"index": 0, "delta": {"content": "abcd"}, "finish_reason": None}]}
chunks = [chunk] * events
chunks += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, {"__sse__": "done"}]
with FakeOpenAIServer(lambda request: RawChunks(chunks)) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""

CHILD = r"""
import json, resource, sys, tempfile
from agentkit import Agent, Settings
from agentkit.llm import LLMClient

def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

mode, base_url = sys.argv[1], sys.argv[2]
settings = Settings(model="m", base_url=base_url, api_key="k", max_retries=0, language="en")
before = rss_mb()
if mode == "client":
    with LLMClient(settings) as client:
        before = rss_mb()
        turn = client.complete([{"role": "user", "content": "hi"}], None)
        size = len(turn.content)
else:
    with tempfile.TemporaryDirectory() as folder:
        with Agent(workspace=folder, settings=settings) as agent:
            before = rss_mb()
            result = agent.run("hi", on_event=lambda event: None)
            size = len(result.final_text or "")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"chars": size, "growth": peak - before}))
"""


def measure(mode: str, base_url: str) -> dict[str, float]:
    """Run one child; return its answer size and peak RSS growth (MB)."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, base_url],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    sizes = [float(a) for a in sys.argv[1:]] or [1.0, 4.0]
    print("| answer | mode | peak RSS growth | per MB of text |")
    print("| --- | --- | --- | --- |")
    for mb in sizes:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            for mode in ("client", "agent"):
                result = measure(mode, base_url)
                text_mb = result["chars"] / 1024 / 1024
                print(
                    f"| {mb:g} MB | {mode} | {result['growth']:.1f} MB "
                    f"| {result['growth'] / text_mb:.1f} MB |"
                )
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(10)


if __name__ == "__main__":
    main()
