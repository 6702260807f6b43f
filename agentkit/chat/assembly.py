"""One place assembles a main agent: its checks, model client, tools and hooks.

One job: turn a workspace and Settings into the parts a main agent runs with
(:class:`Assembly`), checking everything first (:func:`check`), so that an
:class:`agentkit.Agent`, a :class:`agentkit.chat.Session` and the front ends
(``agentkit run``, ``chat``, ``serve``, ``acp``) refuse the same bad input with the
same error, and each part is built once. An Agent assembles once and shares its
parts with each conversation it opens; a Session opened alone (a Workspace's,
a chat server's) assembles its own. The model client is made on first use (or at
once with ``eager_model``), in :attr:`Assembly.model` only.

The rules themselves (a model and a key, approval rules, hooks, the registry) are
agentkit.chat.setup's; this module decides their order and that they run once.
The blocking work of construction is all in :func:`assemble` (MCP servers start,
tool modules are imported, profile files read), so an asynchronous opener runs it
in a worker thread; the model client does no I/O before its first request.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.chat.setup import (
    as_tools,
    build_registry,
    check_builtin_tools,
    check_settings,
    main_system_prompt,
    offer_tool,
    request_overhead,
)
from agentkit.errors import ConfigurationError
from agentkit.settings import Settings
from agentkit.tools.base import Tool
from agentkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentkit.engine_roles import Model
    from agentkit.policy.hooks import PythonHook
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["Assembly", "assemble", "check", "check_folder"]


def check(
    workspace: str | Path | None, settings: Settings, *, model_given: bool = False
) -> Path | None:
    """The checks every main agent passes before anything is built, in this order:
    ``workspace`` is a folder (skipped for None: an editor names it later), then,
    unless the caller brings its own model client (``model_given``), the endpoint
    settings, approval rules and hooks setting (agentkit.chat.setup.check_settings).

    Returns the workspace resolved (None for None). Raises ConfigurationError, whose
    message names the setting (``Settings(model=...)``, ``approvals: ...``) or the folder.
    """
    root = None if workspace is None else check_folder(workspace)
    if not model_given:
        check_settings(settings)
    return root


def check_folder(workspace: str | Path) -> Path:
    """Return ``workspace`` resolved (``~`` expanded); raise ConfigurationError when it
    is not a folder."""
    given = Path(workspace).expanduser()
    if not given.is_dir():
        raise ConfigurationError(f"workspace {str(given)!r} is not a folder")
    return given.resolve()


@dataclass
class Assembly:
    """The parts of a main agent, built once by :func:`assemble`.

    Attributes:
        workspace: the workspace folder, resolved.
        settings: the Settings to use (those of tools for sub-agents included);
            :meth:`offer` replaces them.
        registry: the main agent's tools (built-in, sub-agent, the user's, MCP).
        subagents: whether the sub-agent tools are offered.
        hooks: the embedder's Python hooks by event, checked (a conversation
            starts with a copy of them).
        owns_model: the model client was made here (:meth:`close` closes it).
        owns_registry: the registry was built here (:meth:`close` closes it).
        instructions: the application's text added to the system prompt (after
            agentkit's own, before AGENTS.md), or None.
        built: how many times each part was made: ``check``, ``hooks``,
            ``registry``, ``model``; each is at most 1 for the assembly's life.
    """

    workspace: Path
    settings: Settings
    registry: ToolRegistry
    subagents: bool
    hooks: dict[str, list[PythonHook]]
    owns_model: bool
    owns_registry: bool
    instructions: str | None = None
    built: Counter[str] = field(default_factory=Counter)
    _model: Model | None = None
    _manager: Callable[[], SubAgentManager] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def model(self) -> Model:
        """The model client: the one given, else an LLMClient made on first use (under
        a lock: two threads asking at once share one)."""
        with self._lock:
            if self._model is None:
                from agentkit.llm import LLMClient

                self._model = LLMClient(self.settings)
                self.built["model"] += 1
            return self._model

    def bind_manager(self, source: Callable[[], SubAgentManager]) -> None:
        """Have the sub-agent tools use ``source()`` (called at each use: an Agent's
        follows its current conversation). The first binding stays: a Session given
        an Agent's assembly does not take the Agent's tools over."""
        if self._manager is None:
            self._manager = source

    def manager(self) -> SubAgentManager:
        """The sub-agent manager the sub-agent tools work on. Raises ConfigurationError
        before :meth:`bind_manager` (no conversation uses this assembly yet)."""
        if self._manager is None:
            raise ConfigurationError("no conversation uses these tools yet")
        return self._manager()

    def offer(self, tool: Tool) -> None:
        """Offer ``tool`` from now on (agentkit.chat.setup.offer_tool): registered for the
        main agent, by import reference in :attr:`settings` for sub-agents. Raises
        ToolNotImportable, changing nothing, for one a worker could not import."""
        self.settings = offer_tool(tool, self.registry, self.settings)

    def system_prompt(self, settings: Settings | None = None) -> str:
        """The main agent's system prompt (agentkit.chat.setup.main_system_prompt), with
        ``settings`` (a conversation's own: its language settled) or the assembly's."""
        chosen = settings or self.settings
        return main_system_prompt(self.workspace, chosen, self.subagents, self.instructions)

    def request_overhead(self, settings: Settings | None = None) -> int:
        """Tokens each request spends before its messages (system prompt, tool schemas),
        with ``settings`` (a conversation's own) or the assembly's."""
        chosen = settings or self.settings
        return request_overhead(
            self.workspace, chosen, self.subagents, self.registry, self.instructions
        )

    def close(self) -> None:
        """Close what was made here: the registry (its MCP sessions) and the model
        client. Idempotent; parts given by the caller are left to it."""
        if self.owns_registry:
            self.registry.close()
        with self._lock:
            model = self._model
        close = getattr(model, "close", None)
        if self.owns_model and callable(close):
            close()


def assemble(
    workspace: str | Path,
    settings: Settings | None = None,
    *,
    tools: list[Tool | Callable[..., Any]] | None = None,
    model: Model | None = None,
    registry: ToolRegistry | None = None,
    subagents: bool = True,
    hooks: Mapping[str, Any] | None = None,
    tracer_provider: Any = None,
    eager_model: bool = False,
    instructions: str | None = None,
    builtin_tools: Iterable[str] | None = None,
) -> Assembly:
    """Check and build a main agent's parts, each once.

    Args:
        workspace: the workspace folder (must exist).
        settings: Settings (default: read the environment).
        tools: extra tools: Tools (each offered to the agents its ``agents`` names)
            or plain functions ``func(params: Model[, ctx])`` (main agent).
        model: a model client to use as it is (then the endpoint settings are not
            checked and it is not closed here).
        registry: a tool registry to use as it is (``tools`` then only reach
            sub-agents); default: agentkit.chat.setup.build_registry.
        subagents: offer the sub-agent tools.
        hooks: Python hooks ``{event: func, PythonHook or a list of them}``.
        tracer_provider: an OpenTelemetry TracerProvider for this process's spans
            (agentkit.tracing.configure); the ``OTEL_*`` variables decide otherwise.
        eager_model: make the model client now, before the tools, rather than at
            its first use (its API key is then known to the redaction of errors
            from the start: an Agent asks for this).
        instructions: text added to the main agent's system prompt, after
            agentkit's own and before AGENTS.md (None: nothing).
        builtin_tools: the names of the built-in tools offered to the main agent
            (agentkit.chat.setup.builtin_tool_names; the sub-agent and control-plane
            tools among them); None: all of them. Not applied to a given ``registry``.

    Returns the Assembly; call :meth:`Assembly.bind_manager` before the sub-agent
    tools run. Raises ConfigurationError (:func:`check`, an unknown hook event, an
    unknown built-in tool name, instructions that are not text),
    ToolNotImportable (a tool for sub-agents that a worker could not import),
    TypeError (something that is not a tool).
    """
    from agentkit import tracing
    from agentkit.chat.policy import python_hooks
    from agentkit.tools.imported import worker_settings

    if tracer_provider is not None:
        tracing.configure(tracer_provider)
    tracing.configure_from_environment()  # once per process; off: imports nothing
    given = as_tools(tools or [])
    # Tools for sub-agents travel to workers by import reference, in Settings.tools;
    # one that cannot is refused here (ToolNotImportable), not at its first call.
    chosen = worker_settings(settings or Settings(), given)
    built: Counter[str] = Counter(check=1)
    root = check(workspace, chosen, model_given=model is not None)
    assert root is not None  # a workspace was given
    checked_hooks = python_hooks(hooks)
    built["hooks"] += 1
    builtin = check_builtin_tools(builtin_tools)
    if instructions is not None and not isinstance(instructions, str):
        raise ConfigurationError(f"instructions must be text, not {type(instructions).__name__}")
    owns_model = model is None
    if model is None and eager_model:
        from agentkit.llm import LLMClient

        model = LLMClient(chosen)  # before any tool (an MCP server) starts
        built["model"] += 1
    parts: Assembly | None = None

    def manager() -> SubAgentManager:  # the tools ask at each use, long after this
        assert parts is not None
        return parts.manager()

    owns_registry = registry is None
    if registry is None:
        registry = build_registry(subagents, given, manager, root, chosen, builtin)
        built["registry"] += 1
    parts = Assembly(
        workspace=root,
        settings=chosen,
        registry=registry,
        subagents=subagents,
        hooks=checked_hooks,
        owns_model=owns_model,
        owns_registry=owns_registry,
        instructions=instructions,
        built=built,
        _model=model,
    )
    return parts
