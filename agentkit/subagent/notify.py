"""Telling the main agent that background sub-agents finished (docs/specification.md §2, §3).

After each batch of tool results, every background sub-agent that ended since is
announced in a system message (the seed's system template). When the main agent
answers without tool calls while background agents still run, the conversation
waits (state ``waiting_for_subagents``); at the next completion the seed's user
template starts a new round. Agents that end together share one message. Each
completion is announced exactly once (SubAgentManager.take_finished).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentkit import prompts
from agentkit.engine import Engine, Hooks, Step
from agentkit.errors import Cancelled
from agentkit.llm.turns import AssistantTurn

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.subagent.state import SubAgent


def render_notifications(
    language: str, agents: list[SubAgent], template: str, cap: Callable[[SubAgent], str]
) -> str:
    """Render one notification text for ``agents`` with ``subagent/<template>.txt``
    (``notify_system`` or ``notify_user``), blank-line separated."""
    parts = []
    for agent in agents:
        parts.append(
            prompts.render(
                language,
                f"subagent/{template}.txt",
                agent_id=agent.spec.agent_id,
                summary=agent.spec.summary,
                **agent.stats(),  # runtime_seconds and the four seed counters
                deliverables_dir=agent.spec.deliverables_dir,
                result_summary=cap(agent),
            )
        )
    return "\n\n".join(parts)


class MainHooks(Hooks):
    """Main-agent hooks: notifications after tool results; wait for background
    sub-agents instead of stopping while any still runs."""

    def __init__(self, get_manager: Callable[[], SubAgentManager | None]) -> None:
        self.get_manager = get_manager

    def after_tool_results(self, engine: Engine) -> Step:
        manager = self.get_manager()
        if manager is None:
            return Step()
        done = manager.take_finished()
        if not done:
            return Step()
        text = render_notifications(
            engine.settings.language, done, "notify_system", manager.capped_summary
        )
        return Step(messages=[{"role": "system", "content": text}])

    def on_final_answer(self, engine: Engine, turn: AssistantTurn) -> Step:
        manager = self.get_manager()
        if manager is None or not manager.has_pending():
            return Step(stop=True)
        done = manager.take_finished()
        if not done:
            engine.set_state("waiting_for_subagents")
            done = manager.wait_finished(engine.cancel_event)
            if engine.cancel_event.is_set():
                raise Cancelled("cancelled while waiting for sub-agents")
            engine.set_state("running")
        if not done:
            return Step(stop=True)
        text = render_notifications(
            engine.settings.language, done, "notify_user", manager.capped_summary
        )
        return Step(messages=[{"role": "user", "content": text}])
