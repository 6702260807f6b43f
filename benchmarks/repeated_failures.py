"""The tiny local model and identical failing tool calls: where to put the note.

Issue 20 saw the toy local model (Gemma 3 270M) run the same failing command 17
times in a row. The engine now adds one note to the result of the N-th identical
failing call in a row (``Settings.repeated_failure_note``, agentkit.tools.repeats).
This runs tasks whose obvious call fails (a missing script, a missing file, a
missing Makefile) with the note off and at several N, and prints per N: runs, the
identical failing calls in a row (longest streak, mean), how many runs changed the
call right after the note, the turns used and the wall time.

Needs the local extra. Run: python benchmarks/repeated_failures.py [--runs R]
[--turns T] [--n 0,2,3,4] [--tasks 0,1,2] (each task R times per N; a run stops
after T turns).
"""

from __future__ import annotations

import argparse
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit.agent import Agent  # noqa: E402
from agentkit.local import LocalModelServer  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.tools.repeats import call_key  # noqa: E402

TASKS = [
    "Run the command `python3 check.py` and tell me what it prints.",
    "Read the file config.yaml and tell me which port it sets.",
    "Run `make test` and tell me whether the tests pass.",
]


def streaks(messages: list[dict[str, Any]]) -> tuple[int, bool | None]:
    """The longest run of identical failing calls, and whether the call after the
    note differed from the noted one (None: no note)."""
    results = {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}
    keys: list[tuple[str, bool, bool]] = []  # (call, failed, noted)
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call["function"]
            try:
                arguments = json.loads(function["arguments"])
            except ValueError:
                arguments = None
            text = results.get(call["id"], "")
            failed = text.startswith("Error:") or "[exit 0 " not in text and "[exit " in text
            noted = "identical call" in text
            keys.append(
                (call_key(function["name"], arguments, function["arguments"]), failed, noted)
            )
    longest = current = 0
    previous = None
    changed: bool | None = None
    for i, (key, failed, noted) in enumerate(keys):
        current = current + 1 if failed and key == previous else (1 if failed else 0)
        previous = key if failed else None
        longest = max(longest, current)
        if noted and changed is None:
            changed = i + 1 < len(keys) and keys[i + 1][0] != key
    return longest, changed


def run(server: LocalModelServer, task: str, note_after: int, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        values = {
            **server.settings_overrides(),
            "language": "en",
            "max_turns": turns,
            "repeated_failure_note": note_after,
            "web_search_provider": "searxng:http://127.0.0.1:9",  # offline: a dead port
        }
        started = time.monotonic()
        with Agent(folder, Settings(**values), subagents=False) as agent:
            result = agent.run(task)
            messages = agent.conversation.messages
        longest, changed = streaks(messages)
        return {
            "longest": longest,
            "changed": changed,
            "turns": result.stats.get("turns", 0),
            "seconds": time.monotonic() - started,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--n", default="0,2,3,4", help="N values to try (0: no note)")
    parser.add_argument("--tasks", default="0,1,2", help="which TASKS to run (indexes)")
    args = parser.parse_args()
    tasks = [TASKS[int(i)] for i in args.tasks.split(",")]
    rows = []
    with LocalModelServer() as server:
        for n in [int(v) for v in args.n.split(",")]:
            found = []
            for task in [t for t in tasks for _ in range(args.runs)]:
                found.append(run(server, task, n, args.turns))
                print(f"N={n} {task[:40]!r}: {found[-1]}", file=sys.stderr, flush=True)
            noted = [f["changed"] for f in found if f["changed"] is not None]
            rows.append(
                (
                    "off" if n == 0 else str(n),
                    len(found),
                    max(f["longest"] for f in found),
                    statistics.mean(f["longest"] for f in found),
                    f"{sum(noted)}/{len(noted)}",
                    statistics.mean(f["turns"] for f in found),
                    statistics.mean(f["seconds"] for f in found),
                )
            )
    print("| N | runs | longest streak | mean streak | changed after the note | turns | s/run |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.1f} | {row[4]} | {row[5]:.1f} | {row[6]:.0f} |"
        )


if __name__ == "__main__":
    main()
