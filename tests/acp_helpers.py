"""Driving ``agentkit acp`` (a real subprocess) with the ``acp`` library's client side.

:func:`connect` starts ``python -m agentkit acp`` through the library's own
``spawn_agent_process`` (the way a Python ACP client starts an agent), initializes
the connection and yields it with a :class:`Recorder`: the client object the
library calls with every ``session/update`` and ``session/request_permission``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from cli_helpers import cli_env

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
AGENT = (sys.executable, "-m", "agentkit", "acp")


def agent_env(base_url: str, **extra: str) -> dict[str, str]:
    """The environment of an agent played by the FakeOpenAIServer at ``base_url``:
    English, no retries, a 1 s minimum sub-agent timeout, tests/ importable, token
    counts estimated (tiktoken would try to download its tables from the internet,
    seconds per process on a machine without it)."""
    env = cli_env(
        base_url, AGENTKIT_SUBAGENT_TIMEOUT_MIN="1", AGENTKIT_TOKENIZER="estimate", **extra
    )
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS)])
    return env


class Recorder:
    """The client side: records updates, answers permission requests.

    ``answer`` is called with ``(tool_call, options)`` and returns the response model
    (or awaits one); by default every request is allowed once.
    """

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.permissions: list[dict[str, Any]] = []
        self.answer: Callable[[Any, list[Any]], Any] | None = None
        self._changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(
            (session_id, update.model_dump(mode="json", by_alias=True, exclude_none=True))
        )
        self._changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        self.permissions.append(
            {
                "session_id": session_id,
                "tool_call": tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
                "options": [o.model_dump(mode="json", by_alias=True) for o in options],
            }
        )
        self._changed.set()
        if self.answer is not None:
            result = self.answer(tool_call, options)
            return await result if asyncio.iscoroutine(result) else result
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def read_text_file(self, **kwargs: Any) -> Any:
        raise AssertionError("agentkit must not read files through the client")

    async def write_text_file(self, **kwargs: Any) -> Any:
        raise AssertionError("agentkit must not write files through the client")

    # ------------------------------------------------------------ queries
    def of(self, kind: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """The updates whose ``sessionUpdate`` is ``kind`` (of one session)."""
        return [
            u
            for sid, u in self.updates
            if u["sessionUpdate"] == kind and (session_id is None or sid == session_id)
        ]

    def text(self, kind: str = "agent_message_chunk", session_id: str | None = None) -> str:
        """The text of every ``kind`` chunk, joined."""
        return "".join(u["content"].get("text", "") for u in self.of(kind, session_id))

    def calls(self, session_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Every tool call's updates (the tool_call first), by tool call id."""
        out: dict[str, list[dict[str, Any]]] = {}
        for sid, u in self.updates:
            if u["sessionUpdate"] in ("tool_call", "tool_call_update") and (
                session_id is None or sid == session_id
            ):
                out.setdefault(u["toolCallId"], []).append(u)
        return out

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30) -> bool:
        """Wait until ``predicate()`` holds (checked after each update), at most ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))
        return True


def final_status(updates: list[dict[str, Any]]) -> str | None:
    """The last status a tool call's updates gave it."""
    statuses = [u["status"] for u in updates if u.get("status")]
    return statuses[-1] if statuses else None


@contextlib.asynccontextmanager
async def connect(
    base_url: str,
    cwd: Path,
    recorder: Recorder | None = None,
    **env: str,
) -> AsyncIterator[tuple[Any, Any, Recorder]]:
    """Start ``agentkit acp`` in ``cwd`` and initialize it; yields ``(connection,
    process, recorder)``. Leaving closes its stdin and waits for it to exit."""
    from acp import PROTOCOL_VERSION, spawn_agent_process
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    recorder = recorder or Recorder()
    caps = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
    )
    async with spawn_agent_process(
        recorder,
        *AGENT,
        env=agent_env(base_url, **env),
        cwd=str(cwd),
        # The library waits 2 s for the exit, then terminates: on a busy machine a
        # conversation's close can take longer, and its terminate() raises
        # ProcessLookupError when the process ends in between.
        transport_kwargs={"stderr": None, "shutdown_timeout": 30.0},
    ) as (conn, proc):
        await asyncio.wait_for(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=caps,
                client_info=Implementation(name="agentkit-tests", version="1"),
            ),
            60,
        )
        yield conn, proc, recorder


def run(coro: Any, timeout: float = 120) -> Any:
    """Run an async scenario to its end (at most ``timeout`` seconds)."""
    return asyncio.run(asyncio.wait_for(coro, timeout))
