"""What a run to completion gives back, and how it is gathered.

One job: :class:`RunResult` (what :meth:`agentkit.Agent.run` returns: its
``to_dict`` and ``raise_for_status``) and :func:`wait_for_everything`, the wait
behind ``Agent.run``: the task's round and every round the completions of its
background sub-agents start by themselves, until no sub-agent works, made into a
RunResult. ``from agentkit import RunResult`` and ``from agentkit.agent import
RunResult`` give this class.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

from agentkit.conversation import usage_total
from agentkit.engine_roles import RunStatus
from agentkit.errors import ErrorKind, RunFailed, RunFailedKind
from agentkit.output import OutputSpec, OutputT, to_json

if TYPE_CHECKING:
    from agentkit.chat.inbox import RoundResult
    from agentkit.chat.session import Session

__all__ = ["RunResult", "wait_for_everything"]


@dataclass
class RunResult(Generic[OutputT]):
    """What :meth:`Agent.run` returns (``RunResult[Model]`` for a run with
    ``output_type=Model``).

    Attributes:
        final_text: the main agent's last answer (None if it gave none).
        conversation_id: id of the conversation (its file is ``transcript_path``).
        status: a :data:`~agentkit.engine.RunStatus`: ``done``, ``failed`` or
            ``cancelled``.
        stats: the main agent's conversation stats (turns, tool_calls by name,
            token_usage, seed counters, cost_usd: None when unknown) and ``usage_total``,
            ``{"tokens", "cost_usd"}`` of the main agent and every sub-agent summed.
        error: one line saying why, when status is not ``done``.
        error_kind: an :data:`~agentkit.errors.ErrorKind`: the LLMError kind when a
            model error ended the run (``connection``, ``authentication``,
            ``quota_exhausted``...), ``budget_exhausted`` for a spent budget, else None.
        transcript_path: the conversation JSON file.
        output: the validated ``output_type`` instance the main agent gave through
            ``final_result`` (its last valid one; ``final_text`` is its JSON), None
            without ``output_type`` or when the run failed before one
            (``error_kind`` ``output_invalid``: none was valid within
            ``output_retries``).
    """

    final_text: str | None
    conversation_id: str
    status: RunStatus
    stats: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    transcript_path: Path | None = None
    error_kind: ErrorKind | None = None
    output: OutputT | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (the CLI's ``--json`` output; ``output``, dumped as
        JSON, only when there is one)."""
        extra = {"output": to_json(self.output)} if self.output is not None else {}
        return {
            "final_text": self.final_text,
            "conversation_id": self.conversation_id,
            "status": self.status,
            "stats": self.stats,
            "error": self.error,
            "error_kind": self.error_kind,
            "transcript_path": str(self.transcript_path) if self.transcript_path else None,
            **extra,
        }

    def raise_for_status(self) -> RunResult[OutputT]:
        """Return this result when the run succeeded (status ``done``), so that
        ``agent.run(task).raise_for_status()`` chains; otherwise raise
        :class:`~agentkit.errors.RunFailed` carrying ``kind`` (the ``error_kind`` when
        known, else the status: ``cancelled`` or ``failed``), the ``error`` line as its
        message, the status and this result."""
        if self.status == "done":
            return self
        kind: RunFailedKind = self.error_kind or self.status
        message = self.error or f"the run ended {self.status}"
        raise RunFailed(kind, message, status=self.status, result=self)


def wait_for_everything(
    session: Session, task: str, spec: OutputSpec[Any] | None, cancel_asked: threading.Event
) -> RunResult[Any]:
    """Post ``task`` to ``session`` with ``spec`` (None: no ``output_type``) and wait
    for its round and every round after it until no sub-agent works; returns the
    RunResult of the last one. ``cancel_asked`` set while sub-agents work turns a
    ``done`` into ``cancelled``. A BaseException raised into the waiting thread
    (KeyboardInterrupt) stops everything and goes on."""
    session.output = spec  # read by each round of this run (agentkit.output)
    try:
        last = _last_round(session, task, cancel_asked)
    finally:
        session.output = None
    return RunResult(
        final_text=last.final_text,
        conversation_id=last.conversation_id,
        status=last.status,
        stats={
            **session.conversation.stats.to_dict(),
            "usage_total": usage_total(session.conversation.stats, session.subagents()),
        },
        error=last.error,
        transcript_path=last.transcript_path,
        error_kind=last.error_kind,
        output=spec.value if spec is not None and last.status == "done" else None,
    )


def _last_round(session: Session, task: str, cancel_asked: threading.Event) -> RoundResult:
    """Post ``task`` and wait for its round and every round after it until no
    sub-agent works; returns how the last one ended."""
    future = session.post(task)
    try:
        first = future.result()
        if first.status != "done":
            # Cancelled, failed or out of turns with sub-agents still at work:
            # nobody would hear of them, so end them (no orphans).
            session.stop_all()
            session.wait_idle(30)
            last = first
        else:
            session.wait_idle()
            last = session.last_result or first
            if cancel_asked.is_set() and last.status == "done":
                # Cancelled while its sub-agents worked: they were ended, so the
                # run did not finish its work.
                last = dataclasses.replace(last, status="cancelled", error="cancelled")
    except BaseException:
        # KeyboardInterrupt (or another exception raised into this thread): stop
        # the round, its tools and every sub-agent; the record is kept.
        session.stop_all()
        session.conversation.error = "interrupted"
        raise
    return last
