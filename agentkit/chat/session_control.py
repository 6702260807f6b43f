"""A Session's controls from outside its rounds: stop, steer sub-agents, answer approvals.

One job: what a person or an application does to a living conversation between or
during its rounds, apart from sending it messages: stop the current round
(``cancel``) or everything (``stop_all``); list, terminate, message, answer and
continue its sub-agents (the calls go to agentkit.chat.control); start work from code
so that ``wait_idle`` waits for it (``outside_round``); leave the main agent a note;
answer approval requests (the broker: agentkit.chat.approvals). agentkit.chat.session's
Session inherits :class:`SessionControl`; the methods read the session through
:class:`ControlHost`, what they use of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from agentkit.chat import control

if TYPE_CHECKING:
    from agentkit.chat.approvals import Answerer
    from agentkit.chat.driver import RoundDriver
    from agentkit.chat.policy import ConversationPolicy
    from agentkit.chat.runs import RunTasks
    from agentkit.conversation import Conversation
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["ControlHost", "SessionControl"]


class ControlHost(control.Session, Protocol):
    """What :class:`SessionControl`'s methods use of an agentkit.chat.Session."""

    conversation: Conversation
    policy: ConversationPolicy
    runs: RunTasks
    _driver: RoundDriver
    _manager: SubAgentManager | None


class SessionControl:
    """The Session's control methods (see the module docstring); a mixin of
    agentkit.chat.session.Session, which has what :class:`ControlHost` names."""

    # ------------------------------------------------------------- sub-agents
    def subagents(self: ControlHost) -> list[dict[str, Any]]:
        """Status rows of every sub-agent of the conversation (earlier runs' too):
        agent_id, summary, status, runtime_seconds, the four counters, last_action,
        deliverables_dir."""
        if self._manager is None:
            return self.runs.rows([dict(r) for r in self.conversation.subagents])
        return self.runs.rows(self._manager.records())

    def _saved_runs(self, agent_id: int) -> int:
        """The runs the conversation file's row of ``agent_id`` counts (1 without one)."""
        conversation = getattr(self, "conversation", None)  # set once it is claimed
        for row in conversation.subagents if conversation is not None else []:
            if row.get("agent_id") == agent_id and isinstance(row.get("runs"), int):
                return int(row["runs"])
        return 1

    # ---------------------------------------------------------------- control
    def cancel(self: ControlHost) -> bool:
        """Stop the current round (safe from any thread or a signal handler): its
        model request and tools are interrupted, a blocking sub-agent it waits for is
        terminated; background sub-agents go on. Returns False when no round ran."""
        if not self._driver.running:
            return False
        self._driver.round_cancel.set()
        if self._manager is not None:
            self._manager.wake()
        return True

    def stop_all(self: ControlHost) -> None:
        """Cancel the current round and terminate every running sub-agent; their ends
        are told to the model with the next user message (no round starts for them)."""
        self._driver.hold_notifications = True
        self._driver.round_cancel.set()
        if self._manager is not None:
            self._manager.wake()
            self._manager.terminate_all(interrupted=True)
        self._driver.poke()

    def terminate_subagent(self: ControlHost, agent_id: int) -> dict[str, Any]:
        """Terminate a sub-agent at the user's request; returns the seed's
        terminate_sub_agent JSON (docs/specification.md §1). The model is told at the
        next round (agentkit.chat.control)."""
        return control.terminate_subagent(self, agent_id)

    # ---------------------------------------- the control plane (chat/control.py)
    def message_subagent(self: ControlHost, agent_id: int, text: str) -> dict[str, Any]:
        """Send running sub-agent ``agent_id`` the user's message (agentkit.chat.control)."""
        return control.message_subagent(self, agent_id, text)

    def answer_subagent(self: ControlHost, agent_id: int, text: str) -> dict[str, Any]:
        """Answer sub-agent ``agent_id``'s pending question (agentkit.chat.control)."""
        return control.answer_subagent(self, agent_id, text)

    def continue_subagent(
        self: ControlHost, agent_id: int, task: str, timeout_seconds: int | None = None
    ) -> dict[str, Any]:
        """Run ended sub-agent ``agent_id`` again on ``task`` (agentkit.chat.control);
        :meth:`wait_idle` then waits for that run and the round announcing its end."""
        self._driver.idle.clear()  # work started outside a round (a trial saw idle stay)
        try:
            return control.continue_subagent(self, agent_id, task, timeout_seconds)
        finally:
            self._driver.poke()  # the state said again: waiting, or idle when refused

    def outside_round(self: ControlHost, start: Callable[[], Any]) -> Any:
        """Return ``start()``, work begun outside a round (a sub-agent started from
        code: agentkit.spawn), so that :meth:`wait_idle` waits for what it starts: idle
        is cleared first, the driver woken after to say the state again."""
        self._driver.idle.clear()
        try:
            return start()
        finally:
            self._driver.poke()

    def note(self: ControlHost, text: str) -> None:
        """Tell the main agent ``text`` (a system note) at the start of its next round."""
        self._driver.notes.append(text)

    # -------------------------------------------------------------- approvals
    def approve(
        self: ControlHost, request_id: str, decision: str, note: str | None = None
    ) -> dict[str, Any]:
        """Answer approval request ``request_id`` with ``allow``, ``allow_always`` (its
        rule, for the rest of the conversation; kept in its file) or ``deny`` (``note``:
        the reason, quoted to the model); returns its row (docs/approvals.md §2). Raises
        ApprovalError: an unknown, answered or withdrawn id, another decision."""
        return self.policy.broker.approve(request_id, decision, note)

    def pending_approvals(self: ControlHost) -> list[dict[str, Any]]:
        """The requests waiting for an answer, oldest first (ApprovalRequested's fields
        and ``created_at``)."""
        return self.policy.broker.pending()

    def on_approval(self: ControlHost, answerer: Answerer) -> Callable[[], None]:
        """Answer approval requests with ``answerer(row)`` from now on (each new one and
        those pending; it may return a decision, or None and :meth:`approve` later);
        returns the unsubscribe. Without any, ``approvals_default`` settles an ask."""
        return self.policy.on_approval(answerer)
