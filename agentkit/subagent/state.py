"""A sub-agent's state as the parent sees it, and the names of its statuses.

One job: the :class:`SubAgent` dataclass (its spec, status, counters, timing and
worker handle) and the status vocabulary every sub-agent module uses (seed §1:
running, completed, failed, timeout, terminated).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.conversation import SEED_COUNTERS

if TYPE_CHECKING:
    from agentkit.subagent.contract import WorkerHandle, WorkerSpec

# How a sub-agent ended; "running" until then (seed §1 statuses).
EndStatus = Literal["completed", "failed", "timeout", "terminated"]
Status = Literal["running", "completed", "failed", "timeout", "terminated"]
# The endings the parent forces (timeout, terminate_sub_agent, shutdown).
KillStatus = Literal["timeout", "terminated"]
# A get_sub_agent_status row's keys (seed §1), in order.
STATUS_KEYS = (
    "agent_id",
    "summary",
    "status",
    "runtime_seconds",
    *SEED_COUNTERS,
    "last_action",
    "deliverables_dir",
)


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
    kill_reason: KillStatus | None = None

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
        """Return the get_sub_agent_status row (seed §1), keys as STATUS_KEYS."""
        stats = self.stats()
        return {
            "agent_id": self.spec.agent_id,
            "summary": self.spec.summary,
            "status": self.status,
            **stats,
            "last_action": self.last_action,
            "deliverables_dir": self.spec.deliverables_dir,
        }
