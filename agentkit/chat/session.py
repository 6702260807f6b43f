"""A living conversation with the main agent: the specification's chat setting.

One job: keep one conversation alive between rounds (docs/architecture.md §9).
Sending a message returns when the main agent's round ends, with its answer,
while background sub-agents keep working; a sub-agent that ends between rounds
starts a round by itself with the specification's user template (docs/
specification.md §2, §3); messages sent while a round runs queue and reach the
model at the next turn boundary; every event goes out on one ordered stream.

Threads: one *driver* thread per session runs the rounds, one after another.
``post``/``send`` only queue and wake it, so they never block on a round;
``cancel`` stops the current round only. The sub-agent manager's ``on_finished``
callback wakes the driver when a sub-agent ends (events are for observers only).
The driver and its rounds live in agentkit.chat.driver (the session is its
DriverHost); this module holds the conversation's API, agentkit.chat._lifecycle
its opening (claim, language, parts), its sub-agent manager and its closing,
agentkit.chat.session_control its controls from outside the rounds (stop, the
sub-agents, approval answers: the Session inherits them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.chat import _lifecycle
from agentkit.chat.assembly import Assembly, assemble
from agentkit.chat.eventbus import Numbered
from agentkit.chat.inbox import RoundResult
from agentkit.chat.notices import log_notices, start_notices
from agentkit.chat.policy import python_hooks
from agentkit.chat.runs import RunTasks
from agentkit.chat.session_control import SessionControl
from agentkit.chat.setup import check_message, offer_tool
from agentkit.chat.store import clean_title, default_title
from agentkit.conversation import Conversation, ConversationState, conversations_dir
from agentkit.engine_roles import Model
from agentkit.errors import Cancelled, ConfigurationError
from agentkit.language import settle_language
from agentkit.policy.hooks import PythonHook
from agentkit.settings import Settings
from agentkit.tools.base import Tool
from agentkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentkit.chat.approvals import Answerer
    from agentkit.chat.driver import RoundDriver
    from agentkit.chat.eventbus import EventBus
    from agentkit.chat.inbox import Inbox
    from agentkit.chat.policy import ConversationPolicy
    from agentkit.output import OutputSpec
    from agentkit.subagent.budget import Meter
    from agentkit.subagent.contract import Launcher
    from agentkit.subagent.manager import SubAgentManager

log = logging.getLogger("agentkit")

__all__ = ["Session"]

STATES = ("idle", "running", "waiting_for_subagents")


class Session(SessionControl):
    """One conversation with the main agent, alive between rounds.

    Args:
        workspace: the folder the tools work in (must exist).
        settings: Settings (default: read the environment).
        conversation_id: load and continue this saved conversation (its sub-agents
            that ended while nobody listened are told to the model at the next round).
        tools: extra tools: Tools (each offered to the agents its ``agents`` names)
            or plain functions ``func(params: Model[, ctx])`` (main agent).
        registry: use this tool registry as it is (``tools`` and ``subagents`` then
            only decide whether the sub-agent manager may be used); see
            :func:`build_registry`.
        model: an object with the engine's ``complete()`` (default: an LLMClient).
        subagents: offer the sub-agent tools (default True).
        launcher: how sub-agent workers start (default: local processes).
        prewarm: start the worker process server in the background now, so the first
            sub-agent starts fast (default True).
        hooks: Python hooks ``{event: func or [funcs]}`` (see :meth:`add_hook`).
        on_approval: answers approval requests (see :meth:`on_approval`).
        assembly: the parts to run with, as agentkit.chat.assembly.assemble made them
            (an Agent's, shared by its conversations and closed by it); ``workspace``,
            ``settings``, ``tools``, ``registry``, ``model``, ``subagents``,
            ``hooks``, ``instructions`` and ``builtin_tools`` are then not read.
            Default: the session assembles its own.
        instructions: text added to the main agent's system prompt, after
            agentkit's own and before AGENTS.md.
        builtin_tools: the names of the built-in tools the main agent is offered
            (None: all; agentkit.chat.setup.builtin_tool_names).

    Its controls from outside the rounds (cancel, stop_all, the sub-agents'
    rows and control, approve, on_approval) are agentkit.chat.session_control's.

    Attributes:
        notices: what a person must hear at the start (agentkit.chat.notices: the
            command sandbox cannot run, a cost cap that cannot trip); each is also
            logged once per process as a warning unless a front end showed it.

    Raises:
        ConfigurationError: no such folder, no model or key, a damaged file, a malformed
            hooks file.
        FileNotFoundError: an unknown conversation_id.
    """

    # Set when the conversation is claimed and the session started (chat._lifecycle).
    conversation: Conversation
    bus: EventBus
    policy: ConversationPolicy
    budget: Meter | None
    inbox: Inbox
    _driver: RoundDriver
    _release: Callable[[], None]

    def __init__(
        self,
        workspace: str | Path = ".",
        settings: Settings | None = None,
        *,
        conversation_id: str | None = None,
        tools: list[Tool | Callable[..., Any]] | None = None,
        registry: ToolRegistry | None = None,
        model: Model | None = None,
        subagents: bool = True,
        launcher: Launcher | None = None,
        prewarm: bool = True,
        hooks: dict[str, Any] | None = None,
        on_approval: Answerer | None = None,
        assembly: Assembly | None = None,
        instructions: str | None = None,
        builtin_tools: Iterable[str] | None = None,
    ) -> None:
        # An Agent's conversations share its parts (it closes them); alone, a session
        # assembles its own (agentkit.chat.assembly: every check happens there).
        self._owns_assembly = assembly is None
        if assembly is None:
            assembly = assemble(
                workspace,
                settings,
                tools=tools,
                model=model,
                registry=registry,
                subagents=subagents,
                hooks=hooks,
                instructions=instructions,
                builtin_tools=builtin_tools,
            )
            assembly.bind_manager(lambda: self.manager)
        self.assembly = assembly
        self.settings = assembly.settings
        self.workspace = assembly.workspace
        self.notices = start_notices(self.settings)  # said once, at the start
        log_notices(self.notices)
        self._subagents = assembly.subagents
        self._launcher = launcher
        self.registry = assembly.registry
        self._python_hooks = {event: list(found) for event, found in assembly.hooks.items()}
        self._closed = False
        self._manager: SubAgentManager | None = None
        self._manager_lock = threading.Lock()
        self.runs = RunTasks(self._saved_runs)  # continued runs' tasks, for people
        try:
            self._claim(conversation_id)
        except BaseException:
            self._close_assembly()  # its MCP sessions must not outlive a failed open
            raise
        try:
            self._start(
                conversation_id, prewarm and self._subagents and launcher is None, on_approval
            )
        except BaseException:
            self._release()  # the claim must not outlive a session that never started
            self._close_assembly()
            raise

    def _claim(self, conversation_id: str | None) -> None:
        """Load (``conversation_id``) or create the conversation and hold its lock file."""
        _lifecycle.claim(self, conversation_id)

    def settle_language(self, text: str) -> Settings:
        """Settle an ``auto`` language by ``text``, the conversation's first (a user
        message, a sub-agent's task started from code): agentkit.language. Kept in the
        conversation, used by its sub-agents; a settled one stays. Returns the
        Settings to use from now on."""
        with self._manager_lock:
            if self.settings.language == "auto":
                language = settle_language("auto", text)
                self.conversation.language = language
                self.settings = self.settings.model_copy(update={"language": language})
                if self._manager is not None:
                    self._manager.adopt(self.settings)
            return self.settings

    def _close_assembly(self) -> None:
        """Close the parts this session assembled itself (an Agent closes its own)."""
        if self._owns_assembly:
            self.assembly.close()

    def _start(self, conversation_id: str | None, prewarm: bool, answerer: Answerer | None) -> None:
        """The rest of ``__init__``, once the conversation is claimed."""
        _lifecycle.start(self, conversation_id, prewarm, answerer)

    # ------------------------------------------------------------- properties
    @property
    def id(self) -> str:
        """The conversation id (``conv_...``)."""
        return self.conversation.id

    @property
    def title(self) -> str:
        """The title: given with :meth:`rename`, else from the first user message."""
        return self.conversation.title or default_title(self.conversation.messages)

    @property
    def state(self) -> ConversationState:
        """``running`` (a round runs, or work for one is waiting), ``waiting_for_subagents``
        (no round; background sub-agents work) or ``idle`` (also once closed)."""
        return self._driver.state()

    @property
    def output(self) -> OutputSpec[Any] | None:
        """The typed result asked of the coming rounds (``Agent.run``'s
        ``output_type``: agentkit.output), or None (plain answers)."""
        return self._driver.output

    @output.setter
    def output(self, spec: OutputSpec[Any] | None) -> None:
        self._driver.output = spec

    @property
    def last_result(self) -> RoundResult | None:
        """The result of the last round that ended, or None before the first."""
        return self._driver.last_result

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def model(self) -> Model:
        """The LLM client (created on first use)."""
        return self.assembly.model

    def add_tool(self, tool: Tool) -> None:
        """Offer ``tool`` from now on to the agents its ``agents`` field names: the
        main agent's next request, and sub-agents created from now on (running ones
        keep their tools). Raises ToolNotImportable, registering nothing, for a tool
        meant for sub-agents that a worker could not import (agentkit.chat.setup.offer_tool)."""
        with self._manager_lock:
            self.settings = offer_tool(tool, self.registry, self.settings)
            if self._manager is not None:
                self._manager.settings = self.settings

    @property
    def manager(self) -> SubAgentManager:
        """The conversation's sub-agent manager (created on first use)."""
        with self._manager_lock:  # parallel create_sub_agent calls must share one manager
            if self._manager is None:
                self._manager = _lifecycle.make_manager(self)
            return self._manager

    def current_manager(self) -> SubAgentManager | None:
        """The sub-agent manager if the conversation has one yet (the first use of
        :attr:`manager` makes it), else None; nothing is created."""
        return self._manager

    def system_prompt(self) -> str:
        """The main agent's system prompt for this workspace and settings: the first
        message of a new conversation (agentkit.chat.setup.main_system_prompt; the
        application's instructions included)."""
        return self.assembly.system_prompt(self.settings)

    @property
    def transcript_path(self) -> Path:
        """``<workspace>/.agentkit/conversations/<conversation id>.json``."""
        return conversations_dir(self.workspace) / f"{self.conversation.id}.json"

    # --------------------------------------------------------------- messages
    def post(self, text: str) -> Future[RoundResult]:
        """Queue a user message without waiting; returns the future of the result of
        the round it is answered in. Between rounds it starts a round at once; during
        a round it reaches the model after the current tool results.

        Raises:
            ConfigurationError: an empty message, one larger than the context window
                leaves for it (agentkit.chat.setup.check_message), or one a
                UserPromptSubmit hook refused.
            Cancelled: the session is closed.
        """
        if isinstance(text, str) and text.strip():
            self.settle_language(text)  # before the first request (its system prompt) is built
        check_message(text, self.settings, self.request_overhead)
        context = self.policy.prompt(text)  # UserPromptSubmit hooks may refuse it
        self._driver.idle.clear()
        busy = self._driver.running
        pending, position = self.inbox.put(text, context)
        if busy:
            self._emit(ev.MessageQueued(text=text, position=position))
        return pending.future

    def request_overhead(self) -> int:
        """Tokens each request spends before the messages (system prompt, tools)."""
        return self.assembly.request_overhead(self.settings)

    def send(self, text: str, timeout: float | None = None) -> RoundResult:
        """Send a user message and wait for the end of the round that answers it
        (background sub-agents may still run: ``result.background``).

        Raises ConfigurationError (empty), Cancelled (session closed before the
        answer), TimeoutError after ``timeout`` seconds (the message stays queued).
        """
        return self.post(text).result(timeout)

    async def asend(self, text: str) -> RoundResult:
        """Asyncio form of :meth:`send`."""
        return await asyncio.wrap_future(self.post(text))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no round runs, nothing is queued and no sub-agent works;
        returns False after ``timeout`` seconds."""
        return self._driver.wait_idle(timeout)

    # ---------------------------------------------------------- hooks, title
    def add_hook(
        self, event: str, func: Callable[[dict[str, Any]], Any], matcher: str = ""
    ) -> None:
        """Call ``func(payload)`` at hook ``event`` as a command hook would run (its
        return value read as a command's JSON output; ``matcher`` as a hooks file's).
        Sub-agents' tool calls run command hooks only. ConfigurationError: no such event."""
        checked = python_hooks({event: [PythonHook(func, matcher)]})
        self._python_hooks.setdefault(event, []).extend(checked[event])

    def rename(self, title: str) -> None:
        """Set the conversation's title (one line, cut to 80 characters); saved now.

        Raises ConfigurationError (an empty title) or Cancelled (closed: no write after)."""
        cleaned = clean_title(title)
        if not cleaned:
            raise ConfigurationError("a title cannot be empty")
        with self._driver.wake:  # close() sets _closed under it, then makes its last save
            if self._closed:
                raise Cancelled("the conversation is closed; open it again to rename it")
            self.conversation.title = cleaned
        self._save(self.conversation)
        self._flush()

    def close(self) -> None:
        """End the conversation's life in this process (docs/specification.md §8.5):
        cancel the round, terminate every sub-agent, save, stop the driver. Queued
        messages never answered fail with Cancelled (kept for the next opening). Idempotent."""
        _lifecycle.close(self)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- events
    def subscribe(self, callback: Callable[[ev.Event], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for each later event, one at a time; returns the
        function that unsubscribes."""
        return self.bus.subscribe(callback)

    def events(self, after: int | None = None) -> AsyncIterator[Numbered]:
        """``async for item in session.events():`` each later event as ``item.event``
        with its number ``item.seq``; ``after`` replays kept events after that number
        first (a reconnecting client). Ends when the session closes."""
        return self.bus.aiter(after)

    def publish(self, event: ev.Event) -> None:
        """Put ``event`` on the conversation's stream (its conversation_id filled in)."""
        self._emit(event)

    def _emit(self, event: ev.Event) -> None:
        event = self.runs.enrich(event)  # a continued run's task and run number
        if not event.conversation_id:
            event = dataclasses.replace(event, conversation_id=self.conversation.id)
        self.bus.publish(event)

    # --------------------------------------------------------------- storage
    def _save(self, conversation: Conversation) -> None:
        self._driver.save(conversation)

    def _flush(self) -> None:
        self._driver.file.flush()

    def _save_now(self) -> None:
        self._save(self.conversation)
        self._flush()
