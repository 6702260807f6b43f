"""The file tools: read_file, write_file, edit_file (docs/architecture.md §3, docs/tools.md).

Every path goes through :func:`agentkit.tools.paths.resolve_path`. Text is decoded
and re-encoded by :mod:`agentkit.tools.files._text` so a file keeps its encoding, BOM and
line endings; writes are atomic and keep the file's mode (:mod:`agentkit.tools.files._fileio`).

Public API: ``ReadFileParams``, ``WriteFileParams``, ``EditFileParams``; the tool functions
``read_file(params, ctx)``, ``write_file(params, ctx)``, ``edit_file(params, ctx)`` (each
returns a ToolResult or raises ToolError); the Tool objects ``READ_FILE``, ``WRITE_FILE``,
``EDIT_FILE`` and ``FILE_TOOLS``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from agentkit.errors import ToolError
from agentkit.tools.base import Tool, ToolContext, ToolResult
from agentkit.tools.files._edit_match import (
    apply_replacements,
    crlf_index,
    edit_result,
    find_replacements,
)
from agentkit.tools.files._fileio import (
    atomic_write,
    get_snapshot,
    is_fresh,
    make_snapshot,
    open_regular,
    os_error,
    path_lock,
    record_snapshot,
    stale_error,
)
from agentkit.tools.files._listing import not_found_message
from agentkit.tools.files._placeholder import is_lazy_rewrite
from agentkit.tools.files._read import detect_stream_format, read_path
from agentkit.tools.files._text import (
    SNIFF_BYTES,
    Decoded,
    TextFormat,
    decode,
    encode,
    human_size,
    sniff_binary,
)
from agentkit.tools.paths import display_path, resolve_path, write_root

__all__ = [
    "ReadFileParams",
    "WriteFileParams",
    "EditFileParams",
    "read_file",
    "write_file",
    "edit_file",
    "READ_FILE",
    "WRITE_FILE",
    "EDIT_FILE",
    "FILE_TOOLS",
]


class ReadFileParams(BaseModel):
    """Parameters of read_file: a window of ``limit`` lines from line ``offset`` (1-based).

    ``char_offset`` (docs/tools.md) starts the first line of the window at that character, to
    page through a line longer than ``read_max_line_chars``.
    """

    path: str
    offset: int = Field(default=1, ge=1)
    limit: int = Field(default=2000, ge=1)
    char_offset: int = Field(default=0, ge=0)


class WriteFileParams(BaseModel):
    """Parameters of write_file: the whole new ``content`` of ``path``."""

    path: str
    content: str
    force: bool = Field(
        default=False,
        description="Write even though the content looks like a placeholder rewrite.",
    )


class EditFileParams(BaseModel):
    """Parameters of edit_file: replace ``old_string`` by ``new_string`` in ``path``."""

    path: str
    old_string: str
    new_string: str
    replace_all: bool = False


def read_file(params: ReadFileParams, ctx: ToolContext) -> ToolResult:
    """Read a text file as numbered lines (``{n:>6}\\t{text}``), or list a folder.

    Output: a header ``path · lines a–b of N · encoding, EOL, size``, the lines, and
    ``[showing lines a–b of N; continue with offset=b+1]`` when more remain. Lines over
    ``settings.read_max_line_chars`` are cut with a marker naming the ``char_offset`` to
    continue with; the whole output stays under ``settings.read_max_output_chars`` (never an
    error for size). Files over ``settings.max_file_bytes`` are streamed from the start in
    1 MiB chunks (memory bounded; N shown as "?" unless the end is near). Records a read
    snapshot in ``ctx.file_state`` for write_file/edit_file.

    Raises ToolError: not_found (with close names), not_a_regular_file, binary_file,
    decode_error, outside_workspace, invalid_argument (offset past the end).
    """
    path = resolve_path(ctx, params.path)
    limit = min(params.limit, max(1, ctx.settings.read_max_lines))
    try:
        return read_path(ctx, path, params.offset, limit, params.char_offset)
    except OSError as exc:
        raise os_error(ctx, path, exc, "read") from None


def _current(ctx: ToolContext, path: Path) -> tuple[os.stat_result, bytes | None]:
    """Stat an existing regular file and read it whole when it is under max_file_bytes."""
    fh, st = open_regular(ctx, path)
    with fh:
        if st.st_size > ctx.settings.max_file_bytes:
            return st, None
        return st, fh.read()


def _check_fresh(
    ctx: ToolContext, path: Path, st: os.stat_result, data: bytes | None, text: str | None
) -> None:
    """Raise stale_read if this agent read ``path`` and it changed since; the snapshot is then
    refreshed, since the error shows the current start of the file (one retry recovers)."""
    snap = get_snapshot(ctx, path)
    if snap is None or is_fresh(snap, st, data):
        return
    fmt = snap.get("format")
    record_snapshot(
        ctx, path, make_snapshot(st, fmt if isinstance(fmt, TextFormat) else None, data)
    )
    raise stale_error(ctx, path, text)


def _encode_or_fail(text: str, fmt: TextFormat, what: str) -> tuple[bytes, TextFormat]:
    try:
        return encode(text, fmt)
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise ToolError(
            "invalid_argument",
            f"{what} contains {bad!r}, which the file's encoding {fmt.label} cannot represent; "
            "use characters that exist in that encoding",
        ) from None


def write_file(params: WriteFileParams, ctx: ToolContext) -> ToolResult:
    """Create or replace a file with ``content``; parent folders are created.

    A new file is written as UTF-8 with no BOM and the content's own line endings. An
    existing file keeps its encoding, BOM and dominant line ending (from its read snapshot,
    else detected now) and its permission bits; the write is atomic.

    Choice about docs/tools.md's ``not_read_yet`` rule: a prior read_file is NOT required to
    overwrite (models often write fresh files, and a sub-agent writing deliverables must
    not be refused). ``stale_read`` IS enforced: when this agent read the file and it changed
    on disk since, nothing is written and the error shows its current first 40 lines.

    Calls ``ctx.claim_write(path)`` before writing; its ToolError("write_conflict")
    propagates. Raises ToolError: outside_workspace, is_directory, not_a_regular_file,
    stale_read, invalid_argument, placeholder_content (docs/tools.md: the content is
    substantially shorter than the existing file and holds a line such as
    ``# ... rest unchanged ...``; see ``_placeholder``; ``force=True`` writes anyway).
    """
    path = resolve_path(ctx, params.path, write=True)
    with path_lock(path):
        return _write_locked(ctx, path, params.content, params.force)


def _refuse_placeholder(ctx: ToolContext, path: Path, old: str, new: str) -> None:
    found = is_lazy_rewrite(old, new)
    if found is None:
        return
    number, line = found
    shown = display_path(ctx, path)
    raise ToolError(
        "placeholder_content",
        f"line {number} of the new content, {line[:100]!r}, stands for code that is not there, "
        f"and the content ({_count_lines(new)} lines) is much shorter than the current {shown} "
        f"({_count_lines(old)} lines): writing it would delete what the placeholder stands for. "
        "Nothing was written. To change part of the file use edit_file; to replace it, send "
        "the complete new content. If that line really belongs in the file, call write_file "
        "again with force=true.",
    )


def _write_locked(ctx: ToolContext, path: Path, content: str, force: bool = False) -> ToolResult:
    shown = display_path(ctx, path)
    try:
        st, data = _current(ctx, path)
    except FileNotFoundError:
        st, data = None, None
    except OSError as exc:
        raise os_error(ctx, path, exc, "write") from None
    fmt = TextFormat()
    old_lines: int | None = None
    if st is not None:
        decoded = _decode_existing(ctx, path, data)
        _check_fresh(ctx, path, st, data, decoded.text if decoded and data is not None else None)
        if decoded is not None:
            if not force and data is not None:
                _refuse_placeholder(ctx, path, decoded.text, content)
            fmt = decoded.fmt
            old_lines = _count_lines(decoded.text) if data is not None else None
            if fmt.eol == "\r\n":
                content = content.replace("\r\n", "\n").replace("\n", "\r\n")
    note = ""
    try:
        raw, used = encode(content, fmt)
    except UnicodeEncodeError:
        raw, used = content.encode("utf-8"), TextFormat(eol=fmt.eol)
        note = f" (written as UTF-8: the content has characters {fmt.label} cannot represent)"
    ctx.claim_write(path)
    try:
        _ensure_parent(ctx, path)
        atomic_write(path, raw, None if st is None else st.st_mode & 0o7777, write_root(ctx, path))
        new_st = os.stat(path)
    except OSError as exc:
        raise os_error(ctx, path, exc, "write") from None
    record_snapshot(ctx, path, make_snapshot(new_st, used, raw))
    lines = _count_lines(content)
    action = "Created" if st is None else "Replaced"
    was = f"; was {old_lines} lines" if old_lines is not None else ""
    text = f"{action} {shown} ({lines} lines, {human_size(len(raw))}, {used.label}, {used.eol_label}{was}){note}"
    meta = {"path": shown, "action": action.lower(), "bytes": len(raw), "lines": lines}
    return ToolResult(text, meta=meta)


def _decode_existing(ctx: ToolContext, path: Path, data: bytes | None) -> Decoded | None:
    """Decode an existing file before overwriting it; None for binary or undecodable files
    (they are simply replaced) and for files too large to read whole (format from the head)."""
    if data is None:
        with open(path, "rb") as fh:
            head = fh.read(64 * 1024)
        if sniff_binary(head[:SNIFF_BYTES]):
            return None
        try:
            return Decoded("", detect_stream_format(head)[0])
        except ToolError:
            return None
    if sniff_binary(data[:SNIFF_BYTES]):
        return None
    try:
        return decode(data)
    except ToolError:
        return None


def _ensure_parent(ctx: ToolContext, path: Path) -> None:
    parent = path.parent
    if parent.is_dir():
        return
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ToolError(
            "invalid_argument",
            f"cannot create {display_path(ctx, path)}: {display_path(ctx, probe)} is a file, not a folder",
        )
    from agentkit.confined import folder

    with folder(write_root(ctx, parent), parent, create=True):  # no link below the root
        pass


def _count_lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def edit_file(params: EditFileParams, ctx: ToolContext) -> ToolResult:
    """Replace ``old_string`` by ``new_string`` in an existing text file, in place.

    ``old_string`` must occur exactly once (or ``replace_all``); matching is staged (exact on
    LF-normalised text, look-alike characters, trailing whitespace, indentation; see
    ``_edit_match``). A CRLF file matches LF or CRLF ``old_string`` and keeps CRLF; encoding
    and BOM are kept; bytes outside the replaced spans are unchanged. The write is atomic
    and keeps the file's mode. A prior read is not required (old_string itself proves what
    is replaced), but if this agent read the file and it changed since, ``stale_read``.

    Returns ``Edited path: N replacement(s) at line L (match: stage)`` and the new text
    around each edit with line numbers (±4 lines). Calls ``ctx.claim_write(path)`` first
    (ToolError("write_conflict") propagates). Raises ToolError: invalid_argument (empty
    old_string, unrepresentable characters), no_change, not_found, is_directory,
    not_a_regular_file, too_large, binary_file, decode_error, stale_read, no_match,
    ambiguous_match, outside_workspace.
    """
    if params.old_string == "":
        raise ToolError(
            "invalid_argument",
            "old_string is empty; to create or replace a whole file use write_file",
        )
    if params.old_string == params.new_string:
        raise ToolError("no_change", "old_string and new_string are identical; nothing to change")
    path = resolve_path(ctx, params.path, write=True)
    with path_lock(path):
        return _edit_locked(ctx, path, params)


def _edit_locked(ctx: ToolContext, path: Path, params: EditFileParams) -> ToolResult:
    shown = display_path(ctx, path)
    try:
        fh, st = open_regular(ctx, path)
        with fh:
            if st.st_size > ctx.settings.max_file_bytes:
                raise ToolError(
                    "too_large",
                    f"{shown} is {human_size(st.st_size)}, over the {human_size(ctx.settings.max_file_bytes)} "
                    "edit limit; change it with run_command (e.g. sed) instead",
                )
            data = fh.read()
    except FileNotFoundError:
        raise ToolError(
            "not_found", not_found_message(ctx, path) + " To create a new file use write_file."
        ) from None
    except OSError as exc:
        raise os_error(ctx, path, exc, "edit") from None
    kind = sniff_binary(data[:SNIFF_BYTES])
    if kind:
        raise ToolError(
            "binary_file",
            f"{shown} is a binary file ({kind}, {human_size(len(data))}); it cannot be edited as text",
        )
    decoded = decode(data)
    if decoded.lossy:
        raise ToolError(
            "decode_error",
            f"{shown} does not decode and re-encode exactly as {decoded.fmt.label}; an edit would change "
            "other bytes. Use write_file to replace it whole, or run_command.",
        )
    _check_fresh(ctx, path, st, data, decoded.text)
    raw = decoded.text
    crlfs = crlf_index(raw)
    text = raw.replace("\r\n", "\n") if crlfs else raw
    old = params.old_string.replace("\r\n", "\n")
    new = params.new_string.replace("\r\n", "\n")
    reps, stage = find_replacements(text, old, new, params.replace_all)
    new_raw, spans = apply_replacements(raw, crlfs, reps, decoded.fmt.eol)
    if new_raw == raw:
        raise ToolError("no_change", "the replacement leaves the file unchanged")
    out, used = _encode_or_fail(new_raw, decoded.fmt, "new_string")
    ctx.claim_write(path)
    try:
        now = os.stat(path)
        if (now.st_mtime_ns, now.st_size) != (st.st_mtime_ns, st.st_size):
            raise stale_error(ctx, path, None)  # changed while we were matching
        atomic_write(path, out, st.st_mode & 0o7777, write_root(ctx, path))
        new_st = os.stat(path)
    except OSError as exc:
        raise os_error(ctx, path, exc, "write") from None
    record_snapshot(ctx, path, make_snapshot(new_st, used, out))
    return edit_result(ctx, shown, new_raw, spans, stage)


READ_FILE = Tool(name="read_file", params=ReadFileParams, func=read_file, counter="files_read")
WRITE_FILE = Tool(name="write_file", params=WriteFileParams, func=write_file, counter=None)
EDIT_FILE = Tool(name="edit_file", params=EditFileParams, func=edit_file, counter=None)
FILE_TOOLS: list[Tool] = [READ_FILE, WRITE_FILE, EDIT_FILE]
