"""Agent Skills: finding and parsing ``SKILL.md`` files, and which one wins a name.

One job: the skills an agent may see, following the Agent Skills specification
(agentskills.io, ``docs/specification.mdx``): a skill is a folder holding a
``SKILL.md`` whose YAML header gives ``name`` (1-64 characters: lowercase letters,
digits and single hyphens, neither first nor last; it should match the folder's name)
and ``description`` (what it does and when to use it, at most 1024 characters); the
body after the header holds the instructions, and the folder's other files
(``scripts/``, ``references/``, ``assets/``...) are used when the instructions say so.
Other header keys (``license``, ``compatibility``, ``metadata``, ``allowed-tools``,
other agents' extensions) are ignored.

Where skills are found, highest precedence first (a skill hides those of the same
name below it; :attr:`SkillScan.shadowed` says which):

1. ``<workspace>/.agents/skills/<name>/SKILL.md``: the cross-client project folder;
2. ``<workspace>/.agentkit/skills/<name>/SKILL.md``: agentkit's project folder;
3. ``~/.config/agentkit/skills/<name>/SKILL.md`` (``$XDG_CONFIG_HOME``): the user's.

Project over user, as the specification's client guide, Gemini CLI, goose and Codex
order them (Claude Code alone puts the user's first); within the project the
cross-client folder first, as goose and Gemini CLI do.

Parsing is lenient where the client guide says so: a name that differs from its
folder's, a missing name (the folder's is used) or a description over 1024
characters is kept with a note; a YAML value with an unquoted ``: `` is read again
quoted. A header that cannot be used (no ``---`` lines, unreadable YAML, no
description, a name that is not a skill name) skips the skill with the reason, and
:func:`discover_skills` warns once naming the file.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from agentkit.configfile import read_front_matter
from agentkit.conventions.files import (
    ConventionFileError,
    display,
    read_text,
    user_config_dir,
    warn_once,
    warn_secrets,
)
from agentkit.conversation import state_path
from agentkit.errors import ConfigFileError

__all__ = [
    "SKILL_FILE",
    "Skill",
    "SkillScan",
    "Skipped",
    "discover_skills",
    "parse_skill",
    "skill_body",
    "skill_folders",
    "user_skills_dir",
]

SKILL_FILE = "SKILL.md"
NAME_MAX = 64
DESCRIPTION_MAX = 1024
MAX_SKILLS_PER_FOLDER = 500
"""Skill folders looked at in one skills folder (sorted by name); the rest are
skipped, with one warning naming the folder and how many."""

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

Scope = Literal["project", "user"]


@dataclass(frozen=True)
class Skill:
    """One usable skill.

    Attributes:
        name: its name (the header's, else the folder's).
        description: what it does and when to use it, on one line.
        path: absolute path of its ``SKILL.md``.
        label: that path as shown (workspace-relative, or absolute for the user's).
        folder: the skills folder it came from, as shown (``.agents/skills``...).
        scope: ``project`` or ``user``.
        notes: what was lenient about its header (empty when nothing).
    """

    name: str
    description: str
    path: str
    label: str
    folder: str
    scope: Scope = "project"
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (it travels to workers in the WorkerSpec)."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Skill:
        """Rebuild from :meth:`to_dict`. Raises KeyError or TypeError when it is not one."""
        return cls(
            name=str(data["name"]),
            description=str(data["description"]),
            path=str(data["path"]),
            label=str(data["label"]),
            folder=str(data["folder"]),
            scope="user" if data.get("scope") == "user" else "project",
            notes=tuple(str(n) for n in data.get("notes") or ()),
        )


@dataclass(frozen=True)
class Skipped:
    """A ``SKILL.md`` not used: ``label`` (its path as shown) and ``reason`` (one line)."""

    label: str
    reason: str


@dataclass(frozen=True)
class SkillScan:
    """What :func:`discover_skills` found.

    Attributes:
        skills: the usable skills, one per name, in precedence order of their folder,
            then by name.
        skipped: files that could not be used, with the reason.
        shadowed: ``(hidden, winner)`` pairs: a skill hidden by one of the same name
            in a folder of higher precedence.
    """

    skills: tuple[Skill, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    shadowed: tuple[tuple[Skill, Skill], ...] = field(default_factory=tuple)

    def by_name(self) -> dict[str, Skill]:
        """The usable skills by name."""
        return {s.name: s for s in self.skills}


def user_skills_dir() -> Path:
    """``~/.config/agentkit/skills`` (``$XDG_CONFIG_HOME/agentkit/skills``)."""
    return user_config_dir() / "skills"


def skill_folders(workspace: Path, *, user: bool = True) -> list[tuple[Path, Scope]]:
    """The skills folders, highest precedence first (module docstring); ``user``: the
    user's own (``Settings.user_files``)."""
    folders: list[tuple[Path, Scope]] = [
        (workspace / ".agents" / "skills", "project"),
        (state_path(workspace, "skills"), "project"),
    ]
    return folders + [(user_skills_dir(), "user")] if user else folders


def _header(text: str) -> tuple[dict[str, Any], str]:
    """Split a SKILL.md into its YAML header and body (agentkit.configfile's reader,
    shared with agent profiles). Raises ConventionFileError."""
    try:
        return read_front_matter(text)
    except ConfigFileError as exc:
        raise ConventionFileError(exc.message) from None


def parse_skill(text: str, folder_name: str) -> tuple[str, str, tuple[str, ...], str]:
    """Parse a SKILL.md's text.

    Args:
        text: the file's text.
        folder_name: the name of the folder holding it (the default name).

    Returns:
        ``(name, description, notes, body)``: the description on one line; notes say
        what was lenient; body is the text after the header, stripped.

    Raises:
        ConventionFileError: the header cannot be used (the message says why).
    """
    header, body = _header(text)
    notes: list[str] = []
    name = header.get("name")
    if name is None:
        name = folder_name
        notes.append("the header has no name: the folder's name is used")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > NAME_MAX:
        raise ConventionFileError(
            f"name {name!r} is not a skill name: 1-{NAME_MAX} lowercase letters, digits "
            "and single hyphens, not first or last"
        )
    if name != folder_name:
        notes.append(f"its name {name!r} differs from its folder's {folder_name!r}")
    description = header.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ConventionFileError(
            "the header has no description (required: what the skill does and when to use it)"
        )
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_MAX:
        notes.append(
            f"its description has {len(description)} characters (at most {DESCRIPTION_MAX})"
        )
    return name, description, tuple(notes), body


class _Parsed(NamedTuple):
    name: str
    description: str
    notes: tuple[str, ...]
    body: str
    text: str


_cache: dict[tuple[str, str, int, int, int], _Parsed | str] = {}
_cache_lock = threading.Lock()


def _parse_file(path: Path, workspace: Path, scope: Scope) -> _Parsed:
    """Parse the SKILL.md at ``path`` (cached by its identity and mtime: files are
    looked at every round). Raises FileNotFoundError or ConventionFileError."""
    st = os.stat(path)
    key = (str(path), str(workspace), st.st_ino, st.st_mtime_ns, st.st_size)
    with _cache_lock:
        hit = _cache.get(key)
    if isinstance(hit, str):
        raise ConventionFileError(hit)
    if hit is not None:
        return hit
    parsed: _Parsed | str
    try:
        text = read_text(path, inside=workspace if scope == "project" else None)
        parsed = _Parsed(*parse_skill(text, path.parent.name), text)
    except ConventionFileError as exc:
        parsed = str(exc)
    with _cache_lock:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = parsed
    if isinstance(parsed, str):
        raise ConventionFileError(parsed)
    return parsed


def _candidates(folder: Path) -> tuple[list[Path], int]:
    """The first :data:`MAX_SKILLS_PER_FOLDER` skill folders' ``SKILL.md`` paths (by
    name), and how many folders past that were not looked at."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:  # no such folder (the usual case), or not a folder
        return [], 0
    found: list[Path] = []
    over = 0
    for name in names:
        if name.startswith(".") or not os.path.isdir(folder / name):
            continue
        if len(found) < MAX_SKILLS_PER_FOLDER:
            found.append(folder / name / SKILL_FILE)
        else:
            over += 1
    return found, over


def discover_skills(
    workspace: Path, *, warn: bool = True, hidden: Iterable[str | None] = (), user: bool = True
) -> SkillScan:
    """Return the skills of ``workspace`` and of the user (module docstring).

    Args:
        workspace: the resolved workspace root.
        warn: log a warning (once per process and problem) for each skipped file,
            shadowed skill, lenient header, and file holding what looks like a secret.
        hidden: values that must not be in a skill (the endpoint's key), for that warning.
        user: look in the user's skills folder too (``Settings.user_files``).

    Never raises: a file that cannot be used is in :attr:`SkillScan.skipped`.
    """
    keys = list(hidden)
    winners: dict[str, Skill] = {}
    skipped: list[Skipped] = []
    shadowed: list[tuple[Skill, Skill]] = []
    for folder, scope in skill_folders(workspace, user=user):
        paths, over = _candidates(folder)
        if over and warn:
            warn_once(
                f"skills folder {display(folder, workspace)} holds more than "
                f"{MAX_SKILLS_PER_FOLDER} skill folders: only the first {MAX_SKILLS_PER_FOLDER} "
                f"(by name) are used, {over} skipped"
            )
        for path in paths:
            label = display(path, workspace)
            try:
                parsed = _parse_file(path, workspace, scope)
            except FileNotFoundError:
                continue  # a folder without SKILL.md is not a skill
            except (ConventionFileError, OSError) as exc:
                skipped.append(Skipped(label, str(exc)))
                continue
            skill = Skill(parsed.name, parsed.description, str(path), label,
                          display(folder, workspace), scope, parsed.notes)  # fmt: skip
            if skill.name in winners:
                shadowed.append((skill, winners[skill.name]))
                continue
            winners[skill.name] = skill
            if warn:
                for note in skill.notes:
                    warn_once(f"skill {label}: {note}")
                warn_secrets(label, parsed.text, keys)
    if warn:
        for item in skipped:
            warn_once(f"skill {item.label} is skipped: {item.reason}")
        for lost, winner in shadowed:
            warn_once(f"skill {lost.name!r} in {lost.label} is hidden by {winner.label}")
    return SkillScan(tuple(winners.values()), tuple(skipped), tuple(shadowed))


def skill_body(skill: Skill, workspace: Path) -> str:
    """Return the instructions of ``skill`` as its file says now (read again).

    Raises:
        FileNotFoundError: the file is gone.
        ConventionFileError: it can no longer be used (the message says why).
    """
    return _parse_file(Path(skill.path), workspace, skill.scope).body
