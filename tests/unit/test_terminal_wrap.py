"""The terminal chat's status lines wrap at word boundaries (a trial at 100 and 120
columns saw "themse" / "lves" and "sav" / "ed": long lines were left to the terminal,
which breaks them at its last column). In-process: the view's lines at a fixed width."""

from __future__ import annotations

import re

import pytest

from agentkit import events as ev
from agentkit.cli.terminal_view import TerminalView, fit_words, style
from agentkit.settings import Settings

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def visible(lines: list[str]) -> list[str]:
    return [ANSI.sub("", part).replace("\a", "") for line in lines for part in line.split("\n")]


@pytest.mark.parametrize("width", [60, 100, 120])
def test_a_long_status_line_wraps_between_words(
    width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))  # the terminal's width, as the chat reads it
    view = TerminalView(settings=Settings)
    view.apply(ev.RoundStarted(round=1, trigger="user"))
    explanation = (
        "The model endpoint http://127.0.0.1:9/v1 refused the request because the key was "
        "rejected; check OPENAI_API_KEY, or set AGENTKIT_MODEL to a model the server lists "
        "itself, and send the message again: the conversation was saved."
    )
    finished = ev.RoundFinished(
        round=1, status="failed", final_text=None, background=[1, 2], explanation=explanation
    )
    lines = visible(view.apply(finished))
    assert len(lines) > 2 and all(len(line) <= width for line in lines), lines
    shown = " ".join(lines).split()
    for word in [*explanation.split(), "running:", "themselves;"]:
        assert word in shown, (word, lines)  # none cut in two


def test_short_lines_wide_characters_and_long_words() -> None:
    assert fit_words("short  line\twith tab", 40) == ["short  line\twith tab"]
    assert fit_words("a\nb", 40) == ["a", "b"]
    chinese = "子智能体" * 15  # 60 characters, 120 columns
    assert [len(line) for line in fit_words(chinese, 40)] == [20, 20, 20]
    url = "see https://example.com/" + "x" * 90
    assert fit_words(url, 40)[0] == "see"  # a word wider than a line is cut, on its own
    lines = style("the conversation was saved to its file", "2", width=20).split("\n")
    assert lines == ["\x1b[2mthe conversation was\x1b[0m", "\x1b[2msaved to its file\x1b[0m"]
