"""run_command leaves no zombie child behind: the launcher (``unshare`` without
bubblewrap, bwrap with it) is collected as each command returns, and a kept
namespace's launcher when its background services end (issue 31, item 11).

Real processes: run_command in this process; the children are this process's own."""

from __future__ import annotations

import uuid
from pathlib import Path

import psutil
import pytest
from subagent_helpers import wait_until

from agentkit.process import spawn
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.shell import SHELL_TOOLS

REGISTRY = ToolRegistry(SHELL_TOOLS)


def zombies() -> list[str]:
    """This process's children that exited and were never collected."""
    found = []
    for child in psutil.Process().children():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                found.append(f"{child.name()} (pid {child.pid})")
        except psutil.NoSuchProcess:
            continue
    return found


def context(workspace: Path, **overrides: object) -> ToolContext:
    owner = overrides.pop("owner", None)
    settings = Settings(model="m", api_key="k", **overrides)  # type: ignore[arg-type]
    mark = uuid.uuid4().hex
    return ToolContext(workspace=workspace, settings=settings, process_mark=mark, owner=owner)  # type: ignore[arg-type]


@pytest.mark.parametrize("sandbox", ["none", "auto"])
def test_no_zombie_launcher_is_left_after_each_quick_command(tmp_path: Path, sandbox: str) -> None:
    ctx = context(tmp_path, command_sandbox=sandbox)
    for n in range(50):
        result = REGISTRY.execute("run_command", {"command": f"echo {n}"}, ctx)
        assert result.ok, result.output
        assert zombies() == [], f"after command {n}"


def test_a_kept_namespace_s_launcher_is_collected_when_its_services_end(
    tmp_path: Path,
) -> None:
    owner = uuid.uuid4().hex
    ctx = context(tmp_path, command_sandbox="none", command_background_services=True, owner=owner)
    launched = set(psutil.Process().children())
    result = REGISTRY.execute("run_command", {"command": "sleep 300 >/dev/null 2>&1 &"}, ctx)
    assert result.ok, result.output
    launchers = [p for p in psutil.Process().children() if p not in launched]
    assert launchers, "the kept namespace's launcher is a child of this process"
    spawn.end_background_services(owner, every=False)
    # Collected means gone from the process table, not merely exited.
    assert wait_until(lambda: all(not p.is_running() for p in launchers), 10), zombies()
    assert zombies() == []
