"""agentkit.chat.runs: a continued sub-agent's new task and run number reach the rows
people see, whether the main agent (continue_sub_agent) or a person continued it."""

from __future__ import annotations

from agentkit import events as ev
from agentkit.chat.runs import RunTasks
from agentkit.cli.progress import event_line, runtime_words


def _row(**extra: object) -> dict[str, object]:
    return {
        "agent_id": 1,
        "summary": "year report",
        "status": "running",
        "runtime_seconds": 70,
        **extra,
    }


def test_the_main_agents_continue_call_gives_the_start_its_task_and_run_number() -> None:
    runs = RunTasks(lambda agent_id: 1)
    call = ev.ToolCallStarted(
        call_id="c1",
        name="continue_sub_agent",
        arguments={"agent_id": 1, "task": "Add  a summary"},
        last_action="",
    )
    assert runs.enrich(call) is call
    started = runs.enrich(ev.SubAgentStarted(info=_row()))
    assert isinstance(started, ev.SubAgentStarted)
    assert (started.info["task"], started.info["runs"]) == ("Add a summary", 2)
    assert event_line(started) is not None
    assert "runs again (run 2): Add a summary" in str(event_line(started))
    # later events of that run say the same; the rows too
    finished = runs.enrich(ev.SubAgentFinished(info=_row(status="completed")))
    assert "1m10s in total over 2 runs" in str(event_line(finished))
    assert runs.rows([_row(runs=2)])[0]["task"] == "Add a summary"


def test_a_first_run_is_left_as_it_is() -> None:
    runs = RunTasks()
    event = ev.SubAgentStarted(info=_row())
    assert runs.enrich(event) is event
    assert runs.rows([_row()]) == [_row()]
    assert runtime_words(_row()) == "1m10s"


def test_a_third_run_counts_from_the_saved_rows() -> None:
    runs = RunTasks(lambda agent_id: 2)
    runs.expect(1, "Once more")
    started = runs.enrich(ev.SubAgentStarted(info=_row()))
    assert started.info["runs"] == 3
