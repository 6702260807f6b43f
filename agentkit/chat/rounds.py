"""One round of the main agent, and the turn-boundary rules inside it.

One job: run a round (docs/architecture.md §9) from its opening messages to the
main agent's answer. What enters the conversation and when:

* at the start of a round: notes owed to the model (an interrupted request, sub-agents
  that ended unseen), then finished background sub-agents: when they alone start the
  round, with the specification's **user** template (the main agent was idle: docs/
  specification.md §2, §3); when a user message starts it, with the **system**
  template just before that message; then the user messages, in order;
* after each batch of tool results (:class:`SessionHooks`): sub-agents finished
  since, with the **system** template, then user messages queued meanwhile;
* an answer without tool calls ends the round; a completion or message that comes
  later starts the next one.

Every completion is taken from the manager exactly once (``take_finished``), so
it is announced exactly once whichever way it goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.chat.inbox import RoundResult
from agentkit.engine import Engine, EngineResult, Hooks, Model, Step
from agentkit.llm.turns import AssistantTurn
from agentkit.subagent.notify import render_notifications
from agentkit.tools.base import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from pathlib import Path

    from agentkit.chat.inbox import Inbox, Pending
    from agentkit.chat.store import ConversationFile
    from agentkit.conversation import Conversation
    from agentkit.subagent.manager import SubAgentManager

__all__ = [
    "NOTIFY_SETTLE",
    "RoundPlan",
    "SessionHooks",
    "announce",
    "plan_round",
    "round_result",
    "run_round",
]

NOTIFY_SETTLE = 0.3
"""At most this many seconds a completion waits for sub-agents that have already called
finish_task (their ends are on the way), so that sub-agents ending together share one
notification (docs/specification.md §2). No wait when none is finishing."""


@dataclass
class RoundPlan:
    """What opens a round: ``notes`` (system messages owed to the model), the
    sub-agents ``finished`` unannounced, and the user ``messages`` taken."""

    notes: list[str] = field(default_factory=list)
    finished: list[Any] = field(default_factory=list)
    messages: list[Pending] = field(default_factory=list)

    @property
    def trigger(self) -> str:
        """``user`` when a user message opens the round, else ``notification``."""
        return "user" if self.messages else "notification"

    def is_empty(self) -> bool:
        """True when there is nothing to start a round with."""
        return not (self.finished or self.messages)


def plan_round(
    manager: SubAgentManager | None, inbox: Inbox, messages: list[Pending], *, hold: bool
) -> RoundPlan:
    """Return what the next round opens with: the user ``messages`` already taken, and
    the sub-agents that ended unannounced (none while ``hold``: after a stop, they
    wait for the user's next message). When completions alone would open the round,
    sub-agents already calling finish_task get up to NOTIFY_SETTLE seconds to join,
    so that agents ending together share one message; messages that arrive
    meanwhile join too."""
    finished: list[Any] = []
    if manager is not None and not hold:
        finished = manager.take_finished()
        if finished and not messages and manager.any_finishing():
            deadline = time.monotonic() + NOTIFY_SETTLE
            while manager.any_finishing() and time.monotonic() < deadline:
                time.sleep(0.005)
            finished += manager.take_finished()
            messages = messages + inbox.take_all()
    return RoundPlan(finished=finished, messages=messages)


def announce(
    manager: SubAgentManager,
    agents: list[Any],
    role: str,
    emit: Callable[[ev.Event], None],
) -> dict[str, Any]:
    """Return the message announcing ``agents`` (``role`` "system" or "user", with the
    matching template) and emit a Notification event."""
    template = "notify_system" if role == "system" else "notify_user"
    text = render_notifications(manager.language, agents, template, manager.capped_summary)
    emit(ev.Notification(agent_ids=[a.spec.agent_id for a in agents], role=role, text=text))
    return {"role": role, "content": text}


class SessionHooks(Hooks):
    """Main-agent hooks of a chat session (see the module docstring).

    Args:
        manager: returns the conversation's manager, or None before the first sub-agent.
        inbox: the session's queued user messages.
        taken: the round's list of taken messages (their futures get its result).
        emit: the session's event callback.
    """

    def __init__(
        self,
        manager: Callable[[], SubAgentManager | None],
        inbox: Inbox,
        taken: list[Pending],
        emit: Callable[[ev.Event], None],
    ) -> None:
        self.manager = manager
        self.inbox = inbox
        self.taken = taken
        self.emit = emit

    def after_tool_results(self, engine: Engine) -> Step:
        """Announce completions (system template), then deliver queued user messages."""
        messages: list[dict[str, Any]] = []
        manager = self.manager()
        if manager is not None:
            done = manager.take_finished()
            if done:
                messages.append(announce(manager, done, "system", self.emit))
        for pending in self.inbox.take_all():
            self.taken.append(pending)
            self.emit(ev.UserMessage(text=pending.text, queued=True))
            messages.append({"role": "user", "content": pending.text})
        return Step(messages=messages)

    def on_final_answer(self, engine: Engine, turn: AssistantTurn) -> Step:
        """An answer ends the round; what comes later starts the next one."""
        return Step(stop=True)


def run_round(
    plan: RoundPlan,
    *,
    conversation: Conversation,
    system_prompt: Callable[[], str],
    model: Model,
    registry: ToolRegistry,
    ctx: ToolContext,
    manager: Callable[[], SubAgentManager | None],
    inbox: Inbox,
    emit: Callable[[ev.Event], None],
    save: Callable[[Conversation], None],
) -> tuple[EngineResult, list[Pending]]:
    """Open the round with ``plan`` and run the engine to the main agent's answer.

    Returns the engine's result and every user message taken into this round (the
    plan's and those delivered at turn boundaries), oldest first. Model errors give
    a ``failed`` result, never an exception; an unexpected exception is returned as
    ``failed`` too, with its type and text (the loop must not die with the round).
    """
    taken: list[Pending] = list(plan.messages)
    messages = conversation.messages
    if not messages:
        messages.append({"role": "system", "content": system_prompt()})
    for note in plan.notes:
        messages.append({"role": "system", "content": note})
    current = manager()
    if plan.finished and current is not None:
        role = "system" if plan.messages else "user"
        messages.append(announce(current, plan.finished, role, emit))
    for pending in plan.messages:
        emit(ev.UserMessage(text=pending.text))
        messages.append({"role": "user", "content": pending.text})
    conversation.final_text = None
    engine = Engine(
        model=model,
        registry=registry,
        conversation=conversation,
        ctx=ctx,
        hooks=SessionHooks(manager, inbox, taken, emit),
        emit=emit,
        save=save,
        manage_state=False,
    )
    try:
        outcome = engine.run()
    except BaseException as exc:  # a bug below, even SystemExit, costs this round only
        conversation.error = f"{type(exc).__name__}: {exc}"
        outcome = EngineResult("failed", conversation.final_text, conversation.error)
    finally:
        engine.close()
    return outcome, taken


def round_result(
    outcome: EngineResult,
    number: int,
    conversation: Conversation,
    manager: SubAgentManager | None,
    file: ConversationFile,
    transcript_path: Path,
) -> RoundResult:
    """Save the conversation now and return the round's result; a failed save makes
    the round ``failed`` with the reason (nothing is lost silently)."""
    file.save(conversation, manager.records() if manager else None)
    save_error = None
    try:
        file.flush()
    except OSError as exc:
        save_error = f"the conversation could not be saved: {exc}"
    return RoundResult(
        conversation_id=conversation.id,
        round=number,
        status="failed" if save_error else outcome.status,
        final_text=outcome.final_text,
        error=outcome.error or save_error,
        error_kind=outcome.error_kind,
        background=sorted(a.spec.agent_id for a in manager.running()) if manager else [],
        stats=conversation.stats.to_dict(),
        transcript_path=transcript_path,
    )
