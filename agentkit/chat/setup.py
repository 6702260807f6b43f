"""What a main agent is made of: its settings checked, its tools gathered.

One job: the two steps every main agent (a chat Session, an Agent) takes before
its first round: :func:`check_settings` (a model and a key or local URL) and
:func:`build_registry` (built-in tools, the sub-agent tools, the user's tools).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentkit.errors import ConfigurationError
from agentkit.settings import Settings
from agentkit.tools.base import Tool, ToolRegistry

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["build_registry", "check_settings"]


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
    subagents: bool, extra: list[Tool], manager: Callable[[], SubAgentManager]
) -> ToolRegistry:
    """Return the main agent's tools: the built-in ones, the three sub-agent tools
    bound to ``manager()`` (called at each use) when ``subagents``, then ``extra``."""
    from agentkit.tools import base_tools

    registry = ToolRegistry(base_tools())
    if subagents:
        from agentkit.subagent.tools import make_main_tools

        for tool in make_main_tools(manager):
            registry.register(tool)
    for tool in extra:
        registry.register(tool)
    return registry
