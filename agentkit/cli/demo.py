"""``agentkit demo``: the whole machinery offline, on a scripted model.

No key and no network: FakeOpenAIServer serves a built-in script (clearly
labelled as such) on 127.0.0.1, and everything else is real: the engine, the
worker processes, the tools, the notifications and the files on disk. On the
given folder (default: a copy of a small sample project shipped with agentkit)
the main agent starts two background sub-agents and a blocking one, waits for
their notifications, reads their deliverables and writes a final report.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

DEMO_MODEL = "agentkit-demo-scripted"
REPORT_FILE = "agentkit_demo_report.md"
TASK = {
    "en": "Review this project: collect the TODO/FIXME notes, measure the code size, summarise the README, and write a report.",
    "zh": "审阅这个项目：收集 TODO/FIXME 注释，统计代码规模，总结 README，并写一份报告。",
}
_SUB_SYSTEM = ("你是一个专注的子智能体", "You are a focused sub-agent")
_AGENT_ID = re.compile(r"(?:你是子智能体 |You are sub-agent )(\d+)")
_ANNOUNCED = re.compile(r"(?:子智能体|Sub-agent )\s*(\d+) \(")


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _tool_texts(request: dict[str, Any]) -> list[str]:
    return [m.get("content") or "" for m in request["messages"] if m.get("role") == "tool"]


# The main agent's first two replies: two background sub-agents and a search, then a
# blocking one.
_OPENING: list[list[dict[str, Any]]] = [
    [
        _call("search_workspace", pattern="", glob="**/*.py"),
        _call(
            "create_sub_agent",
            agent_id=1,
            summary="Collect TODO and FIXME notes",
            task="Search the project for TODO and FIXME comments and write them, grouped by file, "
            "to todos.md in your deliverables directory.",
            run_in_background=True,
            timeout_seconds=300,
        ),
        _call(
            "create_sub_agent",
            agent_id=2,
            summary="Measure the code size",
            task="Count the lines of every Python file with a shell command and write the table "
            "to code_size.md in your deliverables directory.",
            run_in_background=True,
            timeout_seconds=300,
        ),
    ],
    [
        _call(
            "create_sub_agent",
            agent_id=3,
            summary="Summarise the README",
            task="Read README.md (or list the files if there is none) and write a short summary "
            "to summary.md in your deliverables directory.",
            timeout_seconds=300,
        )
    ],
]


class DemoModel:
    """The scripted model: decides each reply from the request it receives.

    Main agent: start sub-agents 1 and 2 in the background and search the project;
    run sub-agent 3 blocking; wait until 1 and 2 are announced; read their
    deliverables; write the report; answer. Sub-agents use search_workspace,
    run_command, read_file and write_file, then finish_task.
    ``latency`` (seconds) slows each reply so the live table can be watched.
    """

    def __init__(self, latency: float = 0.6) -> None:
        self.latency = latency

    def __call__(self, request: dict[str, Any]) -> Any:
        from agentkit.testing import Reply

        messages = request["messages"]
        first = messages[0].get("content") or ""
        if first.startswith(_SUB_SYSTEM):
            match = _AGENT_ID.search(messages[1].get("content") or "")
            reply = self._sub(int(match.group(1)) if match else 0, request)
        else:
            reply = self._main(request)
        if isinstance(reply, str):
            return Reply(content=reply, latency=self.latency)
        return Reply(tool_calls=reply, latency=self.latency)

    # -- the main agent ---------------------------------------------------------
    def _main(self, request: dict[str, Any]) -> Any:
        messages = request["messages"]
        steps = sum(1 for m in messages if m.get("role") == "assistant")
        if steps < 2:
            return _OPENING[steps]
        announced: set[int] = set()
        for m in messages:
            if m.get("role") in ("system", "user") and m is not messages[0]:
                announced.update(int(x) for x in _ANNOUNCED.findall(m.get("content") or ""))
        read = [t for t in _tool_texts(request) if "todos.md" in t or "code_size.md" in t]
        wrote_report = any(REPORT_FILE in t for t in _tool_texts(request)[-1:])
        if not {1, 2} <= announced:
            return "Sub-agent 3 is done. Waiting for the background sub-agents 1 and 2 to finish."
        if not read:
            return [
                _call("read_file", path="sub_agent_results/agent_1/todos.md"),
                _call("read_file", path="sub_agent_results/agent_2/code_size.md"),
                _call("read_file", path="sub_agent_results/agent_3/summary.md"),
            ]
        if not wrote_report:
            bodies = "\n\n".join(_strip_numbers(t) for t in _tool_texts(request)[-3:])
            report = f"# Project review (scripted demo)\n\n{bodies}\n"
            return [_call("write_file", path=REPORT_FILE, content=report)]
        return (
            "## Review finished (scripted demo)\n\n"
            "Three sub-agents worked on the project:\n\n"
            "- **1** collected the TODO/FIXME notes: `sub_agent_results/agent_1/todos.md`\n"
            "- **2** measured the code size: `sub_agent_results/agent_2/code_size.md`\n"
            "- **3** summarised the README: `sub_agent_results/agent_3/summary.md`\n\n"
            f"The combined report is `{REPORT_FILE}`."
        )

    # -- the sub-agents ---------------------------------------------------------
    def _sub(self, agent_id: int, request: dict[str, Any]) -> Any:
        steps = sum(1 for m in request["messages"] if m.get("role") == "assistant")
        folder = f"sub_agent_results/agent_{agent_id}"
        last = (_tool_texts(request) or [""])[-1]
        if agent_id == 1:
            script = [
                [_call("search_workspace", pattern="TODO|FIXME", glob="**/*.py")],
                [_call("write_file", path=f"{folder}/todos.md", content=_todos(last))],
            ]
            summary = (
                "Wrote todos.md: every TODO and FIXME note of the Python files, grouped by file."
            )
        elif agent_id == 2:
            command = "find . -name '*.py' -not -path './.agentkit/*' | sort | xargs wc -l"
            script = [
                [_call("run_command", command=command)],
                [_call("write_file", path=f"{folder}/code_size.md", content=_code_size(last))],
            ]
            summary = "Wrote code_size.md: line counts of the Python files, measured with wc -l."
        else:
            script = [
                [_call("read_file", path="README.md")],
                [_call("write_file", path=f"{folder}/summary.md", content=_summary(last))],
            ]
            summary = (
                "Wrote summary.md: the README's first lines, as a short summary of the project."
            )
        if steps < len(script):
            return script[steps]
        return [_call("finish_task", success=True, summary=summary)]


def _strip_numbers(text: str) -> str:
    """Turn read_file output (``   12\\ttext``) back into plain text."""
    lines = []
    for line in text.splitlines():
        head, tab, rest = line.partition("\t")
        if tab and head.strip().isdigit():
            lines.append(rest)
    return "\n".join(lines) if lines else text


def _todos(search_output: str) -> str:
    rows = [
        line
        for line in search_output.splitlines()
        if re.search(r"TODO|FIXME", line) and ":" in line
    ]
    body = "\n".join(f"- `{row.strip()}`" for row in rows) or "- (none found)"
    return f"## TODO and FIXME notes\n\n{body}\n"


def _code_size(command_output: str) -> str:
    rows = [line.strip() for line in command_output.splitlines() if re.match(r"\s*\d+ ", line)]
    table = "\n".join(f"| {r.split(None, 1)[1]} | {r.split(None, 1)[0]} |" for r in rows)
    return f"## Code size\n\n| file | lines |\n|---|---|\n{table}\n"


def _summary(read_output: str) -> str:
    text = _strip_numbers(read_output)
    if text.startswith("Error:"):
        return "## Summary\n\nThere is no README in this folder.\n"
    lines = [line for line in text.splitlines() if line.strip()][:6]
    return "## README summary\n\n" + "\n".join(lines) + "\n"


def prepare_workspace(workspace: str | None) -> Path:
    """Return the demo's workspace: ``workspace`` if given (must exist), else a fresh
    copy of the shipped sample project in a new marked temporary folder
    (agentkit.cli.demo_copies)."""
    if workspace:
        path = Path(workspace).expanduser().resolve()
        if not path.is_dir():
            raise FileNotFoundError(f"workspace {workspace!r} is not a folder")
        return path
    from agentkit.cli.demo_copies import make_copy

    return make_copy()  # marked; copies unused for a day are swept first


MAX_DEMO_LATENCY = 60.0
"""Seconds: the longest pause per scripted reply ``AGENTKIT_DEMO_LATENCY`` may ask for."""


def demo_latency(default: float) -> float:
    """Seconds per scripted reply: env ``AGENTKIT_DEMO_LATENCY``, else ``default``.

    Raises:
        UsageError: the variable is not a number from 0 to :data:`MAX_DEMO_LATENCY`.
    """
    import math

    from agentkit.cli.common import UsageError

    text = os.environ.get("AGENTKIT_DEMO_LATENCY", "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= MAX_DEMO_LATENCY):
        raise UsageError(
            f"AGENTKIT_DEMO_LATENCY must be a number of seconds from 0 to "
            f"{MAX_DEMO_LATENCY:g}, not {text[:40]!r}"
        )
    return value


def no_downloads() -> None:
    """Keep the demo's promise of no network: tokens are estimated (inherited by the
    workers too), so tiktoken never fetches its tables from the internet. An explicit
    ``AGENTKIT_TOKENIZER`` is kept."""
    os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")


def main(
    workspace: str | None = None, language: str | None = None, latency: float | None = None
) -> int:
    """Run the scripted demo through ``agentkit run``'s code path; returns the exit code.

    ``latency`` defaults to env ``AGENTKIT_DEMO_LATENCY`` or 0.6 s per reply.
    """
    from agentkit.cli.common import ENDPOINT_PLACEHOLDER, make_settings
    from agentkit.cli.run import run_task
    from agentkit.testing import FakeOpenAIServer

    lang = language or os.environ.get("AGENTKIT_LANGUAGE") or "en"
    if latency is None:
        latency = demo_latency(0.6)
    given = {"model": DEMO_MODEL, "api_key": "demo-no-key", "language": lang}
    # The settings first (UsageError): a bad value is said before the banner and the copy.
    make_settings({**ENDPOINT_PLACEHOLDER, **given})
    try:
        root = prepare_workspace(workspace)
    except (FileNotFoundError, OSError) as exc:
        print(f"agentkit: {exc}")
        return 2
    no_downloads()
    with FakeOpenAIServer(DemoModel(latency)) as server:
        print(
            "SCRIPTED DEMO: no real model and no network. A built-in script answers as the model, "
            f"served by FakeOpenAIServer at {server.base_url}; everything else is real.\n"
            f"workspace: {root}\n",
            flush=True,
        )
        settings = make_settings({**given, "base_url": server.base_url})
        code = run_task(TASK.get(lang, TASK["en"]), str(root), settings)
    results = root / "sub_agent_results"
    print(
        f"\ndeliverables: {results}/agent_1, agent_2, agent_3 and {root / REPORT_FILE}\n"
        f"transcripts:  {results}/agent_*/.subagent/conversations.json and {root / '.agentkit' / 'conversations'}\n"
        f"look at them: agentkit show -w {root}   |   agentkit transcript 1 -w {root}",
        flush=True,
    )
    if not workspace:
        from agentkit.cli.demo_copies import farewell

        print(farewell(root), flush=True)
    return code
