"""What a continued sub-agent runs on now, for the people watching a conversation.

One job: remember the task of each continued run (continue_sub_agent by the main
agent, or ``/continue`` by a person) and its number, and add them to the rows people
see: the sub-agent events' ``info`` and :meth:`agentkit.chat.Session.subagents`. The
status row the model sees keeps the summary it was created with and the runtime of
all its runs (the seed's contract); people see ``task`` (this run's task) and ``runs``
(how many runs the runtime adds up), so the front ends show the new task and say
"total over N runs". Nothing here reaches the model.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from agentkit import events as ev

__all__ = ["RunTasks"]

CONTINUE_TOOL = "continue_sub_agent"


class RunTasks:
    """The continued runs of one conversation (thread-safe).

    Args:
        saved_runs: returns the ``runs`` a sub-agent's saved row counts (1 when it
            has none): the conversation file's rows, read when a continue starts.
    """

    def __init__(self, saved_runs: Callable[[int], int] | None = None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[str, int]] = {}  # asked, not started: task, runs before
        self._current: dict[int, tuple[str, int]] = {}  # id -> (task, run number)
        self._saved_runs = saved_runs or (lambda agent_id: 1)

    def expect(self, agent_id: int, task: str) -> None:
        """A continue of ``agent_id`` on ``task`` was asked; its next start is that run."""
        before = int(self._saved_runs(agent_id) or 1)  # read before the new run saves its row
        with self._lock:
            self._pending[agent_id] = (" ".join(task.split()), before)

    def enrich(self, event: ev.Event) -> ev.Event:
        """Return ``event`` with ``task`` and ``runs`` in a continued sub-agent's info
        (other events as they are); a continue_sub_agent tool call is remembered."""
        if isinstance(event, ev.ToolCallStarted) and event.name == CONTINUE_TOOL:
            args = event.arguments or {}
            agent_id, task = args.get("agent_id"), args.get("task")
            if isinstance(agent_id, int) and isinstance(task, str) and task.strip():
                self.expect(agent_id, task)
            return event
        if not isinstance(event, ev.SubAgentEvent):
            return event
        extra = self._extra(event)
        if extra is None:
            return event
        return dataclasses.replace(event, info={**event.info, **extra})

    def rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` (status rows) with ``task`` and ``runs`` added to continued ones."""
        with self._lock:
            current = dict(self._current)
        out = []
        for row in rows:
            found = current.get(row.get("agent_id", -1))
            if found is not None:
                row = {**row, "task": found[0], "runs": max(found[1], _runs(row))}
            out.append(row)
        return out

    def _extra(self, event: ev.SubAgentEvent) -> dict[str, Any] | None:
        agent_id = event.info.get("agent_id")
        if not isinstance(agent_id, int):
            return None
        with self._lock:
            started = isinstance(event, ev.SubAgentStarted)
            pending = self._pending.pop(agent_id, None) if started else None
            if pending is not None:
                task, saved = pending
                run = max(self._current.get(agent_id, ("", 1))[1], saved) + 1
                self._current[agent_id] = (task, run)
            found = self._current.get(agent_id)
        if found is None:
            return None
        return {"task": found[0], "runs": found[1]}


def _runs(row: dict[str, Any]) -> int:
    runs = row.get("runs")
    return runs if isinstance(runs, int) and not isinstance(runs, bool) else 1
