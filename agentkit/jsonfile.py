"""Atomic JSON files: a reader never sees a half-written file, even after a kill.

Replacing a file by rename is atomic, but on ext4 it also flushes the new data
(``auto_da_alloc``), about 2 ms here. :class:`JsonFileWriter` therefore encodes
in the caller's thread (a consistent snapshot, C encoder) and renames in a
background thread, keeping only the newest pending document; the thread ends
when it has had nothing to write for a while, so an idle file holds no thread.

Reading (:func:`read_json`) refuses documents nested deeper than
:data:`MAX_DEPTH` with a ValueError: a damaged or hostile file must not raise
RecursionError here, nor in whatever walks the document later. Input that arrives
as JSON from outside (a web request, an editor's message) is checked with
:func:`has_lone_surrogate` before it is taken: such text cannot be saved as UTF-8.
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode

SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate (in a Python str every surrogate is lone): a JSON ``"\\ud800"``
escape decodes to one, and no UTF-8 text can hold it."""

MAX_DEPTH = 200
"""Deepest nesting of lists and objects :func:`read_json` accepts (agentkit's own
files nest fewer than ten levels)."""

IDLE_SECONDS = 5.0
"""A :class:`JsonFileWriter`'s thread ends after this many seconds with nothing to
write (the next ``submit`` starts a new one)."""


def _write_text_atomic(path: Path, text: str, fsync: bool, root: Path | None = None) -> None:
    if root is not None:
        # Inside a workspace the model's commands may change: follow no link below root.
        from agentkit.confined import write_text_atomic

        write_text_atomic(root, path, text, fsync=fsync)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # errors="replace": a lone surrogate from anywhere must not lose the save.
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json_atomic(
    path: Path, data: Any, *, fsync: bool = False, root: Path | None = None
) -> None:
    """Write ``data`` as UTF-8 JSON to ``path`` through a temp file and ``os.replace``.

    The rename is atomic on POSIX and Windows, so ``path`` always holds either the
    old or the new complete document. ``fsync=True`` also survives power loss at
    the cost of a disk flush (milliseconds). Parent folders are created. ``root``
    (a workspace): no symbolic link below it is followed (agentkit.confined).
    Raises OSError when the folder is not writable, or is reached through a link.
    """
    _write_text_atomic(path, _encode(data), fsync, root)


def read_json(path: Path, max_depth: int = MAX_DEPTH) -> Any:
    """Return the parsed JSON document at ``path``.

    Raises FileNotFoundError, or ValueError for bad JSON (json.JSONDecodeError, or
    UnicodeDecodeError) and for a document nested deeper than ``max_depth`` levels
    of lists and objects (never RecursionError, however deep the file).
    """
    with open(path, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
        except RecursionError:
            raise ValueError(f"{path}: nested too deeply (over {max_depth} levels)") from None
    if _too_deep(data, max_depth):
        raise ValueError(f"{path}: nested too deeply (over {max_depth} levels)")
    return data


def parse_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Return the JSON document ``text`` parsed, refusing (ValueError) bad JSON and a
    document nested deeper than ``max_depth`` levels, as :func:`read_json` does."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested too deeply (over {max_depth} levels)") from None
    if _too_deep(data, max_depth):
        raise ValueError(f"nested too deeply (over {max_depth} levels)")
    return data


def _too_deep(data: Any, limit: int) -> bool:
    """True when ``data`` nests lists and objects deeper than ``limit`` (walked
    without recursion; only containers are visited)."""
    stack: list[tuple[Any, int]] = [(data, 1)] if isinstance(data, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _signature(item: Any) -> tuple[int, int]:
    # What may change in a stored message: compaction rewrites a content, or the
    # tool calls (shortened arguments), in place.
    if not isinstance(item, dict):
        return (-1, -1)
    content = item.get("content")
    calls = item.get("tool_calls")
    return (len(content) if isinstance(content, str) else -1, id(calls) if calls else 0)


class _ListEncoder:
    """Encodes a list of messages, re-using the JSON of messages seen before, so
    saving a growing transcript each turn costs a join, not a full encode."""

    def __init__(self) -> None:
        self._parts: dict[int, tuple[Any, tuple[int, int], str]] = {}

    def encode(self, items: list[Any]) -> str:
        parts: list[str] = []
        seen: dict[int, tuple[Any, tuple[int, int], str]] = {}
        for item in items:
            sig = _signature(item)
            hit = self._parts.get(id(item))
            text = hit[2] if hit is not None and hit[0] is item and hit[1] == sig else _encode(item)
            seen[id(item)] = (item, sig, text)
            parts.append(text)
        self._parts = seen
        return "[" + ",".join(parts) + "]"


class JsonFileWriter:
    """Saves successive versions of one JSON document atomically, off the caller's thread.

    ``submit(data)`` hands over a snapshot and returns; a daemon thread encodes and
    writes the newest version. Versions submitted within ``coalesce`` seconds of
    each other are written once (the newest): at a human pace every turn is
    written at once, and a burst of fast turns costs a few writes, not one each.
    ``flush()`` writes what is pending now and re-raises the error of the last
    write when it failed (OSError). ``guard(data, write)``, when given, decides
    whether ``data`` may replace the file: it calls ``write()`` or not. ``root``: as
    :func:`write_json_atomic`'s. A reader always sees a complete document, at most
    ``coalesce`` seconds old. The writing thread ends after :data:`IDLE_SECONDS`
    with nothing to write; with ``forget_when_idle`` it then also drops the
    messages' cached JSON.
    """

    def __init__(
        self,
        path: Path,
        coalesce: float = 0.2,
        guard: Callable[[Any, Callable[[], None]], None] | None = None,
        root: Path | None = None,
        forget_when_idle: bool = False,
    ) -> None:
        self.path = path
        self.root = root  # as write_json_atomic's root
        # Drop the messages' cached JSON when the thread ends idle (the next write
        # encodes them all once): an open conversation waiting for a person holds no
        # second copy of its transcript.
        self.forget_when_idle = forget_when_idle
        self.coalesce = coalesce
        # guard(data, write): runs write() when data may replace the file, or not.
        self.guard = guard
        self._pending: Any = None
        self._has_pending = False
        self._flushing = False
        self._cond = threading.Condition()
        self._busy = False
        self._error: OSError | None = None
        self._thread: threading.Thread | None = None
        self._messages = _ListEncoder()

    def submit(self, data: Any) -> None:
        """Queue ``data`` to be written. A dict's ``messages`` list is copied (the
        caller may keep appending) and later encoded incrementally (_ListEncoder)."""
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            data = {**data, "messages": list(data["messages"])}
        with self._cond:
            woken = self._has_pending  # the writer already waits to write: no wake-up
            self._pending, self._has_pending = data, True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agentkit-json-writer", daemon=True
                )
                try:
                    self._thread.start()
                except RuntimeError:  # no thread to be had: flush() writes it
                    self._thread = None
            if not woken:
                self._cond.notify_all()

    def _encode(self, data: Any) -> str:
        if isinstance(data, dict) and isinstance(data.get("messages"), list):
            rest = _encode({k: v for k, v in data.items() if k != "messages"})
            joiner = "," if rest != "{}" else ""
            return (
                rest[:-1] + joiner + '"messages":' + self._messages.encode(data["messages"]) + "}"
            )
        return _encode(data)

    def _run(self) -> None:
        last_write = 0.0
        while True:
            with self._cond:
                while not self._has_pending:
                    if not self._cond.wait(IDLE_SECONDS) and not self._has_pending:
                        self._thread = None  # idle: the next submit starts a new thread
                        if self.forget_when_idle:
                            self._messages = _ListEncoder()
                        return
                # Wait out the coalescing window since the last write (unless flushed).
                while not self._flushing:
                    remaining = last_write + self.coalesce - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                data, self._pending, self._has_pending = self._pending, None, False
                self._busy = True
            self._write(data)
            del data  # written: this thread keeps no document alive while it waits
            last_write = time.monotonic()
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _write(self, data: Any) -> None:
        try:
            text = self._encode(data)
            write = functools.partial(_write_text_atomic, self.path, text, False, self.root)
            if self.guard is None:
                write()
            else:
                self.guard(data, write)
            self._error = None  # a later good write supersedes an earlier failure
        except (OSError, TypeError, ValueError) as exc:
            self._error = exc if isinstance(exc, OSError) else OSError(str(exc))

    def flush(self, timeout: float = 30.0) -> None:
        """Write what is pending now and wait for it (at most ``timeout`` seconds)."""
        with self._cond:
            inline = self._thread is None and self._has_pending and not self._busy
            if inline:  # no thread could be started: write here
                data, self._pending, self._has_pending = self._pending, None, False
                self._busy = True
            else:
                self._flushing = True
                self._cond.notify_all()
                self._cond.wait_for(lambda: not self._has_pending and not self._busy, timeout)
                self._flushing = False
        if inline:
            self._write(data)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def has_lone_surrogate(value: Any) -> bool:
    """True when any text in ``value`` (a decoded JSON document: dict keys included)
    holds a lone surrogate. Walked without recursion (the document may be nested
    deeply)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and SURROGATE.search(item):
            return True
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_strict(data: str | bytes) -> Any:
    """``json.loads`` without the extensions Python accepts and JSON has not
    (``NaN``, ``Infinity``, ``-Infinity``). Raises ValueError (UnicodeDecodeError,
    a JSONDecodeError, or for those words) and RecursionError as ``json.loads`` does."""
    return json.loads(data, parse_constant=_no_constant)
