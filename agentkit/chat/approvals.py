"""The approval broker of one conversation: pending requests, their answers, their file.

One job: every tool call that waits for a person in this conversation, the main
agent's (through :meth:`ApprovalBroker.ask`, on the call's lane thread) and its
sub-agents' (arriving over the pipe: :meth:`ApprovalBroker.submit`), is held here
until it is answered (:meth:`ApprovalBroker.approve`), times out
(``approval_timeout_seconds``) or is withdrawn (its sub-agent ended, its round was
cancelled, the conversation closed). Front ends (the terminal, JSON lines, the web
page, an editor over ACP) only present and answer them: :meth:`subscribe` declares an
*answerer* and hands it each new request; without any answerer an ``ask`` is settled
at once by ``approvals_default`` ("no one to ask").

Durable: the pending requests and the conversation's ``allow_always`` rules are kept
in the conversation file (``approvals``: ``pending``, ``always``), written before
ApprovalRequested goes out, so a reconnecting client or a reopened conversation sees
them. A process that died with requests pending cannot answer them any more:
:meth:`restore` withdraws them when the conversation is opened again, and the main
agent's unanswered call gets a result that says so. Exactly once: each request ends
once (answered, timed out or withdrawn), under the broker's lock; a second answer is
refused with ApprovalError. Events are never published under that lock. The
requests' rows and the file's record are agentkit.chat.approval_records.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.chat.approval_records import (
    ANSWERS,
    Answerer,
    Pending,
    answer_call,
    answer_later,
    file_record,
    gone_error,
    request_row,
    requested_event,
    saved_always,
    saved_pending,
)
from agentkit.conversation import Conversation
from agentkit.errors import ApprovalError
from agentkit.policy.reasons import cap_reason
from agentkit.tools.gate import AskAnswer, AskRequest, say

if TYPE_CHECKING:
    from agentkit.settings import Settings

log = logging.getLogger("agentkit")

__all__ = ["ANSWERS", "Answerer", "ApprovalBroker", "answer_call", "answer_later"]

_ENDED_KEPT = 500  # how many ended ids are remembered, to say "already answered"


class ApprovalBroker:
    """Holds the approval requests of one conversation (see the module docstring).

    Args:
        conversation: the conversation (its ``approvals`` field is the file's record).
        settings: returns the session's current Settings (approvals_default,
            approval_timeout_seconds, language).
        emit: the session's event callback.
        save: writes the conversation file now (called outside the lock).
    """

    def __init__(
        self,
        conversation: Conversation,
        *,
        settings: Callable[[], Settings],
        emit: Callable[[ev.Event], None],
        save: Callable[[], None],
    ) -> None:
        self.conversation = conversation
        self._settings = settings
        self._emit = emit
        self._save = save
        self._lock = threading.Lock()
        self._pending: dict[str, Pending] = {}
        self._ended: dict[str, str] = {}
        self._answerers: list[Answerer] = []
        self._always = saved_always(conversation.approvals)

    # ------------------------------------------------------------ front ends
    def subscribe(self, answerer: Answerer, *, replay: bool = True) -> Callable[[], None]:
        """Declare ``answerer`` (see :data:`Answerer`); ``replay``: hand it the requests
        pending now first. Returns the function that unsubscribes."""
        with self._lock:
            self._answerers.append(answerer)
            waiting = [dict(p.row) for p in self._pending.values()] if replay else []
        for row in waiting:
            self._offer(answerer, row)

        def unsubscribe() -> None:
            with self._lock:
                if answerer in self._answerers:
                    self._answerers.remove(answerer)

        return unsubscribe

    @property
    def answerable(self) -> bool:
        """True while at least one answerer is subscribed."""
        with self._lock:
            return bool(self._answerers)

    def pending(self) -> list[dict[str, Any]]:
        """The requests waiting now, oldest first: ``request_id``, ``agent_id``,
        ``tool``, ``arguments``, ``reason``, ``key``, ``call_id``, ``created_at``,
        ``always`` (what allow_always allows, in words)."""
        with self._lock:
            return [dict(p.row) for p in self._pending.values()]

    def always(self) -> list[str]:
        """The keys allowed for the rest of the conversation (allow_always), sorted."""
        with self._lock:
            return sorted(self._always)

    def approve(self, request_id: str, decision: str, note: str | None = None) -> dict[str, Any]:
        """Answer request ``request_id`` with ``decision`` (:data:`ANSWERS`; ``note``:
        the reason, quoted to the model on a deny). Returns the request's row.

        Raises ApprovalError: ``invalid`` decision, ``unknown`` id, ``answered`` already
        (the first answer won), ``withdrawn`` (its agent ended, its round was cancelled).
        """
        if decision not in ANSWERS:
            raise ApprovalError(
                "invalid", f"decision must be allow, allow_always or deny, not {decision!r}"
            )
        with self._lock:
            waiting = self._pending.get(request_id)
        if waiting is None:
            raise self._gone(request_id)
        waiting.ready.wait(5)  # its ApprovalRequested is out first
        with self._lock:
            entry = self._pending.pop(request_id, None)
            if entry is None:
                raise self._gone(request_id)
            self._ended[request_id] = f"already answered ({decision})"
        entry.stop_timer()
        row = entry.row
        # One cap for every front end's note (terminal, jsonl, web, ACP, a callback).
        text = cap_reason(note.strip()) if isinstance(note, str) and note.strip() else None
        answer = AskAnswer("deny" if decision == "deny" else "allow", text, "user")
        if not entry.deliver(answer):
            why = (
                f"sub-agent {row['agent_id']} has ended"
                if row["agent_id"] is not None
                else "its call ended"
            )
            self._end(request_id, f"withdrawn: {why}", None)
            self._emit(
                ev.ApprovalWithdrawn(request_id=request_id, agent_id=row["agent_id"], reason=why)
            )
            raise ApprovalError(
                "withdrawn", f"approval {request_id} can no longer be answered: {why}"
            )
        self._end(
            request_id,
            f"already answered ({decision})",
            row["key"] if decision == "allow_always" else None,
        )
        self._emit(
            ev.ApprovalAnswered(
                request_id=request_id, agent_id=row["agent_id"], decision=decision, note=text
            )
        )
        return dict(row)

    # --------------------------------------------------------------- askers
    def ask(self, request: AskRequest, cancel: threading.Event) -> AskAnswer:
        """The main agent's call waits here until it is answered, or ``cancel`` is set
        (the request is then withdrawn and the answer says ``cancelled``)."""
        box: list[AskAnswer] = []
        done = threading.Event()

        def reply(answer: AskAnswer) -> bool:
            box.append(answer)
            done.set()
            return True

        request_id = self.submit(request, None, reply)
        while not done.wait(0.1):
            if cancel.is_set() and request_id is not None:
                language = self._settings().language
                self.withdraw([request_id], say(language, "cancelled_withdrawn"), by="cancelled")
        return box[0]

    def submit(
        self, request: AskRequest, agent_id: int | None, reply: Callable[[AskAnswer], bool]
    ) -> str | None:
        """Hold ``request`` of ``agent_id`` (None: the main agent) until it ends;
        ``reply(answer)`` is then called exactly once (it returns False when the asker is
        gone). Returns the request id, or None when it was settled at once (an earlier
        allow_always, or no one to ask)."""
        with self._lock:
            always = request.key in self._always
            answerers = list(self._answerers)
        if always:
            reply(AskAnswer("allow", None, "always"))
            return None
        settings = self._settings()
        row = request_row(request, agent_id)
        request_id = row["request_id"]
        asked = requested_event(row)
        if not answerers:  # no one to ask: approvals_default decides, at once
            default = settings.approvals_default
            self._emit(asked)
            note = "no one to ask" if default == "deny" else None
            self._emit(
                ev.ApprovalAnswered(
                    request_id=request_id,
                    agent_id=agent_id,
                    decision=default,
                    note=note,
                    by="default",
                )
            )
            reply(AskAnswer(default, note, "default"))
            return None
        entry = Pending(row, reply)
        with self._lock:
            self._pending[request_id] = entry
            self._persist()
        self._write()
        self._emit(asked)
        entry.ready.set()
        if settings.approval_timeout_seconds:
            entry.timer = threading.Timer(
                settings.approval_timeout_seconds, self._expire, (request_id,)
            )
            entry.timer.daemon = True
            entry.timer.start()
        for answerer in answerers:
            self._offer(answerer, dict(row))
        return request_id

    def withdraw(self, request_ids: list[str], reason: str, *, by: str = "withdrawn") -> list[str]:
        """Withdraw the given requests that are still pending (their askers hear
        ``deny`` with ``reason``, ``by`` ``withdrawn`` or ``cancelled``); returns those
        withdrawn."""
        taken: list[Pending] = []
        with self._lock:
            for request_id in request_ids:
                entry = self._pending.pop(request_id, None)
                if entry is not None:
                    taken.append(entry)
                    self._ended[request_id] = f"withdrawn: {reason}"
            if taken:
                self._persist()
        if not taken:
            return []
        self._write()
        for entry in taken:
            entry.stop_timer()
            entry.deliver(AskAnswer("deny", reason, by))
            row = entry.row
            self._emit(
                ev.ApprovalWithdrawn(
                    request_id=row["request_id"], agent_id=row["agent_id"], reason=reason
                )
            )
        return [e.row["request_id"] for e in taken]

    def withdraw_agent(self, agent_id: int, reason: str) -> list[str]:
        """Withdraw every pending request of sub-agent ``agent_id`` (it ended)."""
        with self._lock:
            ids = [i for i, p in self._pending.items() if p.row["agent_id"] == agent_id]
        return self.withdraw(ids, reason)

    def withdraw_all(self, reason: str) -> list[str]:
        """Withdraw every pending request (the conversation is closing)."""
        with self._lock:
            ids = list(self._pending)
        return self.withdraw(ids, reason)

    def restore(self) -> list[dict[str, Any]]:
        """At a reopening: withdraw the requests a dead process left in the file (an
        event each) and answer the main agent's calls among them in the conversation
        (the result says the process ended while it waited). Returns those rows."""
        rows = saved_pending(self.conversation.approvals)
        if not rows:
            return []
        language = self._settings().language
        reason = say(language, "restart_withdrawn")
        for row in rows:
            call_id, tool = row.get("call_id"), str(row.get("tool") or "?")
            if row.get("agent_id") is None and isinstance(call_id, str):
                text = say(language, "withdrawn", tool=tool, reason=reason)
                answer_call(self.conversation.messages, call_id, tool, f"Error: denied: {text}")
        with self._lock:
            for row in rows:
                self._ended[str(row.get("request_id"))] = f"withdrawn: {reason}"
            self._persist()
        for row in rows:
            agent_id = row.get("agent_id") if isinstance(row.get("agent_id"), int) else None
            self._emit(
                ev.ApprovalWithdrawn(
                    request_id=str(row.get("request_id")), agent_id=agent_id, reason=reason
                )
            )
        return rows

    # -------------------------------------------------------------- helpers
    def _offer(self, answerer: Answerer, row: dict[str, Any]) -> None:
        try:
            answer = answerer(row)
        except Exception:  # a front end's bug must not lose the request
            log.warning("approval answerer failed", exc_info=True)
            return
        if answer is None:
            return
        decision, note = answer if isinstance(answer, tuple) else (answer, None)
        try:
            self.approve(row["request_id"], decision, note)
        except ApprovalError as exc:
            log.info("approval answerer's answer refused: %s", exc)

    def _expire(self, request_id: str) -> None:
        with self._lock:
            entry = self._pending.pop(request_id, None)
            if entry is None:
                return
            self._ended[request_id] = "already answered (deny: no answer in time)"
            self._persist()
        self._write()
        entry.deliver(AskAnswer("deny", None, "timeout"))
        seconds = self._settings().approval_timeout_seconds
        self._emit(
            ev.ApprovalAnswered(
                request_id=request_id,
                agent_id=entry.row["agent_id"],
                decision="deny",
                note=f"no answer within {seconds:g} s",
                by="timeout",
            )  # fmt: skip
        )

    def _gone(self, request_id: str) -> ApprovalError:
        with self._lock:
            ended = self._ended.get(request_id)
        return gone_error(request_id, ended)

    def _end(self, request_id: str, how: str, always: str | None) -> None:
        with self._lock:
            self._ended[request_id] = how
            while len(self._ended) > _ENDED_KEPT:
                self._ended.pop(next(iter(self._ended)))
            if always:
                self._always.add(always)
            self._persist()
        self._write()

    def _persist(self) -> None:
        """Put the pending rows and the always rules in the conversation (lock held)."""
        self.conversation.approvals = file_record(self._pending.values(), self._always)

    def _write(self) -> None:
        try:
            self._save()
        except OSError as exc:  # the request still works in memory; say so
            log.warning(
                "conversation %s: approvals could not be saved: %s", self.conversation.id, exc
            )
