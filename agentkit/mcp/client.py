"""MCP sessions owned by one background event loop per agent process.

The ``mcp`` package is asyncio (anyio) code; agentkit's tools run in threads. Each
process (the main agent's, every sub-agent worker) gets one daemon thread running an
asyncio loop (:func:`event_loop`, created lazily, so a forkserver never holds one),
and every :class:`Connection` is owned by a task on it: the task enters the transport
and the ``ClientSession`` and stays inside them until closed, because anyio's scopes
must be left by the task that entered them. Tool threads call in with
``run_coroutine_threadsafe`` and a timeout.

No orphans: a stdio server is started by that loop thread (which lives as long as the
process) under ``setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child``, the
run_command technique (agentkit.process.spawn): when the agent process dies,
even by SIGKILL, the kernel kills the server's whole pid namespace. Without pid
namespaces the server carries the agent's AGENTKIT_PROCESS_MARK, so the worker's
kill-by-mark finds it. Its environment is the agent's minus secrets
(agentkit.process.secrets), plus the ``env`` its configuration gives explicitly.

A server that dies is restarted once, at the next call; a call that times out gives
an error and leaves the session open.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from agentkit import tracing
from agentkit.errors import OutsideTextError
from agentkit.mcp.config import MCPServer
from agentkit.process.redact import remember
from agentkit.process.secrets import is_secret_var, scrub_env
from agentkit.process.spawn import owned_argv
from agentkit.process.tree import AGENT_MARK_VAR
from agentkit.settings import Settings

log = logging.getLogger("agentkit")

__all__ = ["Connection", "MCPFailure", "event_loop", "server_env"]

T = TypeVar("T")
CLOSE_TIMEOUT = 6.0
"""Seconds a close waits for a stdio server to end (the mcp package gives it 2 s after
stdin closes, then SIGTERM, 2 s, SIGKILL)."""


class MCPFailure(OutsideTextError):
    """An MCP server could not be reached or answered with a protocol error; the message
    is one line for the model and the log, scrubbed of known secrets (a server may
    echo its environment: :class:`agentkit.errors.OutsideTextError`)."""


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="agentkit-mcp-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop; raises TimeoutError after ``timeout`` seconds
        (the coroutine is then cancelled)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None


_loop: _Loop | None = None
_loop_lock = threading.Lock()


def event_loop() -> _Loop:
    """This process's MCP loop thread (started on first use; a forked child gets its own)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.pid != os.getpid():
            _loop = _Loop()
        return _loop


def remember_server(server: MCPServer) -> None:
    """Count a server's configured secrets (env values and headers that look secret)
    as known secrets, so that no error text shows them (agentkit.process.redact)."""
    pairs = [*server.env.items(), *server.headers.items()]
    remember(*(value for name, value in pairs if is_secret_var(name, value)))
    for name, value in server.headers.items():
        scheme, _, token = value.partition(" ")
        if token and scheme.isalpha() and is_secret_var(name, value):
            remember(token.strip())  # "Bearer xyz": the token alone


def server_env(server: MCPServer, settings: Settings, mark: str | None) -> dict[str, str]:
    """A stdio server's environment: this process's minus secrets (honouring
    command_env_passthrough/command_env_drop), plus the configured ``env`` as given,
    plus AGENTKIT_PROCESS_MARK when this agent has one."""
    env = scrub_env(
        os.environ,
        passthrough=settings.command_env_passthrough,
        drop=settings.command_env_drop,
        hidden_values=(settings.api_key,),
    )
    env.update(server.env)
    remember_server(server)
    if mark:
        env[AGENT_MARK_VAR] = mark
    return env


def _describe(exc: BaseException) -> str:
    """One line for an exception from the mcp package (task groups wrap them)."""
    while getattr(exc, "exceptions", None):  # an ExceptionGroup: its first cause
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Connection:
    """One MCP server's session in this process, opened lazily.

    Args:
        server: its configuration.
        workspace: a stdio server's default working folder.
        settings: timeouts (mcp_start_timeout, mcp_call_timeout) and the env rules.
        mark: this agent's process mark (sub-agent workers), or None.
    """

    def __init__(
        self, server: MCPServer, workspace: Path, settings: Settings, mark: str | None = None
    ) -> None:
        self.server = server
        self.workspace = workspace
        self.settings = settings
        self.mark = mark
        self.restarts = 0
        self.tools: list[Any] | None = None
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._stderr: Any = None

    # ------------------------------------------------------------ loop side
    def _transport(self) -> Any:
        if self.server.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            remember_server(self.server)
            client = create_mcp_http_client(headers=dict(self.server.headers))
            return streamable_http_client(self.server.url or "", http_client=client)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        argv = owned_argv([self.server.command or "", *self.server.args])
        params = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            env=server_env(self.server, self.settings, self.mark),
            cwd=self.server.cwd or str(self.workspace),
        )
        # Kept for the error message of a server that fails; closed with the connection.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        return stdio_client(params, errlog=self._stderr)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        from mcp.client.session import ClientSession

        assert self._stop is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.server.transport == "http":
                    client = self._transport()
                    read, write = await stack.enter_async_context(client)
                else:
                    read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                tools: list[Any] = []
                cursor: str | None = None
                while True:
                    from mcp.types import PaginatedRequestParams

                    page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                    tools.extend(page.tools)
                    cursor = getattr(page, "next_cursor", None)
                    if not cursor:
                        break
                self.tools = tools
                self._session = session
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(MCPFailure(_describe(exc) + self._stderr_tail()))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None

    def _stderr_tail(self) -> str:
        """The last line a stdio server wrote on stderr, as `` (stderr: ...)``, or ""."""
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            lines = [line.strip() for line in self._stderr.read()[-2000:].splitlines()]
        except (OSError, ValueError):
            return ""
        lines = [line for line in lines if line]
        return f" (stderr: {lines[-1][:300]})" if lines else ""

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        # Read the outcome even when nobody waits any more (the start timed out).
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._stop = asyncio.Event()
        self._ready = ready
        self._task = loop.create_task(self._own(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.settings.mcp_start_timeout)
        except BaseException:
            await self._end()
            raise

    async def _end(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        if self._ready is not None and not self._ready.done():
            # Still starting (a server that never answers the handshake): the task
            # waits on the server, not on the stop event, so cancel it at once
            # rather than after CLOSE_TIMEOUT.
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, CLOSE_TIMEOUT)

    async def _call(
        self, name: str, arguments: dict[str, Any], timeout: float, meta: Any = None
    ) -> Any:
        session = self._session
        if session is None:
            raise MCPFailure("the session is closed")
        if meta is None:  # the request stays as it was while not tracing
            return await session.call_tool(name, arguments, read_timeout_seconds=timeout)
        return await session.call_tool(name, arguments, read_timeout_seconds=timeout, meta=meta)

    # ---------------------------------------------------------- thread side
    def _alive(self) -> bool:
        return self._task is not None and not self._task.done() and self._session is not None

    def _ensure(self) -> None:
        """Open the session if it is not open (restarting a dead server once)."""
        if self._alive():
            return
        if self._closed:
            raise MCPFailure(f"MCP server {self.server.name!r} is closed")
        loop = event_loop()
        if self._task is not None:  # it was open and died
            if self.restarts >= 1:
                raise MCPFailure(
                    f"MCP server {self.server.name!r} stopped again after a restart; "
                    "its tools are unavailable"
                )
            self.restarts += 1
            log.warning("agentkit: MCP server %r stopped; restarting it once", self.server.name)
            loop.run(self._end(), CLOSE_TIMEOUT * 2 + 1)
        try:
            loop.run(self._open(), self.settings.mcp_start_timeout + CLOSE_TIMEOUT * 2 + 1)
        except TimeoutError:
            raise MCPFailure(
                f"MCP server {self.server.name!r} did not start within "
                f"{self.settings.mcp_start_timeout:g} s"
            ) from None
        except MCPFailure as exc:
            raise MCPFailure(f"MCP server {self.server.name!r} could not start: {exc}") from None

    def list_tools(self) -> list[Any]:
        """Start the server if needed and return its tools (``mcp.types.Tool``).
        Raises MCPFailure when it cannot start or list them in mcp_start_timeout."""
        with self._lock:
            self._ensure()
            return list(self.tools or [])

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call tool ``name`` (the server's own name); returns the ``CallToolResult``.

        Raises MCPFailure for a server that cannot start, a call that exceeds
        mcp_call_timeout, a crash during the call (restarted at the next one), or a
        protocol error."""
        timeout = self.settings.mcp_call_timeout
        with self._lock:
            self._ensure()
        # The trace context of the execute_tool span, read on this thread (the event
        # loop's thread has no current span): the call's _meta carries it (SEP-414).
        meta = tracing.mcp_meta()
        try:
            return event_loop().run(self._call(name, arguments, timeout, meta), timeout + 5)
        except TimeoutError:
            raise MCPFailure(
                f"the call to {name!r} on MCP server {self.server.name!r} took longer than "
                f"{timeout:g} s (Settings.mcp_call_timeout)"
            ) from None
        except MCPFailure:
            raise
        except Exception as exc:
            why = _describe(exc)
            if "timed out" in why.lower() or "timeout" in why.lower():
                why += f" (Settings.mcp_call_timeout is {timeout:g} s)"
            elif not self._alive() or "closed" in why.lower():
                why += "; the server stopped and is restarted at the next call"
                self._forget()
            raise MCPFailure(f"MCP server {self.server.name!r}: {why}") from None

    def _forget(self) -> None:
        """Mark the session dead (its server crashed), so the next call restarts it."""
        self._session = None

    def close(self) -> None:
        """End the session (and the server process of a stdio server); idempotent."""
        self._closed = True
        if self._task is None or _loop is None or _loop.pid != os.getpid():
            return
        with contextlib.suppress(Exception):
            event_loop().run(self._end(), CLOSE_TIMEOUT * 2 + 1)
        if self._stderr is not None:
            self._stderr.close()
