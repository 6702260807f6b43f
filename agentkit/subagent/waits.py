"""wait_for_sub_agents: block until sub-agents end, without spending requests
(docs/control-plane.md §1.3).

One job: the wait. It returns when all (``all``) or one (``any``) of the agents ended,
when one of them asks a question (it cannot end while it waits for an answer), at the
timeout, or when the round is cancelled. The ends it reports are marked announced, so
no notification repeats them.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from agentkit import prompts

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["wait_for"]


def wait_for(
    manager: SubAgentManager,
    agent_ids: list[int],
    mode: str,
    timeout_seconds: float,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """wait_for_sub_agents (``mode`` "all" or "any", ``timeout_seconds``): returns
    ``{"success": true, "agents": [get_sub_agent_status rows], "timed_out"}``, or the
    refusal (control off; every id unknown: get_sub_agent_status's)."""
    if not manager.settings.subagent_control:
        error = prompts.phrase(manager.language, "control_off")
        return {"success": False, "agents": [], "error": error}
    agent_ids = list(dict.fromkeys(agent_ids))  # one row per agent, first-seen order
    found = manager.status(agent_ids)
    if not found.get("success"):
        return {**found, "timed_out": False}
    deadline = time.monotonic() + timeout_seconds
    with manager.changed:
        agents = [manager.agents[i] for i in agent_ids if i in manager.agents]
        while True:
            ended = [a for a in agents if a.status != "running"]
            asking = [a for a in agents if a.status == "running" and a.question is not None]
            held = len(ended) == len(agents) if mode == "all" else bool(ended) or not agents
            left = deadline - time.monotonic()
            stop = cancel is not None and cancel.is_set()
            if held or asking or left <= 0 or stop:
                break
            manager.changed.wait(min(left, 0.5))
        for agent in ended:
            agent.announced = True  # reported here: no notification later
        for agent in asking:
            agent.question.announced = True
    rows = manager.status(agent_ids)["agents"]
    return {"success": True, "agents": rows, "timed_out": not (held or asking)}
