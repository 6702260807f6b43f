"""``--lang auto`` is taken wherever ``--lang`` is (issue 35: it was refused), and
means the default: the conversation's first message settles the language."""

from __future__ import annotations

import pytest

from agentkit.cli import build_parser
from agentkit.cli.common import settings_from_args


@pytest.mark.parametrize("command", ["run", "chat", "serve", "acp", "demo"])
def test_every_command_takes_lang_auto(command: str) -> None:
    words = [command, "--lang", "auto"] + (["a task"] if command == "run" else [])
    args = build_parser().parse_args(words)
    assert args.lang == "auto"
    if command != "demo":
        settings = settings_from_args(args, {"model": "m", "api_key": "k"})
        assert settings.language == "auto"


def test_other_values_are_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "--lang", "fr"])
    assert "auto" in capsys.readouterr().err
