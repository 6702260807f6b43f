"""The terminal chat's input: a paste is read as one, however the terminal sends it.

One job: wrap prompt_toolkit's terminal input so that a paste the terminal does not
bracket (it arrives as keys) reaches the input line as one insert and one redraw.
prompt_toolkit matches every key against its key bindings by walking the layout
(about a millisecond a key) and redraws the whole input line after every read of
1 KB, so a 100 KB paste held ``agentkit chat`` up for 41 s (issue 20 item 23;
``benchmarks/chat_paste.py`` measures it). prompt_toolkit is imported when used.
"""

from __future__ import annotations

import select
from typing import Any

__all__ = ["PASTE_BATCH", "PASTE_GAP", "PASTE_MAX", "coalesce_keys", "typed_runs_as_paste"]

PASTE_BATCH = 200
"""Keys in one read from which it counts as part of a paste (prompt_toolkit reads 1 KB:
at least 256 keys of up to 4 bytes each; typing gives one or a few)."""
PASTE_GAP = 0.02
"""Seconds a paste may pause between reads and still be read as one (seconds)."""
PASTE_MAX = 4 << 20
"""Characters read as one paste at most; the rest follows in the next batch."""


def coalesce_keys(keys: list[Any]) -> list[Any]:
    """Merge each run of two or more printable characters in ``keys`` (prompt_toolkit
    ``KeyPress`` objects read together) into one ``Keys.BracketedPaste`` key press
    carrying their text, the line breaks, control characters and escape sequences
    between them included (read between characters, they are part of the paste);
    every other key (a last Enter, Tab, a control typed alone, cursor keys and
    reports) stays as it is, in order.

    A paste the terminal does not bracket arrives as keys, and prompt_toolkit matches
    each against its key bindings by walking the layout (about a millisecond a key:
    a 100 KB paste held the chat up for 41 s). Characters that arrive in one read
    were not typed one by one, so inserting them at once changes nothing else.
    """
    from prompt_toolkit.key_binding import KeyPress
    from prompt_toolkit.keys import Keys

    merged: list[Any] = []
    run: list[str] = []

    def end_run() -> None:
        if len(run) > 1:
            merged.append(KeyPress(Keys.BracketedPaste, "".join(run)))
        elif run:
            merged.append(KeyPress(run[0], run[0]))
        run.clear()

    def printable(key: Any) -> bool:
        return not isinstance(key.key, Keys) and key.key == key.data and key.data.isprintable()

    def pasted_control(key: Any) -> bool:
        # A control character or an escape sequence (a colour code reads as a mouse
        # report: the chat never turns mouse reporting on, and prompt_toolkit's
        # handler failed on it with a traceback) between characters read together
        # is part of what was pasted, not a command.
        if key.key == Keys.Vt100MouseEvent:
            return True
        if key.key in (Keys.ControlM, Keys.ControlJ, Keys.ControlI):
            return False  # Enter has its own rule; Tab stays the key it is
        data = key.data
        return (
            isinstance(key.key, Keys) and bool(data) and all(c < " " or c == "\x7f" for c in data)
        )

    enter = (Keys.ControlM, Keys.ControlJ)
    shown = [i for i, key in enumerate(keys) if printable(key)]
    inside = range(shown[0] + 1, shown[-1]) if shown else range(0)
    for i, key in enumerate(keys):
        if printable(key):
            run.append(key.data)
        elif key.key in enter and run and i + 1 < len(keys) and printable(keys[i + 1]):
            # A line break inside characters read together is a pasted line break, not
            # Enter: a multi-line paste is one message (the last Enter still sends it).
            run.append("\n")
        elif i in inside and pasted_control(key):
            run.append(key.data)
        else:
            end_run()
            merged.append(key)
    end_run()
    return merged


def typed_runs_as_paste(base: Any = None) -> Any:
    """prompt_toolkit's terminal input (or ``base``, an ``Input``) with every batch of
    keys it reads passed through :func:`coalesce_keys`; returns that input.

    A full read (prompt_toolkit reads at most 1 KB) means more is on its way: it goes
    on reading while more comes within ``PASTE_GAP`` seconds (up to ``PASTE_MAX``
    characters), so a paste is one insert and one redraw, not one per kilobyte (each
    redraw lays out the whole input line: quadratic in the paste's size).
    """
    if base is None:
        from prompt_toolkit.input import create_input

        base = create_input()
    read_keys, flush_keys = base.read_keys, base.flush_keys

    def read_all() -> list[Any]:
        keys = read_keys()
        batch = len(keys)
        while batch >= PASTE_BATCH and len(keys) < PASTE_MAX:
            try:
                ready, _, _ = select.select([base.fileno()], [], [], PASTE_GAP)
            except (OSError, ValueError):
                break
            if not ready:
                break
            more = read_keys()
            batch = len(more)
            keys += more
            if not more:
                break
        return coalesce_keys(keys)

    base.read_keys = read_all
    base.flush_keys = lambda: coalesce_keys(flush_keys())
    return base
