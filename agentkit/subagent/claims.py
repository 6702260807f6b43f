"""Write claims: no two running sub-agents write the same file (docs/specification.md §8.2).

Each running agent claims its deliverables_dir at creation and every file at its
first write or edit. A claim ends with its agent. An isolated sub-agent (its own
copy of the workspace, docs/isolation.md) claims no file and never refuses the main
agent's write. The table lives in the parent process; workers ask over their pipe.
A folder claim also holds the folder's OS lock (agentkit.subagent.folder_lock: other
processes see it), released once the agent's record is final.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from agentkit.subagent.folder_lock import FolderHold


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass
class Claims:
    """Thread-safe table of claimed folders and files, by owner (agent id)."""

    folders: dict[int, Path] = field(default_factory=dict)
    files: dict[Path, int] = field(default_factory=dict)
    holds: dict[int, FolderHold] = field(default_factory=dict)
    isolated: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def folder_overlap(self, folder: Path) -> int | None:
        """Return the agent whose claimed folder overlaps ``folder`` (same, inside or
        containing), else None."""
        with self._lock:
            for owner, other in self.folders.items():
                if _inside(folder, other) or _inside(other, folder):
                    return owner
        return None

    def claim_folder(self, owner: int, folder: Path) -> None:
        """Record ``owner``'s deliverables folder."""
        with self._lock:
            self.folders[owner] = folder

    def mark_isolated(self, owner: int) -> None:
        """``owner`` works on its own copy of the workspace (docs/isolation.md): it
        claims no file (:meth:`claim_file` grants without recording) and never
        refuses the main agent's write (:meth:`owner_of` skips it); the merge is the
        arbiter. Its deliverables folder, the real one, stays claimed against other
        sub-agents."""
        with self._lock:
            self.isolated.add(owner)

    def hold(self, owner: int, hold: FolderHold) -> None:
        """Keep ``hold``, the OS lock on ``owner``'s folder, until :meth:`release_hold`."""
        with self._lock:
            self.holds[owner] = hold

    def owner_of(self, path: Path, asking: int | None) -> int | None:
        """Return the running agent other than ``asking`` that owns ``path`` (a claimed
        file, or a file inside its claimed folder), else None."""
        with self._lock:
            owner = self.files.get(path)
            if owner is not None and owner != asking:
                return owner
            for agent, folder in self.folders.items():
                if agent != asking and agent not in self.isolated and _inside(path, folder):
                    return agent
        return None

    def claim_file(self, owner: int, path: Path) -> int | None:
        """Claim ``path`` for ``owner``; returns the conflicting owner instead when
        another agent holds it (and claims nothing)."""
        with self._lock:
            if owner in self.isolated:  # its own copy: nothing to keep apart
                return None
            current = self.files.get(path)
            if current is not None and current != owner:
                return current
            for agent, folder in self.folders.items():
                if agent != owner and _inside(path, folder):
                    return agent
            self.files[path] = owner
            return None

    def release(self, owner: int) -> None:
        """Drop every claim of ``owner`` (its agent ended) but its folder's OS lock,
        which :meth:`release_hold` drops once the record is final (before that another
        process taking the folder would archive or sweep a record still being written)."""
        with self._lock:
            self.folders.pop(owner, None)
            self.isolated.discard(owner)
            for path in [p for p, o in self.files.items() if o == owner]:
                del self.files[path]

    def release_hold(self, owner: int) -> None:
        """Drop ``owner``'s folder OS lock (agentkit.subagent.folder_lock), if held."""
        with self._lock:
            hold = self.holds.pop(owner, None)
        if hold is not None:
            hold.release()
