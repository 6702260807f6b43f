"""Bringing an isolated sub-agent's work back, or dropping it (docs/isolation.md).

One job: the manager-level operations on an isolated sub-agent's copy, for the main
agent's tools (agentkit.subagent.isolation_tools), the front ends and the Python API:
:func:`changes` and :func:`diff` (what it changed), :func:`merge` (its changes applied
onto the workspace as it is now, all or nothing; ``dry_run`` writes nothing),
:func:`discard` (its copy and branch dropped) and :func:`unmerged` (the copies waiting
for a decision). Sub-agents of this run and of earlier runs of the conversation alike:
an earlier one is found through its row in the conversation file and its record, so a
reopened conversation still merges what a killed process left. Merge and discard are
refused while the sub-agent runs; after them its record and its row say ``merged:
true`` or ``discarded: true``. The copy itself is agentkit.isolation's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.isolation.types import Changes, Copy, IsolationError, MergeReport
from agentkit.subagent.admission import resolve_deliverables
from agentkit.subagent.isolated import Isolation, from_record, mark_record
from agentkit.subagent.record import read_record

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.subagent.state import SubAgent

__all__ = [
    "IsolationRefused",
    "Refusal",
    "changes",
    "copy_of",
    "count_changes",
    "diff",
    "discard",
    "merge",
    "unmerged",
]

Refusal = Literal["unknown", "shared", "running", "discarded", "merged"]

_MERGE_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


class IsolationRefused(IsolationError):
    """The operation does not apply to this sub-agent now. ``reason``: ``unknown`` (no
    such sub-agent), ``shared`` (it has no copy), ``running`` (it has not ended),
    ``discarded`` (its copy was dropped) or ``merged`` (its changes are in already);
    the message says so in the conversation's language."""

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class _Target:
    """An isolated sub-agent found: this run's ``agent``, or an earlier run's ``row``."""

    agent_id: int
    copy: Copy
    state: Isolation
    deliverables: Path
    sub_conversation_id: str
    agent: SubAgent | None = None
    row: dict[str, Any] | None = None


def copy_of(manager: SubAgentManager, agent_id: int) -> Copy:
    """The recorded copy of isolated sub-agent ``agent_id`` (also while it runs), for a
    front end that reads its files (a diff's two sides). Raises as :func:`changes`."""
    return _find(manager, agent_id, allow_running=True).copy


def changes(manager: SubAgentManager, agent_id: int) -> Changes:
    """What sub-agent ``agent_id`` changed in its copy, base to now (saved first; also
    while it runs). Raises IsolationRefused (unknown, shared, discarded) or
    IsolationError (git failed, the copy is gone)."""
    target = _find(manager, agent_id, allow_running=True)
    return _engine().changes(target.copy)


def diff(manager: SubAgentManager, agent_id: int, *, max_chars: int = 200_000) -> str:
    """Its changes as a unified diff, base to now (at most ``max_chars`` characters).
    Raises as :func:`changes`."""
    target = _find(manager, agent_id, allow_running=True)
    return _engine().diff(target.copy, max_chars=max_chars)


def merge(manager: SubAgentManager, agent_id: int, *, dry_run: bool = False) -> MergeReport:
    """Apply sub-agent ``agent_id``'s changes onto the workspace as it is now (a
    three-way merge against its base, all or nothing; agentkit.isolation.merge). With
    ``dry_run`` nothing is written. A real merge that applied (or found nothing to
    apply) marks it ``merged: true`` in its record and row. Raises IsolationRefused
    (unknown, shared, running, discarded, merged) or IsolationError (git failed:
    nothing was written)."""
    _unmerged(manager, agent_id)  # refused before waiting for the lock
    # One merge at a time, and the state read again inside: the page and the main
    # agent may both ask, and the second must see the first's mark.
    with _merge_lock(manager.workspace):
        target = _unmerged(manager, agent_id)
        report = _engine().merge(manager.workspace, target.copy, dry_run=dry_run)
        if not dry_run and report.status in ("merged", "nothing_to_merge"):
            changed = report.changes or target.state.changes
            _store(manager, target, replace(target.state, merged=True, changes=changed))
    return report


def _unmerged(manager: SubAgentManager, agent_id: int) -> _Target:
    """The ended, unmerged isolated sub-agent ``agent_id``, or IsolationRefused."""
    target = _find(manager, agent_id, allow_running=False)
    if target.state.merged:
        raise _refused(manager, "merged", agent_id)
    return target


def discard(manager: SubAgentManager, agent_id: int) -> None:
    """Drop sub-agent ``agent_id``'s copy and branch (the workspace is not touched);
    its record and row say ``discarded: true``. Raises IsolationRefused (unknown,
    shared, running, discarded) or IsolationError (git failed: the copy stays)."""
    with _merge_lock(manager.workspace):  # not while a merge reads its copy
        target = _find(manager, agent_id, allow_running=False)
        _engine().discard(target.copy)
        _store(manager, target, replace(target.state, discarded=True))


def unmerged(manager: SubAgentManager) -> list[dict[str, Any]]:
    """The ended isolated sub-agents whose copies wait for a merge or a discard, of
    this run and earlier runs, by id: ``{"agent_id", "summary", "status",
    "deliverables_dir", "changes"}`` (``changes`` counted now when its record has
    none, None when that fails)."""
    found: list[dict[str, Any]] = []
    with manager.table.locked():
        ids = sorted(manager.table.used_ids())
    for agent_id in ids:
        try:
            target = _find(manager, agent_id, allow_running=False)
        except IsolationError:  # shared, running, dropped, unknown: nothing to decide
            continue
        if target.state.merged:
            continue
        summary = target.agent.spec.summary if target.agent else (target.row or {}).get("summary")
        status = target.agent.status if target.agent else (target.row or {}).get("status")
        found.append(
            {
                "agent_id": agent_id,
                "summary": summary,
                "status": status,
                "deliverables_dir": _rel(manager.workspace, target.deliverables),
                "changes": target.state.changes or count_changes(target.copy),
            }
        )
    return found


# ------------------------------------------------------------------ helpers
def _engine() -> Any:
    from agentkit import isolation

    return isolation


def _refused(manager: SubAgentManager, reason: Refusal, agent_id: int) -> IsolationRefused:
    key = "unknown_agent" if reason == "unknown" else f"isolation_{reason}"
    return IsolationRefused(reason, manager.phrase(key, agent_id=agent_id))


def _find(manager: SubAgentManager, agent_id: int, *, allow_running: bool) -> _Target:
    """The isolated sub-agent ``agent_id`` with its copy, or IsolationRefused."""
    with manager.table.locked():
        agent = manager.table.get(agent_id)
        earlier = manager.earlier_row(agent_id) if agent is None else None
        row = dict(earlier) if earlier is not None else None
        if agent is not None:  # ended only once its record is final and its copy saved
            running = agent.status == "running" or not agent.done.is_set()
            state = replace(agent.isolation) if agent.isolation is not None else None
            where, sub_id = agent.deliverables_path, agent.spec.sub_conversation_id
    if row is not None:
        running, sub_id = False, str(row.get("sub_conversation_id") or "")
        state, where = _earlier_state(manager, agent_id, row)
    elif agent is None:
        raise _refused(manager, "unknown", agent_id)
    if state is None or state.copy is None:
        raise _refused(manager, "shared", agent_id)
    if state.discarded:
        raise _refused(manager, "discarded", agent_id)
    if running and not allow_running:
        raise _refused(manager, "running", agent_id)
    copy = Copy.from_dict(state.copy)
    return _Target(agent_id, copy, state, where, sub_id, agent=agent, row=row)


def _earlier_state(
    manager: SubAgentManager, agent_id: int, row: dict[str, Any]
) -> tuple[Isolation | None, Path]:
    """An earlier run's isolation state: its record's (the truth on disk: a killed
    process's last word), marks from its row added; and its deliverables folder."""
    resolved = resolve_deliverables(manager.workspace, agent_id, str(row.get("deliverables_dir")))
    where = resolved[1] if not isinstance(resolved, str) else manager.workspace
    record = read_record(where, manager.workspace) if not isinstance(resolved, str) else None
    same = record is not None and record.get("sub_conversation_id") == row.get(
        "sub_conversation_id"
    )
    state = from_record(record) if same else None
    from_row = from_record(row)
    if state is None:
        return from_row, where
    if from_row is not None:  # either place may hold the later mark
        state.merged = state.merged or from_row.merged
        state.discarded = state.discarded or from_row.discarded
        state.changes = state.changes or from_row.changes
    return state, where


def _store(manager: SubAgentManager, target: _Target, state: Isolation) -> None:
    """Keep ``state`` on the agent (or the earlier row) and in its record."""
    if target.agent is not None:

        def take(agent: SubAgent) -> None:
            agent.isolation = state

        manager.table.update(target.agent, take)
    else:
        with manager.table.locked():
            row = manager.earlier_row(target.agent_id)
            if row is not None:  # the conversation file's row, saved at its next save
                row.update(state.marks())
    mark_record(target.deliverables, manager.workspace, target.sub_conversation_id, state)


def count_changes(copy: Copy) -> dict[str, int] | None:
    """``copy``'s changes against its base, ``{"files", "insertions", "deletions"}``
    (its unsaved files too), counted now; None when git cannot count them."""
    try:
        summary: dict[str, int] = _engine().changes(copy).summary()
    except (IsolationError, OSError):
        return None
    return summary


def _rel(workspace: Path, path: Path) -> str:
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)


def _merge_lock(workspace: Path) -> threading.Lock:
    with _LOCKS_LOCK:
        return _MERGE_LOCKS.setdefault(workspace.resolve(), threading.Lock())
