"""What a main agent is made of: its settings checked, its tools gathered.

One job: the steps every main agent (a chat Session, an Agent) takes before
its first round: :func:`check_settings` (a model and a key or local URL),
:func:`build_registry` (built-in tools, the sub-agent tools, the user's tools) and
:func:`main_system_prompt` (what its conversation opens with); :func:`add_main_extensions` (the user's
imported tools and MCP tools offered to the main agent; sub-agents get theirs in
agentkit.subagent.worker.registry); :func:`refresh_conventions` (AGENTS.md and skills,
read again at each round's start: agentkit.conventions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.errors import ConfigurationError
from agentkit.settings import Settings
from agentkit.tools.base import Tool
from agentkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.subagent.manager import SubAgentManager

log = logging.getLogger("agentkit")

__all__ = [
    "add_main_extensions",
    "as_tools",
    "build_registry",
    "builtin_tool_names",
    "check_builtin_tools",
    "check_message",
    "check_settings",
    "main_system_prompt",
    "missing_setting",
    "offer_tool",
    "refresh_conventions",
    "request_overhead",
]


MISSING_MODEL = "no model given: set Settings(model=...) or AGENTKIT_MODEL"
MISSING_KEY = (
    "no API key: set Settings(api_key=...) or OPENAI_API_KEY, or point "
    "Settings(base_url=...) or OPENAI_BASE_URL at a local server (which needs none)"
)


def missing_setting(settings: Settings) -> str | None:
    """``"model"`` or ``"api_key"`` when that endpoint setting is missing, else None
    (the rule of :func:`check_settings`; the CLI words it with its own flags)."""
    if not settings.model:
        return "model"
    if not settings.api_key and not settings.base_url:
        return "api_key"
    return None


def check_settings(settings: Settings) -> None:
    """Raise ConfigurationError when the endpoint settings cannot work.

    A model name is required. An API key is required for the default OpenAI
    endpoint; a custom ``base_url`` (Ollama, vLLM, llama.cpp...) may go without,
    and a placeholder key is sent. The messages name the Python settings
    (``Settings(api_key=...)``) and the environment variables. The approval rules
    and hooks must be well formed (:func:`check_policy`).
    """
    missing = missing_setting(settings)
    if missing is not None:
        raise ConfigurationError(MISSING_MODEL if missing == "model" else MISSING_KEY)
    check_policy(settings)


def check_policy(settings: Settings) -> None:
    """Raise ConfigurationError naming the field for malformed ``approvals`` rules or a
    ``hooks`` setting not in the hooks shape (docs/approvals.md; checked at startup,
    here rather than in Settings, so that settings import nothing of agentkit.policy)."""
    from agentkit.policy.approvals import check_rules
    from agentkit.policy.hook_config import parse_hooks

    try:
        check_rules(settings.approvals)
    except ValueError as exc:
        raise ConfigurationError(f"approvals: {exc}") from None
    if settings.hooks:
        try:
            parse_hooks(settings.hooks, "Settings.hooks")
        except ValueError as exc:  # HookConfigError: it names the field
            raise ConfigurationError(str(exc)) from None


def builtin_tool_names() -> list[str]:
    """The names ``builtin_tools`` may give, in the order they are offered: the
    built-in tools, the seed's three sub-agent tools, the control plane's four, the
    two of isolation."""
    from agentkit.subagent.control_tools import make_control_tools
    from agentkit.subagent.isolation_tools import ISOLATION_TOOLS
    from agentkit.subagent.seed_tools import make_main_tools
    from agentkit.tools import base_tools

    def nobody() -> SubAgentManager:  # pragma: no cover - never called: names only
        raise ConfigurationError("names only")

    tools = [*base_tools(), *make_main_tools(nobody), *make_control_tools(nobody)]
    return [tool.name for tool in tools] + list(ISOLATION_TOOLS)


def check_builtin_tools(builtin: Iterable[str] | None) -> frozenset[str] | None:
    """Return the names of ``builtin`` (None: every built-in tool). Raises
    ConfigurationError naming an unknown one and listing the known names, or for a
    bare string (a list of names is meant)."""
    if builtin is None:
        return None
    if isinstance(builtin, str):
        raise ConfigurationError(f"builtin_tools takes a list of names, not the string {builtin!r}")
    chosen = frozenset(builtin)
    known = builtin_tool_names()
    unknown = sorted(name for name in chosen if name not in known)
    if unknown:
        raise ConfigurationError(
            f"builtin_tools: unknown tool {', '.join(map(repr, unknown))}; "
            f"the built-in tools are {', '.join(known)}"
        )
    return chosen


def build_registry(
    subagents: bool,
    extra: list[Tool],
    manager: Callable[[], SubAgentManager],
    workspace: Path | None = None,
    settings: Settings | None = None,
    builtin: frozenset[str] | None = None,
) -> ToolRegistry:
    """Return the main agent's tools: the built-in ones, the three sub-agent tools
    bound to ``manager()`` (called at each use) when ``subagents`` (and the four of
    the control plane with ``subagent_control``, the two of isolation with
    ``subagent_isolation`` not off; create_sub_agent's ``isolation`` with
    ``available``), then ``extra`` (except tools for
    sub-agents only). ``builtin``: only the built-in tools of these names
    (:func:`check_builtin_tools`; None: all). With ``workspace`` and ``settings``: also
    the tools of ``Settings.tools`` and of the MCP servers (add_main_extensions), and
    create_sub_agent's ``profile`` parameter when agent profiles exist."""
    from agentkit.tools import base_tools

    offered = list(base_tools())
    if subagents:
        from agentkit.subagent.seed_tools import make_main_tools

        known = (workspace, settings) if workspace is not None and settings is not None else None
        isolation = settings.subagent_isolation if settings is not None else "off"
        offered += make_main_tools(manager, known, isolation=isolation)
        if settings is not None and settings.subagent_control:
            from agentkit.subagent.control_tools import make_control_tools

            offered += make_control_tools(manager)
        if isolation != "off":
            from agentkit.subagent.isolation_tools import make_isolation_tools

            offered += make_isolation_tools(manager)
    registry = ToolRegistry([t for t in offered if builtin is None or t.name in builtin])
    for tool in extra:
        if tool.agents != "subagents":
            registry.register(tool)
    if workspace is not None and settings is not None:
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


def main_system_prompt(
    workspace: Path, settings: Settings, subagents: bool, instructions: str | None = None
) -> str:
    """Return the main agent's system prompt: ``main_system.txt`` in the settings'
    language, the control plane's tools (``control_main.txt``) with
    ``subagent_control``, then the workspace's agent profiles when ``subagents`` are
    offered, then the application's ``instructions`` (when given). AGENTS.md and the
    skill list are added after it at each round's start (:func:`refresh_conventions`)."""
    from agentkit import prompts
    from agentkit.profiles import load_profiles, profiles_section
    from agentkit.prompts import prompt_values

    profiles = load_profiles(workspace, settings)[0] if subagents else {}
    text = prompts.render(
        settings.language,
        "main_system.txt",
        max_concurrent=settings.max_concurrent_subagents,
        **prompt_values(workspace),
    )
    if subagents and settings.subagent_control:
        text += "\n\n" + prompts.render(settings.language, "control_main.txt")
    text += profiles_section(profiles, settings.language)
    if instructions and instructions.strip():
        text += "\n\n" + instructions.strip()
    return text


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
    (agentkit.context.message_budget, less ``overhead()``: the system prompt and
    tool schemas, asked only for a long text).
    Compaction never cuts the user's latest message, so such a round could only fail."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError("the message is empty")
    from agentkit.context import message_budget

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
    workspace: Path,
    settings: Settings,
    subagents: bool,
    registry: ToolRegistry,
    instructions: str | None = None,
) -> int:
    """Tokens each of the main agent's requests spends before its messages: the system
    prompt (``instructions`` included) and the tool schemas (counted as sent)."""
    from agentkit.context import schema_tokens
    from agentkit.conventions import gather
    from agentkit.tokens import count_text

    prompt = main_system_prompt(workspace, settings, subagents, instructions)
    prompt += gather(workspace, settings).text
    return count_text(prompt) + schema_tokens(registry.schemas(settings.language))


def refresh_conventions(
    conversation: Conversation, registry: ToolRegistry, workspace: Path, settings: Settings
) -> None:
    """At a round's start (docs/architecture.md §10: once per round): read AGENTS.md and
    the skills again, make the first system message end with their current section
    (agentkit.conventions.gather.sync_first_message: the seed's text before it stays as
    it was), and offer load_skill exactly while skills are listed. Without either,
    nothing changes. Never raises: a failure is logged and leaves the round as it was."""
    from agentkit.conventions import gather, sync_first_message
    from agentkit.conventions.tool import LOAD_SKILL

    try:
        found = gather(workspace, settings)
        sync_first_message(conversation, found)
    except Exception as exc:  # a convention file must not stop the round
        log.warning("agentkit: AGENTS.md and skills could not be read: %s", exc)
        return
    current = registry.get(LOAD_SKILL.name)
    if found.skills and current is None:
        registry.register(LOAD_SKILL)
    elif not found.skills and current is LOAD_SKILL:
        registry.unregister(LOAD_SKILL.name)


def add_main_extensions(registry: ToolRegistry, workspace: Path, settings: Settings) -> None:
    """Register the tools of ``Settings.tools`` offered to the main agent and the tools
    of the MCP servers configured for it (their sessions close with ``registry.close()``).

    A server that cannot start is logged in one line and offers no tools; a missing
    ``mcp`` package is logged once when servers are configured."""
    from agentkit.tools.imported import tools_for

    for tool in tools_for(settings.tools, "main"):
        registry.register(tool)
    for tool in _mcp_tools(registry, workspace, settings):
        registry.register(tool)


def _mcp_tools(registry: ToolRegistry, workspace: Path, settings: Settings) -> list[Tool]:
    from agentkit.mcp.config import load_servers

    servers, problems = load_servers(workspace, settings)
    for problem in problems:
        log.warning("agentkit: MCP configuration: %s", problem)
    servers = {n: s for n, s in servers.items() if s.agents in ("main", "both")}
    if not servers:
        return []
    from agentkit.mcp import available

    if not available():
        from agentkit.extras import install_hint

        log.warning("agentkit: MCP servers are configured but the mcp package is missing "
                    "(%s)", install_hint("mcp"))  # fmt: skip
        return []
    from agentkit.mcp.tools import MCPTools

    mcp = MCPTools(workspace, settings, "main", servers=servers)
    registry.on_close(mcp.close)
    return mcp.tools()
