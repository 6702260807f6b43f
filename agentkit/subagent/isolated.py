"""An isolated sub-agent's copy, as the parent sees it (docs/isolation.md).

One job: the parent side of a sub-agent that works on its own copy of the workspace
(``Settings.subagent_isolation``): whether a start is isolated (:func:`choose`), the
copy made before its worker starts (:func:`make_copy`, the engine's ``create_copy``
and ``link_deliverables``; the copy's dict goes to the worker as
``WorkerSpec.extra["isolation"]``), its end (:func:`end_copy`: the copy saved and its
changes counted), and what its record says about it (``isolation``, ``changes``,
``merged``, ``discarded``: :func:`mark_record`, :func:`from_record`). The merge and the
discard are agentkit.subagent.merging's; the copy itself is agentkit.isolation's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.isolation.types import Copy, IsolationError
from agentkit.subagent.record import add_to_final

if TYPE_CHECKING:
    from agentkit.settings import Settings
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.subagent.state import SubAgent

__all__ = [
    "Isolation",
    "IsolationMode",
    "choose",
    "continued",
    "end_copy",
    "from_record",
    "make_copy",
    "mark_record",
    "refusal",
]

log = logging.getLogger(__name__)

IsolationMode = Literal["shared", "isolated"]
_MARKS = ("changes", "merged", "discarded")


@dataclass
class Isolation:
    """What the parent tracks of an isolated sub-agent (under the table's lock).

    Attributes:
        copy: its copy (``Copy.to_dict()``), None until made or when it could not be.
        changes: ``{"files", "insertions", "deletions"}`` at its last end, None before
            (or when they could not be counted: ``error`` says why).
        merged: merge_sub_agent applied them (``merged: true`` in its record).
        discarded: discard_sub_agent_changes dropped the copy.
        error: why the copy could not be saved or counted at its end, else None.
    """

    copy: dict[str, Any] | None = None
    changes: dict[str, int] | None = None
    merged: bool = False
    discarded: bool = False
    error: str | None = None

    def fields(self) -> dict[str, Any]:
        """What results, notifications and status rows add for it: ``changes`` and
        ``merged`` (and ``discarded: true`` once dropped); ``{}`` without a copy."""
        if self.copy is None:
            return {}
        shown: dict[str, Any] = {"changes": self.changes, "merged": self.merged}
        if self.discarded:
            shown["discarded"] = True
        return shown

    def marks(self) -> dict[str, Any]:
        """Its record's and its conversation row's fields: ``isolation`` (the copy),
        ``changes``, ``merged``, ``discarded``; ``{}`` without a copy."""
        marks = {"changes": self.changes, "merged": self.merged, "discarded": self.discarded}
        return {"isolation": self.copy, **marks} if self.copy is not None else {}


def choose(settings: Settings, requested: str | None, profile: dict[str, Any] | None) -> bool:
    """Whether a new run is isolated: never with ``subagent_isolation`` off, always
    with ``always``; with ``available`` the ``requested`` mode (create_sub_agent's
    ``isolation``, spawn's), else the profile's ``isolation``, else shared."""
    mode = settings.subagent_isolation
    if mode != "available":
        return mode == "always"
    chosen = requested or (profile or {}).get("isolation") or "shared"
    return chosen == "isolated"


def refusal(settings: Settings, requested: str | None) -> str | None:
    """Why an explicitly requested mode (from code: spawn's ``isolation``) cannot be
    had under ``subagent_isolation``, else None."""
    mode = settings.subagent_isolation
    if requested == "isolated" and mode == "off":
        return "isolation='isolated' needs subagent_isolation 'available' or 'always' (it is off)"
    if requested == "shared" and mode == "always":
        return "isolation='shared' is not possible: subagent_isolation is 'always'"
    if requested not in (None, "shared", "isolated"):
        return f"isolation must be 'shared' or 'isolated', not {requested!r}"
    return None


def continued(
    settings: Settings, previous: Isolation | None, profile: dict[str, Any] | None
) -> Isolation | None:
    """The isolation of a continue_sub_agent run whose earlier runs had ``previous``
    (None: shared): :func:`choose` with the earlier mode as the requested one. An
    isolated run keeps the earlier copy's state, so :func:`make_copy` continues in
    it, or makes a fresh one when it was merged or discarded; None: shared."""
    had_copy = previous is not None and previous.copy is not None
    if not choose(settings, "isolated" if had_copy else "shared", profile):
        return None
    return replace(previous, changes=None, error=None) if previous and had_copy else Isolation()


def make_copy(manager: SubAgentManager, agent: SubAgent) -> str | None:
    """Make ``agent``'s copy of the workspace (its deliverables folder left out and
    linked to the real one) and put it in its spec (``extra["isolation"]``). A
    continued run keeps its earlier copy while that exists and was neither merged
    nor discarded; a merged one (its work is in the workspace) is dropped for a fresh
    one. Returns the error text when no copy could be made (nothing the sub-agent
    made is deleted), else None."""
    from agentkit import isolation as engine

    spec = agent.spec
    state = agent.isolation or Isolation()
    earlier = Copy.from_dict(state.copy) if state.copy is not None else None
    try:
        if earlier and not (state.merged or state.discarded) and engine.copy_exists(earlier):
            copy = earlier
        else:
            if earlier is not None and state.merged and not state.discarded:
                engine.discard(earlier)  # merged: the same branch name is taken anew
            copy = engine.create_copy(
                manager.workspace,
                manager.folder_key,
                spec.agent_id,
                exclude=(spec.deliverables_dir,),
            )
        engine.link_deliverables(copy, spec.deliverables_dir, agent.deliverables_path)
    except (IsolationError, OSError) as exc:
        return f"could not make the sub-agent's own copy of the workspace: {exc}"
    data = copy.to_dict()

    def take(agent: SubAgent) -> None:
        agent.spec = replace(agent.spec, extra={**agent.spec.extra, "isolation": data})
        agent.isolation = Isolation(copy=data)

    manager.table.update(agent, take)
    return None


def end_copy(agent: SubAgent, workspace: Path) -> Isolation | None:
    """At ``agent``'s end: save its copy (a commit on its branch) and count its
    changes; the record gets ``changes`` and ``merged: false``. Returns the new state
    (the caller stores it under the table's lock), None when it has no copy."""
    state = agent.isolation
    if state is None or state.copy is None:
        return None
    from agentkit import isolation as engine

    new = replace(state, merged=False, error=None)
    try:
        new.changes = engine.changes(Copy.from_dict(state.copy)).summary()
    except (IsolationError, OSError) as exc:  # the worktree's files are still there
        log.warning("sub-agent %s: changes not counted: %s", agent.spec.agent_id, exc)
        new.changes, new.error = None, f"its changes could not be counted: {exc}"
    mark_record(agent.deliverables_path, workspace, agent.spec.sub_conversation_id, new)
    return new


def mark_record(
    deliverables: Path, workspace: Path, sub_conversation_id: str, state: Isolation
) -> bool:
    """Write ``state``'s fields (:meth:`Isolation.marks`) into the final record in
    ``deliverables`` when it is ``sub_conversation_id``'s. Returns whether it wrote
    (False: no such record, or it could not be written: the caller's state still
    holds them)."""
    fields = state.marks()
    if state.error:
        fields["isolation_error"] = state.error
    try:
        return add_to_final(deliverables, sub_conversation_id, fields, root=workspace)
    except OSError as exc:
        log.warning("the record in %s could not be updated: %s", deliverables, exc)
        return False


def from_record(record: dict[str, Any] | None) -> Isolation | None:
    """The isolation state a record (or a conversation row) holds, None when it has
    no copy (a shared sub-agent's)."""
    if not isinstance(record, dict) or not isinstance(record.get("isolation"), dict):
        return None
    changes = record.get("changes")
    return Isolation(
        copy=dict(record["isolation"]),
        changes=dict(changes) if isinstance(changes, dict) else None,
        merged=record.get("merged") is True,
        discarded=record.get("discarded") is True,
    )


def row_record(workspace: Path, row: dict[str, Any]) -> tuple[Path | None, dict[str, Any] | None]:
    """The record of a conversation file's sub-agent ``row`` and the folder holding it:
    its deliverables folder, or where a later run set the record aside. ``(None, None)``
    when neither holds it or it cannot be read (a damaged record: the row's own marks
    then say what is known)."""
    from agentkit.subagent.record import read_record
    from agentkit.subagent.reuse import earlier_folder

    folder, run = row.get("deliverables_dir"), row.get("sub_conversation_id")
    if not isinstance(folder, str) or not folder:
        return None, None
    for place in (workspace / folder, earlier_folder(workspace / folder, str(run))):
        try:
            record = read_record(place, workspace)
        except Exception:  # damaged or unreadable: not this row's record
            continue
        if record is not None and record.get("sub_conversation_id") == run:
            return place, record
    return None, None
