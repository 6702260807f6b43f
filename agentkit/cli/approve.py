"""Approval requests on the command line: how they read, how a person answers them.

One job: the text of a request (:func:`approval_text`), the short answers a person types
(:func:`parse_answer`: ``y`` allow, ``a`` always, ``n [reason]`` deny), the chat's
``/approve ID``, ``/approve-always ID`` and ``/deny ID [reason]`` (:func:`answer_command`,
for agentkit.cli.commands), and :class:`TerminalApprover`, which asks at the terminal
for ``agentkit run``, and :class:`Asks`, the requests a chat terminal shows
(docs/approvals.md §2). Only the standard library is imported at load time.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from agentkit.cli.safe_text import terminal_safe

if TYPE_CHECKING:
    from agentkit.chat import Session

__all__ = [
    "ANSWER_HINT",
    "Asks",
    "TerminalApprover",
    "answer_command",
    "approval_text",
    "parse_answer",
]

ANSWER_HINT = "y = allow, a = always (this conversation), n [reason] = deny"

_WORDS = {"y": "allow", "yes": "allow", "a": "allow_always", "always": "allow_always",
          "n": "deny", "no": "deny"}  # fmt: skip
_COMMANDS = {"approve": "allow", "approve_always": "allow_always", "deny": "deny"}


def parse_answer(line: str) -> tuple[str, str | None] | None:
    """``(decision, note)`` for an answer typed at a prompt (``y``, ``a``, ``n`` or
    ``n too risky``, any case), or None when the line is no answer."""
    word, _, rest = line.strip().partition(" ")
    decision = _WORDS.get(word.lower())
    if decision is None:
        return None
    return decision, (rest.strip() or None) if decision == "deny" else None


def approval_text(row: dict[str, Any], limit: int = 300) -> str:
    """One terminal-safe paragraph for a request: who asks, the tool and its arguments,
    why, its id, and what answering "always" allows."""
    who = "the main agent" if row.get("agent_id") is None else f"sub-agent #{row['agent_id']}"
    arguments = json.dumps(row.get("arguments") or {}, ensure_ascii=False)
    if len(arguments) > limit:
        arguments = arguments[: limit - 1] + "…"
    text = (
        f"approval needed ({row.get('request_id')}): {who} wants to call {row.get('tool')} "
        f"{arguments}; {row.get('reason', '')}"
    )
    if row.get("always"):
        text += f' ("always" allows {row["always"]}, for this conversation)'
    return terminal_safe(" ".join(text.split()))


def answer_command(session: Session, command: str, args: list[str], rest: str) -> dict[str, Any]:
    """Carry out ``/approve ID``, ``/approve-always ID`` or ``/deny ID [reason]`` on
    ``session``; returns ``{"request_id", "decision", "note", "text"}``.

    Raises:
        ValueError: no ID given, or the broker refused the answer (an unknown,
            answered or withdrawn id: the message says which).
    """
    from agentkit.errors import ApprovalError

    name = command.replace("-", "_")
    if not args:
        raise ValueError(f"usage: /{command} ID" + (" [reason]" if name == "deny" else ""))
    request_id = args[0]
    note = (rest[len(request_id) :].strip() or None) if name == "deny" else None
    try:
        session.approve(request_id, _COMMANDS[name], note)
    except ApprovalError as exc:
        raise ValueError(str(exc)) from None
    said = {"allow": "allowed", "allow_always": "allowed for this conversation", "deny": "denied"}
    text = f"{request_id} {said[_COMMANDS[name]]}" + (f": {note}" if note else "")
    return {"request_id": request_id, "decision": _COMMANDS[name], "note": note, "text": text}


class TerminalApprover:
    """Asks the person at the terminal, one request at a time, on a thread of its own
    (``agentkit run`` on a terminal): the answerer of its session.

    Args:
        stream: where the question goes (the terminal's stderr).
        fd: the file descriptor answers are read from (the terminal's stdin).

    :meth:`bind` says which session it answers and how to pause a live view.
    """

    def __init__(self, stream: IO[str] | None = None, fd: int = 0) -> None:
        self._session: Callable[[], Session] | None = None
        self.pause: Callable[[bool], None] | None = None
        self._stream = stream or sys.stderr
        self._fd = fd
        self._requests: queue.Queue[dict[str, Any]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def bind(self, session: Callable[[], Session], pause: Callable[[bool], None] | None) -> None:
        """Answer the requests of ``session()``; ``pause(True)`` before a question and
        ``pause(False)`` after it keep a live view from drawing over it."""
        self._session, self.pause = session, pause

    def __call__(self, row: dict[str, Any]) -> None:
        """Take a request (the broker calls it); it is asked in turn. Returns None."""
        self._requests.put(row)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="agentkit-ask", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            row = self._requests.get()
            if self._session is None:
                continue
            session = self._session()
            if row["request_id"] not in {r["request_id"] for r in session.pending_approvals()}:
                continue  # answered or withdrawn while it waited its turn
            if self.pause is not None:
                self.pause(True)
            try:
                self._ask(session, row)
            finally:
                if self.pause is not None:
                    self.pause(False)

    def _ask(self, session: Session, row: dict[str, Any]) -> None:
        from agentkit.errors import ApprovalError

        self._write(approval_text(row) + "\n")
        answer: tuple[str, str | None] | None = None
        while answer is None:
            line = self._read_line(f"answer ({ANSWER_HINT}): ")
            if line is None:  # the input ended: no one is left to ask
                self._write("\n")
                answer = ("deny", "no one to ask")
            else:
                answer = parse_answer(line)
        try:
            session.approve(row["request_id"], *answer)
        except ApprovalError as exc:
            self._write(terminal_safe(f"not answered: {exc}") + "\n")

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(text)
            self._stream.flush()

    def _read_line(self, prompt: str) -> str | None:
        # os.read, not sys.stdin: a daemon thread blocked in a buffered reader holds its
        # lock, and the interpreter aborts at exit when it finds it taken.
        self._write(prompt)
        data = b""
        while not data.endswith(b"\n"):
            try:
                chunk = os.read(self._fd, 1024)
            except OSError:
                return None
            if not chunk:
                return None if not data else data.decode("utf-8", "replace")
            data += chunk
        return data.decode("utf-8", "replace").strip()


class Asks:
    """The approval requests a chat terminal shows, oldest first, kept from the events;
    a ``y``, ``a`` or ``n [reason]`` line answers the oldest.

    Args:
        session: the conversation shown (its pending requests are taken at once).
    """

    def __init__(self, session: Session) -> None:
        self._lock = threading.Lock()
        self.rows: list[dict[str, Any]] = session.pending_approvals()

    def prompt(self) -> str:
        """The input line's prompt: it says when a request waits for an answer."""
        with self._lock:
            return f"approve {self.rows[0]['tool']}? y/a/n › " if self.rows else "› "

    def lines(self, event: Any) -> list[str] | None:
        """What to show for an approval event (and keep the list right), or None for
        another event."""
        from agentkit import events as ev

        if isinstance(event, ev.ApprovalRequested):
            row = {
                k: getattr(event, k)
                for k in ("request_id", "agent_id", "tool", "arguments", "reason", "always")
            }
            with self._lock:
                self.rows.append(row)
            return [approval_text(row), ANSWER_HINT + f" (or /approve {event.request_id} ...)"]
        if isinstance(event, (ev.ApprovalAnswered, ev.ApprovalWithdrawn)):
            with self._lock:
                self.rows = [r for r in self.rows if r["request_id"] != event.request_id]
            if isinstance(event, ev.ApprovalWithdrawn):
                return [terminal_safe(f"{event.request_id} withdrawn: {event.reason}")]
            note = f": {event.note}" if event.note else ""
            return [terminal_safe(f"{event.request_id}: {event.decision}{note}")]
        return None

    def answer(self, session: Session, line: str) -> str | None:
        """Answer the oldest request when ``line`` is an answer; returns what to show
        (None: the line is no answer, or nothing waits)."""
        from agentkit.errors import ApprovalError

        answer = parse_answer(line)
        with self._lock:
            row = self.rows[0] if self.rows else None
        if answer is None or row is None:
            return None
        try:
            session.approve(row["request_id"], *answer)
        except ApprovalError as exc:
            with self._lock:
                self.rows = [r for r in self.rows if r is not row]
            return terminal_safe(f"not answered: {exc}")
        return ""
