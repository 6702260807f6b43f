"""AGENTS.md: which files an agent reads, in what order, and how much of them.

One job: the files of the AGENTS.md convention (agents.md, and Codex's reading of
it: root down to the working folder, nearest last) for one agent, farthest first, nearest last, so that the nearer file,
read later, takes precedence:

1. the user's ``~/.config/agentkit/AGENTS.md`` (``$XDG_CONFIG_HOME/agentkit``);
2. the workspace's ``AGENTS.md``;
3. for a sub-agent only: the ``AGENTS.md`` of every folder from the workspace root
   down to its deliverables folder (that folder's own last).

Empty files are skipped; a file that cannot be used (a link out of the workspace, not
a regular file, not UTF-8, over 1 MiB) is skipped with a warning naming it. The texts
together are capped at ``Settings.agents_md_max_chars``: the nearest files keep their
text first, so the cut falls on the farthest (most general) ones, and the cut is said
(:attr:`AgentsMd.cut_chars`, rendered by agentkit.conventions.section).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.conventions.files import (
    ConventionFileError,
    display,
    read_text,
    user_config_dir,
    warn_once,
    warn_secrets,
)

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["AGENTS_MD", "AgentsMd", "InstructionFile", "agents_md_paths", "read_agents_md"]

AGENTS_MD = "AGENTS.md"


@dataclass(frozen=True)
class InstructionFile:
    """One AGENTS.md as included: ``label`` (its path as shown: workspace-relative, or
    absolute for the user's) and ``text`` (stripped; cut when over the cap)."""

    label: str
    text: str


@dataclass(frozen=True)
class AgentsMd:
    """The AGENTS.md files of one agent, farthest first.

    Attributes:
        files: the files included, with their text (a file cut to nothing is not here).
        labels: every file read (those cut to nothing too), farthest first.
        cut_chars: characters left out to keep within the cap (0: nothing cut).
        cut_files: labels of the files that were cut, farthest first.
        limit: the cap applied (``agents_md_max_chars``), characters.
    """

    files: tuple[InstructionFile, ...] = ()
    labels: tuple[str, ...] = ()
    cut_chars: int = 0
    cut_files: tuple[str, ...] = ()
    limit: int = 0


def agents_md_paths(
    workspace: Path, deliverables: Path | None = None, *, user: bool = True
) -> list[tuple[Path, bool]]:
    """Return ``(path, is_project_file)`` of every AGENTS.md an agent may read, farthest
    first (module docstring). ``deliverables``: a sub-agent's folder, absolute, inside
    ``workspace`` (else only the first two are returned). ``user``: the user's own file
    (``Settings.user_files``); without it nothing in the home folder is read."""
    paths = [(user_config_dir() / AGENTS_MD, False)] if user else []
    paths.append((workspace / AGENTS_MD, True))
    if deliverables is not None and deliverables.is_relative_to(workspace):
        here = workspace
        for part in deliverables.relative_to(workspace).parts:
            here = here / part
            paths.append((here / AGENTS_MD, True))
    return paths


def read_agents_md(
    workspace: Path, settings: Settings, deliverables: Path | None = None
) -> AgentsMd:
    """Return the AGENTS.md files of one agent (:func:`agents_md_paths`) with their
    text, capped at ``settings.agents_md_max_chars``; nothing when ``settings.agents_md``
    is off. Never raises: a file that cannot be used is skipped with a warning."""
    if not settings.agents_md:
        return AgentsMd()
    found: list[InstructionFile] = []
    for path, project in agents_md_paths(workspace, deliverables, user=settings.user_files):
        if not os.path.lexists(path):  # the usual case: no file there
            continue
        label = display(path, workspace)
        try:
            text = read_text(path, inside=workspace if project else None).strip()
        except FileNotFoundError:
            continue
        except (ConventionFileError, OSError) as exc:
            warn_once(f"{label} is not used: {exc}")
            continue
        if text:
            warn_secrets(label, text, [settings.api_key])
            found.append(InstructionFile(label, text))
    return _capped(found, settings.agents_md_max_chars)


def _capped(files: list[InstructionFile], limit: int) -> AgentsMd:
    """Keep at most ``limit`` characters, nearest file first (module docstring)."""
    left = limit
    kept: list[InstructionFile | None] = [None] * len(files)
    cut_chars = 0
    cut: list[str] = []
    for i in range(len(files) - 1, -1, -1):
        item = files[i]
        if len(item.text) <= left:
            kept[i] = item
            left -= len(item.text)
            continue
        cut_chars += len(item.text) - left
        cut.append(item.label)
        if left > 0:
            kept[i] = InstructionFile(item.label, item.text[:left].rstrip())
        left = 0
    return AgentsMd(
        files=tuple(f for f in kept if f is not None),
        labels=tuple(f.label for f in files),
        cut_chars=cut_chars,
        cut_files=tuple(reversed(cut)),
        limit=limit,
    )
