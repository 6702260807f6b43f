"""The terminal chat's input: a paste that arrives as keys is read as one paste.

prompt_toolkit's input over a real pipe (``create_pipe_input``), read the way the
prompt reads it. Without bracketed paste a terminal delivers a paste as keys, and
each key costs prompt_toolkit a walk of its layout (a 100 KB paste held the chat up
for 41 s); ``benchmarks/chat_paste.py`` measures the whole program in tmux.
"""

from __future__ import annotations

import select
import threading

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.key_binding import KeyPress
from prompt_toolkit.keys import Keys

from agentkit.cli.paste import coalesce_keys, typed_runs_as_paste


def test_a_100_kb_paste_sent_as_keys_is_read_as_one_paste() -> None:
    text = "中文 paste, with punctuation! " * 3500  # ~100 KB, multi-byte characters too
    with create_pipe_input() as pipe:
        keys = typed_runs_as_paste(pipe)
        # More than a pipe holds: written as a terminal writes, while it is read.
        writer = threading.Thread(target=pipe.send_text, args=(text,), daemon=True)
        writer.start()
        select.select([pipe.fileno()], [], [], 30)  # the prompt reads once input is there
        got = keys.read_keys()
        writer.join(30)
    assert {k.key for k in got} == {Keys.BracketedPaste}
    assert len(got) <= 3  # one paste, or a few when the writer paused
    assert "".join(k.data for k in got) == text


def test_enter_controls_and_single_keys_stay_keys_in_order() -> None:
    with create_pipe_input() as pipe:
        keys = typed_runs_as_paste(pipe)
        pipe.send_text("ab\x1b[Bc\r\x1b[Ad\tef\r")
        got = keys.read_keys()
    assert [(k.key, k.data) for k in got] == [
        (Keys.BracketedPaste, "ab"),
        (Keys.Down, "\x1b[B"),
        ("c", "c"),
        (Keys.ControlM, "\r"),  # not between characters: Enter
        (Keys.Up, "\x1b[A"),
        ("d", "d"),
        (Keys.ControlI, "\t"),
        (Keys.BracketedPaste, "ef"),
        (Keys.ControlM, "\r"),
    ]


def test_a_multi_line_paste_sent_as_keys_is_one_message() -> None:
    """A terminal that does not bracket a paste (tmux paste-buffer without -p) sends its
    line breaks as Enter: 49 lines became 49 messages for a new user. Line breaks read
    between characters are the paste's; the last Enter sends it, once."""
    lines = [f"line {n}: some pasted text" for n in range(49)]
    with create_pipe_input() as pipe:
        keys = typed_runs_as_paste(pipe)
        pipe.send_text("\r".join(lines) + "\r")
        got = keys.read_keys()
    assert [(k.key, k.data) for k in got] == [
        (Keys.BracketedPaste, "\n".join(lines)),
        (Keys.ControlM, "\r"),
    ]


def test_coalesce_keeps_a_real_bracketed_paste_and_typing() -> None:
    typed = [KeyPress("h", "h")]
    assert [(k.key, k.data) for k in coalesce_keys(typed)] == [("h", "h")]
    pasted = [KeyPress(Keys.BracketedPaste, "x\ny"), KeyPress(Keys.ControlM, "\r")]
    assert coalesce_keys(pasted) == pasted


def test_controls_and_escape_codes_inside_a_paste_are_its_text() -> None:
    """Regression (a new user's trial): pasting coloured terminal output on a terminal
    that does not bracket pastes printed prompt_toolkit's traceback (a colour code read
    as a malformed mouse report) and sent only the text before it."""
    text = "ctl \x01\x02\x1b[31mred\x1b[0m \x07bell"
    with create_pipe_input() as pipe:
        keys = typed_runs_as_paste(pipe)
        pipe.send_text(text + "\r")
        got = keys.read_keys()
    assert [(k.key, k.data) for k in got] == [
        (Keys.BracketedPaste, text),
        (Keys.ControlM, "\r"),
    ]
    # Typed alone, a control is still a command key.
    alone = coalesce_keys([KeyPress(Keys.ControlA, "\x01")])
    assert [(k.key, k.data) for k in alone] == [(Keys.ControlA, "\x01")]
