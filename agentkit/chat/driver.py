"""The driver of a chat session: its rounds, one after another, on one thread.

One job: wait until work comes (a user message queued, a sub-agent ended: both
:meth:`RoundDriver.poke` it), then run round after round (agentkit.chat.rounds)
while work waits, and settle the conversation's state after each (docs/
architecture.md §9). A Session owns one driver and delegates to it; it is the
driver's :class:`DriverHost`. The driver owns what the rounds compute and touch:
the conversation's file, the state, the wake-up condition, the round number, the
round's cancel event, the idle event, the last round's result, the notes owed to
the model and whether completions are held back after a stop.

Lock order: the driver never holds its own lock while calling the manager, and
events are never published under it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentkit import events as ev
from agentkit.chat.explain import round_failure
from agentkit.chat.inbox import Inbox, RoundResult
from agentkit.chat.rounds import RoundPlan, owed_notes, plan_round, round_result, run_round
from agentkit.chat.store import ConversationFile
from agentkit.tools.base import ToolContext

if TYPE_CHECKING:
    from agentkit.chat.policy import ConversationPolicy
    from agentkit.conversation import Conversation, ConversationState
    from agentkit.engine_roles import Model
    from agentkit.output import OutputSpec
    from agentkit.settings import Settings
    from agentkit.subagent.budget import Meter
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.tools.registry import ToolRegistry

log = logging.getLogger("agentkit")
IDLE_RECHECK_SECONDS = 0.02  # wait_idle's pause while idle is set but work is waiting

__all__ = ["DriverHost", "RoundDriver"]


class DriverHost(Protocol):
    """What a RoundDriver reads from the session it drives (agentkit.chat.Session is
    one). Read at each use: settings and the model may change between rounds."""

    conversation: Conversation
    workspace: Path
    registry: ToolRegistry
    policy: ConversationPolicy
    budget: Meter | None  # the conversation's budget (docs/control-plane.md), if any

    @property
    def settings(self) -> Settings:
        """The session's current settings."""
        ...

    @property
    def model(self) -> Model:
        """The session's model client."""
        ...

    @property
    def closed(self) -> bool:
        """True once the session is closed; the driver then ends after the current
        round (whoever closes it sets that under ``driver.wake`` and notifies it)."""
        ...

    @property
    def transcript_path(self) -> Path:
        """The conversation's file."""
        ...

    def current_manager(self) -> SubAgentManager | None:
        """The sub-agent manager, or None before the first sub-agent (none is made)."""
        ...

    def system_prompt(self) -> str:
        """The main agent's system prompt (the first message of a new conversation)."""
        ...

    def publish(self, event: ev.Event) -> None:
        """Put ``event`` on the session's stream."""
        ...


class RoundDriver:
    """Runs a session's rounds on its own thread (started by :meth:`start`).

    Args:
        host: the session (see :class:`DriverHost`).
        notes: system notes owed to the model at the next round.

    Attributes:
        file: the conversation's file (saved through :meth:`save`).
        inbox: the queued user messages (putting one pokes the driver).
        wake: the condition the driver waits on between rounds.
        running: True while a round runs or its messages are being taken.
        hold_notifications: after a stop, completions wait for the next user message.
        notes: system notes owed to the model at the next round.
        round_cancel: set to cancel the current round.
        idle: set when no round runs, nothing is queued and no sub-agent works.
        last_result: the last round's result (set before anyone waiting hears of it).
        output: the typed result the current ``Agent.run`` asks of its rounds
            (agentkit.output), or None.
    """

    def __init__(self, host: DriverHost, *, notes: list[str]) -> None:
        self._host = host
        self.conversation = host.conversation
        self.file = ConversationFile(
            host.workspace, memory=host.settings.conversation_store == "memory"
        )
        self.notes = notes
        self.inbox = Inbox(self.poke)
        self.running = False
        self.hold_notifications = False
        self.round_cancel = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self.wake = threading.Condition(threading.Lock())
        self.last_result: RoundResult | None = None
        self.output: OutputSpec[Any] | None = None
        self._poked = False
        self._file_state: dict[str, Any] = {}
        self._thread = threading.Thread(
            target=self._drive, name=f"agentkit-session-{self.conversation.id}", daemon=True
        )

    def state(self) -> ConversationState:
        """``running`` (a round runs, or work for one is waiting), ``waiting_for_subagents``
        (no round; background sub-agents work) or ``idle`` (also once closed)."""
        if self._host.closed:
            return "idle"
        if self.running or self._work_waiting():
            return "running"
        manager = self._host.current_manager()
        # An agent whose end is still being recorded (an isolated one's copy saved and
        # counted) is announced once that is done: not idle before then.
        if manager is not None and (manager.running() or manager.any_finishing()):
            return "waiting_for_subagents"
        return "idle"

    def _work_waiting(self) -> bool:
        """True when a message is queued, or a completion or question waits to be announced."""
        if len(self.inbox):
            return True
        manager = self._host.current_manager()
        if manager is None or self.hold_notifications:
            return False
        return manager.has_unannounced() or manager.control.has_questions()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until :attr:`idle` is set and :meth:`state` agrees; False after
        ``timeout`` seconds. A message posted as the last round settled (after this
        driver found nothing queued, before it set ``idle``) is queued while ``idle`` is
        set: its round follows, and this waits for it too."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self.idle.wait(left):
                return False
            if self.state() == "idle":
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(IDLE_RECHECK_SECONDS)

    def save(self, conversation: Conversation | None = None) -> None:
        """Save the conversation, with the manager's sub-agent rows (coalesced: see
        ConversationFile; ``conversation``: the driver's, as the engine passes it)."""
        manager = self._host.current_manager()
        self.file.save(conversation or self.conversation, manager.records() if manager else None)

    def start(self) -> None:
        """Start the driver thread."""
        self._thread.start()

    def poke(self) -> None:
        """Wake the driver: work may be waiting."""
        with self.wake:
            self._poked = True
            self.wake.notify_all()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the driver thread to end."""
        self._thread.join(timeout)

    def _drive(self) -> None:
        while True:
            with self.wake:
                while not self._host.closed and not self._poked:
                    self.wake.wait()
                if self._host.closed:
                    return
                self._poked = False
            try:
                while not self._host.closed:  # round after round while work waits
                    # Running from the take on: messages taken are on their way into
                    # the conversation, and a reader must not see an idle session
                    # with neither them queued nor them in its messages.
                    self.round_cancel.clear()  # a cancel from here on stops this round
                    self.running = True
                    plan = self._plan()
                    if plan.is_empty():
                        self.running = False
                        self._settle()
                        break
                    self._round(plan)
            except BaseException:  # the driver must survive anything a round throws
                log.exception("conversation %s: a round failed unexpectedly", self.conversation.id)
                self.running = False
                self._settle()

    def _plan(self) -> RoundPlan:
        messages = self.inbox.take_all()
        if messages:
            self.hold_notifications = False
        manager = self._host.current_manager()
        plan = plan_round(manager, self.inbox, messages, hold=self.hold_notifications)
        if not plan.is_empty():
            plan.notes = self._take_notes()
        return plan

    def _take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        owed = owed_notes(self.conversation, self._host.settings.language)
        return owed + notes + self._host.policy.take_owed()  # hooks' context last

    def _context(self) -> ToolContext:
        """The tool context of the next round (its cancel, claims, file state, gate)."""
        host = self._host
        return ToolContext(
            workspace=host.workspace,
            settings=host.settings,
            cancel=self.round_cancel,
            claim_write=self._claim_write,
            file_state=self._file_state,
            owner=self.conversation.id,
            gate=host.policy.gate(),
        )

    def _round(self, plan: RoundPlan) -> None:
        self.conversation.rounds += 1  # saved: a reopened conversation numbers on
        number = self.conversation.rounds
        self.running = True
        self.idle.clear()
        if self._host.closed:  # closed between the plan and now: cancel at once
            self.round_cancel.set()
        self._set_state("running")
        host = self._host
        host.publish(ev.RoundStarted(round=number, trigger=plan.trigger))
        ctx = self._context()
        outcome, taken = run_round(
            plan,
            conversation=self.conversation,
            system_prompt=host.system_prompt,
            model=host.model,
            registry=host.registry,
            ctx=ctx,
            manager=host.current_manager,
            inbox=self.inbox,
            emit=host.publish,
            save=self.save,
            policy=host.policy,
            budget=host.budget,
            output=self.output,
        )
        manager = host.current_manager()
        result = round_result(
            outcome,
            number,
            self.conversation,
            manager,
            self.file,
            None if self.file.memory else host.transcript_path,  # memory: no file to name
            closing=host.closed,
        )
        self.last_result = result
        self.running = False
        # The state is settled before anyone hears the round ended; AllWorkDone follows
        # the round's RoundFinished.
        self._settle(
            lambda: host.publish(
                ev.RoundFinished(
                    round=number,
                    status=result.status,
                    final_text=result.final_text,
                    error=result.error,
                    background=result.background,
                    error_kind=result.error_kind,
                    explanation=explain(result, host.settings),
                )
            )
        )
        for pending in taken:
            if not pending.future.done():
                pending.future.set_result(result)

    def _settle(self, before_done: Callable[[], None] | None = None) -> None:
        """Set the state after a round or a completion (saved at once). ``before_done``
        (the round's own RoundFinished) goes out next; then, when the conversation
        just became idle, ``AllWorkDone``, and waiters of :attr:`idle` wake."""
        state = self.state()
        changed = state != "running" and self.conversation.state != state
        if state != "running":
            self._set_state(state)
            try:
                self.file.flush()  # the file says the state a caller is about to hear of
            except OSError as exc:
                log.info("conversation %s could not be saved: %s", self.conversation.id, exc)
        if before_done is not None:
            before_done()
        if state == "idle":
            if changed:
                self._host.publish(ev.AllWorkDone())
            self.idle.set()

    def _set_state(self, state: ConversationState) -> None:
        if self.conversation.state != state:
            self.conversation.state = state
            self._host.publish(ev.StateChanged(state=state))
            self.save()

    def _claim_write(self, path: Path) -> None:
        manager = self._host.current_manager()
        if manager is not None:
            manager.check_main_write(path)


def explain(result: RoundResult, settings: Any) -> str | None:
    """A failed round's explanation for people (agentkit.chat.explain), else None."""
    if result.status != "failed":
        return None
    return round_failure(
        result.error, result.error_kind, base_url=settings.base_url, model=settings.model
    )
