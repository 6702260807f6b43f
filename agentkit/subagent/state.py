"""A sub-agent's state as the parent sees it.

One job: the :class:`SubAgent` dataclass (its spec, status, counters, timing and
worker handle), the spec it starts with (:func:`worker_spec`) and the
get_sub_agent_status row's keys; the status names (docs/specification.md §1: running,
completed, failed, timeout, terminated; budget_exhausted, docs/control-plane.md) are the
contract's (agentkit.subagent.contract).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.conversation import SEED_COUNTERS, new_conversation_id, utc_now
from agentkit.subagent.contract import KillStatus, Status, WorkerSpec
from agentkit.subagent.record import record_relpath

if TYPE_CHECKING:
    from agentkit.settings import Settings
    from agentkit.subagent.contract import WorkerHandle
    from agentkit.subagent.isolated import Isolation

# A get_sub_agent_status row's keys (docs/specification.md §1), in order.
STATUS_KEYS = (
    "agent_id",
    "summary",
    "status",
    "runtime_seconds",
    *SEED_COUNTERS,
    "last_action",
    "deliverables_dir",
)


def worker_spec(
    settings: Settings,
    workspace: Path,
    *,
    agent_id: int,
    summary: str,
    task: str,
    timeout_seconds: int,
    deliverables: tuple[str, Path],
    extra: dict[str, Any],
    sub_conversation_id: str | None = None,
    created_at: str | None = None,
) -> WorkerSpec:
    """A new worker's spec: ``deliverables`` (relative, absolute), a fresh process mark,
    and a fresh sub-conversation id and creation time unless given (a continued run
    keeps its own)."""
    rel, path = deliverables
    return WorkerSpec(
        agent_id=agent_id,
        summary=summary,
        task=task,
        timeout_seconds=timeout_seconds,
        deliverables_dir=rel,
        deliverables_path=str(path),
        workspace=str(workspace),
        sub_conversation_id=sub_conversation_id or new_conversation_id(),
        settings=settings.model_dump(),
        process_mark=f"agentkit-{uuid.uuid4().hex}",
        created_at=created_at or utc_now(),
        extra=extra,
    )


def earlier_rows(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Return the sub-agent rows an earlier run saved in the main conversation (see
    SubAgent.conversation_row), by agent id; malformed rows are skipped, and one
    still "running" becomes "terminated" (its process ended with that run)."""
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("agent_id"), int):
            row = dict(row)
            if row.get("status") == "running":
                row["status"] = "terminated"
            found[row["agent_id"]] = row
    return found


@dataclass
class SubAgent:
    """Parent-side state of one sub-agent (times in seconds, monotonic clock).

    ``spec`` is what its worker was given (id, summary, task, folder, timeout,
    mark); the rest changes while it runs. ``status`` moves once from "running"
    to an EndStatus.
    """

    spec: WorkerSpec
    background: bool
    started: float
    status: Status = "running"
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SEED_COUNTERS, 0))
    last_action: str = ""
    result_summary: str | None = None
    error: str | None = None
    runtime_seconds: int | None = None
    token_usage: dict[str, int] = field(default_factory=dict)
    handle: WorkerHandle | None = None
    # The thread that watches the worker and ends it (Supervisor.watch).
    monitor: threading.Thread | None = field(default=None, repr=False, compare=False)
    done: threading.Event = field(default_factory=threading.Event)
    announced: bool = False
    finishing: bool = False  # it called finish_task; its Result is on the way
    last_progress: dict[str, Any] | None = None  # the last SubAgentProgress row sent
    kill_reason: KillStatus | None = None
    # Where the final record is when the deliverables folder could not hold it
    # (workspace-relative), and the record itself when no disk could.
    record_elsewhere: str | None = None
    record: dict[str, Any] | None = None
    # The timeout clock stops while the sub-agent waits for its parent or a person
    # (a question, an approval): seconds paused so far, and open pauses. ``clock``
    # reads the time (seconds, monotonic; ``started`` is on it): a test may put in a
    # clock it moves on, so that a timeout is checked without waiting it out.
    paused_seconds: float = 0.0
    _pauses: int = 0
    _paused_since: float = 0.0
    _clock_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    # The control plane (agentkit.subagent.control, docs/control-plane.md): tokens and
    # cost so far (all runs; cost None when a response had no known price; estimated
    # when a response came without the server's usage), the
    # question it waits on, steering messages sent and not yet read (ref -> text),
    # receipts awaited (ref -> Receipt once it came), messages it never read (it ended
    # first), finish_task's typed result, and for a continued run the earlier runs'
    # seconds and this run's number.
    tokens: int = 0
    cost_usd: float | None = 0.0
    usage_estimated: bool = False
    question: Any = None
    steers: dict[int, str] = field(default_factory=dict)
    receipts: dict[int, Any] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)
    result: Any = None
    runtime_before: int = 0
    runs: int = 1
    # Its own copy of the workspace (agentkit.subagent.isolated), None when shared.
    isolation: Isolation | None = None

    def pause_clock(self, now: float | None = None) -> None:
        """Stop the timeout clock (nested pauses count: it runs again when every
        pause has been resumed). Thread-safe; ``now`` defaults to ``clock()``."""
        with self._clock_lock:
            self._pauses += 1
            if self._pauses == 1:
                self._paused_since = self.clock() if now is None else now

    def resume_clock(self, now: float | None = None) -> None:
        """End one pause of :meth:`pause_clock` (an unmatched call does nothing)."""
        with self._clock_lock:
            if self._pauses == 0:
                return
            self._pauses -= 1
            if self._pauses == 0:
                now = self.clock() if now is None else now
                self.paused_seconds += now - self._paused_since

    def clock_paused(self) -> bool:
        """True while at least one pause is open."""
        return self._pauses > 0

    def timeout_elapsed(self, now: float | None = None) -> float:
        """Seconds counted against ``spec.timeout_seconds``: the time since start
        minus the paused time (an open pause counts up to now)."""
        now = self.clock() if now is None else now
        with self._clock_lock:
            paused = self.paused_seconds
            if self._pauses:
                paused += now - self._paused_since
        return now - self.started - paused

    def ended(self) -> bool:
        """True once its end is recorded whole: its status final, its record made
        final and, when isolated, its copy saved and its changes counted
        (``done`` is set after agentkit.subagent.endings.finalise)."""
        return self.status != "running" and self.done.is_set()

    @property
    def deliverables_path(self) -> Path:
        """The absolute deliverables folder."""
        return Path(self.spec.deliverables_path)

    def runtime(self) -> int:
        """Seconds since start (frozen at the end), a continued run's earlier runs included."""
        if self.runtime_seconds is not None:
            return self.runtime_seconds + self.runtime_before
        return int(time.monotonic() - self.started) + self.runtime_before

    def stats(self) -> dict[str, int]:
        """Return the seed's ``stats`` object: runtime_seconds and the four counters."""
        return {
            "runtime_seconds": self.runtime(),
            **{k: self.counters.get(k, 0) for k in SEED_COUNTERS},
        }

    def status_row(self) -> dict[str, Any]:
        """Return the get_sub_agent_status row (docs/specification.md §1), keys as STATUS_KEYS."""
        stats = self.stats()
        return {
            "agent_id": self.spec.agent_id,
            "summary": self.spec.summary,
            "status": self.status,
            **stats,
            "last_action": self.last_action,
            "deliverables_dir": self.spec.deliverables_dir,
        }

    def usage_fields(self) -> dict[str, Any]:
        """``tokens`` (prompt plus completion, all runs) and ``cost_usd`` (None: no known
        price), ``usage_estimated: true`` once a response came without the server's
        usage (its tokens estimated), and the pending ``question`` when there is one:
        what status rows add for people (events, files) always, and for the model with
        subagent_control."""
        fields: dict[str, Any] = {"tokens": self.tokens, "cost_usd": self.cost_usd}
        if self.usage_estimated:
            fields["usage_estimated"] = True
        if self.question is not None:
            fields["question"] = self.question.text
        return fields

    def view_row(self) -> dict[str, Any]:
        """The row events carry (SubAgentStarted/Progress/Finished, for the chat front
        ends, never the model): the status row, ``token_usage`` (``prompt``,
        ``completion``, ``total`` tokens so far; empty before the first turn),
        :meth:`usage_fields` and, isolated, ``changes`` and ``merged``."""
        return {
            **self.status_row(),
            "token_usage": dict(self.token_usage),
            **self.usage_fields(),
            **(self.isolation.fields() if self.isolation is not None else {}),
        }

    def conversation_row(self) -> dict[str, Any]:
        """Return the row the main conversation file keeps for this sub-agent: the
        status row with usage, plus background, sub_conversation_id, result_summary, the
        record's path (``transcript``) and its runs."""
        return {
            **self.view_row(),
            "runs": self.runs,
            "background": self.background,
            "sub_conversation_id": self.spec.sub_conversation_id,
            "result_summary": self.result_summary,
            "transcript": self.record_elsewhere or record_relpath(self.spec.deliverables_dir),
            **self._profile_name(),
            **(self.isolation.marks() if self.isolation is not None else {}),
        }

    def _profile_name(self) -> dict[str, str]:
        profile = self.spec.extra.get("profile")
        name = profile.get("name") if isinstance(profile, dict) else None
        return {"profile": name} if isinstance(name, str) else {}
