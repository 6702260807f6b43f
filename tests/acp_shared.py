"""One ``agentkit acp`` for several tests of a module (each in sessions of its own).

Starting the command costs about 1.5 s of CPU (Python, agentkit and openai imported,
the connection initialized); tests that need nothing of a process but a session share
one. :class:`SharedAgent` keeps the :func:`acp_helpers.connect` connection open on an
event loop in a thread of its own; :meth:`SharedAgent.run` runs a test's scenario on
that loop with a :class:`acp_helpers.Recorder` emptied for the test. A test that needs
a process to itself (its own environment, its end) still uses ``connect``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from acp_helpers import Recorder, connect

T = TypeVar("T")


class SharedAgent:
    """``agentkit acp`` started in ``cwd`` with ``env``, open until :meth:`close`."""

    def __init__(self, base_url: str, cwd: Path, **env: str) -> None:
        self.recorder = Recorder()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._stop = asyncio.Event()
        opened: Future[tuple[Any, Any]] = Future()
        self._held = asyncio.run_coroutine_threadsafe(
            self._hold(base_url, cwd, env, opened), self._loop
        )
        self.conn, self.proc = opened.result(timeout=120)

    async def _hold(
        self, base_url: str, cwd: Path, env: dict[str, str], opened: Future[tuple[Any, Any]]
    ) -> None:
        """Enter and leave the connection in one task (as its task groups require)."""
        try:
            async with connect(base_url, cwd, self.recorder, **env) as (conn, proc, _):
                opened.set_result((conn, proc))
                await self._stop.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    def run(
        self, scenario: Callable[[Any, Any, Recorder], Awaitable[T]], timeout: float = 120
    ) -> T:
        """Run ``scenario(conn, proc, recorder)`` on the agent's loop, the recorder
        emptied first (updates, permission requests, its answer); at most ``timeout`` s."""
        rec = self.recorder

        async def fresh() -> T:
            rec.updates.clear()
            rec.permissions.clear()
            rec.answer = None
            return await asyncio.wait_for(scenario(self.conn, self.proc, rec), timeout)

        return asyncio.run_coroutine_threadsafe(fresh(), self._loop).result()

    def close(self) -> None:
        """Close the agent's stdin, wait for it to exit, stop the loop."""
        try:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._held.result(timeout=60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop.close()
