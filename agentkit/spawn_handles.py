"""What code holds of a sub-agent it started (agentkit.spawn): handles and the result.

One job: :class:`SubAgentHandle` (threads: ``result(timeout=None)``, ``cancel()``,
``message(text)``; for an isolated sub-agent ``changes()``, ``merge(dry_run=False)``,
``discard()``), :class:`AsyncSubAgentHandle` (asyncio: the same awaited, and
``events()``, that sub-agent's events from its start, replayed from the
conversation's numbered stream), and :class:`SubAgentResult`, how it ended: the seed's
blocking create_sub_agent result, typed. No wait borrows the event loop's default
executor: blocking calls run in a thread of their own, and async waits are fed by
the conversation's events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.subagent.contract import Status

if TYPE_CHECKING:
    from agentkit.chat.session import Session
    from agentkit.isolation.types import Changes, MergeReport
    from agentkit.subagent.state import SubAgent

__all__ = ["AsyncSubAgentHandle", "SubAgentHandle", "SubAgentResult"]


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

    # ------------------------------------------- an isolated sub-agent's copy
    def changes(self) -> Changes:
        """What it changed in its own copy of the workspace (saved first; also while it
        runs): ``Changes.files``, one ``FileChange(path, status, insertions,
        deletions, binary)`` per file, workspace-relative; ``Changes.summary()`` is
        ``{"files", "insertions", "deletions"}``; ``Changes.head`` the saved commit.

        Raises:
            agentkit.IsolationError: it is not isolated (shared), its copy was
                discarded, or git failed; the message says which.
        """
        from agentkit.chat import isolation

        return isolation.review(self._session, self.agent_id, max_chars=1).changes

    def merge(self, dry_run: bool = False) -> MergeReport:
        """Apply its changes onto the workspace as it is now: a three-way merge against
        its base, all or nothing, nothing committed (the main agent is told at its
        next round). ``dry_run``: only check, write nothing.

        Returns:
            a ``MergeReport``: ``status`` ``"merged"`` (``files`` written, or that
            would be), ``"conflicts"`` (nothing written; ``conflicts``: per file a
            ``Conflict(path, reason, workspace_change, sub_agent_change, detail)``)
            or ``"nothing_to_merge"``; ``base_moved``, ``dry_run``.

        Raises:
            agentkit.IsolationError: shared, still running, discarded or merged
                already, or git failed (nothing was written).
        """
        from agentkit.chat import isolation

        return isolation.merge(self._session, self.agent_id, dry_run=dry_run)

    def discard(self) -> None:
        """Drop its copy and branch, unmerged work included (the workspace is not
        touched; the main agent is told). Raises agentkit.IsolationError as
        :meth:`merge` (the copy stays when git fails)."""
        from agentkit.chat import isolation

        isolation.discard(self._session, self.agent_id)

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

    async def changes(self) -> Changes:
        """:meth:`SubAgentHandle.changes` in a thread of its own (git reads)."""
        from agentkit.agent_run import in_thread

        return await in_thread(self.sync.changes, name="agentkit-spawn")

    async def merge(self, dry_run: bool = False) -> MergeReport:
        """:meth:`SubAgentHandle.merge` in a thread of its own (git work)."""
        from agentkit.agent_run import in_thread

        return await in_thread(lambda: self.sync.merge(dry_run), name="agentkit-spawn")

    async def discard(self) -> None:
        """:meth:`SubAgentHandle.discard` in a thread of its own (git work)."""
        from agentkit.agent_run import in_thread

        await in_thread(self.sync.discard, name="agentkit-spawn")

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
