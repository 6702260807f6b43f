"""What a main agent is made of: its settings checked, its tools gathered.

One job: the steps every main agent (a chat Session, an Agent) takes before
its first round: :func:`check_settings` (a model and a key or local URL),
:func:`build_registry` (built-in tools, the sub-agent tools, the user's tools) and
:func:`main_system_prompt` (what its conversation opens with).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.errors import ConfigurationError
from agentkit.settings import Settings
from agentkit.tools.base import Tool, ToolRegistry

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = [
    "as_tools",
    "build_registry",
    "check_message",
    "check_settings",
    "main_system_prompt",
    "offer_tool",
    "request_overhead",
]


def check_settings(settings: Settings) -> None:
    """Raise ConfigurationError when the endpoint settings cannot work.

    A model name is required. An API key is required for the default OpenAI
    endpoint; a custom ``base_url`` (Ollama, vLLM, llama.cpp...) may go without,
    and a placeholder key is sent.
    """
    if not settings.model:
        raise ConfigurationError("no model given: pass --model or set AGENTKIT_MODEL")
    if not settings.api_key and not settings.base_url:
        raise ConfigurationError(
            "no API key: set OPENAI_API_KEY (or pass --api-key), or point --base-url / OPENAI_BASE_URL at a local server"
        )


def build_registry(
    subagents: bool,
    extra: list[Tool],
    manager: Callable[[], SubAgentManager],
    workspace: Path | None = None,
    settings: Settings | None = None,
) -> ToolRegistry:
    """Return the main agent's tools: the built-in ones, the three sub-agent tools
    bound to ``manager()`` (called at each use) when ``subagents``, then ``extra``
    (except tools for sub-agents only). With ``workspace`` and ``settings``: also the
    tools of ``Settings.tools`` and of the MCP servers (agentkit.extensions), and
    create_sub_agent's ``profile`` parameter when agent profiles exist."""
    from agentkit.tools import base_tools

    registry = ToolRegistry(base_tools())
    if subagents:
        from agentkit.subagent.tools import make_main_tools

        known = (workspace, settings) if workspace is not None and settings is not None else None
        for tool in make_main_tools(manager, known):
            registry.register(tool)
    for tool in extra:
        if tool.agents != "subagents":
            registry.register(tool)
    if workspace is not None and settings is not None:
        from agentkit.extensions import add_main_extensions

        add_main_extensions(registry, workspace, settings)
    return registry


def offer_tool(tool: Tool, registry: ToolRegistry, settings: Settings) -> Settings:
    """Offer a tool added after start (``Agent.tool``, ``Session.tool``) to the agents
    its ``agents`` names: registered in the main agent's ``registry`` unless it is for
    sub-agents only; for sub-agents, its import reference is added to
    ``Settings.tools`` (workers import it at start).

    Returns the Settings to use from now on (``settings`` itself when unchanged).
    Raises ToolNotImportable, before anything is registered, when a worker could not
    import it (defined in ``__main__``, a closure, a lambda).
    """
    from agentkit.tools.imported import worker_settings

    updated = worker_settings(settings, [tool])
    if tool.agents != "subagents":
        registry.register(tool)
    return updated


def main_system_prompt(workspace: Path, settings: Settings, subagents: bool) -> str:
    """Return the main agent's system prompt: ``main_system.txt`` in the settings'
    language, then the workspace's agent profiles when ``subagents`` are offered."""
    from agentkit import prompts
    from agentkit.environment import prompt_values
    from agentkit.profiles import load_profiles, profiles_section

    profiles = load_profiles(workspace, settings)[0] if subagents else {}
    return prompts.render(
        settings.language,
        "main_system.txt",
        max_concurrent=settings.max_concurrent_subagents,
        **prompt_values(workspace),
    ) + profiles_section(profiles, settings.language)


def as_tools(items: Iterable[Any]) -> list[Tool]:
    """Return ``items`` as Tools: a Tool as it is, a plain function
    ``func(params: Model[, ctx])`` as a tool for the main agent (as ``Agent.tool``
    without ``agents``; wrap it in a Tool to offer it to sub-agents).

    Raises TypeError for anything else, or a function without a pydantic parameter
    model."""
    from agentkit.tools.base import tool_from_function

    tools = []
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
        elif callable(item):
            tools.append(tool_from_function(item))
        else:
            raise TypeError(f"not a tool: {item!r} (give a Tool or a function)")
    return tools


def check_message(
    text: object, settings: Settings, overhead: Callable[[], int] | None = None
) -> str:
    """Return ``text`` when it can be sent as a user message; raise ConfigurationError
    when it is empty or alone larger than the context window leaves for it
    (agentkit.compaction.message_budget, less ``overhead()``: the system prompt and
    tool schemas, asked only for a long text).
    Compaction never cuts the user's latest message, so such a round could only fail."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError("the message is empty")
    from agentkit.compaction import message_budget

    room = message_budget(settings, 0)  # the engine's own rule, so the two agree
    if overhead is not None and len(text) > min(1000, room // 2):
        room = message_budget(settings, overhead())
    if len(text) > room:  # a token holds at least one character: only then count
        from agentkit.tokens import count_text

        tokens = count_text(text)
        if tokens > room:
            raise ConfigurationError(
                f"the message has {tokens} tokens, more than the {room} the model's "
                f"context window leaves for it (context_window {settings.context_window}, "
                "less the reply, the system prompt and the tools): send a shorter message, "
                "or save the text in a file of the workspace and ask the agent to read it"
            )
    return text


def request_overhead(
    workspace: Path, settings: Settings, subagents: bool, registry: ToolRegistry
) -> int:
    """Tokens each of the main agent's requests spends before its messages: the system
    prompt and the tool schemas (counted as sent)."""
    from agentkit.compaction import schema_tokens
    from agentkit.tokens import count_text

    prompt = main_system_prompt(workspace, settings, subagents)
    return count_text(prompt) + schema_tokens(registry.schemas(settings.language))
