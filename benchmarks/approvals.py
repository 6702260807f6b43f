"""What approvals and hooks cost a tool call.

Measures, per tool call through ``ToolRegistry.execute`` of a tool that does nothing
(its argument validation included), so the rows differ by what approvals and hooks add:

* no gate (nothing configured: every call without approvals or hooks);
* the approval check when no rule matches (a dozen rules over other tools and command
  patterns; goal: under 0.1 ms per call), on ``ApprovalPolicy.decide`` alone and
  through the registry;
* a call of a tool with a path argument (named read_file, doing nothing): its path is
  resolved after links for the rules and again just before it runs;
* a PreToolUse command hook per call: ``true`` (the floor: a process started so that it
  dies with the agent, agentkit.policy.hooks), ``cat >/dev/null`` (reads its stdin JSON)
  and a Python script that parses it (what a typical hook is).

Run: python benchmarks/approvals.py [--calls N] [--hook-calls M]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentkit.policy.approvals import ApprovalPolicy  # noqa: E402
from agentkit.policy.hook_config import parse_hooks  # noqa: E402
from agentkit.policy.hooks import HookRunner  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.tools.base import Tool, ToolContext
from agentkit.tools.gate import AskAnswer, ToolGate  # noqa: E402
from agentkit.tools.registry import ToolRegistry  # noqa: E402

RULES = {
    "run_command:git push*": "ask",
    "run_command:rm -rf*": "deny",
    "run_command:curl *": "ask",
    "run_command:docker *": "ask",
    "write_file:*.env": "deny",
    "edit_file:migrations/*": "ask",
    "mcp__github__*": "ask",
    "mcp__github__list_*": "allow",
    "mcp__slack__post_message": "ask",
    "extract_webpage": "ask",
    "web_search": "allow",
    "terminate_sub_agent": "ask",
}
PYTHON_HOOK = "import json, sys; json.load(sys.stdin)"


class PathParams(BaseModel):
    path: str


def per_call(run: Callable[[], object], calls: int) -> float:
    """Median of 5 batches, microseconds per call."""
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        batches.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(batches)


def noop(params: PathParams, ctx: ToolContext) -> str:
    """A path tool that does nothing: what the gate adds to a path is measured alone."""
    return "ok"


def never(_request: object, _cancel: object) -> AskAnswer:
    raise AssertionError("no rule should ask in this benchmark")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--hook-calls", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp).resolve()
        settings = Settings(model="m", api_key="k", language="en")
        registry = ToolRegistry(
            [Tool("noop", PathParams, lambda p, ctx: "ok"), Tool("read_file", PathParams, noop)]
        )
        (workspace / "src" / "pkg").mkdir(parents=True)
        (workspace / "src" / "pkg" / "a.txt").write_text("x")
        (workspace / "link.txt").symlink_to("src/pkg/a.txt")
        policy = ApprovalPolicy(RULES)
        plain = ToolContext(workspace=workspace, settings=settings)
        gate = ToolGate(policy, never, None, "en")
        gated = ToolContext(workspace=workspace, settings=settings, gate=gate)
        call = {"path": "a.txt"}
        command = {"command": "pytest -q tests/test_store.py"}
        compound = {"command": "cd src && pytest -q | tail -5"}

        def through(ctx: ToolContext) -> Callable[[], object]:
            return lambda: registry.execute("noop", call, ctx, "call_1")

        def with_hook(line: str) -> ToolContext:
            config = parse_hooks({"PreToolUse": [{"hooks": [{"command": line}]}]}, "bench")
            hooks = HookRunner(config, workspace=workspace, settings=settings, base={})
            hooked = ToolGate(ApprovalPolicy(), never, hooks, "en")
            return ToolContext(workspace=workspace, settings=settings, gate=hooked)

        n = args.calls
        rows = [
            ("decide(): no rule matches read_file", per_call(lambda: policy.decide("read_file", call), n)),
            ("decide(): run_command, its patterns checked", per_call(lambda: policy.decide("run_command", command), n)),
            ("decide(): a compound command line, split", per_call(lambda: policy.decide("run_command", compound), n)),
            ("a call, no gate (nothing configured)", per_call(through(plain), n)),
            ("a call, 12 rules, none matching", per_call(through(gated), n)),
            ("a path tool's call, its path resolved (rules, then again before it runs)", per_call(lambda: registry.execute("read_file", {"path": "src/pkg/a.txt"}, gated), n)),
            ("the same through a link", per_call(lambda: registry.execute("read_file", {"path": "link.txt"}, gated), n)),
        ]  # fmt: skip
        python = f"{shlex.quote(sys.executable)} -c {shlex.quote(PYTHON_HOOK)}"
        hooks = [("`true`", "true"), ("`cat >/dev/null`", "cat >/dev/null"), ("Python", python)]
        for label, line in hooks:
            ctx = with_hook(line)
            through(ctx)()  # warm: the launch mode probe
            rows.append(
                (f"a call, PreToolUse hook {label}", per_call(through(ctx), args.hook_calls))
            )
    base = rows[3][1]
    print("| per tool call | µs | added, µs |\n|---|---:|---:|")
    for label, value in rows:
        added = "" if label.startswith(("decide", "a call, no gate")) else f"{value - base:,.1f}"
        print(f"| {label} | {value:,.1f} | {added} |")


if __name__ == "__main__":
    main()
