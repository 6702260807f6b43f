"""Fork bombs and memory hogs under run_command's limits (tests/integration/test_command_limits.py).

Imported by the tests (the agent is the test process), and run as a script
(``python limits_child.py bomb|hog WORKSPACE PYTHON``, printing one JSON object) for an
agent running as another user. Each returns what the tests check: whether the limit
binds, the other tool call made meanwhile, and the limited command's result.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from agentkit.process import limits
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.shell import SHELL_TOOLS

REGISTRY = ToolRegistry(SHELL_TOOLS)
MAX_PROCESSES = 48
MAX_MEMORY_MB = 200
# Forks as many sleepers as it can, up to 150, and says how many: bounded, so a limit
# that does not bind is found before any fork bomb runs.
COUNT = (
    "import os, time\n"
    "n = 0\n"
    "for _ in range(150):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        break\n"
    "    if pid == 0:\n"
    "        time.sleep(3)\n"
    "        os._exit(0)\n"
    "    n += 1\n"
    "print('started', n)\n"
)
BOMB = "echo up > bomb-started; :(){ :|:& };:; sleep 120"  # the bomb detaches: the shell waits
# Allocates 4 times the limit, then stops: a limit that does not bind fails the test
# without taking the machine.
HOG = f"a = []\nfor _ in range({4 * MAX_MEMORY_MB // 8}):\n    a.append(bytearray(8 << 20))\n"


def make_ctx(workspace: Path, **overrides: Any) -> ToolContext:
    fields: dict[str, Any] = {"command_max_processes": MAX_PROCESSES, **overrides}
    settings = Settings(model="m", api_key="k", language="en", command_kill_grace=0.5, **fields)
    return ToolContext(workspace=workspace, settings=settings, process_mark=uuid.uuid4().hex)


def run(ctx: ToolContext, command: str, timeout: float = 60) -> ToolResult:
    return REGISTRY.execute("run_command", {"command": command, "timeout_seconds": timeout}, ctx)


def bomb(workspace: Path, python: str) -> dict[str, Any]:
    """A bounded count of forks, then a fork bomb with another command run while it
    rages; the bomb is then cancelled (it would run until its timeout)."""
    ctx = make_ctx(workspace)
    counted = run(ctx, f"{python} -c {_quote(COUNT)}").output
    started = int(counted.split("started ", 1)[1].split()[0]) if "started " in counted else -1
    found: dict[str, Any] = {"processes": _processes(), "counted": started}
    if not 0 <= started < 150:  # the limit does not bind: no bomb
        return {**found, "count_output": counted}
    results: list[ToolResult] = []
    raging = threading.Thread(target=lambda: results.append(run(ctx, BOMB)))
    raging.start()
    deadline = time.monotonic() + 30
    while not (workspace / "bomb-started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # let it reach the limit
    other = run(make_ctx(workspace), "echo alive")
    found["bomb_running_after_other"] = raging.is_alive()
    ctx.cancel.set()
    raging.join(60)
    found["other"] = other.output
    found["other_ok"] = other.ok
    if results:
        found.update(bomb_output=results[0].output[-2000:], bomb_code=results[0].error_code)
    return found


def hog(workspace: Path, python: str) -> dict[str, Any]:
    """A command that allocates 4 times its memory limit, and another command run
    meanwhile."""
    ctx = make_ctx(workspace, command_max_memory_mb=MAX_MEMORY_MB)
    results: list[ToolResult] = []
    hogging = threading.Thread(
        target=lambda: results.append(run(ctx, f"{python} -c {_quote(HOG)}"))
    )
    hogging.start()
    other = run(make_ctx(workspace), "echo alive")
    hogging.join(120)
    found: dict[str, Any] = {"memory": _memory(), "other": other.output, "other_ok": other.ok}
    if results:
        found.update(hog_output=results[0].output[-2000:], hog_meta=results[0].meta)
    return found


def _processes() -> str | None:
    """How commands' processes are limited here: ``cgroup``, ``RLIMIT_NPROC`` or None."""
    bounds = limits.prepare(make_ctx(Path(".")).settings, _user_namespace())
    if bounds is None:
        return None
    bounds.close()
    return bounds.processes[1] if bounds.processes else None


def _memory() -> str | None:
    settings = make_ctx(Path("."), command_max_memory_mb=MAX_MEMORY_MB).settings
    bounds = limits.prepare(settings, _user_namespace())
    if bounds is None:
        return None
    bounds.close()
    return bounds.memory_mb[1] if bounds.memory_mb else None


def _user_namespace() -> bool:
    from agentkit.process import spawn

    return spawn.user_namespace()


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


if __name__ == "__main__":
    what, where, python = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    print(json.dumps(bomb(where, python) if what == "bomb" else hog(where, python)))
