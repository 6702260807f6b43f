"""A sub-agent status read from a row (the events' ``info``) becomes the Status
Literal through one function; an unknown one is not passed on as if it were one."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from agentkit.events import SubAgentFinished, SubAgentStarted
from agentkit.subagent.contract import STATUSES, Status, sub_agent_status


def test_the_statuses_are_the_literal_type() -> None:
    assert typing.get_args(Status) == STATUSES


@pytest.mark.parametrize("status", STATUSES)
def test_a_known_status_is_kept(status: str) -> None:
    assert sub_agent_status(status) == status
    assert SubAgentFinished(info={"agent_id": 1, "status": status}).status == status


@pytest.mark.parametrize("bad", ["bogus", "Completed", "", None, 3, ["failed"]])
def test_an_unknown_status_is_refused(bad: Any) -> None:
    assert sub_agent_status(bad) is None
    event = SubAgentStarted(info={"agent_id": 1, "status": bad, "summary": "s"})
    assert event.status == "running" and event.summary == "s"
    assert event.info["status"] == bad  # the row itself is passed on untouched
