"""read_file's implementation: windows of numbered lines and bounded-memory streaming of
large files (docs/tools.md §3 read_file)."""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.files._fileio import make_snapshot, open_regular, record_snapshot
from agentkit.tools.files._listing import list_directory, not_found_message
from agentkit.tools.files._text import (
    SNIFF_BYTES,
    Decoded,
    TextFormat,
    decode,
    detect_bom,
    format_of,
    guess_legacy,
    human_size,
    sniff_binary,
)
from agentkit.tools.paths import display_path

CHUNK_BYTES = 1 << 20
HEAD_SAMPLE_BYTES = 64 * 1024


def read_path(
    ctx: ToolContext, path: Path, offset: int, limit: int, char_offset: int
) -> ToolResult:
    """Read ``limit`` lines of ``path`` from line ``offset`` (1-based); see files.read_file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ToolError("not_found", not_found_message(ctx, path)) from None
    if stat.S_ISDIR(st.st_mode):
        return list_directory(ctx, path)
    fh, st = open_regular(ctx, path)
    with fh:
        if st.st_size == 0:
            record_snapshot(ctx, path, make_snapshot(st, TextFormat(), b""))
            return ToolResult(
                "(empty file, 0 bytes)", meta={"path": display_path(ctx, path), "bytes": 0}
            )
        head = fh.read(SNIFF_BYTES)
        kind = sniff_binary(head)
        if kind:
            raise ToolError(
                "binary_file",
                f"{display_path(ctx, path)} is a binary file ({kind}, {human_size(st.st_size)}); "
                "its bytes are not shown. Use run_command with a suitable tool to inspect it.",
            )
        if st.st_size <= ctx.settings.max_file_bytes:
            data = head + fh.read(max(0, st.st_size - len(head)))  # a growing log: what stat saw
            decoded = decode(data)
            record_snapshot(ctx, path, make_snapshot(st, decoded.fmt, data))
            return _window_of_text(ctx, path, decoded, len(data), offset, limit, char_offset)
        return _window_streamed(ctx, path, fh, st, head, offset, limit, char_offset)


# --- windows -----------------------------------------------------------------------


def _format_line(
    n: int, text: str, first: bool, co: int, known_len: int | None, nbytes: int, s: Settings
) -> str:
    """Render one numbered line; ``text`` starts at char 0 (maybe only a prefix of the line)."""
    start = co if first else 0
    end = start + s.read_max_line_chars
    shown = text[start:end].replace("\x00", "␀")  # NULs (e.g. a sparse hole) shown, not sent raw
    if len(text) <= end:
        return f"{n:>6}\t{shown}"
    size = f"{known_len} chars" if known_len is not None else f"{nbytes} bytes"
    return f"{n:>6}\t{shown}… [line {n}: {size}; continue with offset={n}, char_offset={end}]"


def _render(
    ctx: ToolContext,
    path: Path,
    entries: Iterable[tuple[int, str, int | None, int]],
    offset: int,
    char_offset: int,
    fmt_label: str,
    size: int,
    total: Any,
) -> ToolResult:
    """Assemble header, lines and the continuation note, within the output cap.

    ``entries`` yields ``(line number, text from char 0, length in chars or None, length
    in bytes or units)``; ``total`` is a callable returning the line count or None.
    """
    s = ctx.settings
    out: list[str] = []
    used = 0
    last = offset - 1
    capped = False
    for n, text, known, nbytes in entries:
        line = _format_line(n, text, n == offset, char_offset, known, nbytes, s)
        if out and used + len(line) + 1 > s.read_max_output_chars:
            capped = True
            break
        out.append(line)
        used += len(line) + 1
        last = n
    n_total = total()
    if last < offset:
        count = "?" if n_total is None else str(n_total)
        raise ToolError(
            "invalid_argument",
            f"offset {offset} is past the end of {display_path(ctx, path)} ({count} lines)",
        )
    of = "?" if n_total is None else str(n_total)
    from_char = f" (line {offset} from char {char_offset})" if char_offset else ""
    header = f"{display_path(ctx, path)} · lines {offset}–{last} of {of}{from_char} · {fmt_label}, {human_size(size)}"
    more = capped or n_total is None or last < n_total
    text = header + "\n" + "\n".join(out)
    if more:
        text += f"\n[showing lines {offset}–{last} of {of}; continue with offset={last + 1}]"
    meta = {
        "path": display_path(ctx, path),
        "first_line": offset,
        "last_line": last,
        "total_lines": n_total,
        "bytes": size,
    }
    return ToolResult(text, truncated=more, meta=meta)


def _window_of_text(
    ctx: ToolContext,
    path: Path,
    decoded: Decoded,
    size: int,
    offset: int,
    limit: int,
    char_offset: int,
) -> ToolResult:
    lines = decoded.text.split("\n")
    if lines[-1] == "":
        lines.pop()
    total = len(lines)
    if total == 0:  # only a BOM
        return ToolResult(f"(empty file, {size} bytes: {decoded.fmt.label} byte-order mark only)")

    def entries() -> Iterator[tuple[int, str, int | None, int]]:
        for i in range(offset - 1, min(total, offset - 1 + limit)):
            line = lines[i].removesuffix("\r")
            yield i + 1, line, len(line), len(line)

    label = (
        f"{decoded.fmt.label}, {decoded.fmt.eol_label}"
        if total > 1 or decoded.fmt.final_newline
        else decoded.fmt.label
    )
    return _render(ctx, path, entries(), offset, char_offset, label, size, lambda: total)


class _Scanner:
    """Split a stream of chunks (bytes or str) into lines on ``sep`` with bounded memory:
    only the first ``keep`` units of each wanted line are kept."""

    def __init__(self, chunks: Iterator[Any], sep: Any, keep: int) -> None:
        self.chunks, self.sep, self.keep = chunks, sep, keep
        self.chunk: Any = sep[:0]
        self.pos = 0
        self.n = 1  # number of the line starting at pos
        self.last_was_sep = False
        self.seen_data = False

    def _advance(self) -> bool:
        for chunk in self.chunks:
            if chunk:
                self.chunk, self.pos = chunk, 0
                self.last_was_sep = chunk[-1:] == self.sep
                self.seen_data = True
                return True
        return False

    def skip_to(self, first: int) -> None:
        """Skip whole lines until line ``first`` starts (or the stream ends)."""
        while self.n < first:
            if self.pos >= len(self.chunk) and not self._advance():
                if self.seen_data and not self.last_was_sep:
                    self.n += 1  # the unterminated last line was skipped too
                return
            need = first - self.n
            # find() is a memchr; count() is much slower on long runs without separators.
            if self.chunk.find(self.sep, self.pos) < 0:
                self.pos = len(self.chunk)
                continue
            count = self.chunk.count(self.sep, self.pos)
            if count < need:
                self.n += count
                self.pos = len(self.chunk)
                continue
            for _ in range(need):
                self.pos = self.chunk.index(self.sep, self.pos) + 1
            self.n = first

    def next_line(self) -> tuple[int, Any, int] | None:
        """Return ``(number, kept prefix incl. any \\r, full length in units)`` or None at EOF."""
        parts: list[Any] = []
        kept = length = 0
        while True:
            if self.pos >= len(self.chunk) and not self._advance():
                if parts or length:
                    self.n += 1
                    return self.n - 1, self.sep[:0].join(parts), length
                return None
            idx = self.chunk.find(self.sep, self.pos)
            end = len(self.chunk) if idx < 0 else idx
            if kept < self.keep:
                piece = self.chunk[self.pos : min(end, self.pos + self.keep - kept)]
                parts.append(piece)
                kept += len(piece)
            length += end - self.pos
            if idx >= 0:
                self.pos = idx + 1
                self.n += 1
                return self.n - 1, self.sep[:0].join(parts), length
            self.pos = len(self.chunk)

    def count_rest(self) -> int:
        """Consume the stream and return the total number of lines."""
        seps = self.chunk.count(self.sep, self.pos)
        rest = self.pos < len(self.chunk)
        for chunk in self.chunks:
            if chunk:
                seps += chunk.count(self.sep)
                self.last_was_sep = chunk[-1:] == self.sep
                rest = True
        return self.n - 1 + seps + (1 if rest and not self.last_was_sep else 0)


def detect_stream_format(head: bytes) -> tuple[TextFormat, int]:
    """Format of a large file from its first bytes: ``(format, BOM length)``.

    Raises ToolError("decode_error") when no accepted encoding fits the head.
    """
    bom = detect_bom(head)
    if bom:
        codec, mark = bom
        sample = codecs.getincrementaldecoder(codec)(errors="replace").decode(head[len(mark) :])
        return format_of(sample, codec, mark), len(mark)
    try:
        sample = codecs.getincrementaldecoder("utf-8")().decode(head)
        return format_of(sample, "utf-8", b""), 0
    except UnicodeDecodeError:
        pass
    legacy, likely = guess_legacy(head)
    if legacy is None:
        hint = f" (most like {likely})" if likely else ""
        raise ToolError(
            "decode_error", f"the start of the file is not UTF-8 and no common encoding fits{hint}"
        )
    return format_of(head.decode(legacy, errors="replace"), legacy, b""), 0


def _window_streamed(
    ctx: ToolContext,
    path: Path,
    fh: Any,
    st: os.stat_result,
    head: bytes,
    offset: int,
    limit: int,
    char_offset: int,
) -> ToolResult:
    """Window of a file over ``max_file_bytes``: one pass from the start in 1 MiB chunks,
    keeping only the wanted lines (each cut to what can be shown); memory stays bounded
    whatever the file or line sizes. The line count is given only when the window ends
    within ``max_file_bytes`` of the end of the file ("of ?" otherwise)."""
    s = ctx.settings
    more = fh.read(HEAD_SAMPLE_BYTES - len(head))
    head += more
    fmt, bom_len = detect_stream_format(head)
    fh.seek(bom_len)
    byte_safe = not fmt.encoding.startswith(("utf-16", "utf-32"))
    # Up to 4 bytes per character (UTF-8, GB18030), +8 so a cut line is recognisable as such.
    keep_chars = char_offset + s.read_max_line_chars + 2
    raw_chunks: Iterator[bytes] = iter(lambda: fh.read(CHUNK_BYTES), b"")
    if byte_safe:
        scanner = _Scanner(raw_chunks, b"\n", keep_chars * 4 + 8)
    else:
        dec = codecs.getincrementaldecoder(fmt.encoding)(errors="replace")
        text_chunks = (dec.decode(c) for c in raw_chunks)
        scanner = _Scanner(text_chunks, "\n", keep_chars)
    record_snapshot(ctx, path, make_snapshot(st, fmt, None))
    scanner.skip_to(offset)
    eof = {"at": False}

    def entries() -> Iterator[tuple[int, str, int | None, int]]:
        for _ in range(limit):
            item = scanner.next_line()
            if item is None:
                eof["at"] = True
                return
            n, kept, length = item
            if byte_safe:
                whole = len(kept) == length
                text = codecs.getincrementaldecoder(fmt.encoding)(errors="replace").decode(
                    kept, final=whole
                )
            else:
                whole, text = len(kept) == length, kept
            if whole:
                text = text.removesuffix("\r")
            yield n, text, (len(text) if whole else None), length

    def total() -> int | None:
        if eof["at"]:
            return scanner.n - 1
        if st.st_size - fh.tell() <= s.max_file_bytes:
            return scanner.count_rest()
        return None

    label = f"{fmt.label}, {fmt.eol_label}"
    return _render(ctx, path, entries(), offset, char_offset, label, st.st_size, total)
