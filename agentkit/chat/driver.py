"""The driver of a chat session: its rounds, one after another, on one thread.

One job: wait until work comes (a user message queued, a sub-agent ended: both
:meth:`RoundDriver.poke` it), then run round after round (agentkit.chat.rounds)
while work waits, and settle the conversation's state after each (docs/
architecture.md §9). A Session owns one driver and delegates to it; the driver
owns what only the rounds touch: the wake-up condition, the round number, the
round's cancel event, the idle event, the notes owed to the model and whether
completions are held back after a stop.

Lock order: the driver never holds its own lock while calling the manager, and
events are never published under it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.chat.inbox import Inbox, RoundResult
from agentkit.chat.notes import owed_notes
from agentkit.chat.rounds import RoundPlan, plan_round, round_result, run_round
from agentkit.tools.base import ToolContext

if TYPE_CHECKING:
    from agentkit.chat.store import ConversationFile
    from agentkit.conversation import Conversation
    from agentkit.engine import Model
    from agentkit.settings import Settings
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.tools.base import ToolRegistry

log = logging.getLogger("agentkit")

__all__ = ["RoundDriver"]


class RoundDriver:
    """Runs a session's rounds on its own thread (started by :meth:`start`).

    Args:
        conversation: the session's conversation (rounds append to it).
        file: where it is saved; ``transcript_path`` names that file.
        workspace: the folder the tools work in.
        registry: the main agent's tools.
        notes: system notes owed to the model at the next round.
        settings, model, manager: return the session's current settings, its model
            client and its sub-agent manager (None before the first sub-agent).
        system_prompt: returns the main agent's system prompt (for a new conversation).
        state: returns the session's state (``idle``, ``running``,
            ``waiting_for_subagents``).
        closed: returns True once the session is closed; the driver then ends after
            the current round (whoever closes it sets that under :attr:`wake` and
            notifies it).
        emit: publishes an event on the session's stream.
        save: saves the conversation (with the manager's records).
        on_result: receives each round's result before anyone waiting hears of it.

    Attributes:
        inbox: the queued user messages (putting one pokes the driver).
        wake: the condition the driver waits on between rounds.
        running: True while a round runs.
        hold_notifications: after a stop, completions wait for the next user message.
        notes: system notes owed to the model at the next round.
        round_cancel: set to cancel the current round.
        idle: set when no round runs, nothing is queued and no sub-agent works.
    """

    def __init__(
        self,
        *,
        conversation: Conversation,
        file: ConversationFile,
        transcript_path: Path,
        workspace: Path,
        registry: ToolRegistry,
        notes: list[str],
        settings: Callable[[], Settings],
        model: Callable[[], Model],
        manager: Callable[[], SubAgentManager | None],
        system_prompt: Callable[[], str],
        state: Callable[[], str],
        closed: Callable[[], bool],
        emit: Callable[[ev.Event], None],
        save: Callable[[Conversation], None],
        on_result: Callable[[RoundResult], None],
    ) -> None:
        self.conversation = conversation
        self._file = file
        self._transcript_path = transcript_path
        self._workspace = workspace
        self._registry = registry
        self._settings = settings
        self._model = model
        self._manager = manager
        self._system_prompt = system_prompt
        self._state = state
        self._closed = closed
        self._emit = emit
        self._save = save
        self._on_result = on_result
        self.notes = notes
        self.inbox = Inbox(self.poke)
        self.running = False
        self.hold_notifications = False
        self.round_cancel = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self.wake = threading.Condition(threading.Lock())
        self._poked = False
        self._round_no = 0
        self._file_state: dict[str, Any] = {}
        self._thread = threading.Thread(
            target=self._drive, name=f"agentkit-session-{conversation.id}", daemon=True
        )

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
                while not self._closed() and not self._poked:
                    self.wake.wait()
                if self._closed():
                    return
                self._poked = False
            try:
                while not self._closed():  # round after round while work waits
                    plan = self._plan()
                    if plan.is_empty():
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
        plan = plan_round(self._manager(), self.inbox, messages, hold=self.hold_notifications)
        if not plan.is_empty():
            plan.notes = self._take_notes()
        return plan

    def _take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return owed_notes(self.conversation, self._settings().language) + notes

    def _round(self, plan: RoundPlan) -> None:
        self._round_no += 1
        number = self._round_no
        self.running = True
        self.idle.clear()
        self.round_cancel.clear()
        if self._closed():  # closed between the plan and now: cancel at once
            self.round_cancel.set()
        self._set_state("running")
        self._emit(ev.RoundStarted(round=number, trigger=plan.trigger))
        ctx = ToolContext(
            workspace=self._workspace,
            settings=self._settings(),
            cancel=self.round_cancel,
            claim_write=self._claim_write,
            file_state=self._file_state,
            owner=self.conversation.id,
        )
        outcome, taken = run_round(
            plan,
            conversation=self.conversation,
            system_prompt=self._system_prompt,
            model=self._model(),
            registry=self._registry,
            ctx=ctx,
            manager=self._manager,
            inbox=self.inbox,
            emit=self._emit,
            save=self._save,
        )
        result = round_result(
            outcome, number, self.conversation, self._manager(), self._file, self._transcript_path
        )
        self._on_result(result)
        self.running = False
        # The state is settled before anyone hears the round ended; AllWorkDone follows
        # the round's RoundFinished.
        self._settle(
            lambda: self._emit(
                ev.RoundFinished(
                    round=number,
                    status=result.status,
                    final_text=result.final_text,
                    error=result.error,
                    background=result.background,
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
        state = self._state()
        changed = state != "running" and self.conversation.state != state
        if state != "running":
            self._set_state(state)
            try:
                self._file.flush()  # the file says the state a caller is about to hear of
            except OSError as exc:
                log.info("conversation %s could not be saved: %s", self.conversation.id, exc)
        if before_done is not None:
            before_done()
        if state == "idle":
            if changed:
                self._emit(ev.AllWorkDone())
            self.idle.set()

    def _set_state(self, state: str) -> None:
        if self.conversation.state != state:
            self.conversation.state = state
            self._emit(ev.StateChanged(state=state))
            self._save(self.conversation)

    def _claim_write(self, path: Path) -> None:
        manager = self._manager()
        if manager is not None:
            manager.check_main_write(path)
