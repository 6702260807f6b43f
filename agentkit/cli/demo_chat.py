"""``agentkit chat --demo`` and ``agentkit serve --demo``: a living conversation with no key.

One job: the scripted model of the keyless chat (:class:`ChatDemoModel`) and its
set-up (:func:`start_demo`): FakeOpenAIServer serves the script on 127.0.0.1, and
everything else is real (the engine, the worker processes, the tools, the files).
The script plays every agent: the main agent answers any message; a message that
asks for work (``review this project``, ``bg x``, ``后台统计代码``) starts a background
sub-agent, which searches the workspace, runs a command, writes ``findings.md`` and
finishes within a few seconds; its completion starts a round by itself, in which the
main agent reads the findings and reports them. Every answer says it is scripted.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkit.cli.demo import (
    _AGENT_ID,
    _ANNOUNCED,
    _SUB_SYSTEM,
    DEMO_MODEL,
    _call,
    _strip_numbers,
    _tool_texts,
    demo_latency,
    no_downloads,
    prepare_workspace,
)

__all__ = ["ChatDemoModel", "DemoSetup", "asks_for_work", "start_demo"]

DEFAULT_LATENCY = 0.8
"""Seconds per scripted reply (env ``AGENTKIT_DEMO_LATENCY``): slow enough to watch."""

_WORK = re.compile(
    r"\b(bg|background|sub-?agents?|review|analy[sz]e|audit|research|investigate|explore|"
    r"find|search|scan|count|measure|check|collect|summari[sz]e|report|list|compare|"
    r"write|build|test|fix|refactor|improve|todo|fixme|look into|work)\b"
    r"|审阅|分析|研究|调查|查找|搜索|统计|检查|收集|总结|报告|后台|子智能体|任务|整理|写",
    re.IGNORECASE,
)
SUB_COMMAND = (
    "find . -type f -name '*.py' -not -path './.agentkit/*' -not -path './sub_agent_results/*'"
    " | sort | head -40 | xargs -r wc -l"
)


def asks_for_work(text: str) -> bool:
    """True when a message asks for work (a background sub-agent starts for it)."""
    return bool(_WORK.search(text))


def _summary_of(text: str) -> str:
    words = re.sub(r"^bg\s+", "", " ".join(text.split()), flags=re.IGNORECASE)
    return words if len(words) <= 60 else words[:57] + "..."


def _created_ids(messages: list[dict[str, Any]]) -> list[int]:
    ids = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") == "create_sub_agent":
                found = re.search(r'"agent_id"\s*:\s*(\d+)', function.get("arguments") or "")
                if found:
                    ids.append(int(found.group(1)))
    return ids


class ChatDemoModel:
    """The scripted model of the keyless chat (see the module docstring): a function of
    each request. ``latency``: seconds per reply."""

    def __init__(self, latency: float = DEFAULT_LATENCY) -> None:
        self.latency = latency

    def __call__(self, request: dict[str, Any]) -> Any:
        from agentkit.testing import Reply

        messages = request["messages"]
        first = messages[0].get("content") or ""
        if first.startswith(_SUB_SYSTEM):
            found = _AGENT_ID.search(messages[1].get("content") or "")
            reply = self._sub(int(found.group(1)) if found else 0, request)
        else:
            reply = self._main(messages)
        if isinstance(reply, str):
            return Reply(content=reply, latency=self.latency, chunk_delay=0.02)
        return Reply(tool_calls=reply, latency=self.latency)

    # -- the main agent ---------------------------------------------------------
    def _main(self, messages: list[dict[str, Any]]) -> Any:
        at = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        opener = messages[at].get("content") or ""
        since = messages[at + 1 :]
        steps = sum(1 for m in since if m.get("role") == "assistant")
        announced = [int(x) for x in _ANNOUNCED.findall(opener)]
        if announced:
            return self._report(announced, since, steps)
        if not asks_for_work(opener):
            return _chat_answer(opener)
        if steps == 0:
            agent_id = max(_created_ids(messages), default=0) + 1
            return [
                _call("search_workspace", pattern="TODO|FIXME", glob="**/*.py"),
                _call(
                    "create_sub_agent",
                    agent_id=agent_id,
                    summary=_summary_of(opener),
                    task=f"{opener}\n\nLook through the workspace (search it, run a command), "
                    f"write your findings to findings.md in your deliverables directory, then finish.",
                    run_in_background=True,
                    timeout_seconds=300,
                ),
            ]
        agent_id = max(_created_ids(messages), default=1)
        return (
            f"I started **sub-agent {agent_id}** in the background for: *{_summary_of(opener)}*.\n\n"
            "It works in its own process; watch it in the sub-agents table. When it finishes, "
            "its result starts a new round by itself. You can keep talking meanwhile.\n\n"
            "_(scripted demo: no real model is answering)_"
        )

    def _report(self, announced: list[int], since: list[dict[str, Any]], steps: int) -> Any:
        if steps == 0:
            return [
                _call("read_file", path=f"sub_agent_results/agent_{i}/findings.md")
                for i in announced
            ]
        texts = [_strip_numbers(m.get("content") or "") for m in since if m.get("role") == "tool"]
        names = ", ".join(f"**{i}**" for i in announced)
        body = "\n\n".join(t for t in texts if t and not t.startswith("Error:")) or "(no findings)"
        return (
            f"Sub-agent {names} finished. Here is what it wrote:\n\n{body}\n\n"
            "_(scripted demo: no real model is answering)_"
        )

    # -- the sub-agents ---------------------------------------------------------
    def _sub(self, agent_id: int, request: dict[str, Any]) -> Any:
        messages = request["messages"]
        steps = sum(1 for m in messages if m.get("role") == "assistant")
        texts = _tool_texts(request)
        folder = f"sub_agent_results/agent_{agent_id}"
        if steps == 0:
            return [_call("search_workspace", pattern="TODO|FIXME", glob="**/*.py")]
        if steps == 1:
            return [_call("run_command", command=SUB_COMMAND)]
        if steps == 2:
            task = (messages[1].get("content") or "").strip()
            content = _findings(task, texts[0] if texts else "", texts[1] if len(texts) > 1 else "")
            return [_call("write_file", path=f"{folder}/findings.md", content=content)]
        return [
            _call(
                "finish_task",
                success=True,
                summary="Wrote findings.md: the TODO/FIXME notes found and the size of the "
                "Python files (scripted demo).",
            )
        ]


def _findings(task: str, search: str, sizes: str) -> str:
    notes = [line.strip() for line in search.splitlines() if re.search(r"TODO|FIXME", line)]
    rows = [line.strip() for line in sizes.splitlines() if re.match(r"\s*\d+ ", line)]
    cells = [r.split(None, 1)[::-1] for r in rows if " " in r.strip()]
    table = "\n".join(
        f"| {f'`{name}`' if name.startswith('./') else name} | {lines} |" for name, lines in cells
    )
    lines = [line.strip() for line in task.splitlines()]
    heads = [i for i, line in enumerate(lines) if "summary" in line.lower() or "摘要" in line]
    asked = lines[heads[0] + 1] if heads and heads[0] + 1 < len(lines) else ""
    return (
        f"## Findings (scripted demo)\n\nAsked: {_summary_of(asked)}\n\n"
        f"### TODO and FIXME notes\n\n"
        + ("\n".join(f"- `{n}`" for n in notes[:20]) or "- (none found)")
        + "\n\n### Code size\n\n"
        + (f"| file | lines |\n|---|---|\n{table}\n" if table else "(no Python files)\n")
    )


def _chat_answer(text: str) -> str:
    said = _summary_of(text) or "(nothing)"
    return (
        "**This is a scripted demo**: a built-in script answers as the model, and everything "
        "else (the tools, the worker processes, the files) is real.\n\n"
        f"You said: “{said}”.\n\n"
        "Ask for work (for example *review this project in the background*) and I start a "
        "background sub-agent: you can keep chatting while it works, and its result "
        "starts a round by itself."
    )


@dataclass
class DemoSetup:
    """A running demo: the model ``server`` (stop it when done), the ``workspace`` and
    the settings overrides to use (model, base_url, api_key, language)."""

    server: Any
    workspace: Path
    overrides: dict[str, Any]
    made: bool = False
    """True when ``workspace`` is a copy of the sample project made for this demo."""

    def stop(self) -> None:
        """Stop the scripted model's server; for a copy made for this demo, say where
        it stays and how to remove it (stderr: standard output may hold JSON lines)."""
        self.server.stop()
        if self.made and self.workspace.is_dir():
            from agentkit.cli.demo_copies import farewell

            print(f"agentkit: {farewell(self.workspace)}", file=sys.stderr, flush=True)

    def discard(self) -> None:
        """Remove the sample project's copy when the demo never got going (a refused
        flag, a busy port): failed starts left a copy in the temp folder each. A
        workspace the user gave is never touched."""
        if self.made:
            shutil.rmtree(self.workspace.parent, ignore_errors=True)


def start_demo(workspace: str | None, language: str | None) -> DemoSetup:
    """Start the scripted model on 127.0.0.1 and return the set-up; print the label
    (stderr) saying it is scripted. ``workspace`` None: a fresh copy of the sample
    project (as ``agentkit demo``).

    Raises FileNotFoundError for a ``workspace`` that is not a folder.
    """
    root = prepare_workspace(workspace)
    where = f"workspace: {root}" + ("" if workspace else " (a copy of the sample project)")
    try:
        demo = start_demo_model(language, root, where)
    except BaseException:
        if not workspace:
            shutil.rmtree(root.parent, ignore_errors=True)
        raise
    demo.made = not workspace
    return demo


def start_demo_model(language: str | None, root: Path, where: str) -> DemoSetup:
    """Start the scripted model alone on 127.0.0.1 (``agentkit acp --demo``: the
    editor's folders are the workspaces) and print the label and ``where`` (stderr)."""
    from agentkit.testing import FakeOpenAIServer

    latency = demo_latency(DEFAULT_LATENCY)
    no_downloads()
    server = FakeOpenAIServer(ChatDemoModel(latency), models=[DEMO_MODEL]).start()
    lang = language or os.environ.get("AGENTKIT_LANGUAGE") or "en"
    print(
        "SCRIPTED DEMO: no real model and no network; a built-in script answers as the model "
        f"(on {server.base_url}), everything else is real.\n{where}",
        file=sys.stderr,
        flush=True,
    )
    overrides = {
        "model": DEMO_MODEL,
        "base_url": server.base_url,
        "api_key": "demo-no-key",
        "language": lang,
    }
    return DemoSetup(server, root, overrides)
