"""The ``agentkit skills`` subcommand: the Agent Skills found, and the files skipped.

One job: list what agentkit.conventions.skills finds for a workspace, as the agents
would see it: each usable skill (name, description, the folder it came from, its
file, what was lenient about its header), the skills hidden by one of the same name
higher up, and every ``SKILL.md`` skipped with the reason. Exit 0 when every file is
usable, 1 when one was skipped (as ``agentkit profiles`` does for a broken profile).
"""

from __future__ import annotations

import argparse
from typing import Any

from agentkit.cli.common import workspace_arg

__all__ = ["add_parser", "cmd_skills", "report"]


def add_parser(sub: Any) -> None:
    """Add ``skills`` to the ``agentkit`` subparsers ``sub``."""
    skills = sub.add_parser(
        "skills",
        help="list the Agent Skills found and why a file was skipped",
        description="List the skills of .agents/skills, .agentkit/skills and "
        "~/.config/agentkit/skills (highest precedence first), as the agents see them.",
    )
    workspace_arg(skills)


def report(workspace: Any, settings: Any) -> tuple[list[str], bool]:
    """Return ``(lines, every file usable)`` for ``workspace`` (a resolved Path)."""
    from agentkit.conventions.skills import discover_skills, skill_folders

    scan = discover_skills(workspace, warn=False)
    lines: list[str] = []
    if not settings.skills:
        lines.append("skills are off (Settings.skills / AGENTKIT_SKILLS): the agents see none")
    for skill in scan.skills:
        lines.append(f"{skill.name}: {skill.description}")
        lines.append(f"    source: {skill.folder} ({skill.scope})\n    file: {skill.label}")
        lines.extend(f"    note: {note}" for note in skill.notes)
    for lost, winner in scan.shadowed:
        lines.append(f"{lost.name}: hidden: {lost.label} (by {winner.label}, same name)")
    for item in scan.skipped:
        lines.append(f"skipped: {item.label}: {item.reason}")
    if not (scan.skills or scan.shadowed or scan.skipped):
        from agentkit.conventions.files import display

        folders = " or ".join(f"{display(f, workspace)}/" for f, _ in skill_folders(workspace))
        lines.append(f"no skills (put NAME/SKILL.md folders in {folders})")
    return lines, not scan.skipped


def cmd_skills(args: argparse.Namespace) -> int:
    """``agentkit skills``: print the report; exit code 1 when a file was skipped."""
    from agentkit.cli.common import make_settings, workspace
    from agentkit.cli.safe_text import terminal_safe

    lines, good = report(workspace(args.workspace), make_settings({}))
    print(terminal_safe("\n".join(lines)), flush=True)
    return 0 if good else 1
