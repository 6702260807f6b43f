"""No model, tool, file or sub-agent text can drive the user's terminal:
agentkit.cli.safe_text over every code point from U+0000 to U+009F, JSON lines, the log
handler and sub-agent rows. The same text through ``agentkit run`` and ``agentkit chat``
as real processes is tests/integration/test_terminal_text_servers.py.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys

import pytest
from terminal_cases import ANSWER, CONTROLS

from agentkit.cli.safe_text import SafeStderrHandler, json_line, terminal_safe


# ------------------------------------------------------------------ the functions
def test_terminal_safe_over_every_code_point_up_to_9f() -> None:
    for code in range(0xA0):
        char = chr(code)
        shown = terminal_safe(f"a{char}b")
        if char in "\t\n" or 0x20 <= code < 0x7F:
            assert shown == f"a{char}b", hex(code)
            continue
        # One visible, printable stand-in: nothing vanishes, nothing acts.
        assert len(shown) == 3 and shown[0] == "a" and shown[2] == "b", hex(code)
        assert shown[1].isprintable() and not CONTROLS.search(shown), hex(code)
    assert terminal_safe("\x1b") == "\u241b" and terminal_safe("\x7f") == "\u2421"
    assert terminal_safe("\x9b") == "\ufffd"


def test_terminal_safe_keeps_text_and_line_ends() -> None:
    text = "中文：没有控制字符 😀 é ñ\u00a0× ½\tTAB\nline"
    assert terminal_safe(text) == text
    assert terminal_safe("a\r\nb\rc") == "a\nb\u240dc"  # CRLF is a line end, lone CR shown
    once = terminal_safe(ANSWER)
    assert terminal_safe(once) == once and "中文答案" in once and "PWNED-TITLE" in once
    assert not CONTROLS.search(once)


def test_json_line_escapes_every_control_and_parses_back() -> None:
    text = "".join(chr(code) for code in range(0xA0)) + " 中文"
    line = json_line({"text": text, "n": 1})
    assert not CONTROLS.search(line) and "\n" not in line and "中文" in line
    assert json.loads(line) == {"text": text, "n": 1}
    assert json_line({"a": "中"}) == json.dumps({"a": "中"}, ensure_ascii=False)


def test_log_handler_writes_safe_lines_to_the_current_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logger = logging.getLogger("agentkit.test_terminal_text")
    handler = SafeStderrHandler()
    logger.addHandler(handler)
    later = io.StringIO()
    monkeypatch.setattr(sys, "stderr", later)  # replaced after the handler was made
    try:
        logger.warning("endpoint said %s", ANSWER)
        logger.info("below the level")
    finally:
        logger.removeHandler(handler)
    assert later.getvalue() == f"endpoint said {terminal_safe(ANSWER)}\n"


@pytest.mark.parametrize("summary", ["[link=http://evil.example]click[/link]", "oops [/x] [bold]"])
def test_sub_agent_rows_are_text_not_rich_markup(summary: str) -> None:
    # A model's summary in the live table was read as rich markup: a hyperlink
    # escape (OSC 8), or a MarkupError that broke the view (found by a review).
    from rich.console import Console

    from agentkit import events as ev
    from agentkit.cli.progress import LiveDisplay

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    view = LiveDisplay(console)
    row = {"agent_id": 1, "summary": summary, "status": "running", "last_action": summary}
    view(ev.SubAgentStarted(info=row))
    console.print(view.render())
    shown = out.getvalue()
    assert "\x1b]8;" not in shown
    assert summary[:12] in re.sub(r"\x1b\[[0-9;]*m", "", shown)


def test_html_looking_text_in_an_answer_is_shown_not_dropped() -> None:
    """rich's Markdown parsed HTML and dropped it: a new user's "use <div> or <span
    class=x> here" came back as "use  or  here". Tags are text in the terminal, as on
    the web page (which renders Markdown without HTML too)."""
    from agentkit.cli.terminal import render_markdown

    text = "use <div> or <span class=x> here\n\n<script>alert(1)</script>\n\n**bold**"
    shown = render_markdown(text, 80)
    assert "use <div> or <span class=x> here" in shown
    assert "<script>alert(1)</script>" in shown
    assert "\x1b[1mbold" in shown and "**" not in shown  # Markdown still rendered
