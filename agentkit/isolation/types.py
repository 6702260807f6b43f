"""The shapes of isolation: a sub-agent's own copy, what it changed, a merge's report.

One job: the dataclasses every other part agrees on (the engine in this package, the
sub-agent records, the main agent's tools, the front ends). Each has ``to_dict`` for
JSON (records, tool results, the web API) and, where it is read back, ``from_dict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agentkit.errors import AgentkitError

__all__ = [
    "Changes",
    "Conflict",
    "Copy",
    "CopyKind",
    "FileChange",
    "IsolationError",
    "MergeReport",
    "MergeStatus",
]

CopyKind = Literal["worktree", "snapshot"]
"""``worktree``: a git worktree of the workspace's own repository; ``snapshot``: a
worktree of a private repository (``.agentkit/isolation/snapshots.git``) whose base is a
snapshot of a folder outside git."""

FileStatus = Literal["added", "modified", "deleted", "type_changed"]
MergeStatus = Literal["merged", "conflicts", "nothing_to_merge"]


class IsolationError(AgentkitError):
    """An isolated copy could not be made, read, merged or dropped (git failed, the copy
    is gone, the workspace is not writable). The message says which and why; nothing was
    deleted."""


@dataclass(frozen=True)
class Copy:
    """A sub-agent's own copy of the workspace, as recorded (JSON in its record).

    Attributes:
        kind: see :data:`CopyKind`.
        root: absolute folder the sub-agent works in (the worktree, or the folder inside
            it that matches the workspace when the workspace is below the repository's top).
        worktree: absolute folder of the git worktree (``root`` or an ancestor).
        git_dir: absolute path of the repository's common git folder that holds the
            branch and the base (the user's ``.git``, or the private snapshots repository).
        prefix: the workspace's path inside the repository, ``""`` at the top, else
            ``"sub/dir/"`` (POSIX, trailing slash).
        branch: ``agentkit/<conversation>/agent-<id>``; its commits are the sub-agent's work.
        base: the base commit's id (40 hex): the caller's HEAD plus its uncommitted
            changes when the copy was made.
        base_ref: the private ref that keeps the base alive
            (``refs/agentkit/bases/<conversation>/agent-<id>``).
        exclude: workspace-relative paths that are not part of the change (the
            sub-agent's own deliverables folder, shared with the workspace).
        created_at: ISO UTC time the copy was made.
    """

    kind: CopyKind
    root: str
    worktree: str
    git_dir: str
    prefix: str
    branch: str
    base: str
    base_ref: str
    exclude: tuple[str, ...] = ()
    created_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The copy as JSON-ready data (``exclude`` a list)."""
        data = asdict(self)
        data["exclude"] = list(self.exclude)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Copy:
        """Read a copy back from a record. Raises IsolationError when a field is missing
        or not a string (a damaged record)."""
        try:
            values = {k: data[k] for k in ("kind", "root", "worktree", "git_dir", "prefix",
                                           "branch", "base", "base_ref")}  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise IsolationError(f"the recorded copy lacks {exc}") from None
        if not all(isinstance(v, str) for v in values.values()) or values["kind"] not in (
            "worktree",
            "snapshot",
        ):
            raise IsolationError("the recorded copy is damaged (a field is not text)")
        exclude = data.get("exclude") or ()
        return cls(
            **values,
            exclude=tuple(str(p) for p in exclude if isinstance(p, str)),
            created_at=str(data.get("created_at") or ""),
        )


@dataclass(frozen=True)
class FileChange:
    """One file the sub-agent changed, base to its final tree. ``path`` is
    workspace-relative (POSIX); ``insertions``/``deletions`` count lines (0 for a
    binary file, ``binary`` True then). ``link_target``: when the sub-agent's version
    is a symbolic link, where it points (as written, at most 4,096 characters), else
    None; front ends show it as ``path → target``."""

    path: str
    status: FileStatus
    insertions: int = 0
    deletions: int = 0
    binary: bool = False
    link_target: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``link_target`` only for a symbolic link."""
        data = asdict(self)
        if self.link_target is None:
            del data["link_target"]
        return data


@dataclass(frozen=True)
class Changes:
    """What a sub-agent changed in its copy, base to its last saved state.

    ``head``: the commit on its branch that holds that state (40 hex).
    """

    files: tuple[FileChange, ...]
    head: str

    @property
    def insertions(self) -> int:
        """Lines added across files."""
        return sum(f.insertions for f in self.files)

    @property
    def deletions(self) -> int:
        """Lines removed across files."""
        return sum(f.deletions for f in self.files)

    def summary(self) -> dict[str, int]:
        """``{"files": n, "insertions": i, "deletions": d}``: the ``changes`` field of a
        result, a notification and a status row."""
        return {"files": len(self.files), "insertions": self.insertions,
                "deletions": self.deletions}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The summary plus ``paths`` (each file's dict) and ``head``."""
        return {**self.summary(), "paths": [f.to_dict() for f in self.files], "head": self.head}


@dataclass(frozen=True)
class Conflict:
    """One file the merge could not apply, with what the model needs to decide.

    Attributes:
        path: workspace-relative (POSIX).
        reason: ``both_modified`` (both sides edited overlapping lines), ``modify_delete``
            (one side deleted what the other edited), ``both_added`` (both created it
            differently), ``file_changed`` (the workspace's file is not what the merge
            read, e.g. edited meanwhile), ``unsafe_link`` (a symbolic link whose target
            is absolute or leads out of the workspace: never written), or ``other``
            (git's words in ``detail``).
        workspace_change: unified diff base → workspace now, for this file (capped).
        sub_agent_change: unified diff base → the sub-agent's version (capped).
        detail: git's own message for the conflict, one line, may be empty.
    """

    path: str
    reason: str
    workspace_change: str = ""
    sub_agent_change: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True)
class MergeReport:
    """What ``merge`` did, or (``dry_run``) would do.

    Attributes:
        status: ``merged`` (every change applied; with ``dry_run``: would apply),
            ``conflicts`` (nothing written), ``nothing_to_merge`` (no change since base).
        files: the files written (or that would be), workspace-relative.
        conflicts: per file, when ``status`` is ``conflicts``.
        base_moved: the workspace changed since the copy was made.
        dry_run: nothing was written.
    """

    status: MergeStatus
    files: tuple[str, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    base_moved: bool = False
    dry_run: bool = False
    changes: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data, in the seed's style (the tool adds ``success`` first)."""
        data: dict[str, Any] = {"status": self.status, "files": list(self.files)}
        if self.conflicts:
            data["conflicts"] = [c.to_dict() for c in self.conflicts]
        data["base_moved"] = self.base_moved
        data["dry_run"] = self.dry_run
        if self.changes:
            data["changes"] = dict(self.changes)
        return data
