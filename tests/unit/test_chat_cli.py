"""``agentkit chat`` as a real subprocess against FakeOpenAIServer.

The JSON-lines tests drive a conversation line by line, as a script would: write a
line, read events until the round ends, write the next. Sub-agents are real worker
processes; the ones that must stay busy run ``sleep`` (found afterwards by their
process mark) or wait on a Gate in the fake model. The terminal test drives the
real program in tmux.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_way_back_names_the_folder_a_demo_ran_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (a new user's trial): ``chat --demo -w .`` printed a way back without
    ``-w``, and ``--demo`` without it takes a fresh copy of the sample project, where
    the conversation is not."""
    from agentkit.cli.chat import _resume_hint

    monkeypatch.chdir(tmp_path)
    assert _resume_hint(tmp_path, demo=True) == "agentkit chat --continue {id} -w . --demo"
    assert _resume_hint(tmp_path, demo=False) == "agentkit chat --continue {id}"
    other = tmp_path / "other folder"
    other.mkdir()
    shown = _resume_hint(other, demo=True)
    assert shown == f"agentkit chat --continue {{id}} -w '{other.resolve()}' --demo"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_msg_with_the_control_plane_off_names_the_flag(tmp_path: Path, language: str) -> None:
    """Regression (a new user's trial): /msg with the control plane off said
    ``subagent_control=false`` but not the command line's ``--subagent-control``."""
    from agentkit.chat import Workspace
    from agentkit.cli.commands import ChatCommands
    from agentkit.settings import Settings

    settings = Settings(model="m", api_key="k", base_url="http://127.0.0.1:9/v1", language=language)
    workspace = Workspace(tmp_path, settings)
    try:
        result = ChatCommands(workspace, workspace.create()).execute("/msg 1 hello")
    finally:
        workspace.close()
    assert not result.ok and "--subagent-control" in result.text
