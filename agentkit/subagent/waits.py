"""wait_for_sub_agents: block until sub-agents end, without spending requests
(docs/control-plane.md §1.3).

One job: the wait. It returns when all (``all``) or one (``any``) of the agents ended,
when one of them asks a question (it cannot end while it waits for an answer), at the
timeout, or when the round is cancelled. The ends it reports are marked announced, so
no notification repeats them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from agentkit import prompts

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.subagent.state import SubAgent

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
    table = manager.table
    agents = [a for a in map(table.get, agent_ids) if a is not None]
    seen: dict[str, list[SubAgent]] = {"ended": [], "asking": []}

    def ready() -> bool:
        ended = seen["ended"] = [a for a in agents if a.ended()]  # counted, if isolated
        asking = seen["asking"] = [
            a for a in agents if a.status == "running" and a.question is not None
        ]
        held = len(ended) == len(agents) if mode == "all" else bool(ended) or not agents
        return held or bool(asking)

    def report(held: bool) -> bool:  # under the same lock as ready's last look
        for agent in seen["ended"]:
            agent.announced = True  # reported here: no notification later
        for agent in seen["asking"]:
            agent.question.announced = True
        return held

    held = table.wait_then(ready, timeout_seconds, report, cancel=cancel)
    rows = manager.status(agent_ids)["agents"]
    return {"success": True, "agents": rows, "timed_out": not held}
