"""Text that tries to drive a terminal, shared by the terminal-text tests (unit and
servers): the controls a terminal could act on, and an answer carrying a window title,
an OSC 52 clipboard write, erase line, colour, the 8-bit CSI, a bell and DEL around
visible text (Chinese included)."""

from __future__ import annotations

import re

# Every control a terminal could act on (C0 but TAB and LF, DEL, C1).
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

TITLE = "\x1b]0;PWNED-TITLE\x1b\\"
CLIPBOARD = "\x1b]52;c;ZXZpbA==\x1b\\"
ANSWER = (
    f"Answer {TITLE}{CLIPBOARD} erase L\x1b[2KR colour C\x1b[31mD"
    " csi8 E\x9b2JF bell\x07 del\x7f 中文答案 end"
)
