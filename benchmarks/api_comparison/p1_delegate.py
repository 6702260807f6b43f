"""Program 1: a main agent delegates two research sub-tasks to parallel sub-agents."""

from __future__ import annotations

from common import WORD_STATS, settings, workspace

from agentkit import Agent, Event, SubAgentFinished, SubAgentStarted


def show(event: Event) -> None:
    if isinstance(event, (SubAgentStarted, SubAgentFinished)):
        print(type(event).__name__, event.agent_id, event.status)


with Agent(workspace(), settings(), tools=[WORD_STATS]) as agent:
    result = agent.run("Research alpha and beta in parallel, then combine.", on_event=show)
    print(result.raise_for_status().final_text)
    print("tool calls:", result.stats["tool_calls"])
