"""Follow a run through its typed events: text as it streams, tool calls, sub-agents.

    OPENAI_API_KEY=sk-... python examples/events.py ./my_project

Each sub-agent event carries typed fields (``agent_id``, ``status``, ``summary``,
``deliverables_dir``, ``stats``, and once it finished ``result_summary`` and
``output``); ``info`` holds the same as a dict.
"""

from __future__ import annotations

import sys

from agentkit import (
    Agent,
    Event,
    RunFinished,
    Settings,
    SubAgentEvent,
    SubAgentFinished,
    SubAgentStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)


def describe(event: Event) -> str | None:
    """One line for ``event``, or None for events this display leaves out."""
    if isinstance(event, ToolCallStarted):
        return f"· {event.last_action} ({event.name})"
    if isinstance(event, ToolCallFinished) and not event.ok:
        return f"  {event.name} failed after {event.duration_seconds:.1f}s"
    if isinstance(event, SubAgentStarted):
        return f"sub-agent #{event.agent_id} started: {event.summary} -> {event.deliverables_dir}"
    if isinstance(event, SubAgentFinished):
        seconds = event.stats.get("runtime_seconds", 0)
        line = f"sub-agent #{event.agent_id} {event.status} after {seconds}s"
        return f"{line}: {event.result_summary}" if event.result_summary else line
    if isinstance(event, SubAgentEvent):  # SubAgentProgress
        return None
    if isinstance(event, RunFinished):
        return f"run {event.status}" + (f": {event.error}" if event.error else "")
    return None


def show(event: Event) -> None:
    """The run's ``on_event`` callback: stream text, print one line per notable event."""
    if isinstance(event, TextDelta):
        print(event.text, end="", flush=True)
        return
    line = describe(event)
    if line is not None:
        print(line)


def main(argv: list[str]) -> int:
    workspace = argv[1] if len(argv) > 1 else "."
    settings = Settings(model="gpt-4o-mini", language="en")
    with Agent(workspace=workspace, settings=settings) as agent:
        result = agent.run(
            "Start a sub-agent in the background to count the lines of code per folder,"
            " then summarise its report",
            on_event=show,
        )
    return 0 if result.status == "done" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
