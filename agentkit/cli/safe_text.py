"""Untrusted text made safe to show on a terminal.

One job: text from a model, a tool, a file, a web page or a sub-agent must not be
able to drive the user's terminal. A raw ``ESC ] 52 ; c ; ...`` would write the
clipboard, ``ESC ] 0 ; ...`` set the window title, ``ESC [ 2K`` or ``\\r`` erase or
overwrite what the user reads, and the 8-bit C1 controls (U+009B is CSI on its own)
do the same without an ESC. rich passes ESC through (it strips only BEL, BS, VT, FF
and CR), and so does a plain ``print``.

:func:`terminal_safe` replaces every such character with a visible stand-in, so a
prompt-injected escape shows up as text instead of acting, and nothing disappears
silently. :func:`json_line` is the JSON-lines counterpart: ``json.dumps`` escapes C0
controls (ESC becomes ``\\u001b``) but with ``ensure_ascii=False`` writes DEL and the
C1 controls raw; it escapes those too, so the parsed value is unchanged.

:func:`echoed` caps a line of input quoted back in an error (a 5 MB paste must not
come back as a 5 MB line).

Every front end that writes untrusted text to a terminal goes through these
(``agentkit run``'s views and answer, ``agentkit chat``'s terminal mode, ``agentkit
show``/``transcript``, error lines, and the CLI's log warnings through
:class:`SafeLogFormatter`, since they quote endpoint errors); our own styling
escapes are added afterwards.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import IO, Any

__all__ = ["SafeLogFormatter", "SafeStderrHandler", "json_line", "terminal_safe"]

# Characters a terminal may act on: C0 except TAB and LF, DEL, and C1 (U+0080-U+009F).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# C0 and DEL become their Unicode "control pictures" (U+2400 + code, U+2421 for DEL),
# one column each: ESC shows as "␛", CR as "␍". C1 has no pictures: U+FFFD.
_VISIBLE = {
    **{code: 0x2400 + code for code in range(0x20) if code not in (0x09, 0x0A)},
    0x7F: 0x2421,
    **{code: 0xFFFD for code in range(0x80, 0xA0)},
}
_JSON_RAW = re.compile(r"[\x7f-\x9f]")  # what json.dumps(ensure_ascii=False) leaves raw


def terminal_safe(text: str) -> str:
    """Return ``text`` with nothing a terminal would act on, for display only.

    Args:
        text: any text (model output, tool arguments or results, file names, errors).
            Not a str: ``str(text)`` is used.

    Returns:
        The same text with CRLF turned into LF, and every other C0 control except
        TAB and LF (ESC, BEL, BS, CR, ...) and DEL replaced by its Unicode control
        picture (ESC -> U+241B "␛", DEL -> U+2421), and every C1 control (U+0080 to
        U+009F, the 8-bit CSI U+009B included) replaced by U+FFFD. All other
        characters, Chinese text and emoji included, are unchanged; text without
        controls is returned as is.
    """
    text = str(text)
    if _UNSAFE.search(text) is None:
        return text
    # A CRLF line end is a line end, not an overwrite: keep it readable.
    return text.replace("\r\n", "\n").translate(_VISIBLE)


def json_line(data: Any) -> str:
    """Return ``data`` as one line of JSON that is safe to write to a terminal.

    Args:
        data: a JSON-able value (other objects are written as ``str(obj)``).

    Returns:
        ``json.dumps(data, ensure_ascii=False, default=str)`` (non-ASCII text stays
        readable) with DEL and the C1 controls, which that leaves raw, written as
        ``\\u007f``...``\\u009f`` escapes: the text parses to the same value. No
        trailing newline.

    Raises:
        ValueError: ``data`` holds a circular reference.
    """
    text = json.dumps(data, ensure_ascii=False, default=str)
    if _JSON_RAW.search(text) is None:
        return text
    # These characters can only occur inside JSON strings, where \\u00XX is valid.
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


ECHO_MAX = 1000
"""Characters of an input line that an error quotes back (:func:`echoed`)."""


def echoed(line: str, limit: int = ECHO_MAX) -> str:
    """Return ``line`` as an error quotes it back: whole when it has at most ``limit``
    characters, else its first ``limit`` and ``… (N characters in all)``."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… ({len(line):,} characters in all)"


class SafeLogFormatter(logging.Formatter):
    """A :class:`logging.Formatter` whose records (message, traceback) come out
    terminal-safe: log lines quote endpoint errors and tool input."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the formatted record passed through :func:`terminal_safe`."""
        return terminal_safe(super().format(record))


class SafeStderrHandler(logging.StreamHandler):
    """A logging handler writing ``%(message)s`` lines, terminal-safe, to whatever
    ``sys.stderr`` is at each record (as logging's last-resort handler does, so a
    replaced or closed stderr is never kept). Level: WARNING by default."""

    def __init__(self, level: int = logging.WARNING) -> None:
        super().__init__()
        self.setLevel(level)
        self.setFormatter(SafeLogFormatter("%(message)s"))

    @property
    def stream(self) -> IO[str]:
        """``sys.stderr`` now."""
        return sys.stderr

    @stream.setter
    def stream(self, _value: IO[str]) -> None:
        pass  # StreamHandler.__init__ sets it; the property always answers sys.stderr
