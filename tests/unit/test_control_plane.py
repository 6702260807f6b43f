"""The control plane (docs/control-plane.md) over real workers and FakeOpenAIServer:
message_sub_agent, ask_parent and answer_sub_agent, wait_for_sub_agents,
continue_sub_agent, each refusal, the races, and control off changing no request."""

from __future__ import annotations

from typing import Any

import pytest
from subagent_helpers import (
    wait_until,
)

pytestmark = pytest.mark.slow


def test_control_messages_sent_while_the_worker_prepares_are_kept() -> None:
    """Regression: a Steer or BudgetWrapUp that reached the worker's link before the
    worker had set up its control plane was dropped (a message lost, a budget's
    wrap-up never given)."""
    import multiprocessing

    from agentkit.subagent.contract import BudgetWrapUp, Channel, Steer
    from agentkit.subagent.worker.parent_link import ParentLink

    parent_end, worker_end = multiprocessing.Pipe()
    link = ParentLink(worker_end, lambda by_parent: None)
    link.start_reader()
    parent: Channel[Any, Any] = Channel(parent_end)
    parent.send(Steer(1, "early"))
    parent.send(BudgetWrapUp("session"))
    got: list[Any] = []
    assert wait_until(lambda: len(link._early) == 2, 10)  # read, and kept
    link.set_control(got.append)
    parent.send(Steer(2, "later"))
    assert wait_until(lambda: len(got) == 3, 10)
    assert got == [Steer(1, "early"), BudgetWrapUp("session"), Steer(2, "later")]
    parent.close()
