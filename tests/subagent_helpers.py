"""A scripted model for main agent + sub-agents, routed by who is asking."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit import events as ev

SUB_SYSTEM_STARTS = ("你是一个专注的子智能体", "You are a focused sub-agent")
_AGENT_ID = re.compile(r"(?:你是子智能体 |You are sub-agent )(\d+)")


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call for a scripted reply."""
    return {"name": tool, "arguments": arguments}


def calls(*items: dict[str, Any]) -> dict[str, Any]:
    """An assistant reply made of tool calls."""
    return {"tool_calls": list(items)}


def who(request: dict[str, Any]) -> int | None:
    """Return the sub-agent id asking, or None for the main agent."""
    messages = request["messages"]
    first = messages[0].get("content") or ""
    if first.startswith(SUB_SYSTEM_STARTS):
        match = _AGENT_ID.search(messages[1].get("content") or "")
        return int(match.group(1)) if match else -1
    return None


def step(request: dict[str, Any]) -> int:
    """How many assistant messages the requester already has (0 = first request)."""
    return sum(1 for m in request["messages"] if m["role"] == "assistant")


class Router:
    """Handler for FakeOpenAIServer: ``main[step]`` for the main agent,
    ``subs[agent_id][step]`` for sub-agents. An item is a reply or a callable
    ``request -> reply``; past the end, the last item repeats."""

    def __init__(self, main: list[Any], subs: dict[int, list[Any]] | None = None) -> None:
        self.main = main
        self.subs = subs or {}

    def __call__(self, request: dict[str, Any]) -> Any:
        agent = who(request)
        script = self.main if agent is None else self.subs[agent]
        item = script[min(step(request), len(script) - 1)]
        return item(request) if isinstance(item, Callable) else item  # type: ignore[arg-type]


def finish(
    summary: str = "Done: wrote the report with the findings.", success: bool = True
) -> dict[str, Any]:
    """A reply calling finish_task."""
    return calls(call("finish_task", success=success, summary=summary))


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``predicate`` every 50 ms until it is true or ``timeout`` seconds pass."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def running(processes: Iterable[Any]) -> list[Any]:
    """The psutil processes of ``processes`` that still run (not gone, not a zombie).

    A process may exit between two questions about it; asking them one by one
    (``is_running()`` then ``status()``) raised NoSuchProcess in CI, so this asks
    the product's own :func:`agentkit.process.tree.is_gone`, which treats that as gone.
    """
    from agentkit.process.tree import is_gone

    return [p for p in processes if not is_gone(p)]


def no_process_left(mark: str) -> bool:
    """True when no process carrying the process mark ``mark`` still runs."""
    from agentkit.process.tree import processes_with_mark

    return not running(processes_with_mark(mark))


class Gate:
    """Holds scripted replies until released: ``gate.hold(reply)`` waits for
    ``gate.release(reply)`` (both return request handlers)."""

    def __init__(self) -> None:
        import threading

        self.event = threading.Event()

    def hold(self, reply: Any) -> Callable[[dict[str, Any]], Any]:
        def handler(request: dict[str, Any]) -> Any:
            self.event.wait(30)
            return reply

        return handler

    def release(self, reply: Any) -> Callable[[dict[str, Any]], Any]:
        def handler(request: dict[str, Any]) -> Any:
            self.event.set()
            return reply

        return handler


def scripted_settings(server: Any, language: str = "zh", **overrides: Any) -> Any:
    """Settings for a main agent and sub-agents played by ``server`` (a
    FakeOpenAIServer): no retries, a 1 s minimum sub-agent timeout for short tests."""
    from agentkit.settings import Settings

    values: dict[str, Any] = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": "k",
        "language": language,
        "retry_base_delay": 0.01,
        "max_retries": 0,
        "retry_total_seconds": 0,
        "subagent_timeout_min": 1,
    }
    values.update(overrides)
    return Settings(**values)


class Switch:
    """A FakeOpenAIServer handler that passes each request to ``handler`` (a Router, set
    per test with :func:`script`): one real server per module, a script per test."""

    def __init__(self) -> None:
        self.handler: Any = Router(["(no script)"])

    def __call__(self, request: dict[str, Any]) -> Any:
        return self.handler(request)


def script(
    served: tuple[Any, Switch], main: list[Any], subs: dict[int, list[Any]] | None = None
) -> None:
    """Script the module's server for one test (``served[1]``: its Switch)."""
    served[1].handler = Router(main, subs)


class Recorder:
    """A session's events, collected thread-safely (``session.subscribe(recorder)``),
    and waiting for one."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.cond = threading.Condition()

    def __call__(self, event: ev.Event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def of(self, kind: type[ev.Event]) -> list[Any]:
        """The events of type ``kind`` so far."""
        with self.cond:
            return [e for e in self.events if isinstance(e, kind)]

    def wait_for(self, kind: type[ev.Event], count: int = 1, timeout: float = 30) -> list[Any]:
        """Wait until ``count`` events of ``kind`` came (assert after ``timeout`` s)."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.of(kind)) >= count, timeout)
        found = self.of(kind)
        assert len(found) >= count, (
            f"expected {count} {kind.__name__}: {[e.type for e in self.events]}"
        )
        return found


def start_main(
    script: str, folder: Path, workspace: Path, base_url: str, **popen: Any
) -> subprocess.Popen[str]:
    """A main process a test may kill: ``python SCRIPT WORKSPACE BASE_URL`` (``script``
    written to ``folder/main.py``), its stdout a text pipe, without the environment's
    AGENTKIT_ and OPENAI_ settings; ``popen``: more Popen arguments."""
    path = folder / "main.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTKIT_", "OPENAI_"))}
    return subprocess.Popen(
        [sys.executable, str(path), str(workspace), base_url],
        stdout=subprocess.PIPE, text=True, env=env, **popen,
    )  # fmt: skip
