"""The local model (Gemma 3 270M on llama-cpp-python) with native and prompted tool calls.

Per task (read a file, write a file, start a sub-agent that calls finish_task) and
mode, prints the turns, tool calls (by name), prompt and completion tokens (as the
server counted them), wall time, and whether the task's effect happened; then the
prompt tokens the tool description costs in each mode. Modes:

- ``prompted``: agentkit's default for ``--local``: Gemma 3's own chat format,
  tools in the system prompt, a grammar on the reply;
- ``native``: the ``tools`` parameter on llama-cpp-python's
  chatml-function-calling format, ``tool_choice`` unset (what ``--local`` did before);
- ``native-required``: the same with ``tool_choice: required``.

Needs the local extra. Run: python benchmarks/local_model.py [--runs N]
(each task is run N times per mode; the machine's cores all go to generation).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit.agent import Agent  # noqa: E402
from agentkit.llm import LLMClient  # noqa: E402
from agentkit.local import CHAT_FORMAT, LocalModelServer  # noqa: E402
from agentkit.settings import Settings  # noqa: E402

TASKS: list[tuple[str, str, dict[str, Any]]] = [
    ("read", "Read notes.txt and tell me its first line.", {"max_turns": 3}),
    ("write", "Read notes.txt and write its first line to first.txt", {"max_turns": 4}),
    (
        "sub-agent",
        "Start a sub-agent that writes a haiku to poem.txt and reports back.",
        {"max_turns": 2, "subagent_max_turns": 2, "subagent_timeout_min": 1},
    ),
]
MODES: dict[str, dict[str, Any]] = {
    "prompted": {},
    "native": {"tool_calling": "native"},
    "native-required": {"tool_calling": "native", "tool_choice": "required"},
}


def run_task(
    server: LocalModelServer, mode: dict[str, Any], task: str, extra: dict[str, Any]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / "notes.txt").write_text("Buy milk\nCall Bob\n")
        values = {**server.settings_overrides(), "language": "en", **extra, **mode}
        values["web_search_provider"] = "searxng:http://127.0.0.1:9"  # offline: a dead port
        started = time.monotonic()
        with Agent(workspace, Settings(**values)) as agent:
            result = agent.run(task)
        wall = time.monotonic() - started
        saved = json.loads(Path(str(result.transcript_path)).read_text())
        stats = saved["stats"]
        effect = {
            "first.txt": (workspace / "first.txt").is_file(),
            "sub-agent": any(workspace.glob("sub_agent_results/agent_*/.subagent")),
        }
        return {
            "status": result.status,
            "turns": stats["turns"],
            "calls": stats["tool_calls"],
            "prompt": stats["prompt_tokens"],
            "completion": stats["completion_tokens"],
            "wall": wall,
            "effect": effect,
            "error": (result.error or "")[:90],
        }


def description_cost(server: LocalModelServer, mode: dict[str, Any]) -> int:
    """Prompt tokens the server counts for the main agent's tools in ``mode``."""
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(**{**server.settings_overrides(), "language": "en", **mode})
        with Agent(Path(folder), settings) as agent:
            tools = agent.registry.schemas("en")
        messages = [{"role": "user", "content": "hi"}]
        counts = []
        for offered in (None, tools):
            with LLMClient(settings.model_copy(update={"max_output_tokens": 1})) as client:
                try:
                    counts.append(client.complete(messages, offered).usage.prompt_tokens)
                except Exception as exc:  # native-required fails on this server
                    print(f"  ({exc.__class__.__name__}: {str(exc)[:80]})")
                    return -1
        return counts[1] - counts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as logs:
        for name in args.modes.split(","):
            mode = MODES[name]
            chat_format = CHAT_FORMAT if name == "prompted" else "chatml-function-calling"
            with LocalModelServer(logs, chat_format=chat_format) as server:
                print(f"== {name}: tool description costs {description_cost(server, mode)} tokens")
                for label, task, extra in TASKS:
                    for _ in range(args.runs):
                        row = run_task(server, mode, task, extra)
                        print(
                            f"{label:9} {row['status']:6} turns={row['turns']} "
                            f"calls={row['calls']} prompt={row['prompt']} "
                            f"completion={row['completion']} wall={row['wall']:.1f}s "
                            f"effect={row['effect']} {row['error']}",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
