"""Shared set-up for the run_command tests (unit, processes, command lifetime): a context
with a unique process mark, a run_command call, the live processes running a command,
and the ``ctx`` fixture, which fails a test that leaves processes behind.

Import ``ctx_fixture`` into a test module to use the ``ctx`` fixture.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agentkit.process import tree as proctree
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.shell import SHELL_TOOLS

REGISTRY = ToolRegistry(SHELL_TOOLS)


def make_ctx(workspace: Path, **overrides: object) -> ToolContext:
    settings = Settings(
        model="test-model",
        api_key="test-key",
        language="en",
        command_kill_grace=overrides.pop("command_kill_grace", 0.5),  # type: ignore[arg-type]
        **overrides,  # type: ignore[arg-type]
    )
    return ToolContext(workspace=workspace, settings=settings, process_mark=f"t-{uuid.uuid4().hex}")


def run(ctx: ToolContext, command: str, **args: object) -> ToolResult:
    return REGISTRY.execute("run_command", {"command": command, **args}, ctx)


def sleep_marks(pid: int) -> set[str]:
    """The process marks of the live ``sleep`` processes below ``pid`` (sub-agents'
    commands). A process that ends during the scan (a probe, a shell before its exec)
    is passed over."""
    marks = set()
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            mark = proc.environ().get(proctree.AGENT_MARK_VAR)
            if mark and proc.name() == "sleep":
                marks.add(mark)
        except psutil.Error:
            continue
    return marks


def has_child_named(pid: int, name: str) -> bool:
    """True when a live process below ``pid`` has the name ``name``; one that ends
    during the scan is passed over."""
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if proc.name() == name:
                return True
        except psutil.Error:
            continue
    return False


def running_with(text: str) -> list[psutil.Process]:
    """Live, non-zombie processes whose command line starts with ``text`` (the
    ``sleep N`` itself, not a shell or agent whose arguments mention it)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if " ".join(proc.info["cmdline"] or ()).startswith(text) and not proctree.is_gone(proc):
            found.append(proc)
    return found


@pytest.fixture(name="ctx")
def ctx_fixture(workspace: Path) -> Iterator[ToolContext]:
    context = make_ctx(workspace)
    yield context
    assert context.process_mark
    leftovers = proctree.processes_with_mark(context.process_mark)
    proctree.kill_tree(None, context.process_mark, 0.5)  # clean up even when a test failed
    assert leftovers == [], "a command left processes running"
