"""The main agent run to completion: the simple public API (docs/architecture.md §3).

    from agentkit import Agent, Settings
    with Agent(workspace="proj", settings=Settings(model="...")) as agent:
        result = agent.run("task", on_event=print)

``Agent.run`` sends one message and waits for *everything*: the round that
answers it and every round that the completions of its background sub-agents
start by themselves, until no sub-agent works. It is a thin layer over
:class:`agentkit.chat.Session`, the living conversation that a chat application
uses directly (``send`` returns at the end of the round). An Agent owns one
conversation at a time; a new conversation, loading another, ``close()`` and
leaving the ``with`` block terminate every running sub-agent (docs/
specification.md §8.5).

Map: this module is the Agent class (its parts, conversations, tools, hooks and
ending); its run methods (``run``, ``arun``, ``stream``) are agentkit.run_methods'
RunMethods, what a run returns (:class:`RunResult`) and the wait for a run's every
round live in agentkit.run_result, the asyncio form in agentkit.agent_run, ``spawn``
in agentkit.spawn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from agentkit import prompts
from agentkit.agent_run import in_thread
from agentkit.chat.assembly import assemble
from agentkit.chat.session import Session
from agentkit.conversation import Conversation
from agentkit.engine_roles import Model
from agentkit.errors import ConfigurationError
from agentkit.run_methods import RunMethods
from agentkit.run_result import RunResult
from agentkit.settings import Settings
from agentkit.tools.base import Agents, Tool, tool_from_function

if TYPE_CHECKING:
    from agentkit.profiles import AgentProfile
    from agentkit.spawn import AsyncSubAgentHandle, SubAgentHandle
    from agentkit.subagent.manager import SubAgentManager

# RunResult lives in agentkit.run_result; importable from here as before.
__all__ = ["Agent", "RunResult"]

# A user tool function: @agent.tool gives it back unchanged, its type kept.
_F = TypeVar("_F", bound=Callable[..., Any])


class Agent(RunMethods):
    """The main agent over one workspace, run task by task to completion.

    Args:
        workspace: folder the tools work in (it must exist).
        settings: Settings; default reads the environment.
        tools: extra tools: Tools (each offered to the agents its ``agents`` names)
            or plain functions ``func(params: Model[, ctx])`` (main agent).
        conversation_id: load and continue this saved conversation.
        model: an object with the engine's ``complete()`` (tests, custom clients);
            default is agentkit.llm.LLMClient(settings).
        subagents: offer the three sub-agent tools (default True).
        hooks: Python hooks ``{event: func or [funcs]}`` for every conversation of this
            Agent (see :meth:`add_hook`; docs/approvals.md §5).
        on_approval: answers approval requests (see :meth:`Session.on_approval
            <agentkit.chat.Session.on_approval>`); without one, an ``ask`` is settled by
            ``Settings.approvals_default`` (deny: "no one to ask").
        prewarm: start the sub-agent worker process server now, in the background,
            so the first sub-agent starts in tens of milliseconds (default False: it
            starts at the first create_sub_agent, about a second then, and a task
            that creates none never pays its 1-2 s of CPU; a chat session prewarms).
        tracer_provider: an OpenTelemetry ``TracerProvider`` that this process's
            agentkit spans go through (agentkit.tracing.configure; docs/tracing.md);
            default: the ``OTEL_*`` variables decide.
        instructions: the application's text added to the main agent's system
            prompt, after agentkit's own and before AGENTS.md (None: nothing).
        builtin_tools: the names of the built-in tools the main agent is offered
            (None: all of them; ``create_sub_agent``, ``terminate_sub_agent``,
            ``get_sub_agent_status`` and the control plane's are names like the others).

    Raises ConfigurationError for a missing workspace, model or key, a malformed hooks
    file or ``approvals`` value, an unknown ``builtin_tools`` name, and FileNotFoundError
    for an unknown conversation_id.
    """

    def __init__(
        self,
        workspace: str | Path = ".",
        settings: Settings | None = None,
        *,
        tools: list[Tool | Callable[..., Any]] | None = None,
        conversation_id: str | None = None,
        model: Model | None = None,
        subagents: bool = True,
        hooks: dict[str, Any] | None = None,
        on_approval: Callable[[dict[str, Any]], Any] | None = None,
        prewarm: bool = False,
        tracer_provider: Any = None,
        instructions: str | None = None,
        builtin_tools: Iterable[str] | None = None,
    ) -> None:
        # Every check and part in one place (agentkit.chat.assembly); one model client
        # and one tool registry for the Agent's life, whichever conversation it is on
        # (the sub-agent tools follow the current session).
        self.assembly = assemble(
            workspace,
            settings,
            tools=tools,
            model=model,
            subagents=subagents,
            hooks=hooks,
            tracer_provider=tracer_provider,
            eager_model=True,
            instructions=instructions,
            builtin_tools=builtin_tools,
        )
        self.assembly.bind_manager(lambda: self.manager)
        self.registry = self.assembly.registry
        self._answerers = [on_approval] if on_approval is not None else []
        self._closed = False
        self._run_lock = threading.Lock()
        self._cancel_asked = threading.Event()  # cancel() during the current run
        self.last_result: RunResult | None = None  # kept by a cancelled arun too
        try:
            self.session = self._open(conversation_id, prewarm=prewarm)
        except BaseException:
            self.assembly.close()  # its model client and MCP sessions end with it
            raise
        self.workspace = self.session.workspace

    @property
    def settings(self) -> Settings:
        """The Settings of this Agent's conversations (tools added since included)."""
        return self.assembly.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.assembly.settings = value

    def _open(self, conversation_id: str | None, prewarm: bool) -> Session:
        session = Session(
            self.assembly.workspace,
            conversation_id=conversation_id,
            prewarm=prewarm,
            assembly=self.assembly,
        )
        for answerer in self._answerers:
            session.on_approval(answerer)
        return session

    # ------------------------------------------------------------- the session
    @property
    def conversation(self) -> Conversation:
        """The current conversation (messages, state, stats)."""
        return self.session.conversation

    @property
    def manager(self) -> SubAgentManager:
        """The sub-agent manager of the current conversation (created on first use)."""
        return self.session.manager

    @property
    def model(self) -> Model:
        """The LLM client."""
        return self.assembly.model

    @property
    def transcript_path(self) -> Path:
        """``<workspace>/.agentkit/conversations/<conversation id>.json``."""
        return self.session.transcript_path

    @overload
    def tool(
        self,
        func: _F,
        *,
        name: str | None = None,
        description: str | None = None,
        counter: str | None = None,
        agents: Agents = "main",
    ) -> _F: ...

    @overload
    def tool(self, func: Tool) -> Tool: ...

    @overload
    def tool(
        self,
        func: None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        counter: str | None = None,
        agents: Agents = "main",
    ) -> Callable[[_F], _F]: ...

    def tool(self, func: Any = None, **kwargs: Any) -> Any:
        """Decorator registering a user tool ``func(params: Model[, ctx])``.

        Keyword arguments are :func:`agentkit.tools.base.tool_from_function`'s
        (``name``, ``description``, ``counter``, ``agents``: "main", "subagents" or
        "both"). Raises TypeError for a function without a pydantic parameter model,
        ToolNotImportable for a tool meant for sub-agents that a worker could not
        import (see :meth:`add_tool`). Returns ``func`` itself (its type kept), or,
        called with options only, the decorator.
        """

        def wrap(fn: Any) -> Any:
            if isinstance(fn, Tool):  # agent.tool(SOME_TOOL): it already says everything
                if kwargs:
                    raise TypeError("agent.tool(Tool(...)) takes no options: set them on the Tool")
                self.add_tool(fn)
            else:
                self.add_tool(tool_from_function(fn, **kwargs))
            return fn

        return wrap(func) if func is not None else wrap

    def add_tool(self, tool: Tool) -> None:
        """Offer ``tool`` from now on to the agents its ``agents`` field names: the
        main agent's next request, and sub-agents created from now on (they import it
        by reference). Raises ToolNotImportable, registering nothing, when it is for
        sub-agents and defined in ``__main__``, in a closure or as a lambda."""
        self.session.add_tool(tool)  # the session shares this Agent's registry
        # and the next conversation, whose language is settled again by its own text
        language = self.assembly.settings.language
        self.assembly.settings = self.session.settings.model_copy(update={"language": language})

    def add_hook(
        self, event: str, func: Callable[[dict[str, Any]], Any], matcher: str = ""
    ) -> None:
        """Call ``func(payload)`` at hook ``event`` in this and every later conversation
        (see :meth:`Session.add_hook <agentkit.chat.Session.add_hook>`): it gets the
        payload a command hook reads on stdin and may return a dict like a command's JSON
        output (``{"decision": "deny", "reason": ...}``) or None. Raises
        ConfigurationError for an unknown event."""
        self.session.add_hook(event, func, matcher)
        from agentkit.policy.hooks import PythonHook

        self.assembly.hooks.setdefault(event, []).append(PythonHook(func, matcher))

    def on_approval(self, answerer: Callable[[dict[str, Any]], Any]) -> None:
        """Answer approval requests with ``answerer(request)`` from now on, in this and
        every later conversation (see :meth:`Session.on_approval
        <agentkit.chat.Session.on_approval>`): it may return ``"allow"``,
        ``"allow_always"``, ``"deny"`` or ``("deny", reason)``, or None and answer later
        with ``agent.session.approve``."""
        self.session.on_approval(answerer)
        self._answerers.append(answerer)

    def _replace_session(self, conversation_id: str | None) -> None:
        self.session.close()  # its sub-agents end first (§8.5)
        self.session = self._open(conversation_id, prewarm=False)

    def new_conversation(self) -> str:
        """Terminate running sub-agents and start an empty conversation; returns its id."""
        self._replace_session(None)
        return self.conversation.id

    def load_conversation(self, conversation_id: str) -> Conversation:
        """Terminate running sub-agents and load a saved conversation to continue it.

        Raises FileNotFoundError when no such conversation is saved in this workspace,
        ConfigurationError when its file is damaged.
        """
        from agentkit.chat.store import load_conversation

        load_conversation(self.workspace, conversation_id)  # fail before closing anything
        self._replace_session(conversation_id)
        return self.conversation

    def spawn(
        self,
        task: str,
        *,
        summary: str | None = None,
        profile: str | AgentProfile | None = None,
        deliverables_dir: str | None = None,
        timeout_seconds: int | None = None,
        isolation: Literal["shared", "isolated"] | None = None,
    ) -> SubAgentHandle:
        """Start a sub-agent of the current conversation on ``task`` from code, as the
        model's create_sub_agent does in the background (its limits, records, events;
        the main agent is told of its start and its end). ``summary`` None: the task's
        start; ``profile``: a profile's name or an AgentProfile; ``deliverables_dir``
        None: the default folder; ``timeout_seconds`` 60-3600, None: the profile's,
        else ``subagent_default_timeout`` (600 s); ``isolation``: ``isolated`` (its
        own copy of the workspace) or ``shared``, None: as ``subagent_isolation``
        and the profile say (docs/isolation.md). Returns a SubAgentHandle
        (agentkit.spawn: ``result()``, ``cancel()``, ``message()``) once its worker
        started. Raises SubAgentRefused with the tool's refusal (a bad argument, too
        many running...), ConfigurationError for a closed Agent."""
        from agentkit.spawn import spawn_in

        if self._closed:
            raise ConfigurationError(prompts.phrase(self.settings.language, "closed"))
        return spawn_in(
            self.session,
            task,
            summary=summary,
            profile=profile,
            deliverables_dir=deliverables_dir,
            timeout_seconds=timeout_seconds,
            isolation=isolation,
        )

    async def aspawn(
        self,
        task: str,
        *,
        summary: str | None = None,
        profile: str | AgentProfile | None = None,
        deliverables_dir: str | None = None,
        timeout_seconds: int | None = None,
        isolation: Literal["shared", "isolated"] | None = None,
    ) -> AsyncSubAgentHandle:
        """:meth:`spawn` for asyncio, started in a thread of its own: the same
        arguments and errors; returns an AsyncSubAgentHandle (``await result()``,
        ``await cancel()``, ``await message()``, ``events()``)."""
        from agentkit.spawn import AsyncSubAgentHandle

        def start() -> SubAgentHandle:
            return self.spawn(
                task,
                summary=summary,
                profile=profile,
                deliverables_dir=deliverables_dir,
                timeout_seconds=timeout_seconds,
                isolation=isolation,
            )

        return AsyncSubAgentHandle(await in_thread(start, name="agentkit-spawn"))

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> Agent:
        """``agent = await Agent.open(workspace, settings, ...)``: construct an Agent
        (the same arguments and errors as ``Agent(...)``) in a thread of its own, so the
        event loop never waits for its files, imports and model client."""
        return await in_thread(lambda: cls(*args, **kwargs))

    async def aclose(self) -> None:
        """:meth:`close` in a thread of its own (ending sub-agents takes a while)."""
        await in_thread(self.close, name="agentkit-close")

    def cancel(self) -> None:
        """Ask the current run to stop (safe from any thread or a signal handler).

        Running tools are interrupted, sub-agents terminated, the conversation saved;
        run() then returns with status ``cancelled``, and the next run is told which
        sub-agents were stopped.
        """
        self._cancel_asked.set()
        self.session.stop_all()

    def close(self) -> None:
        """Terminate every sub-agent and release the model client. Idempotent; a
        closed Agent refuses new runs (ConfigurationError)."""
        self._closed = True
        self.session.close()
        self.assembly.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
