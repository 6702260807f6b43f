"""An isolated sub-agent's own copy of the workspace, as its worker uses it (issue 34).

One job: read the copy the parent made (``spec.extra["isolation"]``, a
:class:`~agentkit.isolation.types.Copy` dict; agentkit.isolation made it) and what
follows from it in the worker:

- :func:`own_copy`: the copy, or None for a sub-agent that shares the workspace;
- :func:`workspace_of`: the folder the sub-agent works in (its file tools, its
  commands' folder, its hooks, AGENTS.md and skills, the ``{workspace}`` of its prompt):
  the copy's root, else the workspace;
- :func:`check_deliverables_link`: the copy's deliverables link reaches the real folder;
- :func:`isolated_writes`: no write claims (the copy is its own: the merge is the
  arbiter) and the command sandbox's :class:`~agentkit.process.sandbox.WriteScope`.

The sandbox of an isolated sub-agent's commands: the real workspace is hidden (an empty
tmpfs); the whole worktree of the copy and the real deliverables folder are bound
writable on top (its ``.subagent`` record read-only); the repository's git folder is
shown read-only, because the copy's ``.git`` file points into it
(``<repo>/.git/worktrees/<name>``): ``git status``, ``git diff`` and ``git log`` work in
the copy, while ``git commit`` fails. Writable, that folder would let a command move the
user's branches or set a hook or ``core.fsmonitor`` that agentkit's own git (outside the
sandbox) would then run; the copy's work is committed by the parent (save_copy) instead.
The record and transcript are written below the real workspace as for every sub-agent
(``Worker.record_root``).
"""

from __future__ import annotations

import os
from pathlib import Path

from agentkit.isolation.types import Copy, IsolationError
from agentkit.process.sandbox import WriteScope
from agentkit.subagent.contract import WorkerSpec
from agentkit.tools.base import WriteClaim

__all__ = ["check_deliverables_link", "isolated_writes", "own_copy", "workspace_of"]


def own_copy(spec: WorkerSpec) -> Copy | None:
    """The sub-agent's own copy from ``spec.extra["isolation"]``, or None (not isolated).

    Raises:
        IsolationError: the entry is not a copy's dict, is damaged (Copy.from_dict), or
            its root is not an existing folder (the copy was discarded meanwhile).
    """
    data = spec.extra.get("isolation")
    if data is None:
        return None
    if not isinstance(data, dict):
        raise IsolationError("the sub-agent's isolated copy is damaged (not a copy's record)")
    copy = Copy.from_dict(data)
    if not os.path.isabs(copy.root) or not os.path.isdir(copy.root):
        raise IsolationError(
            f"the sub-agent's own copy {copy.root} is missing (discarded?); it cannot start"
        )
    return copy


def workspace_of(spec: WorkerSpec) -> Path:
    """The folder the sub-agent works in: its copy's root when isolated, else
    ``spec.workspace``. Raises IsolationError as :func:`own_copy`."""
    copy = own_copy(spec)
    return Path(copy.root) if copy is not None else Path(spec.workspace)


def check_deliverables_link(spec: WorkerSpec, copy: Copy) -> None:
    """Check that ``spec.deliverables_dir`` in the copy reaches the real deliverables
    folder (the link the parent made with agentkit.isolation.link_deliverables), so a
    report written there lands where the parent reads it.

    Raises:
        IsolationError: it reaches another place, or nothing.
    """
    link = Path(copy.root) / spec.deliverables_dir
    if os.path.realpath(link) != os.path.realpath(spec.deliverables_path):
        raise IsolationError(
            f"{spec.deliverables_dir} in the sub-agent's copy does not lead to its "
            f"deliverables folder {spec.deliverables_path}; the copy is not ready"
        )


def _no_claim(path: Path) -> None:
    return None


def isolated_writes(spec: WorkerSpec, copy: Copy) -> tuple[WriteClaim, WriteScope]:
    """The write claim and command scope of an isolated sub-agent.

    Returns:
        ``(claim, scope)``: a claim that asks nobody (its copy is its own), for
        ``ToolContext.claim_write``; the scope (module docstring), for
        ``ToolContext.write_scope``.
    """
    label = (
        "your own copy of the workspace (all of it) and your deliverables folder "
        f"{spec.deliverables_dir}"
    )
    scope = WriteScope(
        folders=(Path(copy.worktree), Path(os.path.realpath(spec.deliverables_path))),
        files=tuple,
        label=label,
        hidden=(Path(os.path.realpath(spec.workspace)),),
        shown=(Path(os.path.realpath(copy.git_dir)),),
    )
    return _no_claim, scope
