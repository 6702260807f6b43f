"""Isolated sub-agents: each works in its own copy of the workspace, merged back on request.

The map:

- ``types``: the shared shapes (Copy, FileChange, Changes, Conflict, MergeReport,
  IsolationError).
- ``_git``: running git safely (scrubbed environment, no hooks, fixed identity, capped
  output, lock retries, errors as IsolationError).
- ``_parse``: pure parts (ref-safe names, pathspecs, parsing git's ``-z`` output).
- ``snapshot``: which repository a workspace's snapshots go to (its own git repository,
  or a private one outside git) and a commit of the files as they are, made with a
  temporary index so the user's index, HEAD and branch never change.
- ``copies``: a copy's life: ``create_copy`` (base on a private ref, a worktree on a
  branch of its own), ``link_deliverables``, ``save_copy``, ``copy_exists``,
  ``discard``.
- ``changes``: ``changes`` (files, lines) and ``diff`` (unified), base to saved state.
- ``merge``: the three-way merge onto the workspace as it is now (``merge-tree``), with
  a conflict report or a dry run.
- ``apply``: writing a clean merge's files into the workspace, all or nothing.
- ``bundles`` and ``archives``: a copy carried to a machine without the workspace's
  disk (a Ray node) and its work carried back (git bundles; the deliverables folder as
  a tar archive).

Contributors: docs/isolation.md explains the model.
"""

from __future__ import annotations

from agentkit.isolation.changes import changes, diff
from agentkit.isolation.copies import (
    copy_exists,
    create_copy,
    discard,
    link_deliverables,
    save_copy,
)
from agentkit.isolation.merge import merge
from agentkit.isolation.snapshot import workspace_repo
from agentkit.isolation.types import (
    Changes,
    Conflict,
    Copy,
    CopyKind,
    FileChange,
    IsolationError,
    MergeReport,
    MergeStatus,
)

__all__ = [
    "Changes",
    "Conflict",
    "Copy",
    "CopyKind",
    "FileChange",
    "IsolationError",
    "MergeReport",
    "MergeStatus",
    "changes",
    "copy_exists",
    "create_copy",
    "diff",
    "discard",
    "link_deliverables",
    "merge",
    "save_copy",
    "workspace_repo",
]
