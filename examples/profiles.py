"""Give sub-agents a profile: their own prompt, tools, model and a typed result.

    OPENAI_API_KEY=sk-... python examples/profiles.py ./my_project

The ``reviewer`` profile asks its sub-agents for a JSON result of a fixed shape
(``output_schema``); ``SubAgentFinished.output`` carries it in this process.
"""

from __future__ import annotations

import sys
from typing import Any

from agentkit import Agent, AgentProfile, Event, Settings, SubAgentFinished

REVIEWER = AgentProfile(
    name="reviewer",
    description="Reviews code for bugs; read-only.",
    prompt="Read the code you are given and report real bugs only, with file and line.",
    tools=("read_file", "search_files", "list_files"),
    temperature=0.2,
    max_turns=30,
    timeout_seconds=300,
    output_schema={
        "type": "object",
        "properties": {"bugs": {"type": "array", "items": {"type": "string"}}},
        "required": ["bugs"],
    },
)


def collect(outputs: dict[int, Any]) -> Any:
    """An ``on_event`` callback keeping each finished sub-agent's typed result."""

    def on_event(event: Event) -> None:
        if isinstance(event, SubAgentFinished) and event.output is not None:
            outputs[event.agent_id] = event.output

    return on_event


def main(argv: list[str]) -> int:
    workspace = argv[1] if len(argv) > 1 else "."
    settings = Settings(model="gpt-4o-mini", language="en", agent_profiles=[REVIEWER])
    outputs: dict[int, Any] = {}
    with Agent(workspace=workspace, settings=settings) as agent:
        result = agent.run(
            "Have a reviewer sub-agent review src/, then list what it found",
            on_event=collect(outputs),
        ).raise_for_status()
    for agent_id, output in sorted(outputs.items()):
        print(f"reviewer #{agent_id}: {output}")
    print(result.final_text or "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
