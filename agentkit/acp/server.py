"""Running the ACP agent over stdio until the editor leaves.

One job: :class:`AcpServer` wires the channel (agentkit.acp.stdio), the library's
agent-side connection and :class:`agentkit.acp.agent.AcpAgent` together on one
asyncio event loop, runs until the editor closes its end of the pipe (or
:meth:`AcpServer.stop` is called, e.g. on a signal), then closes every conversation:
their sub-agents end, their commands' processes are killed, the conversations are
saved, and no process is left behind (as for ``agentkit chat``). At start a thread
imports the model client, so the editor's first prompt does not wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from agentkit.settings import Settings

log = logging.getLogger("agentkit.acp")

__all__ = ["SHUTDOWN_SECONDS", "AcpServer"]

SHUTDOWN_SECONDS = 30.0
"""At most this long for closing every conversation at the end (seconds)."""


class AcpServer:
    """The ACP agent on two file descriptors.

    Args:
        settings: the agent's Settings.
        input_fd, output_fd: the protocol's input and output (agentkit.acp.stdio.
            claim_stdio gives the standard streams' private copies).
        refusal, workspace, ask: as :class:`agentkit.acp.agent.AcpAgent` takes them.

    :meth:`run` blocks; :meth:`stop` may be called from any thread.
    """

    def __init__(
        self,
        settings: Settings,
        input_fd: int,
        output_fd: int,
        *,
        refusal: str | None = None,
        workspace: Path | None = None,
        ask: bool = True,
    ) -> None:
        self.settings = settings
        self.options: dict[str, Any] = {"refusal": refusal, "workspace": workspace, "ask": ask}
        self.input_fd = input_fd
        self.output_fd = output_fd
        self.agent: Any = None
        self.output_error: OSError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopping = threading.Event()
        self.started = threading.Event()

    def run(self) -> None:
        """Serve until end of input, a failed write of the output (then
        :attr:`output_error` holds it) or :meth:`stop`; then close everything."""
        asyncio.run(self._serve())

    def stop(self) -> None:
        """Ask :meth:`run` to end (thread-safe; idempotent)."""
        self._stopping.set()
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # the loop has already ended

    async def _serve(self) -> None:
        from acp.core import AgentSideConnection

        from agentkit.acp.agent import AcpAgent
        from agentkit.acp.stdio import StdioChannel

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stopping.is_set():
            self._stop.set()
        raw: dict[str, Any] = {}

        def seen(message: dict[str, Any]) -> None:
            if message.get("method") == "initialize" and isinstance(message.get("params"), dict):
                raw["capabilities"] = message["params"].get("clientCapabilities")

        channel = StdioChannel(self.input_fd, self.output_fd, on_incoming=seen)

        async def send_raw(method: str, params: dict[str, Any]) -> None:
            await channel.send({"jsonrpc": "2.0", "method": method, "params": params})

        self.agent = AcpAgent(
            self.settings, lambda: raw.get("capabilities"), send_raw, **self.options
        )
        threading.Thread(target=_warm_up, name="acp-warm-up", daemon=True).start()
        _quiet_unknown_notifications()
        conn = AgentSideConnection(self.agent, channel, listening=False)
        self.started.set()
        listen = asyncio.create_task(conn.listen(), name="acp-listen")
        stop = asyncio.create_task(self._stop.wait(), name="acp-stop")
        try:
            await asyncio.wait((listen, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            try:
                await asyncio.wait_for(self.agent.shutdown(), SHUTDOWN_SECONDS)
            except asyncio.TimeoutError:
                log.warning("acp: closing the conversations took over %s s", SHUTDOWN_SECONDS)
            await conn.close()
            listen.cancel()
            await asyncio.gather(listen, return_exceptions=True)
            self.output_error = channel.broken


def _warm_up() -> None:
    """Import what a conversation's first round needs (the openai SDK: 0.4 s here, seconds
    on a busy machine) while the editor is still initializing and opening its session,
    so the first prompt does not wait for it (benchmarks/acp.py). A daemon: an editor
    that leaves at once (a refused session) must not wait seconds for an import nobody
    needs any more; the ``agentkit`` process ends with ``os._exit``
    (agentkit.cli.entry), so no interpreter teardown meets the import half done. Only
    openai: it imports nothing of agentkit, so this thread and the loop's imports of
    agentkit's modules can never wait on each other's module locks."""
    try:
        import openai  # noqa: F401
    except Exception:  # the round that needs it reports the real error
        log.debug("acp: warming up the model client failed", exc_info=True)


class _UnknownNotification(logging.Filter):
    """Drops the acp library's log line, with its traceback, for a notification no
    handler takes: JSON-RPC ignores such a notification, and so does agentkit, quietly."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        unknown = getattr(error, "code", None) == -32601  # method not found
        return not (unknown and str(record.msg).startswith("Unhandled error while handling notif"))


def _quiet_unknown_notifications() -> None:
    """Put :class:`_UnknownNotification` on the root logger (the library logs there), once."""
    root = logging.getLogger()
    if not any(isinstance(f, _UnknownNotification) for f in root.filters):
        root.addFilter(_UnknownNotification())
