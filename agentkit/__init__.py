"""agentkit: agents that delegate work to parallel, isolated, observable sub-agents.

The public API (docs/architecture.md §3)::

    from agentkit import Agent, Settings
    with Agent(workspace="proj", settings=Settings(model="gpt-4o-mini")) as agent:
        result = agent.run("task", on_event=print)

Heavy modules (openai, trafilatura) are imported on first use, so importing
agentkit stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentkit.errors import (
    AgentkitError,
    Cancelled,
    ConfigurationError,
    ContextLengthExceeded,
    LLMError,
    ToolError,
)

if TYPE_CHECKING:
    from agentkit.agent import Agent, RunResult
    from agentkit.events import (
        AssistantMessage,
        ContextCompacted,
        Event,
        RetryScheduled,
        RunFinished,
        RunStarted,
        StateChanged,
        SubAgentFinished,
        SubAgentProgress,
        SubAgentStarted,
        TextDelta,
        ToolCallFinished,
        ToolCallStarted,
    )
    from agentkit.settings import Settings
    from agentkit.tools.base import Tool, ToolContext, ToolRegistry, ToolResult

# Loaded on first use, so `import agentkit` (and `agentkit --help`) stays fast:
# pydantic-settings alone costs ~300 ms and openai ~0.4 s (docs/architecture.md §8).
_LAZY = {
    "Agent": "agentkit.agent",
    "RunResult": "agentkit.agent",
    "Settings": "agentkit.settings",
    "Tool": "agentkit.tools.base",
    "ToolContext": "agentkit.tools.base",
    "ToolRegistry": "agentkit.tools.base",
    "ToolResult": "agentkit.tools.base",
    **dict.fromkeys(
        [
            "AssistantMessage",
            "ContextCompacted",
            "Event",
            "RetryScheduled",
            "RunFinished",
            "RunStarted",
            "StateChanged",
            "SubAgentFinished",
            "SubAgentProgress",
            "SubAgentStarted",
            "TextDelta",
            "ToolCallFinished",
            "ToolCallStarted",
        ],
        "agentkit.events",
    ),
}

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentkitError",
    "AssistantMessage",
    "Cancelled",
    "ConfigurationError",
    "ContextCompacted",
    "ContextLengthExceeded",
    "Event",
    "LLMError",
    "RetryScheduled",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "Settings",
    "StateChanged",
    "SubAgentFinished",
    "SubAgentProgress",
    "SubAgentStarted",
    "TextDelta",
    "Tool",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkit' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
