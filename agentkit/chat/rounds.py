"""One round of the main agent, and the turn-boundary rules inside it.

One job: run a round (docs/architecture.md §9) from its opening messages to the
main agent's answer. What enters the conversation and when:

* at the start of a round: the first system message's AGENTS.md and skills section,
  read again (agentkit.chat.setup.refresh_conventions); notes owed to the model (an
  interrupted request, sub-agents that ended unseen), then finished background
  sub-agents: when they alone start the round, with the specification's **user**
  template (the main agent was idle: docs/specification.md §2, §3); when a user
  message starts it, with the **system** template just before that message; then the
  user messages, in order;
* after each batch of tool results (:class:`SessionHooks`): sub-agents finished
  since, with the **system** template, then user messages queued meanwhile;
* an answer without tool calls ends the round; a completion or message that comes
  later starts the next one.

Every completion is taken from the manager exactly once (``take_finished``), so
it is announced exactly once whichever way it goes. A sub-agent's question
(ask_parent, docs/control-plane.md) goes the same ways, right after the completions
(``take_questions``: once). Each response is priced and counted against the
conversation's budget; once that is spent, the round ends before its next request
with a clear error (``budget_exhausted``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit import prompts, tracing
from agentkit.chat.inbox import RoundResult
from agentkit.chat.setup import refresh_conventions
from agentkit.conversation import usage_total
from agentkit.cost import Pricer, response_usage
from agentkit.engine import Engine
from agentkit.engine_roles import EngineResult, Hooks, Model, Step
from agentkit.llm.turns import AssistantTurn
from agentkit.subagent.notify import render_notifications, render_questions
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from pathlib import Path

    from agentkit.chat.inbox import Inbox, Pending
    from agentkit.chat.policy import ConversationPolicy
    from agentkit.chat.store import ConversationFile
    from agentkit.conversation import Conversation
    from agentkit.output import OutputSpec
    from agentkit.subagent.budget import Meter
    from agentkit.subagent.manager import SubAgentManager

__all__ = [
    "NOTIFY_SETTLE",
    "RoundPlan",
    "SessionHooks",
    "announce",
    "announce_questions",
    "owed_notes",
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
    sub-agents ``finished`` unannounced, those ``asking`` a question not announced
    yet, and the user ``messages`` taken."""

    notes: list[str] = field(default_factory=list)
    finished: list[Any] = field(default_factory=list)
    messages: list[Pending] = field(default_factory=list)
    asking: list[Any] = field(default_factory=list)

    @property
    def trigger(self) -> str:
        """``user`` when a user message opens the round, else ``notification``."""
        return "user" if self.messages else "notification"

    def is_empty(self) -> bool:
        """True when there is nothing to start a round with."""
        return not (self.finished or self.messages or self.asking)


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
    asking = manager.control.take_questions() if manager is not None and not hold else []
    return RoundPlan(finished=finished, messages=messages, asking=asking)


def announce(
    manager: SubAgentManager,
    agents: list[Any],
    role: str,
    emit: Callable[[ev.Event], None],
) -> dict[str, Any]:
    """Return the message announcing ``agents`` (``role`` "system" or "user", with the
    matching template) and emit a Notification event."""
    template = "notify_system" if role == "system" else "notify_user"
    text = render_notifications(
        manager.language,
        agents,
        template,
        manager.capped_summary,
        control=manager.settings.subagent_control,
    )
    emit(ev.Notification(agent_ids=[a.spec.agent_id for a in agents], role=role, text=text))
    return {"role": role, "content": text}


def announce_questions(
    manager: SubAgentManager, agents: list[Any], role: str, emit: Callable[[ev.Event], None]
) -> dict[str, Any]:
    """Return the message telling the main agent of ``agents``' questions (``role``
    "system" or "user", docs/control-plane.md) and emit a Notification event."""
    text = render_questions(manager.language, agents, role)
    emit(ev.Notification(agent_ids=[a.spec.agent_id for a in agents], role=role, text=text))
    return {"role": role, "content": text}


class SessionHooks(Hooks):
    """Main-agent hooks of a chat session (see the module docstring).

    Args:
        manager: returns the conversation's manager, or None before the first sub-agent.
        inbox: the session's queued user messages.
        taken: the round's list of taken messages (their futures get its result).
        emit: the session's event callback.
        policy: the conversation's approvals and hooks (Stop hooks), or None.
        budget: the conversation's budget meter, or None.
    """

    def __init__(
        self,
        manager: Callable[[], SubAgentManager | None],
        inbox: Inbox,
        taken: list[Pending],
        emit: Callable[[ev.Event], None],
        policy: ConversationPolicy | None = None,
        budget: Meter | None = None,
    ) -> None:
        self.manager = manager
        self.inbox = inbox
        self.taken = taken
        self.emit = emit
        self.policy = policy
        self.budget = budget
        self._pricer: Pricer | None = None

    def after_response(self, engine: Engine, turn: AssistantTurn) -> None:
        """Price the response into the conversation's stats; count it in the budget."""
        settings = engine.settings
        if self._pricer is None:
            self._pricer = Pricer(settings.model_prices)
        usage = response_usage(turn.usage)
        cost = self._pricer.price(settings.model, settings.base_url, usage)
        engine.conversation.stats.add_cost(usage.cached, cost)
        if self.budget is None:
            return
        manager = self.manager()
        if manager is not None:
            manager.control.count_session(usage.prompt + usage.completion, cost)
        else:
            self.budget.add(usage.prompt + usage.completion, cost)
            if self.budget.first_warning():
                used = self.budget.used()
                exhausted = self.budget.state() == "exhausted"
                self.emit(ev.BudgetWarning(scope="session", exhausted=exhausted, **used))

    def before_request(self, engine: Engine) -> Step:
        """End the round with a clear error once the conversation's budget is spent."""
        if self.budget is None or self.budget.state() != "exhausted":
            return Step()
        manager = self.manager()
        if manager is not None:
            manager.control.check_session_budget()  # running sub-agents wrap up
        language = engine.settings.language
        error = prompts.phrase(language, "session_budget_spent", **self.budget.shown(language))
        return Step(error=error, error_kind="budget_exhausted")

    def before_run(self, engine: Engine) -> None:
        """Nothing: the session keeps the conversation's state (agentkit.chat.driver)."""

    def after_run(self, engine: Engine, result: EngineResult) -> None:
        """Nothing: the session settles the state after the round."""

    def after_tool_results(self, engine: Engine) -> Step:
        """Announce completions (system template), then deliver queued user messages."""
        messages: list[dict[str, Any]] = []
        manager = self.manager()
        if manager is not None:
            done = manager.take_finished()
            if done:
                messages.append(announce(manager, done, "system", self.emit))
            asking = manager.control.take_questions()
            if asking:
                messages.append(announce_questions(manager, asking, "system", self.emit))
        for pending in self.inbox.take_all():
            self.taken.append(pending)
            self.emit(ev.UserMessage(text=pending.text, queued=True))
            messages.extend(user_messages(pending))
        return Step(messages=messages)

    def on_final_answer(self, engine: Engine, turn: AssistantTurn) -> Step:
        """An answer ends the round, unless a Stop hook sends the agent back to work;
        what comes later starts the next one."""
        if self.policy is not None:
            manager = self.manager()
            running = sorted(a.spec.agent_id for a in manager.running()) if manager else []
            again = self.policy.stop(turn.content, running)
            if again:
                return Step(messages=[{"role": "system", "content": again}])
        return Step(stop=True)


def user_messages(pending: Pending) -> list[dict[str, Any]]:
    """The messages a taken user message enters the conversation as: its own dict
    (``pending.message``, by identity), then what its UserPromptSubmit hooks added (a
    system message)."""
    messages = [pending.message]  # that dict: the inbox sees it saved
    if pending.context:
        messages.append({"role": "system", "content": pending.context})
    return messages


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
    policy: ConversationPolicy | None = None,
    budget: Meter | None = None,
    output: OutputSpec[Any] | None = None,
) -> tuple[EngineResult, list[Pending]]:
    """Open the round with ``plan`` and run the engine to the main agent's answer.

    Returns the engine's result and every user message taken into this round (the
    plan's and those delivered at turn boundaries), oldest first. Model errors give
    a ``failed`` result, never an exception; an unexpected exception is returned as
    ``failed`` too, with its type and text (the loop must not die with the round).
    ``policy``: the conversation's approvals and hooks (agentkit.chat.policy);
    ``output``: the typed result the current run asks for (agentkit.output), if any.
    """
    taken: list[Pending] = list(plan.messages)
    messages = conversation.messages
    if not messages:
        messages.append({"role": "system", "content": system_prompt()})
    refresh_conventions(conversation, registry, ctx.workspace, ctx.settings)  # once per round
    for note in plan.notes:
        messages.append({"role": "system", "content": note})
    current = manager()
    role = "system" if plan.messages else "user"
    if plan.finished and current is not None:
        messages.append(announce(current, plan.finished, role, emit))
    if plan.asking and current is not None:
        messages.append(announce_questions(current, plan.asking, role, emit))
    for pending in plan.messages:
        emit(ev.UserMessage(text=pending.text))
        messages.extend(user_messages(pending))
    conversation.final_text = None
    engine = Engine(
        model=model,
        registry=registry,
        conversation=conversation,
        ctx=ctx,
        hooks=SessionHooks(manager, inbox, taken, emit, policy=policy, budget=budget),
        emit=emit,
        save=save,
        output=output,
    )
    with tracing.round_span(conversation, ctx.settings, plan.trigger, plan.finished) as span:
        try:
            outcome = engine.run()
        except BaseException as exc:  # a bug below, even SystemExit, costs this round only
            conversation.error = f"{type(exc).__name__}: {exc}"
            outcome = EngineResult("failed", conversation.final_text, conversation.error)
        finally:
            engine.close()
        span.outcome(outcome)
    return outcome, taken


def round_result(
    outcome: EngineResult,
    number: int,
    conversation: Conversation,
    manager: SubAgentManager | None,
    file: ConversationFile,
    transcript_path: Path | None,
    *,
    closing: bool = False,
) -> RoundResult:
    """Save the conversation now and return the round's result; a failed save makes
    the round ``failed`` with the reason (nothing is lost silently). A round that did
    not answer is noted in ``conversation.round_ends`` (where it ended, and why).
    ``closing``: the session is closing, so its sub-agents end with it (§8.5) and
    none is named as working on in the background."""
    running = manager.running() if manager and not closing else []
    background = sorted(a.spec.agent_id for a in running)
    if outcome.status != "done":
        conversation.round_ends.append(
            {
                "round": number,
                "status": outcome.status,
                "error": outcome.error,
                "error_kind": outcome.error_kind,
                "background": background,
                "after": len(conversation.messages),
            }
        )
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
        background=background,
        stats={
            **conversation.stats.to_dict(),
            "usage_total": usage_total(conversation.stats, conversation.subagents),
        },
        transcript_path=transcript_path,
    )


def owed_notes(conversation: Conversation, language: str) -> list[str]:
    """Return the notes the next round owes its model about the conversation itself:
    that the last user message was never answered (its round was cancelled, or
    interrupted: stopped, or cut off when its process died). An empty list when the
    conversation ends with an answer or its last round failed (the user saw why)."""
    if conversation.error in ("cancelled", "interrupted") and _unanswered(conversation):
        return [prompts.phrase(language, "interrupted_request")]
    return []


def _unanswered(conversation: Conversation) -> bool:
    """The conversation ends inside a round: after a user message, a tool result, or a
    turn's tool calls, not after the model's answer (nor with no message at all)."""
    last = conversation.messages[-1] if conversation.messages else {}
    role = last.get("role")
    return role in ("user", "tool") or (role == "assistant" and bool(last.get("tool_calls")))
