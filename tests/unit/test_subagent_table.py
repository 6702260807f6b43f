"""The sub-agent table (agentkit.subagent.table) is the one owner of a conversation's
sub-agents, their lock and their condition: waits with a predicate and a timeout,
changes from many threads that lose nothing, and a take that hands each agent to one
taker only. In-process: real threads, no worker."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

import agentkit
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.state import SubAgent
from agentkit.subagent.table import SubAgentTable, TableClosed


def _agent(agent_id: int, *, background: bool = True) -> SubAgent:
    spec = WorkerSpec(
        agent_id, f"agent {agent_id}", "task", 600, f"out/{agent_id}", f"/w/out/{agent_id}",
        "/w", f"c{agent_id}", {}, "m", "t",
    )  # fmt: skip
    return SubAgent(spec=spec, background=background, started=0.0)


def _end(agent: SubAgent) -> None:
    agent.status = "completed"


def _run(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()


def test_a_wait_returns_once_another_thread_makes_its_predicate_hold() -> None:
    table = SubAgentTable()
    table.add(agent := _agent(1))
    started = threading.Event()

    def end_it() -> None:
        started.wait(30)
        table.update(agent, _end, notify=True)

    ender = threading.Thread(target=end_it)
    ender.start()

    def ready() -> bool:
        started.set()  # the waiter looked once: the end comes while it waits
        return agent.status != "running"

    assert table.wait_until(ready, 60) is True
    ender.join(30)
    assert agent.status == "completed"


def test_a_wait_whose_predicate_never_holds_returns_false_at_its_timeout() -> None:
    table = SubAgentTable()
    table.add(agent := _agent(1))
    looks: list[bool] = []

    def ready() -> bool:
        looks.append(True)
        return agent.status != "running"

    assert table.wait_until(ready, 0.05) is False
    assert looks  # it looked at least once
    assert table.wait_until(lambda: True, 0) is True  # a zero timeout still looks once


def test_a_set_cancel_ends_the_wait_and_then_still_runs() -> None:
    table = SubAgentTable()
    cancel = threading.Event()
    cancel.set()
    assert table.wait_then(lambda: False, 3600, lambda held: ("then", held), cancel=cancel) == (
        "then",
        False,
    )


def test_changes_from_many_threads_lose_nothing() -> None:
    table = SubAgentTable()
    table.add(agent := _agent(1))
    rounds, workers = 200, 8

    def bump(a: SubAgent) -> None:
        seen = a.tokens
        time.sleep(0)  # let another thread in between the read and the write
        a.tokens = seen + 1

    def work() -> None:
        for _ in range(rounds):
            table.update(agent, bump)

    _run([threading.Thread(target=work) for _ in range(workers)])
    assert agent.tokens == rounds * workers


def test_each_ended_agent_is_reported_once_between_a_waiter_and_a_taker() -> None:
    """A waiter (wait_for_sub_agents) and a taker (the notifications) race for the
    same ends: ``then`` acts on what ``ready`` saw in the same hold of the lock."""
    table = SubAgentTable()
    agents = [_agent(i) for i in range(1, 61)]
    for agent in agents:
        table.add(agent)
    by_waiter: list[int] = []
    by_taker: list[int] = []
    all_told = threading.Event()

    def unannounced(a: SubAgent) -> bool:
        return a.status != "running" and not a.announced

    def announce(a: SubAgent) -> None:
        a.announced = True

    def told() -> bool:
        return all(a.announced for a in agents)

    def waiter() -> None:
        while not all_told.is_set():

            def report(held: bool) -> None:
                for a in agents:
                    if unannounced(a):
                        announce(a)
                        by_waiter.append(a.spec.agent_id)
                if told():
                    all_told.set()

            table.wait_then(lambda: any(map(unannounced, agents)) or told(), 5, report)

    def taker() -> None:
        while not all_told.is_set():
            by_taker.extend(a.spec.agent_id for a in table.take(unannounced, announce))
            time.sleep(0)

    def ender() -> None:
        for agent in agents:
            table.update(agent, _end, notify=True)
            time.sleep(0)

    _run([threading.Thread(target=f) for f in (waiter, taker, ender)])
    assert sorted(by_waiter + by_taker) == list(range(1, 61))


def test_earlier_runs_rows_keep_their_ids_and_status() -> None:
    earlier = {
        2: {"agent_id": 2, "summary": "old two", "status": "failed", "sub_conversation_id": "s2"},
        5: {"agent_id": 5, "summary": "old five", "sub_conversation_id": "s5"},
    }
    table = SubAgentTable(earlier)
    assert table.used_ids() == {2: "old two", 5: "old five"}
    assert table.find(2) == (None, "failed")
    assert table.find(5) == (None, "completed")
    assert table.find(7) == (None, None)
    table.add(again := _agent(5))  # a continued run of 5
    table.add(_agent(3))
    assert table.find(5) == (again, None)
    assert table.earlier_row(5) is earlier[5]
    assert [r["agent_id"] for r in table.conversation_rows()] == [2, 3, 5]
    assert table.sub_conversation_ids() == {"s2", "s5", "c3", "c5"}
    assert [a.spec.agent_id for a in table.running()] == [3, 5]


def test_the_agents_view_is_read_only_and_a_closed_table_takes_no_agent() -> None:
    table = SubAgentTable()
    table.add(_agent(1))
    with pytest.raises(TypeError):
        table.agents[2] = _agent(2)  # type: ignore[index]
    table.close()
    with pytest.raises(TableClosed):
        table.add(_agent(2))
    assert list(table.agents) == [1] and table.closed


def test_no_module_takes_the_tables_lock_from_outside() -> None:
    package = Path(agentkit.__file__).parent
    outside = re.compile(r"\.changed\b|\btable\._\w+")  # the shared condition; table privates
    found = [
        f"{path.relative_to(package)}:{n}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "table.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert found == []
