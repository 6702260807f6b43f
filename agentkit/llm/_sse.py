"""A small, tolerant server-sent-events line parser for Chat Completions streams.

Follows the SSE framing (``field: value`` lines, a blank line ends an event) with the
leniency real servers need: comment
lines (``: keep-alive``, ``: OPENROUTER PROCESSING``) and blank lines are skipped,
``\\r\\n`` endings are accepted, and lines that are not SSE fields at all (llama.cpp's
``error: {...}``) are kept in :attr:`SSEParser.unknown_lines` for the error message
instead of being decoded.
"""

from __future__ import annotations

from collections.abc import Iterator

#: Unknown lines kept for diagnostics (the rest are counted only).
MAX_UNKNOWN_LINES = 5


class SSEParser:
    """Feed bytes, get ``(event, data)`` pairs.

    ``event`` is the ``event:`` field (None when absent) and ``data`` the event's
    ``data:`` lines joined with ``\\n``. ``[DONE]`` is returned as data like any other
    payload; the caller decides what it means.
    """

    __slots__ = ("_buffer", "_data", "_event", "unknown_lines")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event: str | None = None
        self.unknown_lines: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[tuple[str | None, str]]:
        """Consume ``chunk`` (any slice of the byte stream); yield the events completed."""
        if self._buffer:
            chunk = self._buffer + chunk
        lines = chunk.split(b"\n")
        self._buffer = lines.pop()
        for raw in lines:
            event = self._line(raw)
            if event is not None:
                yield event

    def close(self) -> Iterator[tuple[str | None, str]]:
        """Flush at end of stream: a last line without newline, an event without blank line."""
        if self._buffer:
            raw, self._buffer = self._buffer, b""
            event = self._line(raw)
            if event is not None:
                yield event
        event = self._dispatch()
        if event is not None:
            yield event

    def _line(self, raw: bytes) -> tuple[str | None, str] | None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw:
            return self._dispatch()
        if raw[:1] == b":":
            return None  # comment / keep-alive
        line = raw.decode("utf-8", "replace")
        field, sep, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value.strip() or None
        elif field in ("id", "retry"):
            pass
        elif not sep and line.startswith(("{", "[")):
            # Bare JSON without "data:" (seen from hand-rolled proxies): keep it as data.
            self._data.append(line)
        elif len(self.unknown_lines) < MAX_UNKNOWN_LINES:
            self.unknown_lines.append(line[:500])
        return None

    def _dispatch(self) -> tuple[str | None, str] | None:
        if not self._data:
            self._event = None
            return None
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        event, self._event, self._data = self._event, None, []
        return event, data
