"""Delegating from code: start a sub-agent of the current conversation and hold it.

One job: ``agent.spawn(task, ...)`` / ``await agent.aspawn(task, ...)`` (agentkit.agent)
start a sub-agent the way the main model's ``create_sub_agent`` does, through the
same path (the tool's argument rules, then ``SubAgentManager.create`` in the
background: the same limits, deliverables folder choice, records, events and
completion notification), and hand back a handle:

- :class:`SubAgentHandle` (threads): ``agent_id``, ``result(timeout=None)``,
  ``cancel()``, ``message(text)``;
- :class:`AsyncSubAgentHandle` (asyncio): ``await result()``, ``await cancel()``,
  ``await message(text)`` and ``events()``, that sub-agent's events from its start
  to its end, replayed from the conversation's numbered stream when it started
  earlier (agentkit.chat.eventbus).

The sub-agent runs in the background as far as the conversation is concerned:
waiting for it from code does not take its completion from the main agent, which is
told as of any background sub-agent (a round starts for it), and ``cancel`` and
``message`` are the user's control calls (agentkit.chat.control), so the main agent
hears of them at its next round. No wait borrows the event loop's default executor:
blocking calls run in a thread of their own, and async waits are fed by the
conversation's events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentkit import events as ev
from agentkit import prompts
from agentkit.errors import AgentkitError, Cancelled
from agentkit.subagent.contract import Status

if TYPE_CHECKING:
    from agentkit.chat.session import Session
    from agentkit.profiles import AgentProfile
    from agentkit.subagent.state import SubAgent

__all__ = [
    "AsyncSubAgentHandle",
    "SubAgentHandle",
    "SubAgentRefused",
    "SubAgentResult",
    "spawn_in",
]

_SUMMARY_CHARS = 30  # the seed's summary is 10-30 characters; one made from the task
_NOTE_TASK_CHARS = 1000  # of the task, in the note telling the main agent of the start


class SubAgentRefused(AgentkitError):
    """The sub-agent was not started: the refusal the model's create_sub_agent would
    get (a bad argument, an id in use, ``max_concurrent_subagents`` running, a folder
    held, the conversation's budget spent, a closing Agent).

    Attributes:
        error: the refusal text, word for word the tool's.
        result: the tool's JSON refusal (``{"success": false, "error": ...}``).
    """

    def __init__(self, error: str, result: dict[str, Any]) -> None:
        super().__init__(error)
        self.error = error
        self.result = result


@dataclass(frozen=True)
class SubAgentResult:
    """How a sub-agent ended: the seed's blocking create_sub_agent result, typed
    (docs/specification.md §1).

    Attributes:
        agent_id: its id in the conversation (1-99).
        status: ``completed``, ``failed``, ``timeout``, ``terminated`` or
            ``budget_exhausted``.
        summary: the task summary it was started with.
        message: the seed's one-line message (``子智能体1 已完成任务``...).
        deliverables_dir: its folder, workspace-relative (the one really used).
        deliverables_files: the files in it (capped: the last item then says how many
            more there are).
        result_summary: finish_task's summary (capped; the record holds the whole).
        sub_conversation_id: the id of its conversation (its record's).
        stats: the seed's stats (runtime_seconds, files_read, searches, web_pages,
            commands; tokens and cost_usd with the control plane).
        output: the typed result a profile's ``output_schema`` asked for (the value
            finish_task gave, checked; an instance of the profile's ``output_type``
            when it has one), else None.
        raw: the blocking result's JSON as the model would read it.
    """

    agent_id: int
    status: Status
    summary: str
    message: str
    deliverables_dir: str
    deliverables_files: tuple[str, ...]
    result_summary: str
    sub_conversation_id: str
    stats: dict[str, Any]
    output: Any = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def success(self) -> bool:
        """True when the sub-agent completed its task."""
        return self.status == "completed"

    @classmethod
    def from_blocking(
        cls, result: dict[str, Any], profile: dict[str, Any] | None = None
    ) -> SubAgentResult:
        """Build it from the blocking result's JSON (agentkit.subagent.results);
        ``profile``: the sub-agent's profile dict, whose ``output_type`` (if any) makes
        ``output`` an instance of that class (agentkit.output.typed_output)."""
        from agentkit.output import typed_output

        return cls(
            agent_id=int(result["agent_id"]),
            status=result["status"],
            summary=str(result.get("summary") or ""),
            message=str(result.get("message") or ""),
            deliverables_dir=str(result.get("deliverables_dir") or ""),
            deliverables_files=tuple(str(f) for f in result.get("deliverables_files") or ()),
            result_summary=str(result.get("result_summary") or ""),
            sub_conversation_id=str(result.get("sub_conversation_id") or ""),
            stats=dict(result.get("stats") or {}),
            output=typed_output(profile, result.get("result")),
            raw=result,
        )


# ------------------------------------------------------------------ starting
def spawn_in(
    session: Session,
    task: str,
    *,
    summary: str | None = None,
    profile: str | AgentProfile | None = None,
    deliverables_dir: str | None = None,
    timeout_seconds: int | None = None,
) -> SubAgentHandle:
    """Start a background sub-agent of ``session``'s conversation on ``task``, as
    create_sub_agent does, with the next free id.

    Args:
        session: the conversation (an Agent's current session).
        task: what the sub-agent is to do (non-empty).
        summary: its task summary (the seed asks 10-30 characters; at most 200);
            None: the task's first 30 characters.
        profile: an agent profile's name (as create_sub_agent's ``profile``) or an
            AgentProfile; None: none.
        deliverables_dir: its folder, workspace-relative; None: the default
            (``sub_agent_results/agent_{id}``, or the manager's choice when shared).
        timeout_seconds: 60-3600 (``subagent_timeout_min``/``_max``); None: the
            profile's, else ``Settings.subagent_default_timeout`` (600 s).

    Returns the SubAgentHandle once its worker started. Raises SubAgentRefused with
    the tool's refusal when it cannot start, Cancelled when the session is closed.
    """
    if session.closed:
        raise Cancelled("the conversation is closed")
    if isinstance(task, str) and task.strip():
        session.settle_language(task)  # the conversation's first text settles an auto one
    manager = session.manager
    profile_dict, timeout = _profile_and_timeout(session, profile, timeout_seconds)
    first = summary if summary is not None else _summary_of(task)
    arguments = _checked(session, task, first, deliverables_dir, timeout)
    before = session.bus.last_seq  # what events() replays from
    result, agent_id = session.outside_round(lambda: _create(session, profile_dict, arguments))
    refused = "status" not in result  # a worker that could not start has one: "failed"
    if refused:
        error = str(result.get("error") or "the sub-agent was not started")
        raise SubAgentRefused(error, result)
    # Nothing behind the main agent's back: it hears of the start at its next round.
    shown = (
        arguments["task"]
        if len(arguments["task"]) <= _NOTE_TASK_CHARS
        else (arguments["task"][:_NOTE_TASK_CHARS] + "...")
    )
    session.note(
        prompts.phrase(
            session.settings.language,
            "user_started",
            agent_id=agent_id,
            summary=arguments["summary"],
            task=shown,
        )
    )
    return SubAgentHandle(session, manager.agents[agent_id], result, first_seq=before)


def _create(
    session: Session, profile: dict[str, Any] | None, arguments: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """create_sub_agent in the background with the lowest free id: its JSON and the id.
    When another start (the model's, another thread's) took that id meanwhile, the
    next free one is tried."""
    while True:
        agent_id = _free_id(session)
        result = session.manager.create(
            agent_id=agent_id, run_in_background=True, profile=profile, **arguments
        )
        if "status" in result or agent_id == 0 or not _taken_by_other(session, agent_id):
            return result, agent_id


def _summary_of(task: str) -> str:
    line = " ".join(task.split()) if isinstance(task, str) else ""
    return line[:_SUMMARY_CHARS] or line


def _checked(
    session: Session, task: str, summary: str, deliverables_dir: str | None, timeout: int
) -> dict[str, Any]:
    """The arguments under create_sub_agent's rules (agentkit.subagent.inputs), or
    SubAgentRefused with its refusal."""
    from agentkit.subagent import inputs
    from agentkit.subagent.seed_tools import CreateSubAgentParams

    given = {
        "agent_id": 1,  # chosen later; the rules are the id's too
        "summary": summary,
        "task": task,
        "deliverables_dir": deliverables_dir,
        "timeout_seconds": timeout,
    }
    try:
        p = CreateSubAgentParams.model_validate(given)
    except ValidationError as exc:
        refusal = inputs.refusal("create_sub_agent", {})(exc, {}, session.settings.language)
        raise SubAgentRefused(refusal["error"], refusal) from None
    return {
        "summary": p.summary,
        "task": p.task,
        "deliverables_dir": p.deliverables_dir,
        "timeout_seconds": p.timeout_seconds,
    }


def _profile_and_timeout(
    session: Session, profile: str | AgentProfile | None, timeout: int | None
) -> tuple[dict[str, Any] | None, int]:
    """The profile's dict (a name looked up as create_sub_agent does) and the timeout:
    the one given, else the profile's, else ``subagent_default_timeout``."""
    default = session.settings.subagent_default_timeout
    if profile is None:
        return None, timeout if timeout is not None else default
    if isinstance(profile, str):
        from agentkit.subagent.seed_tools import _profile

        chosen = _profile(profile, (session.workspace, session.settings))
        if isinstance(chosen, str):
            error = f"profile {profile!r} cannot be used: {chosen}"
            raise SubAgentRefused(error, {"success": False, "error": error})
        profile = chosen
    if timeout is None:
        timeout = profile.timeout_seconds or default
    return profile.to_dict(), timeout


def _free_id(session: Session) -> int:
    """The lowest id (1-99) no sub-agent of the conversation has; 0 when none is free
    (admission then refuses it, naming the range)."""
    from agentkit.subagent.inputs import AGENT_ID_MAX, AGENT_ID_MIN

    used = session.manager.table.used_ids()
    return next((i for i in range(AGENT_ID_MIN, AGENT_ID_MAX + 1) if i not in used), 0)


def _taken_by_other(session: Session, agent_id: int) -> bool:
    return agent_id in session.manager.table.used_ids()


# ------------------------------------------------------------------- handles
class SubAgentHandle:
    """A sub-agent started from code (:meth:`agentkit.Agent.spawn`); thread-safe.

    Attributes:
        agent_id: its id in the conversation (1-99).
        deliverables_dir: its folder, workspace-relative (the one really used).
        sub_conversation_id: its conversation's id (its record's).
        started: create_sub_agent's background result (``status: running``).
    """

    def __init__(
        self, session: Session, agent: SubAgent, started: dict[str, Any], *, first_seq: int = 0
    ) -> None:
        self._session = session
        self._agent = agent
        self.agent_id: int = agent.spec.agent_id
        self.deliverables_dir: str = agent.spec.deliverables_dir
        self.sub_conversation_id: str = agent.spec.sub_conversation_id
        self.started = started
        self.first_seq = first_seq  # the stream's seq just before its start

    @property
    def done(self) -> bool:
        """True once it ended (whichever way)."""
        return self._agent.done.is_set()

    @property
    def status(self) -> Status:
        """Its status now: ``running`` or how it ended."""
        return self._agent.status

    def result(self, timeout: float | None = None) -> SubAgentResult:
        """Wait for its end and return how it ended. The main agent is still told of
        its completion. Raises TimeoutError after ``timeout`` seconds (it goes on)."""
        if not self._agent.done.wait(timeout):
            raise TimeoutError(f"sub-agent {self.agent_id} still runs after {timeout} s")
        return self._ended()

    def _ended(self) -> SubAgentResult:
        from agentkit.subagent.results import blocking_result

        manager = self._session.manager
        return SubAgentResult.from_blocking(
            blocking_result(self._agent, manager.settings, manager.workspace),
            self._agent.spec.extra.get("profile"),
        )

    def cancel(self) -> dict[str, Any]:
        """Terminate it (the user's terminate, agentkit.chat.control: the main agent is
        told at its next round); its files and record stay. Returns the seed's
        terminate_sub_agent JSON, or the refusal when it had ended already."""
        return self._session.terminate_subagent(self.agent_id)

    def message(self, text: str) -> dict[str, Any]:
        """Send it a steering message (the user's message_sub_agent: it reads it
        before its next model request; the main agent is told). Needs
        ``subagent_control``. Returns message_sub_agent's JSON: ``status``
        ``delivered``, or ``success`` false with why (control off, ended, too long)."""
        return self._session.message_subagent(self.agent_id, text)

    def __repr__(self) -> str:
        return f"<SubAgentHandle {self.agent_id} {self.status} {self.deliverables_dir!r}>"


class AsyncSubAgentHandle:
    """The asyncio twin of :class:`SubAgentHandle` (:meth:`agentkit.Agent.aspawn`):
    the same attributes; every wait is fed by the conversation's events or runs in a
    thread of its own, never in the loop's default executor."""

    def __init__(self, handle: SubAgentHandle) -> None:
        self.sync = handle
        self.agent_id = handle.agent_id
        self.deliverables_dir = handle.deliverables_dir
        self.sub_conversation_id = handle.sub_conversation_id
        self.started = handle.started

    @property
    def done(self) -> bool:
        """True once it ended (whichever way)."""
        return self.sync.done

    @property
    def status(self) -> Status:
        """Its status now: ``running`` or how it ended."""
        return self.sync.status

    async def result(self) -> SubAgentResult:
        """Wait for its end (fed by its SubAgentFinished event) and return how it
        ended; the main agent is still told. Cancelling the awaiting task leaves the
        sub-agent running (``await handle.cancel()`` ends it)."""
        from agentkit.agent_run import in_thread

        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not ended.done():
                ended.set_result(None)

        def on_event(event: ev.Event) -> None:
            if isinstance(event, ev.SubAgentFinished) and event.agent_id == self.agent_id:
                _call_soon(loop, settle)

        unsubscribe = self.sync._session.subscribe(on_event)
        try:
            if not self.sync.done:  # subscribed first: an end from now on is heard
                await ended
        finally:
            unsubscribe()
        return await in_thread(self.sync._ended, name="agentkit-spawn")

    async def cancel(self) -> dict[str, Any]:
        """:meth:`SubAgentHandle.cancel` in a thread of its own (a kill takes a while)."""
        from agentkit.agent_run import in_thread

        return await in_thread(self.sync.cancel, name="agentkit-spawn")

    async def message(self, text: str) -> dict[str, Any]:
        """:meth:`SubAgentHandle.message` in a thread of its own (it waits for the
        worker's receipt)."""
        from agentkit.agent_run import in_thread

        return await in_thread(lambda: self.sync.message(text), name="agentkit-spawn")

    async def events(self) -> AsyncIterator[ev.Event]:
        """``async for event in handle.events():`` this sub-agent's events (its
        SubAgentStarted, progress, messages, questions, budget warnings and its
        SubAgentFinished, the last) from its start, replayed when they came before
        the call (from the conversation's kept events), live after. Ends after its
        SubAgentFinished, or when the conversation closes."""
        session = self.sync._session
        async for item in session.bus.aiter(after=self.sync.first_seq):
            event = item.event
            if getattr(event, "agent_id", None) != self.agent_id:
                continue
            yield event
            if isinstance(event, ev.SubAgentFinished):
                return

    def __repr__(self) -> str:
        return f"<AsyncSubAgentHandle {self.agent_id} {self.status} {self.deliverables_dir!r}>"


def _call_soon(loop: asyncio.AbstractEventLoop, func: Callable[[], None]) -> None:
    """Run ``func`` in ``loop`` (from any thread); a loop already closed drops it."""
    try:
        loop.call_soon_threadsafe(func)
    except RuntimeError:  # the loop closed: nobody waits any more
        pass
