"""A sub-agent's state as the parent sees it, and the names of its statuses.

One job: the :class:`SubAgent` dataclass (its spec, status, counters, timing and
worker handle) and the status vocabulary every sub-agent module uses (docs/specification.md §1:
running, completed, failed, timeout, terminated).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.conversation import SEED_COUNTERS
from agentkit.subagent.record import record_relpath

if TYPE_CHECKING:
    from agentkit.subagent.contract import WorkerHandle, WorkerSpec

# How a sub-agent ended; "running" until then (docs/specification.md §1 statuses).
EndStatus = Literal["completed", "failed", "timeout", "terminated"]
Status = Literal["running", "completed", "failed", "timeout", "terminated"]
# The endings the parent forces (timeout, terminate_sub_agent, shutdown).
KillStatus = Literal["timeout", "terminated"]
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
    done: threading.Event = field(default_factory=threading.Event)
    announced: bool = False
    finishing: bool = False  # it called finish_task; its Result is on the way
    last_progress: dict[str, Any] | None = None  # the last SubAgentProgress row sent
    kill_reason: KillStatus | None = None
    # Where the final record is when the deliverables folder could not hold it
    # (workspace-relative), and the record itself when no disk could.
    record_elsewhere: str | None = None
    record: dict[str, Any] | None = None

    @property
    def deliverables_path(self) -> Path:
        """The absolute deliverables folder."""
        return Path(self.spec.deliverables_path)

    def runtime(self) -> int:
        """Seconds since start (frozen at the end)."""
        if self.runtime_seconds is not None:
            return self.runtime_seconds
        return int(time.monotonic() - self.started)

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

    def conversation_row(self) -> dict[str, Any]:
        """Return the row the main conversation file keeps for this sub-agent: the
        status row plus background, sub_conversation_id, result_summary and the
        record's path (``transcript``)."""
        return {
            **self.status_row(),
            "background": self.background,
            "sub_conversation_id": self.spec.sub_conversation_id,
            "result_summary": self.result_summary,
            "transcript": self.record_elsewhere or record_relpath(self.spec.deliverables_dir),
        }
