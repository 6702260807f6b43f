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
another Agent or process, found through its record, is refused saying so
(``folder_busy_elsewhere``). This conversation's own agents are checked first:
their records say running too, so the record alone cannot tell them apart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkit import prompts
from agentkit.settings import Settings
from agentkit.subagent import inputs
from agentkit.subagent.claims import Claims
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
    rel = given.strip() if given and given.strip() else f"sub_agent_results/agent_{agent_id}"
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


STATE_DIR = ".agentkit"
"""agentkit's own state folder in the workspace (conversations; agentkit.conversation)."""


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
) -> tuple[str, Path] | str:
    """Return the deliverables folder ``(relative, absolute)`` the request gets, or
    the refusal text (the seed's phrases, in the settings' language).

    ``used_ids``: ids taken in this conversation, with their summaries;
    ``running``: the sub-agents running now; ``agents``: this run's by id.
    """
    s = settings
    agent_id = request.agent_id

    def phrase(key: str, **values: Any) -> str:
        return prompts.phrase(s.language, key, **values)

    if not inputs.AGENT_ID_MIN <= agent_id <= inputs.AGENT_ID_MAX:
        return phrase("bad_id", agent_id=agent_id)
    if agent_id in used_ids:
        return phrase("duplicate_id", agent_id=agent_id, summary=used_ids[agent_id])
    timeout = request.timeout_seconds
    if not s.subagent_timeout_min <= timeout <= s.subagent_timeout_max:
        return phrase(
            "bad_timeout", min=s.subagent_timeout_min, max=s.subagent_timeout_max, value=timeout
        )
    if len(running) >= s.max_concurrent_subagents:
        names = ", ".join(f"{a.spec.agent_id} ({a.spec.summary})" for a in running)
        return phrase("too_many", count=len(running), running=names, max=s.max_concurrent_subagents)
    resolved = resolve_deliverables(workspace, agent_id, request.deliverables_dir)
    if isinstance(resolved, str):
        return phrase("bad_dir", reason=resolved, agent_id=agent_id)
    rel, path = resolved
    reserved = reserved_folder(workspace, path)
    if reserved is not None:
        return phrase(reserved, dir=rel, agent_id=agent_id)
    owner = claims.folder_overlap(path)
    if owner is not None:
        other = agents[owner].spec
        return phrase(
            "overlap_dir",
            dir=rel,
            other_id=owner,
            other_summary=other.summary,
            other_dir=other.deliverables_dir,
        )
    busy = folder_in_use(path)
    if busy is not None:  # a sub-agent of another Agent (or process) runs there now
        return phrase("folder_busy_elsewhere", dir=rel, other=busy)
    return resolved
