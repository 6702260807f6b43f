"""Steering messages to one sub-agent are bounded (issue 31, item 11): each at most
CONTROL_TEXT_MAX characters, and at most STEER_QUEUE_MAX unread messages holding
STEER_QUEUE_CHARS characters together; a refused one is said so, never "delivered".
150 x 20,000 characters were "delivered" before.

In-process: the parent's ControlPlane and the worker's Steering, joined directly (the
parent's Steer goes to the worker's queue, its Receipt back to the parent)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from agentkit.settings import Settings
from agentkit.subagent.contract import ParentMessage, Receipt, Steer, WorkerSpec
from agentkit.subagent.control import ControlPlane
from agentkit.subagent.inputs import CONTROL_TEXT_MAX, STEER_QUEUE_CHARS, STEER_QUEUE_MAX
from agentkit.subagent.state import SubAgent
from agentkit.subagent.table import SubAgentTable
from agentkit.subagent.worker.steering import Steering


@dataclass
class OneAgent:
    """A manager with one running sub-agent whose worker side is a real Steering."""

    settings: Settings
    language: str = "en"
    table: SubAgentTable = field(default_factory=SubAgentTable)
    events: list[Any] = field(default_factory=list)
    worker: Steering | None = None
    control: ControlPlane | None = None

    @property
    def supervisor(self) -> OneAgent:
        return self

    @property
    def emit(self) -> Any:
        return self.events.append

    def send(self, agent: SubAgent, message: ParentMessage) -> None:
        assert isinstance(message, Steer) and self.worker is not None
        self.worker.offer(message)

    def running(self) -> list[SubAgent]:
        return self.table.running()


@pytest.fixture
def plane() -> tuple[ControlPlane, OneAgent]:
    settings = Settings(model="m", api_key="k", subagent_control=True, language="en")
    manager = OneAgent(settings)
    spec = WorkerSpec(1, "steered agent", "task", 600, "out", "/w/out", "/w", "c1", {}, "m", "t")
    agent = SubAgent(spec=spec, background=True, started=0.0)
    manager.table.add(agent)
    control = ControlPlane(manager)
    manager.worker = Steering(lambda message: control.on_message(agent, message))  # type: ignore[arg-type]
    return control, manager


def test_the_queue_takes_at_most_its_count_then_says_it_is_full(
    plane: tuple[ControlPlane, OneAgent],
) -> None:
    control, manager = plane
    results = [control.message(1, f"note {n}") for n in range(STEER_QUEUE_MAX + 5)]
    assert [r["status"] for r in results[:STEER_QUEUE_MAX]] == ["delivered"] * STEER_QUEUE_MAX
    for refused in results[STEER_QUEUE_MAX:]:
        assert refused["success"] is False and refused["delivered"] is False
        assert refused["status"] == "running"
        assert f"already holds {STEER_QUEUE_MAX} unread messages" in refused["error"]
    assert manager.worker is not None
    assert len(manager.worker.take("en")) == STEER_QUEUE_MAX
    assert [e.delivered for e in manager.events].count(False) == 5  # people see it too
    # once read, the queue takes messages again
    assert control.message(1, "after reading")["status"] == "delivered"


def test_the_queue_holds_at_most_its_characters(plane: tuple[ControlPlane, OneAgent]) -> None:
    control, manager = plane
    long = "x" * CONTROL_TEXT_MAX
    fits = STEER_QUEUE_CHARS // CONTROL_TEXT_MAX
    results = [control.message(1, long) for _ in range(150)]
    assert sum(r["success"] for r in results) == fits
    assert f"{STEER_QUEUE_CHARS} characters" in results[fits]["error"]
    assert manager.worker is not None
    taken = manager.worker.take("en")
    assert sum(len(m["content"]) for m in taken) < STEER_QUEUE_CHARS + 2_000


def test_a_message_over_the_text_limit_is_refused_whoever_sends_it(
    plane: tuple[ControlPlane, OneAgent],
) -> None:
    control, manager = plane
    refused = control.message(1, "y" * (CONTROL_TEXT_MAX + 1))
    assert refused["success"] is False and refused["delivered"] is False
    assert f"more than the limit of {CONTROL_TEXT_MAX}" in refused["error"]
    assert manager.worker is not None and manager.worker.take("en") == []


def test_the_worker_refuses_past_its_limits_too() -> None:
    receipts: list[Receipt] = []
    steering = Steering(receipts.append)  # type: ignore[arg-type]
    for ref in range(1, STEER_QUEUE_MAX + 2):
        steering.offer(Steer(ref, "a note"))
    steering.offer(Steer(99, "z" * (CONTROL_TEXT_MAX + 1)))
    reasons = [(r.accepted, r.reason) for r in receipts]
    assert reasons[:STEER_QUEUE_MAX] == [(True, "")] * STEER_QUEUE_MAX
    assert reasons[STEER_QUEUE_MAX:] == [(False, "queue_full"), (False, "too_long")]
