"""The sub-agents of one conversation, their lock and the condition others wait on.

One job: :class:`SubAgentTable` owns the records of a conversation's sub-agents
(this run's :class:`~agentkit.subagent.state.SubAgent` by id, the rows earlier runs
saved, the ids taken), the re-entrant lock that guards every field of those
records, and the condition that waiters (wait_for_sub_agents, a blocking create, a
message's receipt) wait on. The manager, the supervisor, the control plane, waits
and continuation change and read sub-agents only through its methods; none of them
takes the lock itself. Functions handed to a method run under the lock, so they
must not block, send to a worker or emit an event.

Lock order: the table's lock may be held while taking a sub-agent's clock lock, the
write claims' lock (agentkit.subagent.claims) or a deliverables folder's OS lock
(admission); never the other way round. See docs/architecture.md (threads).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from agentkit.errors import AgentkitError

if TYPE_CHECKING:
    from agentkit.settings import Settings
    from agentkit.subagent.state import SubAgent

__all__ = ["POLL_SECONDS", "SubAgentTable", "TableClosed"]

T = TypeVar("T")

POLL_SECONDS = 0.5
"""Longest a waiter sleeps before looking again (a change made without a notify,
or a cancel event set by a thread that does not notify, is seen this late)."""


class TableClosed(AgentkitError):
    """A sub-agent was added to a table that was closed (the conversation ends)."""


class SubAgentTable:
    """The sub-agents of one conversation (see the module docstring).

    Args:
        earlier: the rows earlier runs of the conversation saved, by agent id
            (agentkit.subagent.state.earlier_rows); their ids stay taken.
    """

    def __init__(self, earlier: Mapping[int, dict[str, Any]] | None = None) -> None:
        self._agents: dict[int, SubAgent] = {}
        self._earlier: dict[int, dict[str, Any]] = dict(earlier or {})
        self._used_ids: dict[int, str] = {
            i: str(r.get("summary", "")) for i, r in self._earlier.items()
        }
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._closed = False

    # ------------------------------------------------------------- reading
    @property
    def agents(self) -> Mapping[int, SubAgent]:
        """This run's sub-agents by id: a read-only live view (look at one agent's
        changing fields through :meth:`update`)."""
        return MappingProxyType(self._agents)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: no sub-agent is added any more."""
        return self._closed

    def get(self, agent_id: int) -> SubAgent | None:
        """This run's sub-agent ``agent_id``, or None."""
        with self._lock:
            return self._agents.get(agent_id)

    def find(self, agent_id: int) -> tuple[SubAgent | None, str | None]:
        """``(agent, None)`` for this run's sub-agent ``agent_id``; ``(None, status)``
        for one only an earlier run had (its saved status, default "completed");
        ``(None, None)`` for an unknown id. One look, under the lock."""
        with self._lock:
            agent = self._agents.get(agent_id)
            row = self._earlier.get(agent_id) if agent is None else None
            return agent, None if row is None else str(row.get("status", "completed"))

    def earlier_row(self, agent_id: int) -> dict[str, Any] | None:
        """The row an earlier run saved for ``agent_id`` (even when this run has one
        too), or None."""
        with self._lock:
            return self._earlier.get(agent_id)

    def used_ids(self) -> dict[int, str]:
        """A copy of the ids taken in the conversation (earlier runs' and this run's),
        with their summaries."""
        with self._lock:
            return dict(self._used_ids)

    def select(self, keep: Callable[[SubAgent], bool]) -> list[SubAgent]:
        """This run's sub-agents for which ``keep(agent)`` holds (judged under the
        lock), by id."""
        with self._lock:
            return [self._agents[i] for i in sorted(self._agents) if keep(self._agents[i])]

    def running(self) -> list[SubAgent]:
        """This run's sub-agents whose status is still "running", by id."""
        return self.select(lambda a: a.status == "running")

    def any(self, holds: Callable[[SubAgent], bool]) -> bool:
        """True when ``holds(agent)`` is true of one of this run's sub-agents."""
        with self._lock:
            return any(holds(a) for a in self._agents.values())

    def sub_conversation_ids(self) -> set[str]:
        """The sub-conversation ids of this run's sub-agents and earlier runs'."""
        with self._lock:
            rows = [r.get("sub_conversation_id") for r in self._earlier.values()]
            own = {a.spec.sub_conversation_id for a in self._agents.values()}
            return own | {str(r) for r in rows if r}

    def status(self, agent_ids: list[int], settings: Settings) -> dict[str, Any]:
        """get_sub_agent_status's result for ``agent_ids``
        (agentkit.subagent.results.status_result), read under the lock."""
        from agentkit.subagent.results import status_result

        with self._lock:
            return status_result(agent_ids, self._agents, self._earlier, settings)

    def conversation_rows(self) -> list[dict[str, Any]]:
        """One row per sub-agent for the conversation file: earlier runs' rows of ids
        this run has not used, then this run's (SubAgent.conversation_row), by id."""
        with self._lock:
            earlier = [r for i, r in sorted(self._earlier.items()) if i not in self._agents]
            ordered = [self._agents[i] for i in sorted(self._agents)]
            return earlier + [a.conversation_row() for a in ordered]

    # ------------------------------------------------------------ changing
    def add(self, agent: SubAgent) -> None:
        """Take ``agent``'s id (its summary kept for duplicate refusals) and count it
        as this run's, replacing an earlier run's agent of that id (a continued run).
        Raises TableClosed once the table is closed."""
        with self._lock:
            if self._closed:
                raise TableClosed("the conversation's sub-agent table is closed")
            self._used_ids[agent.spec.agent_id] = agent.spec.summary
            self._agents[agent.spec.agent_id] = agent

    def close(self) -> None:
        """Refuse every later :meth:`add` (the conversation ends). Idempotent."""
        with self._lock:
            self._closed = True

    def update(
        self, agent: SubAgent, change: Callable[[SubAgent], T], *, notify: bool = False
    ) -> T:
        """Return ``change(agent)``, run under the lock (it reads or changes the agent's
        fields in one step); ``notify``: wake the waiters after."""
        with self._lock:
            out = change(agent)
            if notify:
                self._changed.notify_all()
            return out

    def take(
        self, keep: Callable[[SubAgent], bool], mark: Callable[[SubAgent], Any]
    ) -> list[SubAgent]:
        """The sub-agents for which ``keep`` holds, by id, each passed to ``mark`` in
        the same step (so two callers never take the same one)."""
        with self._lock:
            taken = self.select(keep)
            for agent in taken:
                mark(agent)
            return taken

    def notify(self) -> None:
        """Wake every waiter so that it looks again (a cancel, an end)."""
        with self._lock:
            self._changed.notify_all()

    # ------------------------------------------------------------- waiting
    def wait_then(
        self,
        ready: Callable[[], bool],
        timeout: float,
        then: Callable[[bool], T],
        *,
        cancel: threading.Event | None = None,
    ) -> T:
        """Wait, under the lock, until ``ready()`` is true, ``timeout`` seconds passed
        or ``cancel`` is set; then return ``then(held)`` (``held``: ``ready()`` was
        true), still under the lock, so what ``ready`` saw cannot change before
        ``then`` acts on it. ``ready`` runs at the start, at each notify and at least
        every :data:`POLL_SECONDS`."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                held = ready()
                left = deadline - time.monotonic()
                if held or left <= 0 or (cancel is not None and cancel.is_set()):
                    return then(held)
                self._changed.wait(min(left, POLL_SECONDS))

    def wait_until(
        self, ready: Callable[[], bool], timeout: float, *, cancel: threading.Event | None = None
    ) -> bool:
        """Wait until ``ready()`` is true (judged under the lock), ``timeout`` seconds
        passed or ``cancel`` is set. Returns whether ``ready()`` held."""
        return self.wait_then(ready, timeout, lambda held: held, cancel=cancel)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lock over a compound step that must see no change between its
        checks and its :meth:`add` (admission: the limits, then the reservation).
        Re-entrant; do not block on a worker or another thread inside."""
        with self._lock:
            yield
