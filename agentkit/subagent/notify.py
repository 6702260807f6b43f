"""The text that tells the main agent background sub-agents finished
(docs/specification.md §2, §3).

One job: render the specification's notification templates for a list of ended
sub-agents: the system template (after a batch of tool results) or the user
template (it starts a round while the main agent is idle); agents that end
together share one message. When each is used is agentkit.chat.rounds' job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentkit import prompts

if TYPE_CHECKING:
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
