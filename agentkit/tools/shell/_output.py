"""Bounded capture and cleaning of a command's output (private to run_command).

Bytes arrive in chunks; they are decoded incrementally (UTF-8, invalid bytes replaced),
cleaned (ANSI CSI/OSC escape codes stripped, ``\\r`` overwrites resolved to the line's
last state, NUL and BEL dropped: docs/tools.md §7 run_command "Output cleaning") and kept as a
head (25 % of the cap) plus a tail ring (75 %). Memory stays bounded whatever the
volume; once the output exceeds the cap the full cleaned text is also spilled to a log
file (up to ``spill_max_bytes``).
"""

from __future__ import annotations

import codecs
import re
from collections import deque
from pathlib import Path
from typing import BinaryIO

# CSI (ESC [ ... final), OSC (ESC ] ... BEL | ESC \), DCS/SOS/PM/APC strings, charset
# designations, and the remaining two-byte escapes (ESC 7, ESC =, ESC M, ...).
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[PX^_][^\x1b]*\x1b\\"
    r"|\x1b[()*+\-./][ -~]"
    r"|\x1b[ -/]*[0-~]"
)
_DROP = str.maketrans("", "", "\x00\x07")
_HOLD_MAX = 64 * 1024  # longest partial line kept back waiting for its newline


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (CSI, OSC, DCS, two-byte escapes) from ``text``."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def resolve_cr(line: str) -> str:
    """Return what a terminal shows for one line containing ``\\r`` overwrites.

    ``"10%\\r100%"`` becomes ``"100%"``; a shorter rewrite keeps the longer tail
    (``"abcdef\\rXY"`` -> ``"XYcdef"``); a trailing ``\\r`` (CRLF) changes nothing.
    """
    if "\r" not in line:
        return line
    shown = ""
    for segment in line.split("\r"):
        shown = segment + shown[len(segment) :]
    return shown


def clean(text: str) -> str:
    """Clean complete lines of output: strip escapes, resolve ``\\r``, drop NUL/BEL."""
    text = strip_ansi(text)
    if "\r" in text:
        text = "\n".join(resolve_cr(line) for line in text.split("\n"))
    return text.translate(_DROP)


class OutputCapture:
    """Accumulates a command's output with bounded memory.

    Args:
        max_chars: characters shown at most (head 25 %, tail 75 %).
        spill_path: file for the full cleaned log once the output exceeds ``max_chars``
            (None: no spill). Created lazily; failures to write are ignored.
        spill_max_bytes: cap of the spill file, bytes.
        root: the workspace the spill file is in: reached through no link below it
            (agentkit.confined; the command itself may have planted one).
    """

    def __init__(
        self,
        max_chars: int,
        spill_path: Path | None = None,
        spill_max_bytes: int = 0,
        root: Path | None = None,
    ):
        self.max_chars = max(1, max_chars)
        self.head_cap = self.max_chars // 4
        self.tail_cap = self.max_chars - self.head_cap
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total_chars = 0
        self.total_bytes = 0
        self._spill_path = spill_path
        self._root = root
        self._spill_max = spill_max_bytes
        self._spill: BinaryIO | None = None
        self._spilled = 0
        self.spill_written: Path | None = None
        self.spill_cut = False

    # -- input -----------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Add raw bytes read from the pipe."""
        self.total_bytes += len(data)
        text = self._pending + self._decoder.decode(data)
        cut = text.rfind("\n") + 1
        if len(text) - cut > _HOLD_MAX:
            # A very long line without newline: flush it, keeping a possibly
            # unfinished escape sequence for the next chunk.
            esc = text.rfind("\x1b", len(text) - 64)
            cut = esc if esc >= 0 else len(text)
        self._pending = text[cut:]
        if cut:
            self._add(clean(text[:cut]))

    def finish(self) -> None:
        """Flush the decoder and the held-back partial line (call once at the end)."""
        text = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        if text:
            self._add(clean(text))
        if self._spill is not None:
            try:
                self._spill.close()
            except OSError:
                pass
            self._spill = None

    def _add(self, text: str) -> None:
        if not text:
            return
        self.total_chars += len(text)
        room = self.head_cap - self._head_len
        if room > 0:
            part = text[:room]
            self._head.append(part)
            self._head_len += len(part)
            text = text[room:]
            if not text:
                return
        self._tail.append(text)
        self._tail_len += len(text)
        if self.total_chars > self.max_chars:
            self._spill_write(text)
        while self._tail and self._tail_len - len(self._tail[0]) >= self.tail_cap:
            self._tail_len -= len(self._tail.popleft())

    def _spill_write(self, text: str) -> None:
        if self._spill_path is None or self.spill_cut:
            return
        try:
            if self._spill is None:
                if self._root is not None:
                    from agentkit.confined import create_file
                    from agentkit.conversation import hide_runtime_folder

                    hide_runtime_folder(self._root, self._spill_path.parent)  # not for git
                    self._spill = create_file(self._root, self._spill_path)
                else:
                    self._spill_path.parent.mkdir(parents=True, exist_ok=True)
                    self._spill = open(self._spill_path, "wb")  # noqa: SIM115 - closed in finish()
                self.spill_written = self._spill_path
                # Everything before this chunk is still in memory: head + tail minus text.
                earlier = "".join(self._head) + "".join(self._tail)[: -len(text)]
                self._spill_raw(earlier)
            self._spill_raw(text)
        except OSError:
            self._spill_path = None

    def _spill_raw(self, text: str) -> None:
        assert self._spill is not None
        data = text.encode("utf-8", "replace")
        room = self._spill_max - self._spilled
        if len(data) > room:
            data = data[: max(0, room)]
            self.spill_cut = True
        self._spill.write(data)
        self._spilled += len(data)

    # -- output ----------------------------------------------------------------
    @property
    def omitted(self) -> int:
        """Characters dropped from the middle (0 when everything fits)."""
        return max(0, self.total_chars - self.max_chars)

    def text(self) -> str:
        """Return the shown output: everything, or head + omission marker + tail."""
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self.omitted:
            return head + tail
        tail = tail[len(tail) - self.tail_cap :]
        return f"{head}\n[... {self.omitted:,} characters omitted ...]\n{tail}"
