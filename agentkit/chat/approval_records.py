"""Approval requests as records: a request's row, its waiting entry, the file's record.

One job: the data of agentkit.chat.approvals' broker, apart from its flow (ask,
answer, time out, withdraw). A request's *row* is what front ends see and what the
conversation file keeps (``approvals``: ``pending``, ``always``); a :class:`Pending`
entry is a row waiting for its answer, with the asker's reply; an ended request's id
is refused in words (:func:`gone_error`); a main agent's call left unanswered by a
process that died gets its tool result in the messages (:func:`answer_call`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentkit import events as ev
from agentkit.conversation import utc_now
from agentkit.errors import ApprovalError
from agentkit.tools.gate import AskAnswer, AskRequest, always_covers

log = logging.getLogger("agentkit")

__all__ = [
    "ANSWERS",
    "Answerer",
    "Pending",
    "answer_call",
    "answer_later",
    "file_record",
    "gone_error",
    "request_row",
    "requested_event",
    "saved_always",
    "saved_pending",
]

ANSWERS = ("allow", "allow_always", "deny")
"""The decisions a person may give (Session.approve)."""

Answerer = Callable[[dict[str, Any]], Any]
"""A front end's ``answerer(request)``: called with each new request's row (on the
asking thread: it must not block long); it may return a decision (``"allow"``,
``"allow_always"``, ``"deny"``, or ``(decision, note)``) or None and answer later."""


@dataclass
class Pending:
    """A request waiting for its answer.

    Attributes:
        row: the request's row (:func:`request_row`).
        reply: hands the asker its answer; returns False when the asker is gone.
        ready: set once the request's ApprovalRequested is out.
        timer: ends the request at ``approval_timeout_seconds``, or None.
    """

    row: dict[str, Any]
    reply: Callable[[AskAnswer], bool]
    ready: threading.Event = field(default_factory=threading.Event)
    timer: threading.Timer | None = None

    def stop_timer(self) -> None:
        """Cancel the timeout timer, if any."""
        if self.timer is not None:
            self.timer.cancel()

    def deliver(self, answer: AskAnswer) -> bool:
        """Hand the asker ``answer``; returns False when it could not take it (gone)."""
        try:
            return bool(self.reply(answer))
        except Exception:  # an asker that cannot take it is gone
            log.debug("approval reply failed", exc_info=True)
            return False


def request_row(request: AskRequest, agent_id: int | None) -> dict[str, Any]:
    """A new request's row, with a fresh id: ``request_id`` (``ap_`` and 8 hex
    digits), ``agent_id`` (None: the main agent), ``tool``, ``arguments``, ``reason``,
    ``key``, ``call_id``, ``created_at`` and ``always`` (what allow_always allows, in
    words)."""
    row: dict[str, Any] = {
        "request_id": "ap_" + uuid.uuid4().hex[:8],
        "agent_id": agent_id,
        "tool": request.tool,
        "arguments": request.arguments,
        "reason": request.reason,
        "key": request.key,
        "call_id": request.call_id,
        "created_at": utc_now(),
    }
    row["always"] = always_covers(request.key)
    return row


def requested_event(row: dict[str, Any]) -> ev.ApprovalRequested:
    """The ApprovalRequested event that announces the request of ``row``."""
    return ev.ApprovalRequested(
        request_id=row["request_id"], agent_id=row["agent_id"], tool=row["tool"],
        arguments=row["arguments"], reason=row["reason"], key=row["key"],
        call_id=row["call_id"], always=row["always"],
    )  # fmt: skip


def saved_always(approvals: dict[str, Any]) -> set[str]:
    """The allow_always keys of a conversation file's ``approvals`` record (its
    strings; anything else is ignored)."""
    always = approvals.get("always")
    return {k for k in always if isinstance(k, str)} if isinstance(always, list) else set()


def saved_pending(approvals: dict[str, Any]) -> list[dict[str, Any]]:
    """The pending rows of a conversation file's ``approvals`` record (its objects;
    anything else is ignored)."""
    saved = approvals.get("pending")
    return [r for r in saved if isinstance(r, dict)] if isinstance(saved, list) else []


def file_record(pending: Iterable[Pending], always: set[str]) -> dict[str, Any]:
    """The ``approvals`` record of the conversation file: ``pending`` (the rows) and
    ``always`` (the keys, sorted), each only when there are some."""
    record: dict[str, Any] = {}
    rows = [dict(p.row) for p in pending]
    if rows:
        record["pending"] = rows
    if always:
        record["always"] = sorted(always)
    return record


def gone_error(request_id: str, ended: str | None) -> ApprovalError:
    """The error for an answer to a request that is not pending: ``unknown`` (never
    seen: ``ended`` None), else ``withdrawn`` or ``answered`` with how it ended."""
    if ended is None:
        return ApprovalError(
            "unknown", f"there is no approval request {request_id!r} in this conversation"
        )
    code = "withdrawn" if ended.startswith("withdrawn") else "answered"
    return ApprovalError(code, f"approval {request_id} was {ended}")


def answer_call(messages: list[dict[str, Any]], call_id: str, name: str, content: str) -> bool:
    """Give the tool call ``call_id`` of the last assistant message that made it the
    result ``content``, after its other results, unless it has one; returns True when a
    result was added."""
    if any(m.get("role") == "tool" and m.get("tool_call_id") == call_id for m in messages):
        return False
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls and any(isinstance(c, dict) and c.get("id") == call_id for c in calls):
            at = index + 1
            while at < len(messages) and messages[at].get("role") == "tool":
                at += 1
            messages.insert(
                at, {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}
            )
            return True
    return False


def answer_later(request: dict[str, Any]) -> None:
    """The answerer of a front end that shows requests from the events and answers them
    with ``Session.approve`` (a terminal, JSON lines, the web page): it only declares
    that someone will answer (returns None)."""
    return None
