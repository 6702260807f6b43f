"""The sub-agent events' typed fields: read from ``info`` (the status row, kept as it
was), one truth for both; a value of the wrong type leaves its field at the default."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import events as ev

ROW: dict[str, Any] = {
    "agent_id": 3,
    "summary": "Count the code",
    "status": "completed",
    "runtime_seconds": 7,
    "files_read": 2,
    "searches": 1,
    "web_pages": 0,
    "commands": 4,
    "last_action": "Writing report.md",
    "deliverables_dir": "sub_agent_results/agent_3",
    "token_usage": {"prompt": 10, "completion": 5, "total": 15},
    "tokens": 15,
    "cost_usd": None,
    "result_summary": "Counted 1,200 lines.",
}
STATS = {"runtime_seconds": 7, "files_read": 2, "searches": 1, "web_pages": 0, "commands": 4}


def test_a_finished_event_has_every_typed_field() -> None:
    event = ev.SubAgentFinished(info=dict(ROW), output={"lines": 1200})
    assert event.agent_id == 3
    assert event.status == "completed"
    assert event.summary == "Count the code"
    assert event.deliverables_dir == "sub_agent_results/agent_3"
    assert event.result_summary == "Counted 1,200 lines."
    assert event.stats == STATS
    assert event.output == {"lines": 1200}
    assert event.info == ROW  # kept, unchanged


@pytest.mark.parametrize("kind", [ev.SubAgentStarted, ev.SubAgentProgress])
def test_started_and_progress_have_them_too(kind: type[ev.SubAgentEvent]) -> None:
    row = {k: v for k, v in ROW.items() if k != "result_summary"} | {"status": "running"}
    event = kind(info=row)  # positional use, as before, works too: kind(row)
    assert isinstance(event, ev.SubAgentEvent)
    assert (event.agent_id, event.status, event.stats) == (3, "running", STATS)
    assert event.result_summary is None and event.output is None
    assert kind(row) == event


def test_to_dict_keeps_info_and_adds_the_fields() -> None:
    data = ev.SubAgentFinished(info=dict(ROW), conversation_id="conv_1").to_dict()
    assert data["type"] == "SubAgentFinished" and data["info"] == ROW
    assert data["agent_id"] == 3 and data["stats"] == STATS and data["output"] is None


def test_values_of_the_wrong_type_leave_the_defaults() -> None:
    bad = {"agent_id": True, "summary": 5, "status": None, "files_read": "2", "commands": 1}
    event = ev.SubAgentProgress(info=bad)
    assert event.agent_id == 0
    assert event.summary == "" and event.status == "running" and event.deliverables_dir == ""
    assert event.stats == {"commands": 1}


def test_the_typed_fields_are_read_not_given() -> None:
    with pytest.raises(TypeError):
        ev.SubAgentStarted(info={}, agent_id=1)  # type: ignore[call-arg]
