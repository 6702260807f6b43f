"""The protocol channel: JSON-RPC messages over the agent's standard input and output.

One job: move ACP's newline-delimited JSON-RPC 2.0 messages between the editor and
the ``acp`` library's connection (this is an ``acp`` *Transport*: ``send``,
``receive``, ``close``), and keep that channel clean in both directions.

* **Nothing else reaches it.** :func:`claim_stdio` moves the protocol onto private
  duplicates of file descriptors 0 and 1, then points fd 1 at stderr and fd 0 at
  ``/dev/null``: a stray ``print``, a library's output or a child process (a
  sub-agent worker, an MCP server) that inherits fd 1 writes to the log, never into
  the protocol, and nothing else can read the editor's requests.
* **Bad input gets an answer, never a crash.** The library logs a line that is not
  JSON and drops it, and dies on a JSON value that is not an object (its receive loop
  ends, the agent exits). Here each line is checked first (:func:`parse_line`):
  not JSON is answered ``-32700 Parse error``; an array (a batch: ACP has none), a
  value that is not an object, a bad ``jsonrpc``, ``id`` or ``method`` are answered
  ``-32600 Invalid Request`` (with ``id: null`` when the id cannot be trusted), and
  the channel reads on. A line over :data:`MAX_LINE_BYTES` is dropped and answered
  the same way. A request whose params hold a lone surrogate (a ``\\ud800`` escape:
  text no UTF-8 file can hold) is answered ``-32602 Invalid params`` before the
  library sees it. Notifications are never answered (JSON-RPC 2.0).
* **Errors say what went wrong.** The library answers ``Method not found`` and
  ``Invalid params`` with the detail only in ``data``; :func:`clarify` puts it in the
  message too (``Method not found: session/fork``, ``Invalid params: sessionId: Field
  required``), since clients show the message.
* **Every string goes out as valid UTF-8.** A lone surrogate (from a damaged file or
  a model's ``\\ud800`` escape) would make the whole message unparseable for a strict
  client (Zed's serde_json refuses it); it is sent as U+FFFD.

Threads: a reader thread reads fd 0 in blocks and hands whole lines to the event
loop (at most :data:`QUEUED_LINES` waiting: a client that floods is slowed down, not
buffered without bound); a writer thread writes each message in full and resolves
its sender's future, so ``send`` returns once the bytes are in the pipe and a client
that stops reading holds back its senders, never the event loop. An editor that
closes its end of the output ends the input too, at the first answer that cannot be
written or, with nothing to write, within :data:`READER_CHECK_SECONDS`
(agentkit.process.pipes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from agentkit.jsonfile import SURROGATE, has_lone_surrogate, loads_strict
from agentkit.process.pipes import output_gone

log = logging.getLogger("agentkit.acp")

__all__ = [
    "MAX_LINE_BYTES",
    "QUEUED_LINES",
    "READER_CHECK_SECONDS",
    "StdioChannel",
    "claim_stdio",
    "clarify",
    "parse_line",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest message accepted (bytes, one line); a longer one is dropped and answered."""

QUEUED_LINES = 256
"""Lines read but not yet handled before the reader waits."""

READER_CHECK_SECONDS = 0.5
"""How often an idle writer looks whether the editor has stopped reading (seconds)."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

_TOO_LONG = object()  # the reader's mark for a dropped over-long line


def claim_stdio() -> tuple[int, int]:
    """Take the standard streams for the protocol.

    Returns ``(input_fd, output_fd)``: private duplicates of fds 0 and 1. Afterwards
    fd 0 reads ``/dev/null`` and fd 1 writes wherever fd 2 (stderr) does, so
    ``print``, ``sys.stdout``, libraries and inherited child processes can neither
    corrupt nor consume the protocol stream (ACP: stdout is the protocol channel).

    Raises OSError when the descriptors cannot be duplicated.
    """
    import sys

    with contextlib.suppress(Exception):
        sys.stdout.flush()
    input_fd, output_fd = os.dup(0), os.dup(1)  # non-inheritable duplicates
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    return input_fd, output_fd


def _error(code: int, message: str, request_id: Any = None, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _valid_id(value: Any) -> bool:
    # JSON-RPC 2.0: a String, a Number or Null (a bool is not a number there).
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def parse_line(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Read one line of the protocol.

    Returns ``(message, None)`` for a well-formed JSON-RPC object, ``(None, error)``
    when it must be answered with ``error`` (a response object), and ``(None, None)``
    for a bad notification, or a response that cannot be matched, which JSON-RPC
    leaves unanswered.
    """
    try:
        value = loads_strict(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return None, _error(PARSE_ERROR, f"Parse error: the line is not JSON ({exc})")
    if isinstance(value, list):
        return None, _error(INVALID_REQUEST, "Invalid Request: batches are not part of ACP")
    if not isinstance(value, dict):
        return None, _error(INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    has_id = "id" in value
    request_id = value.get("id")
    if has_id and not _valid_id(request_id):
        return None, _error(
            INVALID_REQUEST, "Invalid Request: id must be a string, a number or null"
        )
    reply_to = request_id if has_id else None
    if value.get("jsonrpc") != "2.0":
        if not has_id and "method" in value:
            return None, None  # a notification: never answered
        return None, _error(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', reply_to)
    method = value.get("method")
    if "method" in value and (not isinstance(method, str) or not method):
        if not has_id:
            return None, None
        return None, _error(INVALID_REQUEST, "Invalid Request: method must be a string", reply_to)
    if method is None and not has_id:
        return None, _error(INVALID_REQUEST, "Invalid Request: neither a method nor an id")
    if method is not None and has_lone_surrogate(value.get("params")):
        # Text no UTF-8 file can hold: taken, it would break the conversation's saves.
        if not has_id:
            return None, None
        return None, _error(
            INVALID_PARAMS,
            "Invalid params: a text holds a lone surrogate (e.g. \\ud800), "
            "which is not valid Unicode",
            reply_to,
        )
    return value, None


def clarify(message: dict[str, Any]) -> dict[str, Any]:
    """Return the outgoing ``message`` with the detail of a ``Method not found`` or
    ``Invalid params`` error (which the library keeps in ``data``) in its text."""
    error = message.get("error")
    if not isinstance(error, dict):
        return message
    data = error.get("data")
    code = error.get("code")
    text = error.get("message")
    if code == METHOD_NOT_FOUND and isinstance(data, dict) and data.get("method"):
        text = f"Method not found: {data['method']}"
    elif code == INVALID_PARAMS and isinstance(data, dict) and isinstance(data.get("errors"), list):
        problems = []
        for item in data["errors"][:3]:
            if isinstance(item, dict):
                where = ".".join(str(p) for p in item.get("loc", ())) or "params"
                problems.append(f"{where}: {item.get('msg', 'invalid')}")
        if problems:
            text = "Invalid params: " + "; ".join(problems)
    if text == error.get("message"):
        return message
    return {**message, "error": {**error, "message": text}}


def encode(message: dict[str, Any]) -> bytes:
    """One protocol line: compact JSON, lone surrogates as U+FFFD, values JSON cannot
    hold (an exception in a validation error's context) as their text."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str)
    return (SURROGATE.sub("\ufffd", text) + "\n").encode("utf-8")


class StdioChannel:
    """An ``acp`` Transport over two file descriptors (see the module docstring).

    Args:
        input_fd: read for requests (blocking reads on a thread of its own).
        output_fd: written with responses and notifications.
        on_incoming: called on the event loop with each well-formed incoming message
            before the connection sees it (the agent reads capabilities the
            library's models drop, e.g. ``clientCapabilities.subagents``).

    Must be created inside the running event loop. ``receive`` returns None at end
    of input (the editor closed the pipe); ``send`` raises ConnectionError once the
    output is gone.
    """

    def __init__(
        self,
        input_fd: int,
        output_fd: int,
        *,
        on_incoming: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._input_fd = input_fd
        self._output_fd = output_fd
        self._on_incoming = on_incoming
        self._lines: asyncio.Queue[Any] = asyncio.Queue()
        self._room = threading.Semaphore(QUEUED_LINES)
        self._outbox: queue.SimpleQueue[tuple[bytes, asyncio.Future[None]] | None] = (
            queue.SimpleQueue()
        )
        self._broken: OSError | None = None
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="agentkit-acp-in", daemon=True)
        self._writer = threading.Thread(target=self._write, name="agentkit-acp-out", daemon=True)
        self._reader.start()
        self._writer.start()

    @property
    def broken(self) -> OSError | None:
        """The error that closed the output (the editor stopped reading), or None. The
        first one ends the input too: :meth:`receive` returns None next."""
        return self._broken

    # ------------------------------------------------------------ Transport
    async def send(self, message: dict[str, Any]) -> None:
        """Write one message; returns once it is written.

        Raises ConnectionError once the output is gone, except for a response (the
        answer to a request the editor can no longer read): that is dropped quietly,
        since a request answered as the editor leaves is the normal end, not a fault.
        """
        response = "method" not in message
        try:
            if self._broken is not None or self._closed:
                raise ConnectionError("the protocol output is closed")
            future: asyncio.Future[None] = self._loop.create_future()
            self._outbox.put((encode(clarify(message)), future))
            await future
        except ConnectionError:
            if not response:
                raise
            log.info("acp: the editor left before the answer to request %r", message.get("id"))

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message, answering bad lines on the way; None at the
        end of input."""
        while True:
            line = await self._lines.get()
            if line is None:
                return None
            self._room.release()
            message: dict[str, Any] | None = None
            if line is _TOO_LONG:
                error: dict[str, Any] | None = _error(
                    INVALID_REQUEST, f"Invalid Request: a message over {MAX_LINE_BYTES} bytes"
                )
            else:
                message, error = parse_line(line)
            if error is not None:
                with contextlib.suppress(ConnectionError):
                    await self.send(error)
            if message is None:
                continue
            if self._on_incoming is not None:
                try:
                    self._on_incoming(message)
                except Exception:
                    log.exception("acp: reading an incoming message failed")
            return message

    async def close(self) -> None:
        """Write what is queued (at most 5 s), then stop the writer."""
        if self._closed:
            return
        self._closed = True
        self._outbox.put(None)
        await asyncio.to_thread(self._writer.join, 5)

    # -------------------------------------------------------------- threads
    def _deliver(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody reads
            self._loop.call_soon_threadsafe(self._lines.put_nowait, item)

    def _read(self) -> None:
        pending = bytearray()
        dropping = False
        try:
            while chunk := os.read(self._input_fd, 1 << 16):
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line, pending = bytes(pending[:end]), pending[end + 1 :]
                    if dropping:  # the rest of a line already answered as too long
                        dropping = False
                    elif len(line) > MAX_LINE_BYTES:
                        self._room.acquire()
                        self._deliver(_TOO_LONG)
                    elif line.strip():
                        self._room.acquire()
                        self._deliver(line)
                if len(pending) > MAX_LINE_BYTES:
                    pending.clear()
                    if not dropping:
                        dropping = True
                        self._room.acquire()
                        self._deliver(_TOO_LONG)
            if pending.strip() and not dropping:
                self._room.acquire()
                self._deliver(bytes(pending))
        except OSError as exc:
            log.info("acp: reading the protocol input failed: %s", exc)
        finally:
            self._deliver(None)

    def _write(self) -> None:
        while True:
            try:
                item = self._outbox.get(timeout=READER_CHECK_SECONDS)
            except queue.Empty:  # nothing to write: has the editor stopped reading?
                if self._broken is None:
                    self._broken = output_gone(self._output_fd)
                    if self._broken is not None:
                        log.info("acp: the editor stopped reading the protocol output")
                        self._deliver(None)
                continue
            if item is None:
                return
            data, future = item
            error: OSError | None = self._broken
            if error is None:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(self._output_fd, view) :]
                except OSError as exc:  # the editor has gone (EPIPE) or closed its end
                    error = self._broken = exc
                    log.info("acp: writing the protocol output failed: %s", exc)
                    self._deliver(None)  # as at the end of input: nobody reads the answers
            self._resolve(future, error)

    def _resolve(self, future: asyncio.Future[None], error: OSError | None) -> None:
        def settle() -> None:
            if future.done():
                return
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(ConnectionError(f"the protocol output is closed: {error}"))

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(settle)
