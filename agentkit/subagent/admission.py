"""Whether a create_sub_agent request may start a sub-agent (docs/specification.md §1, §8).

One job: check a request against the seed's limits and return either the
deliverables folder it gets or the refusal text: agent_id 1-99 and unique in the
conversation, timeout within Settings' bounds (60-3600 s), at most
``max_concurrent_subagents`` running, a deliverables folder inside the
workspace, outside agentkit's state folder ``.agentkit`` and any sub-agent's
record folder ``.subagent``, that no running sub-agent (of this or another
Agent) uses or overlaps. Input types (whole numbers, flags, non-empty text) were
checked before (agentkit.subagent.inputs).

A folder taken by a running sub-agent of this conversation is refused naming
that agent's id and summary (``overlap_dir``); one taken by a sub-agent of
another Agent or process, found through its record (here) or its OS lock (taken
by :func:`take_folder` when the manager reserves the admitted agent, for created
and continued runs alike: agentkit.subagent.folder_lock), is refused saying so and
naming it (``folder_busy_elsewhere``). This conversation's own agents are checked
first: their records say running too, so the record alone cannot tell them apart.
A request without ``deliverables_dir`` whose default folder another Agent's
sub-agent holds takes this conversation's own folder instead
(agentkit.subagent.placement): by the record here, by the OS lock in
SubAgentManager.create.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentkit import prompts
from agentkit.conversation import STATE_DIR
from agentkit.settings import Settings
from agentkit.subagent import inputs
from agentkit.subagent.claims import Claims
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.folder_lock import FolderBusy, FolderHold, FolderOwner, hold_folder
from agentkit.subagent.placement import default_folder, is_named
from agentkit.subagent.record import RECORD_DIR
from agentkit.subagent.state import SubAgent
from agentkit.subagent.sweep import folder_in_use


@dataclass(frozen=True)
class Request:
    """The create_sub_agent arguments that the limits concern (timeout in seconds)."""

    agent_id: int
    timeout_seconds: int
    deliverables_dir: str | None


def resolve_deliverables(
    workspace: Path, agent_id: int, given: str | None
) -> tuple[str, Path] | str:
    """Return ``(relative folder, absolute path)`` for the request's deliverables_dir
    (default ``sub_agent_results/agent_<id>``), or the reason it is refused."""
    rel = given.strip() if given and is_named(given) else default_folder(agent_id)
    if "\x00" in rel:
        return "NUL byte in path"
    if Path(rel).is_absolute() or rel.startswith("~"):
        return "absolute paths are not allowed"
    target = (workspace / rel).resolve()
    if target == workspace or workspace not in target.parents:
        return "it must be a folder inside the workspace, not the workspace itself or outside it"
    rel = os.path.normpath(rel).replace(os.sep, "/")  # as stored and shown: no "..", no "./"
    if workspace / rel != target:
        # agentkit writes the record there through no link (agentkit.confined).
        return "it passes through a symbolic link; give the real folder's path"
    existing = next((p for p in (target, *target.parents) if p.exists()), workspace)
    if not existing.is_dir():  # the folder, or a folder on its way, is a file
        return f"{existing.relative_to(workspace)} exists and is a file, not a folder"
    return rel.rstrip("/"), target


def reserved_folder(workspace: Path, path: Path) -> str | None:
    """Return the refusal phrase key when ``path`` (absolute, resolved, inside
    ``workspace``) is or lies inside ``<workspace>/.agentkit`` (``dir_state``) or
    any ``.subagent`` record folder (``dir_record``), else None."""
    parts = path.relative_to(workspace).parts
    if parts[0] == STATE_DIR:
        return "dir_state"
    if RECORD_DIR in parts:
        return "dir_record"
    return None


def admit(
    request: Request,
    *,
    workspace: Path,
    settings: Settings,
    used_ids: Mapping[int, str],
    running: Sequence[SubAgent],
    agents: Mapping[int, SubAgent],
    claims: Claims,
    own: str | None = None,
) -> tuple[str, Path] | str:
    """Return the deliverables folder ``(relative, absolute)`` the request gets, or
    the refusal text (the seed's phrases, in the settings' language). The folder's
    OS lock is taken after, by :func:`take_folder` (SubAgentManager.reserve).

    ``used_ids``: ids taken in this conversation, with their summaries;
    ``running``: the sub-agents running now; ``agents``: this run's by id;
    ``own``: the folder a request without ``deliverables_dir`` takes instead of the
    default when a sub-agent of another Agent or process runs there (its record
    says so), or None (then refused, as a named folder is).
    """
    s = settings
    agent_id = request.agent_id

    def phrase(key: str, **values: Any) -> str:
        return prompts.phrase(s.language, key, **values)

    if not inputs.AGENT_ID_MIN <= agent_id <= inputs.AGENT_ID_MAX:
        return phrase("bad_id", agent_id=agent_id)
    if agent_id in used_ids:
        return phrase("duplicate_id", agent_id=agent_id, summary=used_ids[agent_id])
    refused = _limits(request.timeout_seconds, settings, running)
    if refused is not None:
        return refused
    resolved = resolve_deliverables(workspace, agent_id, request.deliverables_dir)
    if isinstance(resolved, str):
        return phrase("bad_dir", reason=resolved, agent_id=agent_id)
    rel, path = resolved
    reserved = reserved_folder(workspace, path)
    if reserved is not None:
        return phrase(reserved, dir=rel, agent_id=agent_id)
    refused = _overlap(rel, path, settings, agents, claims)
    if refused is not None:
        return refused
    refused = _busy_elsewhere(rel, path, settings)
    if refused is not None and own is not None and not is_named(request.deliverables_dir):
        moved = replace(request, deliverables_dir=own)
        return admit(
            moved,
            workspace=workspace,
            settings=settings,
            used_ids=used_ids,
            running=running,
            agents=agents,
            claims=claims,
        )
    return refused or resolved


def admit_continued(
    timeout_seconds: int,
    deliverables: tuple[str, Path],
    *,
    settings: Settings,
    running: Sequence[SubAgent],
    agents: Mapping[int, SubAgent],
    claims: Claims,
) -> str | None:
    """Whether an ended sub-agent may run again (continue_sub_agent,
    docs/control-plane.md §1) in its own folder ``deliverables`` (relative, absolute):
    the create limits but the id's (timeout bounds, at most ``max_concurrent_subagents``
    running, a folder no running sub-agent overlaps). Returns the refusal text or None."""
    refused = _limits(timeout_seconds, settings, running)
    return refused or _folder_free(*deliverables, settings, agents, claims)


def _limits(timeout: int, s: Settings, running: Sequence[SubAgent]) -> str | None:
    """The timeout's bounds and the running limit (the seed's phrases), or None."""
    if not s.subagent_timeout_min <= timeout <= s.subagent_timeout_max:
        return prompts.phrase(
            s.language,
            "bad_timeout",
            min=s.subagent_timeout_min,
            max=s.subagent_timeout_max,
            value=timeout,
        )
    if len(running) >= s.max_concurrent_subagents:
        names = ", ".join(f"{a.spec.agent_id} ({a.spec.summary})" for a in running)
        return prompts.phrase(
            s.language,
            "too_many",
            count=len(running),
            running=names,
            max=s.max_concurrent_subagents,
        )
    return None


def _folder_free(
    rel: str, path: Path, s: Settings, agents: Mapping[int, SubAgent], claims: Claims
) -> str | None:
    """Refusal text when a running sub-agent (of this or another Agent) uses or overlaps
    the folder, else None."""
    return _overlap(rel, path, s, agents, claims) or _busy_elsewhere(rel, path, s)


def _overlap(
    rel: str, path: Path, s: Settings, agents: Mapping[int, SubAgent], claims: Claims
) -> str | None:
    """Refusal text (``overlap_dir``) when a running sub-agent of this conversation
    uses or overlaps the folder, else None."""
    owner = claims.folder_overlap(path)
    if owner is not None:
        other = agents[owner].spec
        return prompts.phrase(
            s.language,
            "overlap_dir",
            dir=rel,
            other_id=owner,
            other_summary=other.summary,
            other_dir=other.deliverables_dir,
        )
    return None


def _busy_elsewhere(rel: str, path: Path, s: Settings) -> str | None:
    """Refusal text (``folder_busy_elsewhere``) when the folder's record says a
    sub-agent of another Agent or process runs there now, else None."""
    busy = folder_in_use(path)
    if busy is not None:  # a sub-agent of another Agent (or process) runs there now
        named = prompts.phrase(s.language, "folder_owner_record", sub_conversation_id=busy)
        return prompts.phrase(s.language, "folder_busy_elsewhere", dir=rel, other=named)
    return None


def take_folder(
    workspace: Path,
    spec: WorkerSpec,
    conversation_id: str | None,
    claims: Claims,
    language: str,
    *,
    name_holder: bool = True,
) -> str | None:
    """Take the OS lock on the admitted deliverables folder of ``spec``'s agent, named
    as this process's conversation ``conversation_id``'s, into ``claims`` (until
    Claims.release_hold, once the agent's record is final). Returns the refusal text
    when a sub-agent of another process holds it, or one inside or around it
    (:func:`claim_folder`), else None (taken, or the folder cannot be opened: the
    start then fails with the reason). ``name_holder`` False: a refusal does not
    wait for the holder to name itself (the caller tries another folder)."""
    owner = FolderOwner.here(conversation_id, spec.agent_id)
    path = Path(spec.deliverables_path)
    hold = claim_folder(workspace, spec.deliverables_dir, path, owner, language, name_holder)
    if isinstance(hold, str):
        return hold
    if hold is not None:
        claims.hold(owner.agent_id, hold)
    return None


def claim_folder(
    workspace: Path,
    rel: str,
    path: Path,
    owner: FolderOwner,
    language: str,
    name_holder: bool = True,
) -> FolderHold | str | None:
    """Take the OS lock on an admitted deliverables folder for ``owner`` (across
    processes, atomically: agentkit.subagent.folder_lock). Returns the hold, the
    refusal text naming the other owner (``folder_busy_elsewhere``: its conversation
    id, agent id and pid; unnamed without ``name_holder``), or None when the folder
    cannot be opened (the start then fails with the reason)."""
    try:
        return hold_folder(workspace, path, owner, name_holder=name_holder)
    except FolderBusy as busy:
        named = busy.owner
        if named is None:
            unnamed = "folder_owner_nested" if busy.nested else "folder_owner_unknown"
            other = prompts.phrase(language, unnamed)
        else:
            other = prompts.phrase(
                language,
                "folder_owner",
                agent_id=named.agent_id,
                conversation_id=named.conversation_id or "?",
                pid=named.pid,
            )
            if busy.nested:
                other = prompts.phrase(language, "folder_owner_around", owner=other)
        return prompts.phrase(language, "folder_busy_elsewhere", dir=rel, other=other)
    except OSError:
        return None
