"""The parent side of the control plane: messages, questions, waits, usage (docs/control-plane.md).

One job: what passes between the main agent (or a person) and running sub-agents
besides create, status and terminate. One :class:`ControlPlane` per manager:

- **from workers** (their monitor threads, agentkit.subagent.supervisor): UsageReport
  (tokens and cost of each response, counted for the agent and the conversation's
  budget), BudgetWarning (an event), Question (the agent waits: its timeout clock is
  paused, SubAgentQuestion is emitted, the main agent is woken like a completion),
  QuestionClosed (withdrawn), Receipt (a Steer or Answer taken or refused) and
  SteerRead (messages now read); and each end (:meth:`ControlPlane.on_finished`: the
  question withdrawn, unread messages kept for the notification).
- **to workers**: :meth:`ControlPlane.message` (message_sub_agent) and :meth:`answer`
  (answer_sub_agent), delivered by agentkit.subagent.delivery; wait_for_sub_agents is
  agentkit.subagent.waits'. A message or answer counts
  as delivered only when the worker's Receipt says it took it; an agent that ended
  between the call and the delivery is reported as not delivered, with its status. A
  message over ``CONTROL_TEXT_MAX`` characters, or one that would overfill the agent's
  unread queue (``STEER_QUEUE_MAX`` messages, ``STEER_QUEUE_CHARS`` characters), is
  refused with the reason, whoever sends it.

Lock order: the manager's table (agentkit.subagent.table) guards every SubAgent
field used here, read and changed through its methods; nothing is sent or emitted
under its lock.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentkit import events as ev
from agentkit import prompts
from agentkit.subagent import delivery
from agentkit.subagent.budget import Limits, Meter
from agentkit.subagent.contract import (
    BudgetWarning,
    BudgetWrapUp,
    ControlMessage,
    Question,
    QuestionClosed,
    Receipt,
    Result,
    SteerRead,
    UsageReport,
)

if TYPE_CHECKING:
    from agentkit.settings import Settings
    from agentkit.subagent.contract import ParentMessage
    from agentkit.subagent.state import SubAgent
    from agentkit.subagent.table import SubAgentTable

__all__ = ["ControlPlane", "PendingQuestion", "session_meter"]


@dataclass
class PendingQuestion:
    """A sub-agent's question waiting for an answer: ``request`` (the worker's number),
    ``text``, and whether the main agent was told (``announced``, exactly once)."""

    request: int
    text: str
    announced: bool = False


def session_meter(settings: Any, tokens: int = 0, cost_usd: float = 0.0) -> Meter | None:
    """The conversation's budget meter from ``session_max_tokens`` and
    ``session_max_cost_usd`` (None when neither is set), starting at what the
    conversation spent before (a loaded one)."""
    limits = Limits(settings.session_max_tokens, settings.session_max_cost_usd)
    return Meter(limits, tokens, cost_usd) if limits else None


class Sender(Protocol):
    """Sends a parent message to an agent's worker (the Supervisor is one)."""

    def send(self, agent: SubAgent, message: ParentMessage) -> None: ...


class Manager(Protocol):
    """What the control plane reads of its SubAgentManager."""

    @property
    def settings(self) -> Settings: ...

    @property
    def language(self) -> str: ...

    @property
    def table(self) -> SubAgentTable: ...

    @property
    def supervisor(self) -> Sender: ...

    @property
    def emit(self) -> Callable[[ev.Event], None]: ...

    def running(self) -> list[SubAgent]: ...


class ControlPlane:
    """The control plane of one manager (see the module docstring).

    Args:
        manager: the SubAgentManager (its table, supervisor, emit).
        budget: the conversation's budget meter, or None.
    """

    def __init__(self, manager: Manager, budget: Meter | None = None) -> None:
        self.manager = manager
        self.table = manager.table
        self.budget = budget
        self.on_question: Any = None  # called with the agent when a question arrives
        self._refs = itertools.count(1)
        self._refs_lock = threading.Lock()
        self._session_spent = False
        self._spent_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """True with ``subagent_control`` on (the tools and the Session's methods)."""
        return bool(self.manager.settings.subagent_control)

    def phrase(self, key: str, **values: Any) -> str:
        """The message ``key`` of agentkit.prompts in the manager's language."""
        return prompts.phrase(self.manager.language, key, **values)

    def next_ref(self) -> int:
        """A new reference number for a Steer or Answer (unique in this plane)."""
        with self._refs_lock:
            return next(self._refs)

    # ------------------------------------------------------------ from workers
    def on_message(self, agent: SubAgent, message: ControlMessage) -> None:
        """Act on one control message from ``agent``'s worker (its monitor thread)."""
        if isinstance(message, UsageReport):
            self._usage(agent, message)
        elif isinstance(message, BudgetWarning):
            self.manager.emit(_budget_event(agent.spec.agent_id, message))
        elif isinstance(message, Question):
            self._question(agent, message)
        elif isinstance(message, QuestionClosed):
            self.close_question(agent, message.request, "timed_out")
        elif isinstance(message, Receipt):
            receipt = message
            self.table.update(agent, lambda a: _keep_receipt(a, receipt), notify=True)
        elif isinstance(message, SteerRead):
            refs = message.refs
            self.table.update(agent, lambda a: _forget_steers(a, refs))

    def on_result(self, agent: SubAgent, result: Result) -> None:
        """Keep the Result's typed result and its unread messages (before the end)."""
        self.table.update(agent, lambda a: _keep_result(a, result))

    def on_finished(self, agent: SubAgent) -> None:
        """The agent ended: its question is withdrawn, messages it never read kept."""
        question = self.table.update(agent, _keep_unread)
        if question is not None:
            self.close_question(agent, question.request, "agent_ended")

    def _usage(self, agent: SubAgent, report: UsageReport) -> None:
        self.table.update(agent, lambda a: _count_usage(a, report))
        self.count_session(report.prompt + report.completion, report.cost_usd)

    def count_session(self, tokens: int, cost_usd: float | None) -> None:
        """Count one response (the main agent's or a sub-agent's) against the
        conversation's budget: BudgetWarning once past the wrap-up point, and once it
        is spent the sub-agents' wrap-up (:meth:`check_session_budget`)."""
        budget = self.budget
        if budget is None:
            return
        budget.add(tokens, cost_usd)
        if budget.state() == "wrap_up" and budget.first_warning():
            self.manager.emit(ev.BudgetWarning(scope="session", exhausted=False, **budget.used()))
        self.check_session_budget()

    def session_spent(self) -> bool:
        """True once the conversation's budget is spent (only looks: sends nothing)."""
        return self.budget is not None and self.budget.state() == "exhausted"

    def check_session_budget(self) -> bool:
        """True once the conversation's budget is spent; the first time, every running
        sub-agent is told to wrap up and BudgetWarning (exhausted) is emitted."""
        if self.budget is None or self.budget.state() != "exhausted":
            return False
        with self._spent_lock:
            first, self._session_spent = not self._session_spent, True
        if first:
            for agent in self.manager.running():
                self.manager.supervisor.send(agent, BudgetWrapUp("session"))
            used = self.budget.used()
            self.manager.emit(ev.BudgetWarning(scope="session", exhausted=True, **used))
        return True

    def _question(self, agent: SubAgent, message: Question) -> None:

        def ask(agent: SubAgent) -> bool:  # False: it ended already
            if agent.status != "running":
                return False
            if agent.question is None:
                agent.pause_clock()
            agent.question = PendingQuestion(message.request, message.text)
            return True

        # notify: wait_for_sub_agents returns for it
        if not self.table.update(agent, ask, notify=True):
            return
        spec = agent.spec
        self.manager.emit(
            ev.SubAgentQuestion(agent_id=spec.agent_id, summary=spec.summary, question=message.text)
        )
        if self.on_question is not None:
            self.on_question(agent)

    def close_question(
        self, agent: SubAgent, request: int, outcome: str, answer: str | None = None, by: str = ""
    ) -> None:
        """End the pending question ``request`` (once): the clock runs again, and
        SubAgentAnswered says how (``answered``, ``timed_out``, ``agent_ended``)."""

        def close(agent: SubAgent) -> bool:  # False: not (or no longer) pending
            question = agent.question
            if question is None or question.request != request:
                return False
            agent.question = None
            agent.resume_clock()
            return True

        if not self.table.update(agent, close):
            return
        self.manager.emit(
            ev.SubAgentAnswered(agent_id=agent.spec.agent_id, answer=answer, outcome=outcome, by=by)
        )

    # --------------------------------------------------------- questions owed
    def take_questions(self) -> list[SubAgent]:
        """Running agents whose question the main agent was not told yet, marking them
        told (each question is announced exactly once)."""
        return self.table.take(_unannounced_question, _announce_question)

    def has_questions(self) -> bool:
        """True when a question waits to be announced."""
        return self.table.any(_unannounced_question)

    # ---------------------------------------------------------- to workers
    def message(self, agent_id: int, text: str, *, by: str = "main") -> dict[str, Any]:
        """message_sub_agent: queue ``text`` for a running sub-agent's next request.
        Returns ``{"success": true, "status": "delivered", ...}`` once its worker took
        it, else a refusal with its status (ended ones: the hint to continue it);
        agentkit.subagent.delivery.message."""
        return delivery.message(self, agent_id, text, by=by)

    def answer(self, agent_id: int, text: str, *, by: str = "main") -> dict[str, Any]:
        """answer_sub_agent: answer the agent's pending question. Delivered once its
        worker took the answer (its ask_parent returns it); else a refusal saying why
        (no question pending, it stopped waiting, it ended);
        agentkit.subagent.delivery.answer."""
        return delivery.answer(self, agent_id, text, by=by)


# What the control plane does to one sub-agent under the table's lock
# (SubAgentTable.update, .take, .any).
def _keep_receipt(agent: SubAgent, receipt: Receipt) -> None:
    agent.receipts[receipt.ref] = receipt


def _forget_steers(agent: SubAgent, refs: tuple[int, ...]) -> None:
    """Messages the worker read: no longer unread."""
    for ref in refs:
        agent.steers.pop(ref, None)


def _keep_result(agent: SubAgent, result: Result) -> None:
    """The Result's typed result, and the messages it says were never read."""
    agent.result = result.result
    for ref in result.unread:
        text = agent.steers.pop(ref, None)
        if text is not None:
            agent.unread.append(text)


def _keep_unread(agent: SubAgent) -> PendingQuestion | None:
    """At its end: every message still queued kept as unread; its pending question."""
    agent.unread.extend(agent.steers.values())
    agent.steers.clear()
    question: PendingQuestion | None = agent.question
    return question


def _count_usage(agent: SubAgent, report: UsageReport) -> None:
    agent.tokens += report.prompt + report.completion
    agent.cost_usd = report.cost_usd_total
    agent.usage_estimated = agent.usage_estimated or report.estimated


def _unannounced_question(agent: SubAgent) -> bool:
    return agent.status == "running" and agent.question is not None and not agent.question.announced


def _announce_question(agent: SubAgent) -> None:
    agent.question.announced = True


def _budget_event(agent_id: int, warning: BudgetWarning) -> ev.BudgetWarning:
    return ev.BudgetWarning(
        scope="subagent",
        agent_id=agent_id,
        exhausted=warning.exhausted,
        tokens=warning.tokens_used,
        max_tokens=warning.max_tokens,
        cost_usd=warning.cost_usd,
        max_cost_usd=warning.max_cost_usd,
    )
