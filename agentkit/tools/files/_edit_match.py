"""Finding ``old_string`` in a file for edit_file: staged matching and the no_match report.

Stages (docs/tools.md §5 edit_file "Matching"; the first stage with a hit wins, later stages
accept a single hit only): 1. exact on LF-normalised text; 2. Unicode look-alikes
(NBSP and other spaces, curly quotes, full-width ASCII) compared as their plain forms;
3. per-line trailing-whitespace-insensitive; 4. per-line indentation-insensitive, with
the replacement re-indented in the file's own style. No similarity-ratio matching.
All positions here are offsets in the LF-normalised text.
"""

from __future__ import annotations

import bisect
import difflib
import time
from dataclasses import dataclass

from agentkit.errors import ToolError
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.files._text import char_name, visible_ws

TAB_COLUMNS = 4  # tab width assumed when converting between tabs and spaces
CLOSEST_SEARCH_SECONDS = 1.5
SNIPPET_CONTEXT = 4
SNIPPET_MAX_LINES = 60

_LOOKALIKES: dict[int, str] = {
    0x00A0: " ",
    0x202F: " ",
    0x2007: " ",
    0x3000: " ",
    0x2018: "'",
    0x2019: "'",
    0x201A: "'",
    0x201B: "'",
    0x201C: '"',
    0x201D: '"',
    0x201E: '"',
    0x201F: '"',
}
_LOOKALIKES.update({c: " " for c in range(0x2000, 0x200B)})
_LOOKALIKES.update({c: chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)})


@dataclass
class Replacement:
    """One span of the LF-normalised text to replace: ``text[start:end] -> new``."""

    start: int
    end: int
    new: str


def line_of(text: str, pos: int) -> int:
    """1-based line number of offset ``pos``."""
    return text.count("\n", 0, pos) + 1


def _find_all(text: str, needle: str) -> list[int]:
    hits, pos = [], text.find(needle)
    while pos >= 0:
        hits.append(pos)
        pos = text.find(needle, pos + len(needle))
    return hits


def _ambiguous(text: str, hits: list[int], how: str) -> ToolError:
    lines = ", ".join(str(line_of(text, h)) for h in hits[:20])
    more = ", …" if len(hits) > 20 else ""
    return ToolError(
        "ambiguous_match",
        f"old_string occurs {len(hits)} times{how} (lines {lines}{more}); add surrounding context "
        "to make it unique, or set replace_all=true to replace every occurrence.",
    )


def find_replacements(
    text: str, old: str, new: str, replace_all: bool
) -> tuple[list[Replacement], str]:
    """Locate ``old`` in ``text`` (both LF-normalised) and return ``(replacements, stage)``.

    ``stage`` is "exact", "unicode", "trailing-ws" or "indent".
    Raises ToolError("ambiguous_match") or ToolError("no_match") (with the closest region).
    """
    hits = _find_all(text, old)
    if hits:
        if len(hits) > 1 and not replace_all:
            raise _ambiguous(text, hits, "")
        return [Replacement(h, h + len(old), new) for h in hits], "exact"
    plain_text, plain_old = text.translate(_LOOKALIKES), old.translate(_LOOKALIKES)
    if plain_old != old or plain_text != text:
        hits = _find_all(plain_text, plain_old)
        if len(hits) > 1:
            raise _ambiguous(
                text,
                hits,
                " when look-alike characters (NBSP, curly quotes, full-width) count as plain ones",
            )
        if hits:
            return [Replacement(hits[0], hits[0] + len(old), new)], "unicode"
    for stage in ("trailing-ws", "indent"):
        found = _line_match(text, old, new, stage)
        if found is not None:
            return [found], stage
    raise ToolError("no_match", no_match_message(text, old))


def _line_match(text: str, old: str, new: str, stage: str) -> Replacement | None:
    """Whole-line match ignoring trailing (or all leading/trailing) whitespace per line."""
    old_lines = old.split("\n")
    ends_nl = len(old_lines) > 1 and old_lines[-1] == ""
    if ends_nl:
        old_lines.pop()
    key = str.rstrip if stage == "trailing-ws" else str.strip
    want = [key(x) for x in old_lines]
    if not any(want):
        return None
    lines = text.split("\n")
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    k = len(want)
    hits = [
        i
        for i in range(len(lines) - k + 1)
        if key(lines[i]) == want[0] and all(key(lines[i + j]) == want[j] for j in range(1, k))
    ]
    if not hits:
        return None
    if len(hits) > 1:
        how = " ignoring trailing whitespace" if stage == "trailing-ws" else " ignoring indentation"
        raise _ambiguous(text, [starts[i] for i in hits], how)
    i = hits[0]
    start = starts[i]
    end = starts[i + k - 1] + len(lines[i + k - 1])
    if ends_nl and end < len(text):
        end += 1
    if stage == "indent":
        new = reindent(new, old_lines, lines[i : i + k])
    return Replacement(start, end, new)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _columns(indent: str) -> int:
    return len(indent.expandtabs(TAB_COLUMNS))


def reindent(new: str, old_lines: list[str], file_lines: list[str]) -> str:
    """Re-indent ``new`` from ``old_string``'s indentation to the file's.

    Fits ``file_col = a * old_col + b`` on the matched line pairs (columns with tabs as
    4), applies it to every line of ``new`` and writes indentation with the file's own
    character (tabs when the matched file lines indent with tabs).
    """
    pairs = [
        (_columns(_indent_of(o)), _columns(_indent_of(f)))
        for o, f in zip(old_lines, file_lines, strict=False)
        if o.strip()
    ]
    use_tabs = any(_indent_of(f).startswith("\t") for f in file_lines)
    b: float
    a, b = 1.0, (pairs[0][1] - pairs[0][0]) if pairs else 0
    if not all(f == o + b for o, f in pairs):
        distinct = sorted(set(pairs))
        if len(distinct) >= 2 and distinct[1][0] != distinct[0][0]:
            (o1, f1), (o2, f2) = distinct[0], distinct[1]
            a2 = (f2 - f1) / (o2 - o1)
            b2 = f1 - a2 * o1
            if a2 > 0 and all(abs(a2 * o + b2 - f) < 0.5 for o, f in pairs):
                a, b = a2, b2
    out = []
    for line in new.split("\n"):
        if not line.strip():
            out.append(line)
            continue
        col = max(0, round(a * _columns(_indent_of(line)) + b))
        indent = "\t" * (col // TAB_COLUMNS) + " " * (col % TAB_COLUMNS) if use_tabs else " " * col
        out.append(indent + line.lstrip(" \t"))
    return "\n".join(out)


def _closest_window(lines: list[str], old_lines: list[str]) -> tuple[int, float]:
    """Index of the k-line window most similar to ``old_lines`` (difflib ratio), bounded in time."""
    k = max(1, len(old_lines))
    target = "\n".join(old_lines)
    sm = difflib.SequenceMatcher(None, autojunk=False)
    sm.set_seq2(target)  # b is indexed once; each window only sets a
    best, at = 0.0, 0
    deadline = time.monotonic() + CLOSEST_SEARCH_SECONDS
    for i in range(max(1, len(lines) - k + 1)):
        if i % 256 == 0 and time.monotonic() > deadline:
            break
        sm.set_seq1("\n".join(lines[i : i + k]))
        if sm.real_quick_ratio() <= best or sm.quick_ratio() <= best:
            continue
        ratio = sm.ratio()
        if ratio > best:
            best, at = ratio, i
    return at, best


def _first_difference(file_lines: list[str], old_lines: list[str], first_no: int) -> str:
    """Describe the first difference between the region and old_string, aligned with
    difflib (file text before or after old_string's extent is not a difference)."""
    region, old = "\n".join(file_lines), "\n".join(old_lines)
    ops = difflib.SequenceMatcher(None, region, old, autojunk=False).get_opcodes()
    while ops and ops[0][0] == "delete":
        ops.pop(0)  # file text before where old_string starts
    while ops and ops[-1][0] == "delete":
        ops.pop()
    for tag, i1, _i2, j1, _j2 in ops:
        if tag == "equal":
            continue
        line = first_no + region.count("\n", 0, i1)
        col = i1 - (region.rfind("\n", 0, i1) + 1) + 1
        where = f"First difference at line {line}, column {col}:"
        file_char = char_name(region[i1]) if i1 < len(region) else "the end of the region"
        if tag == "replace":
            return f"{where} the file has {file_char}, old_string has {char_name(old[j1])}."
        if tag == "insert":
            return f"{where} old_string has {char_name(old[j1])} where the file has {file_char}."
        return f"{where} the file has {file_char}, which old_string lacks."
    return ""


def no_match_message(text: str, old: str) -> str:
    """The no_match message: closest region (difflib) with visible whitespace and the first
    differing column with the Unicode names of both characters (docs/tools.md)."""
    lines = text.split("\n")
    old_lines = old.split("\n")
    if len(old_lines) > 1 and old_lines[-1] == "":
        old_lines.pop()
    at, ratio = _closest_window(lines, old_lines)
    msg = "old_string was not found in the file (compared exactly, then ignoring look-alike characters, trailing whitespace and indentation)."
    if ratio < 0.5:
        return msg + " Nothing similar was found; read the file again to copy the exact text."
    k = len(old_lines)
    lo, hi = max(0, at - 2), min(len(lines), at + k + 2)
    shown = [f"{n + 1:>6}\t{visible_ws(lines[n][:300])}" for n in range(lo, hi)]
    msg += (
        f"\nThe most similar region (lines {at + 1}–{at + k}, {ratio:.0%} similar; whitespace shown as "
        "→ tab, · space, ⍽ no-break space, ␍ carriage return):\n" + "\n".join(shown)
    )
    diff = _first_difference(lines[at : at + k], old_lines, at + 1)
    if diff:
        msg += "\n" + diff
    return msg + "\nCopy the text exactly as the file has it and retry."


def crlf_index(text: str) -> list[int]:
    """Offsets, in the LF-normalised text, of each ``\\n`` that was ``\\r\\n`` in ``text``."""
    out, pos, removed = [], text.find("\r\n"), 0
    while pos >= 0:
        out.append(pos - removed)
        removed += 1
        pos = text.find("\r\n", pos + 2)
    return out


def apply_replacements(
    raw: str, crlfs: list[int], reps: list[Replacement], eol: str
) -> tuple[str, list[tuple[int, int]]]:
    """Splice the replacements into the original text (CRs kept outside the spans).

    Returns the new text and the ``(start, end)`` offsets of each inserted span in it.
    """

    def to_raw(n: int) -> int:
        return n + bisect.bisect_left(crlfs, n)

    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    prev = size = 0
    for rep in reps:
        start, end = to_raw(rep.start), to_raw(rep.end)
        new = rep.new.replace("\n", "\r\n") if eol == "\r\n" else rep.new
        parts.append(raw[prev:start])
        size += start - prev
        parts.append(new)
        spans.append((size, size + len(new)))
        size += len(new)
        prev = end
    parts.append(raw[prev:])
    return "".join(parts), spans


def edit_result(
    ctx: ToolContext, shown: str, new_raw: str, spans: list[tuple[int, int]], stage: str
) -> ToolResult:
    """The success output: ``Edited path: N replacement(s) at line L (match: stage)`` and the
    new text around each edit with line numbers (±4 lines, at most 60 lines in all)."""
    lines = new_raw.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    windows: list[tuple[int, int]] = []
    at: list[int] = []
    line, pos = 1, 0  # spans are in order: count newlines incrementally (replace_all on big files)
    for start, end in spans:
        line += new_raw.count("\n", pos, start)
        first = line
        last = first + new_raw.count("\n", start, max(start, end - 1))
        line, pos = last, max(start, end - 1)
        at.append(first)
        lo, hi = max(1, first - SNIPPET_CONTEXT), min(len(lines), last + SNIPPET_CONTEXT)
        if windows and lo <= windows[-1][1] + 1:
            windows[-1] = (windows[-1][0], hi)
        else:
            windows.append((lo, hi))
    n = len(spans)
    where = (
        f"line {at[0]}"
        if n == 1
        else "lines " + ", ".join(map(str, at[:20])) + (", …" if n > 20 else "")
    )
    head = f"Edited {shown}: {n} replacement{'s' if n != 1 else ''} at {where} (match: {stage})"
    out = [head]
    budget = SNIPPET_MAX_LINES
    for lo, hi in windows:
        if budget <= 0:
            out.append("[more edited regions not shown]")
            break
        if len(out) > 1:
            out.append("…")
        stop = min(hi, lo + budget - 1)
        for i in range(lo, stop + 1):
            text = lines[i - 1].removesuffix("\r")
            limit = ctx.settings.read_max_line_chars
            out.append(f"{i:>6}\t{text[:limit]}" + ("…" if len(text) > limit else ""))
        budget -= stop - lo + 1
        if stop < hi:
            out.append(f"[… snippet cut; read_file offset={stop + 1} to see more]")
    meta = {"path": shown, "replacements": n, "match": stage, "lines": at}
    return ToolResult("\n".join(out), meta=meta)
