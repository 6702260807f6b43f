"""A person's side of isolated sub-agents (docs/isolation.md), shared by the front ends.

One job: what ``agentkit chat`` (``/diff``, ``/merge``, ``/discard``), the web page,
the editor (ACP) and the Python API's spawn handles do with an isolated sub-agent's
copy of a :class:`agentkit.chat.Session`, and the words they say about it:

* :func:`enabled`: isolation is on (``subagent_isolation`` not ``off``);
* :func:`review`: its changes and its diff, split per file and capped
  (:class:`Review`, :class:`FileDiff`);
* :func:`merge` and :func:`discard`: the manager's merge and discard (agentkit.subagent.merging),
  each that changed something told to the main agent at its next round (a system note),
  so nothing happens behind its back;
* :func:`refusal_words`, :func:`report_lines`, :func:`conflict_words`: plain English
  for a refusal (unknown id, shared, running, dropped, merged), a merge report and
  one conflicted file.

Errors are :class:`agentkit.isolation.IsolationError` (``IsolationRefused`` with a
``reason`` for the refusals); nothing here deletes anything but a discard's copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkit import prompts
from agentkit.isolation.types import Changes, Conflict, FileChange, IsolationError, MergeReport
from agentkit.subagent import merging
from agentkit.subagent.merging import IsolationRefused

if TYPE_CHECKING:
    from agentkit.chat.session import Session

__all__ = [
    "DIFF_CHARS",
    "FileDiff",
    "Review",
    "conflict_words",
    "discard",
    "enabled",
    "merge",
    "refusal_words",
    "report_lines",
    "review",
    "split_diff",
]

DIFF_CHARS = 200_000
"""Most characters of a diff a front end gets (the rest is counted in ``Review.cut``)."""

_READ_CHARS = 2_000_000
"""Characters of the diff read to count what a cap leaves out."""

_REASONS = {
    "both_modified": "the workspace and the sub-agent changed the same lines",
    "modify_delete": "one side deleted the file and the other changed it",
    "both_added": "both created the file, with different contents",
    "file_changed": "the file changed in the workspace while the merge read it",
}
# Said with git's own detail (it names the link's target).
_WITH_DETAIL = {"unsafe_link": "a symbolic link leading out of the workspace, not written"}


@dataclass(frozen=True)
class FileDiff:
    """One changed file of a :class:`Review`: its :class:`FileChange` fields and its
    part of the unified diff (``diff``, from ``diff --git`` on; ``""`` when the cap
    left it out); ``link_target``: where the sub-agent's symbolic link points (a front
    end shows ``path → target``), None for a file."""

    path: str
    status: str
    insertions: int
    deletions: int
    binary: bool
    diff: str
    link_target: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; ``link_target`` only for a symbolic link."""
        data = dict(self.__dict__)
        if self.link_target is None:
            del data["link_target"]
        return data


@dataclass(frozen=True)
class Review:
    """An isolated sub-agent's changes as a person reads them.

    Attributes:
        agent_id: the sub-agent's id.
        changes: its files and lines, base to its saved state.
        files: per file, the counts and its diff text.
        diff: the whole unified diff, at most ``max_chars`` characters.
        cut: characters of the diff left out by the cap (0: it is whole; at least this
            many when the diff was longer than could be read).
        branch: the git branch that holds its work; ``base``: the commit it started from.
        merged / discarded: what its record says.
    """

    agent_id: int
    changes: Changes
    files: tuple[FileDiff, ...]
    diff: str
    cut: int
    branch: str
    base: str
    merged: bool = False
    discarded: bool = False

    def summary_line(self) -> str:
        """``sub-agent #2: 3 files changed, +10 -4 (not merged)``."""
        count = len(self.changes.files)
        files = f"{count} file{'s' if count != 1 else ''} changed" if count else "no file changed"
        state = "merged" if self.merged else "not merged"
        return (
            f"sub-agent #{self.agent_id}: {files}, +{self.changes.insertions}"
            f" -{self.changes.deletions} ({state})"
        )

    def cut_line(self) -> str:
        """What the cap left out and where the whole diff is, or ``""`` when whole."""
        if not self.cut:
            return ""
        return (
            f"… {self.cut:,} more characters of the diff not shown; the whole diff: "
            f"git diff {self.base[:12]} {self.branch}"
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"agent_id", "summary", "changes" (Changes.to_dict), "files" (FileDiff
        dicts), "cut", "branch", "base", "merged", "discarded"}``."""
        return {
            "agent_id": self.agent_id,
            "summary": self.summary_line(),
            "changes": self.changes.to_dict(),
            "files": [f.to_dict() for f in self.files],
            "cut": self.cut,
            "branch": self.branch,
            "base": self.base,
            "merged": self.merged,
            "discarded": self.discarded,
        }


def enabled(session: Session) -> bool:
    """True when the conversation's ``subagent_isolation`` is not ``off``."""
    return str(getattr(session.settings, "subagent_isolation", "off")) != "off"


def review(session: Session, agent_id: int, *, max_chars: int = DIFF_CHARS) -> Review:
    """Isolated sub-agent ``agent_id``'s changes and diff (its copy is saved first; also
    while it runs), the diff capped at ``max_chars`` characters.

    Raises:
        IsolationRefused: unknown id, a shared sub-agent, a discarded copy.
        IsolationError: git failed or the copy is gone.
    """
    manager = session.manager
    copy = merging.copy_of(manager, agent_id)
    found = merging.changes(manager, agent_id)
    whole = merging.diff(manager, agent_id, max_chars=_READ_CHARS)
    read_all = not whole.rstrip().endswith(f"[diff cut at {_READ_CHARS} characters]")
    shown = whole[:max_chars]
    cut = len(whole) - len(shown) if read_all else max(1, _READ_CHARS - len(shown))
    sections = split_diff(shown)
    files = tuple(
        FileDiff(
            f.path,
            f.status,
            f.insertions,
            f.deletions,
            f.binary,
            sections.get(f.path, ""),
            f.link_target,
        )  # fmt: skip
        for f in found.files
    )
    row = _row(session, agent_id)
    return Review(
        agent_id=agent_id,
        changes=found,
        files=files,
        diff=shown,
        cut=cut,
        branch=copy.branch,
        base=copy.base,
        merged=bool(row.get("merged")),
        discarded=bool(row.get("discarded")),
    )


def merge(session: Session, agent_id: int, *, dry_run: bool = False) -> MergeReport:
    """Merge isolated sub-agent ``agent_id``'s changes onto the workspace as it is now
    (all or nothing; ``dry_run`` writes nothing). A merge that wrote files is told to
    the main agent at its next round. Raises IsolationRefused (unknown, shared,
    running, discarded, merged) or IsolationError (git failed: nothing was written)."""
    report = merging.merge(session.manager, agent_id, dry_run=dry_run)
    if not dry_run and report.status == "merged":
        _note(session, "user_merged", agent_id=agent_id, count=len(report.files))
    return report


def discard(session: Session, agent_id: int) -> None:
    """Drop isolated sub-agent ``agent_id``'s copy and branch (the workspace is not
    touched); the main agent is told at its next round. Raises as :func:`merge`."""
    merging.discard(session.manager, agent_id)
    _note(session, "user_discarded", agent_id=agent_id)


def split_diff(text: str) -> dict[str, str]:
    """A unified diff's sections by the path each changes (from its ``diff --git``
    line): ``{"app.py": "diff --git a/app.py b/app.py\\n..."}``."""
    sections: dict[str, str] = {}
    current: list[str] = []
    path = ""

    def close() -> None:
        if path and current:
            sections[path] = "".join(current)

    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            close()
            current, path = [line], _path_of(line)
            continue
        current.append(line)
    close()
    return sections


def _path_of(header: str) -> str:
    """The path of ``diff --git a/x b/x`` (both sides are one path: no renames)."""
    rest = header[len("diff --git ") :].rstrip("\n")
    half = (len(rest) - 1) // 2  # "a/<p> b/<p>": two equal halves and a space
    left, right = rest[:half], rest[half + 1 :]
    if left.startswith("a/") and right.startswith("b/") and left[2:] == right[2:]:
        return right[2:]
    return right[2:] if right.startswith("b/") else rest


def conflict_words(conflict: Conflict) -> str:
    """One line for a conflicted file: ``app.py: the workspace and the sub-agent
    changed the same lines``."""
    if conflict.reason in _WITH_DETAIL:
        return f"{conflict.path}: {conflict.detail or _WITH_DETAIL[conflict.reason]}"
    reason = _REASONS.get(conflict.reason) or conflict.detail or conflict.reason
    return f"{conflict.path}: {reason}"


def report_lines(agent_id: int, report: MergeReport) -> list[str]:
    """A merge report in words: a head line, then one line per file (or conflict)."""
    count = len(report.conflicts) if report.status == "conflicts" else len(report.files)
    files = f"{count} file{'s' if count != 1 else ''}"
    moved = " (the workspace changed since it started)" if report.base_moved else ""
    if report.status == "conflicts":
        head = (
            f"sub-agent #{agent_id}'s changes conflict with the workspace in {files}; "
            f"nothing was written{' (dry run)' if report.dry_run else ''}:"
        )
        return [head, *(f"  {conflict_words(c)}" for c in report.conflicts)]
    if report.status == "nothing_to_merge":
        return [f"sub-agent #{agent_id} changed nothing: there is nothing to merge"]
    if report.dry_run:
        head = f"dry run: sub-agent #{agent_id}'s changes would apply cleanly to {files}{moved}"
    else:
        head = f"merged sub-agent #{agent_id}'s changes into {files}{moved}; nothing was committed"
    return [head, *(f"  {path}" for path in report.files)]


def refusal_words(error: IsolationError, agent_id: int, stop_hint: str = "") -> str:
    """Plain words for a refused or failed operation on sub-agent ``agent_id``;
    ``stop_hint``: how this front end stops a sub-agent (``/stop 2``), said when it
    still runs."""
    reason = error.reason if isinstance(error, IsolationRefused) else None
    words = {
        "unknown": f"no sub-agent #{agent_id} in this conversation",
        "shared": f"sub-agent #{agent_id} worked in the workspace itself (shared): its "
        "changes are there already; there is nothing to merge or discard",
        "running": f"sub-agent #{agent_id} is still running: wait for its end"
        + (f" (or {stop_hint})" if stop_hint else "")
        + " before merging or discarding its changes",
        "discarded": f"sub-agent #{agent_id}'s changes were discarded already",
        "merged": f"sub-agent #{agent_id}'s changes were merged already",
    }
    if reason in words:
        return words[reason]
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    return f"sub-agent #{agent_id}: {first}; nothing was written, its copy is kept"


def _row(session: Session, agent_id: int) -> dict[str, Any]:
    return next((r for r in session.subagents() if r.get("agent_id") == agent_id), {})


def _note(session: Session, key: str, **values: Any) -> None:
    session.note(prompts.phrase(session.settings.language, key, **values))


def changes_of(session: Session, agent_id: int) -> tuple[FileChange, ...]:
    """The files isolated sub-agent ``agent_id`` changed (saved first). Raises as
    :func:`review`."""
    return merging.changes(session.manager, agent_id).files
