"""The conversation's state while a sub-agent's end is still being recorded: not idle.

An ended agent's status turns final before its record is made final (and, when it is
isolated, before its copy is saved and its changes counted); it is announced only
after that. In between, the conversation must not read as idle, or ``wait_idle``
returns with an end that is never announced (a seeded interleaving test saw 2 of 3
announcements)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit.chat.driver import RoundDriver
from agentkit.conversation import Conversation
from agentkit.settings import Settings


@dataclass
class _Control:
    def has_questions(self) -> bool:
        return False


@dataclass
class _Manager:
    """The manager's answers the driver reads for its state."""

    running_agents: list[Any] = field(default_factory=list)
    ending: bool = False
    control: _Control = field(default_factory=_Control)

    def running(self) -> list[Any]:
        return self.running_agents

    def any_finishing(self) -> bool:
        return self.ending

    def has_unannounced(self) -> bool:
        return False


@dataclass
class _Host:
    workspace: Path
    manager: _Manager
    conversation: Conversation = field(default_factory=Conversation)
    settings: Settings = field(
        default_factory=lambda: Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")
    )
    closed: bool = False

    def current_manager(self) -> _Manager:
        return self.manager


def test_an_end_being_recorded_keeps_the_conversation_waiting(tmp_path: Path) -> None:
    manager = _Manager()
    driver = RoundDriver(_Host(tmp_path, manager), notes=[])  # type: ignore[arg-type]
    assert driver.state() == "idle"
    manager.ending = True  # status final, record and copy not yet
    assert driver.state() == "waiting_for_subagents"
    manager.ending = False
    manager.running_agents = [object()]
    assert driver.state() == "waiting_for_subagents"
