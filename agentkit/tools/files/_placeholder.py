"""Detect lazy rewrites: content that stands for the rest of a file with a placeholder line.

docs/tools.md §4 write_file: ``placeholder_content`` when the content replaces an existing, longer
file and contains a line that is only a comment + ellipsis or a "rest of ... unchanged"
phrase (``# ... rest of the code unchanged ...``, ``// existing code here``,
``<!-- rest of file -->``, ``... (unchanged)``, ``# 其余代码不变``, ``（其余部分省略）``).
Written to disk, such content would destroy everything the placeholder stands for.

Not flagged: prose comments that merely contain those words (a comment line over 80
characters of text, or one whose phrase is not about elided code), code that uses ``...``
(Python's Ellipsis, ``def f(): ...``, JS spread ``...args``, ``catch (...)``), and any
content that is not substantially shorter than the file it replaces.

Public API: :func:`find_placeholder`, :func:`is_lazy_rewrite`.
"""

from __future__ import annotations

import re

SHRINK_RATIO = 0.9
"""A rewrite counts as "substantially shorter" below this fraction of the old length."""

MAX_MARKER_CHARS = 80  # longer comment text is prose, not a placeholder

# Comment openers and closers of common languages (Python/shell/YAML/Ruby #, C-family //
# and /* */, HTML/XML <!-- -->, SQL/Lua/Haskell --, Lisp/INI ;, TeX/Erlang/Matlab %,
# VB ' and REM, JSX {/* */}, Python docstrings, a block comment's " * " lines).
_OPEN = re.compile(
    r"""^(?:\{/\*+|/\*+|<!--|//+!?|\#+|--+|;+|%+|'|rem\b|"{3}|'{3}|\*+(?!/))\s*""",
    re.IGNORECASE,
)
_CLOSE = re.compile(r"""\s*(?:\*+/\}?|-->|"{3}|'{3})$""")
_INNER = re.compile(r"\*+/|/\*+|<!--|-->")
_ELLIPSIS = r"(?:\.\s?\.\s?\.+|…+|⋯+|。。。)"
_ONLY_ELLIPSIS = re.compile(rf"^[\s\[\](){{}}（）【】<>]*{_ELLIPSIS}[\s\[\](){{}}（）【】<>.,;:]*$")
_HAS_ELLIPSIS = re.compile(_ELLIPSIS)
_BRACKETED = re.compile(r"^(?:\(.*\)|\[.*\]|\{.*\}|（.*）|【.*】|<.*>)$")

_NOUN = (
    r"(?:code|file|files|content|contents|implementation|implementations|function|functions|"
    r"class|classes|method|methods|module|logic|lines?|body|section|sections|stuff|imports?|"
    r"styles?|rules?|markup|html|css|tests?|fields?|properties|config(?:uration)?|script|"
    r"components?|definitions?|document|text|entries|items|cases|helpers?|routes?|handlers?|"
    r"queries|declarations?|settings|output|data|part|parts)"
)
_STATE = (
    r"(?:unchanged|un-changed|not changed|no changes?|unmodified|omitted|elided|skipped|"
    r"truncated(?: for brevity)?|(?:omitted |left out )?for brevity|not shown|same as (?:before|above|"
    r"original|previous)|as before|as is|the same|same|here|below|above|etc|and so on|"
    r"continues|follows)"
)
_VERB = r"(?:(?:is|are|remains?|stays?|goes|go|kept|left|was|were)(?:\s+|$))"
_QUAL = r"(?:(?:the|all|any|existing|previous|original|other|remaining|old|same|more|your|my)\s+)"
# Whole-body forms (after ellipses and brackets are removed), so prose that merely
# contains the words ("return the list unchanged if empty") does not match.
_EN_FULL = re.compile(
    rf"(?:the\s+)?(?:rest|remainder)(?:\s+of\s+(?:\w+\s+){{0,3}}?\w+)?\s*{_VERB}?(?:{_STATE})?"
    rf"|{_QUAL}*(?:{_NOUN}\s+)+{_VERB}?{_STATE}"
    rf"|{_STATE}",
    re.IGNORECASE,
)
# "... existing code ...": a qualified noun alone counts only next to an ellipsis.
_EN_WITH_ELLIPSIS = re.compile(rf"{_QUAL}+(?:{_NOUN}\s*)+", re.IGNORECASE)
# Chinese: 其余代码不变, 保持不变, 此处省略, 其余部分省略, 同上, 原有代码...
_ZH_REST = r"(?:此处|这里|以下|以上|其余|其他|其它|剩余|剩下|原有|原来|现有|之前|后面|后续|下面)"
_ZH_NOUN = r"(?:代码|部分|内容|实现|方法|函数|逻辑|字段|样式|配置)"
_ZH_STATE = (
    r"(?:(?:均|都|全部|保持|维持|暂时)?(?:不变|保持不变|省略|从略|略去|略|同上|未改变|未改动|未修改|未变|"
    r"照旧|不做修改|保持原样|原样保留|与之前相同|与原来相同|相同|不动))"
)
_ZH_FULL = re.compile(
    rf"{_ZH_REST}?的?{_ZH_NOUN}?{_ZH_STATE}|{_ZH_REST}的?{_ZH_NOUN}(?:同上|保持)?"
)
_STRIP = re.compile(rf"{_ELLIPSIS}|[\s\[\](){{}}（）【】<>.,;:!?，。：；！？、“”\"'`*_-]+")


def _comment_body(line: str) -> str | None:
    """The text of a comment-only line without its markers, or None for other lines."""
    opened = _OPEN.match(line)
    if opened is None:
        return None
    body = line[opened.end() :]
    body = _CLOSE.sub("", body)
    return _INNER.sub(" ", body).strip()  # "/* ... */ rest remains"


def _phrase(text: str) -> bool:
    """Whether ``text`` (a comment body or a bare line) is only an elision phrase."""
    core = _STRIP.sub(" ", text).strip()
    if not core:
        return False
    if _EN_FULL.fullmatch(core) or _ZH_FULL.fullmatch(core.replace(" ", "")):
        return True
    return bool(_HAS_ELLIPSIS.search(text) and _EN_WITH_ELLIPSIS.fullmatch(core))


def is_placeholder_line(line: str) -> bool:
    """Whether one line is an elision placeholder (see the module docstring)."""
    text = line.strip()
    if not text or len(text) > MAX_MARKER_CHARS + 12:
        return False
    body = _comment_body(text)
    if body is not None:
        if len(body) > MAX_MARKER_CHARS:
            return False
        if _ONLY_ELLIPSIS.match(body):  # "# ...", "// …", "/* ... */"
            return True
        return _phrase(body)
    # Not a comment: "... (unchanged)", "…其余代码不变…", "（其余部分省略）", "[rest of file]".
    # A bare "..." is Python's Ellipsis, "...args" a spread: both need a phrase too.
    if not _phrase(text):
        return False
    return bool(_HAS_ELLIPSIS.search(text) or _BRACKETED.match(text))


def find_placeholder(content: str) -> tuple[int, str] | None:
    """Return ``(line number, line)`` of the first placeholder line of ``content``, or None."""
    for number, line in enumerate(content.split("\n"), 1):
        if is_placeholder_line(line):
            return number, line.strip()
    return None


def is_lazy_rewrite(old_text: str, new_text: str) -> tuple[int, str] | None:
    """Return the placeholder line when ``new_text`` looks like a lazy rewrite of ``old_text``.

    That is: ``new_text`` is under :data:`SHRINK_RATIO` of ``old_text``'s length (characters,
    line endings ignored) and contains a placeholder line. Returns ``(line number, line)``
    or None.
    """
    old_len = len(old_text.replace("\r\n", "\n").strip())
    new_len = len(new_text.replace("\r\n", "\n").strip())
    if new_len >= SHRINK_RATIO * old_len:
        return None
    return find_placeholder(new_text)
