"""One place assembles a main agent (agentkit.chat.assembly): each part is built once
for an Agent's life, and every bad input is refused there, with the same error from
an Agent, a Session and the front ends."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentkit import Agent, ConfigurationError, Settings
from agentkit.chat import Session, Workspace
from agentkit.chat.assembly import assemble, check
from agentkit.cli.common import UsageError
from agentkit.cli.run import run_task
from agentkit.tools.base import tool_from_function

ONCE = Counter(check=1, hooks=1, registry=1, model=1)


class Nothing(BaseModel):
    pass


def noop(params: Nothing) -> str:
    """Do nothing."""
    return "ok"


def test_an_agent_builds_each_part_once_for_all_its_conversations(
    workspace: Path, settings: Settings
) -> None:
    with Agent(workspace, settings, tools=[noop], hooks={"Stop": lambda _p: None}) as agent:
        parts = agent.assembly
        assert parts.built == ONCE
        first = agent.session
        agent.new_conversation()
        assert agent.session is not first and agent.session.assembly is parts
        agent.load_conversation(first.id)
        assert parts.built == ONCE  # two more conversations, nothing built again
        assert agent.session.registry is parts.registry is agent.registry
        assert agent.session.model is parts.model is agent.model
        assert agent.session._python_hooks["Stop"] == parts.hooks["Stop"]
        assert parts.registry.get("noop") is not None


def test_a_tool_added_to_an_agent_reaches_its_next_conversation(
    workspace: Path, settings: Settings
) -> None:
    with Agent(workspace, settings) as agent:
        agent.add_tool(tool_from_function(noop))
        agent.add_hook("Stop", lambda _p: None)
        agent.new_conversation()
        assert agent.session.registry.get("noop") is not None
        assert len(agent.session._python_hooks["Stop"]) == 1
        assert agent.assembly.built == ONCE


def test_a_session_alone_assembles_its_own_and_makes_the_model_on_first_use(
    workspace: Path, settings: Settings
) -> None:
    with Session(workspace, settings, prewarm=False) as session:
        parts = session.assembly
        assert parts.built == Counter(check=1, hooks=1, registry=1)
        assert session.model is session.model
        assert parts.built["model"] == 1


def test_a_workspace_assembles_once_per_session(workspace: Path, settings: Settings) -> None:
    chats = Workspace(workspace, settings, prewarm=False)
    one, two = chats.create(), chats.create()
    try:
        assert one.assembly is not two.assembly
        assert one.assembly.built["registry"] == two.assembly.built["registry"] == 1
    finally:
        chats.close()


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("no model", {"model": None}, "no model given"),
    ("no key", {"api_key": None, "base_url": None}, "no API key"),
    ("bad rule", {"approvals": {"run_command:": "allow"}}, "approvals: key"),
    ("bad hooks", {"hooks": {"NoSuchEvent": []}}, "NoSuchEvent"),
]


def _settings(**changes: Any) -> Settings:
    given: dict[str, Any] = {"model": "m", "api_key": "k", "language": "en", **changes}
    return Settings(**given)


def _error(make: Any) -> str:
    with pytest.raises((ConfigurationError, UsageError)) as caught:
        make()
    return str(caught.value)


@pytest.mark.parametrize(("case", "changes", "needle"), BAD, ids=[b[0] for b in BAD])
def test_bad_settings_fail_with_the_same_error_everywhere(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    changes: dict[str, Any],
    needle: str,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTKIT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    bad = _settings(**changes)
    expected = _error(lambda: check(workspace, bad))
    assert needle in expected
    assert _error(lambda: assemble(workspace, bad)) == expected
    assert _error(lambda: Agent(workspace, bad)) == expected
    assert _error(lambda: Session(workspace, bad, prewarm=False)) == expected
    assert _error(lambda: Workspace(workspace, bad, prewarm=False).create()) == expected
    if case in ("bad rule", "bad hooks"):  # the CLI words a missing model with its flags
        assert _error(lambda: run_task("do it", str(workspace), bad, ask=False)) == expected
        from agentkit.webchat.serve import serve

        assert _error(lambda: serve(workspace, bad, port=0)) == expected
    assert not (workspace / ".agentkit").exists()  # refused before anything was written


def test_a_missing_folder_fails_with_the_same_error_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTKIT_MODEL", raising=False)
    missing = tmp_path / "missing"
    good = _settings()
    expected = _error(lambda: check(missing, good))
    assert "is not a folder" in expected
    for make in (
        lambda: Agent(missing, good),
        lambda: Agent(missing, _settings(model=None)),  # the folder is checked first
        lambda: Session(missing, good, prewarm=False),
        lambda: Session(missing, _settings(model=None), prewarm=False),
        lambda: Workspace(missing, good),
    ):
        assert _error(make) == expected


def test_an_unknown_hook_event_is_refused_before_anything_is_built(
    workspace: Path, settings: Settings
) -> None:
    expected = "hooks: 'Nope' is not a hook event"
    assert expected in _error(lambda: assemble(workspace, settings, hooks={"Nope": noop}))
    assert expected in _error(lambda: Agent(workspace, settings, hooks={"Nope": noop}))
    assert expected in _error(lambda: Session(workspace, settings, hooks={"Nope": noop}))


def test_a_model_given_skips_the_endpoint_checks_and_is_not_closed(workspace: Path) -> None:
    class Model:
        closed = False

        def complete(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("not called")

        def close(self) -> None:
            self.closed = True

    model = Model()
    parts = assemble(workspace, Settings(model=None, api_key=None), model=model)  # type: ignore[arg-type]
    assert parts.model is model and parts.built == Counter(check=1, hooks=1, registry=1)
    parts.close()
    assert not model.closed
