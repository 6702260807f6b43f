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

from agentkit import events as _events
from agentkit.errors import (
    AgentkitError,
    ApprovalError,
    Cancelled,
    ConfigFileError,
    ConfigurationError,
    ContextLengthExceeded,
    ErrorKind,
    LLMError,
    LLMErrorKind,
    RunFailed,
    ToolError,
    WorkspaceFull,
)

if TYPE_CHECKING:
    from agentkit.agent import Agent
    from agentkit.agent_run import AgentRun
    from agentkit.chat import RoundResult, Session, Workspace
    from agentkit.conversation import ConversationState
    from agentkit.engine_roles import RunStatus
    from agentkit.events import (
        AllWorkDone,
        ApprovalAnswered,
        ApprovalRequested,
        ApprovalWithdrawn,
        AssistantMessage,
        BudgetWarning,
        ContextCompacted,
        Event,
        HookFailed,
        MessageQueued,
        Notification,
        RetryScheduled,
        RoundFinished,
        RoundStarted,
        RunFinished,
        RunStarted,
        StateChanged,
        SubAgentAnswered,
        SubAgentEvent,
        SubAgentFinished,
        SubAgentMessage,
        SubAgentProgress,
        SubAgentQuestion,
        SubAgentStarted,
        TextDelta,
        ToolCallFinished,
        ToolCallStarted,
        UserMessage,
    )
    from agentkit.isolation.types import Changes, Conflict, FileChange, IsolationError, MergeReport
    from agentkit.profiles import AgentProfile
    from agentkit.run_result import RunResult
    from agentkit.settings import Settings
    from agentkit.spawn import SubAgentRefused
    from agentkit.spawn_handles import AsyncSubAgentHandle, SubAgentHandle, SubAgentResult
    from agentkit.tools.base import Tool, ToolContext, ToolResult
    from agentkit.tools.registry import ToolRegistry

# Loaded on first use, so `import agentkit` (and `agentkit --help`) stays fast:
# pydantic-settings alone costs ~300 ms and openai ~0.4 s (docs/architecture.md §8).
# The events module is plain dataclasses: its names come from its own __all__.
_LAZY = {
    "Agent": "agentkit.agent",
    "RunResult": "agentkit.run_result",
    "AgentRun": "agentkit.agent_run",
    "AgentProfile": "agentkit.profiles",
    **{
        name: "agentkit.isolation.types"
        for name in ("Changes", "Conflict", "FileChange", "IsolationError", "MergeReport")
    },
    "Settings": "agentkit.settings",
    "AsyncSubAgentHandle": "agentkit.spawn_handles",
    "SubAgentHandle": "agentkit.spawn_handles",
    "SubAgentRefused": "agentkit.spawn",
    "SubAgentResult": "agentkit.spawn_handles",
    "Tool": "agentkit.tools.base",
    "ToolContext": "agentkit.tools.base",
    "ToolRegistry": "agentkit.tools.registry",
    "ToolResult": "agentkit.tools.base",
    "Session": "agentkit.chat",
    "Workspace": "agentkit.chat",
    "RoundResult": "agentkit.chat",
    "ConversationState": "agentkit.conversation",
    "RunStatus": "agentkit.engine_roles",
    **{name: "agentkit.events" for name in _events.__all__ if name != "EventHandler"},
}

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentProfile",
    "AgentRun",
    "AgentkitError",
    "AllWorkDone",
    "ApprovalAnswered",
    "ApprovalError",
    "ApprovalRequested",
    "ApprovalWithdrawn",
    "AssistantMessage",
    "AsyncSubAgentHandle",
    "BudgetWarning",
    "Cancelled",
    "Changes",
    "ConfigFileError",
    "ConfigurationError",
    "Conflict",
    "ContextCompacted",
    "ContextLengthExceeded",
    "ConversationState",
    "ErrorKind",
    "Event",
    "FileChange",
    "HookFailed",
    "IsolationError",
    "LLMError",
    "LLMErrorKind",
    "MergeReport",
    "MessageQueued",
    "Notification",
    "RetryScheduled",
    "RoundFinished",
    "RoundResult",
    "RoundStarted",
    "RunFailed",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "Session",
    "Settings",
    "StateChanged",
    "SubAgentAnswered",
    "SubAgentEvent",
    "SubAgentFinished",
    "SubAgentHandle",
    "SubAgentMessage",
    "SubAgentProgress",
    "SubAgentQuestion",
    "SubAgentRefused",
    "SubAgentResult",
    "SubAgentStarted",
    "TextDelta",
    "Tool",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "UserMessage",
    "Workspace",
    "WorkspaceFull",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentkit' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
