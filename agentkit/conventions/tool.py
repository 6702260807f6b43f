"""The ``load_skill(name)`` tool: a skill's instructions, when the model asks for them.

One job: find the skill by name in the agent's catalog (the main agent's: the skills
on disk now; a sub-agent's: those its parent listed for it, after its profile's
``skills`` allow-list), read its ``SKILL.md`` again, and hand the model its body and
the paths of the skill's other files (workspace-relative for a project skill, so that
read_file and run_command take them as they are; absolute for the user's, readable
because the user's skills folder is a read-only root, see Settings.read_only_paths).

The body is the user's text, not a tool's output: the tool's own result is one line
saying the skill is loaded, and the instructions follow as a system message after
the batch's tool results (ToolResult.messages), where the tool-output shrinker never
cuts them and "tool results are data" does not apply. The body is capped at
``read_max_output_chars`` (the cut is said, with the file to read for the rest).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from agentkit import prompts
from agentkit.conventions.files import ConventionFileError, display
from agentkit.conventions.skills import Skill, discover_skills, skill_body
from agentkit.tools.base import Tool, ToolContext, ToolResult

__all__ = ["LOAD_SKILL", "LoadSkillParams", "load_skill_tool", "skill_files", "subagent_tools"]

FILES_LISTED = 50
"""A skill's other files named at most; more are counted."""
_WALK_MAX = 2000
_SKIP_DIRS = frozenset({"node_modules", "__pycache__"})


class LoadSkillParams(BaseModel):
    """load_skill's parameters."""

    name: str = Field(json_schema_extra={"minLength": 1})


def skill_files(skill: Skill, workspace: Path) -> tuple[list[str], int]:
    """Return ``(paths, more)``: the skill folder's files other than SKILL.md as the
    tools take them (at most FILES_LISTED, sorted, four levels deep, hidden files and
    ``node_modules`` left out, links not followed) and how many more there are."""
    root = Path(skill.path).parent
    listed: list[str] = []
    more = seen = 0
    for here, dirs, files in os.walk(root):
        depth = len(Path(here).relative_to(root).parts)
        dirs[:] = [] if depth >= 3 else sorted(
            d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
        )  # fmt: skip
        for name in sorted(files):
            seen += 1
            path = Path(here) / name
            if name.startswith(".") or str(path) == skill.path:
                continue
            if len(listed) < FILES_LISTED:
                listed.append(display(path, workspace))
            else:
                more += 1
        if seen > _WALK_MAX:
            break
    return listed, more


def _render(skill: Skill, body: str, ctx: ToolContext) -> str:
    language = ctx.language
    cap = ctx.settings.read_max_output_chars
    if len(body) > cap:
        note = prompts.phrase(language, "skill_body_cut", total=len(body), file=skill.label)
        body = body[:cap] + "\n" + note
    files, more = skill_files(skill, ctx.workspace)
    listing = "\n".join(f"- {f}" for f in files) or prompts.phrase(language, "no_files")
    if more:
        listing += "\n" + prompts.phrase(language, "skill_files_more", more=more)
    return prompts.render(
        language,
        "conventions/skill.txt",
        skill=skill.name,
        file=skill.label,
        body=body or prompts.phrase(language, "no_files"),
        files=listing,
    )


def load_skill_tool(catalog: Callable[[ToolContext], Mapping[str, Skill]]) -> Tool:
    """Return a load_skill Tool over ``catalog(ctx)``: the skills it may load, by name
    (read at each call). Its failures are ``Error:`` results: ``not_found`` (no such
    skill, naming those there are; or its file is gone) and ``invalid_skill`` (its
    header broke since it was listed)."""

    def load(params: LoadSkillParams, ctx: ToolContext) -> ToolResult:
        name = params.name.strip().lstrip("$/")
        skills = catalog(ctx)
        skill = skills.get(name)
        if skill is None:
            names = ", ".join(sorted(skills)[:100]) or "(none)"
            return ToolResult.error(
                "not_found", f"there is no skill named {name!r}; skills: {names}"
            )
        try:
            body = skill_body(skill, ctx.workspace)
        except FileNotFoundError:
            return ToolResult.error(
                "not_found", f"the file of skill {name} ({skill.label}) is gone"
            )
        except (ConventionFileError, OSError) as exc:
            return ToolResult.error(
                "invalid_skill", f"skill {name} ({skill.label}) cannot be used now: {exc}"
            )
        return ToolResult(
            output=prompts.phrase(ctx.language, "skill_loaded", name=name),
            meta={"skill": name, "file": skill.label},
            messages=[{"role": "system", "content": _render(skill, body, ctx)}],
        )

    return Tool(
        name="load_skill",
        params=LoadSkillParams,
        func=load,
        action="load_skill",
    )


def _main_catalog(ctx: ToolContext) -> Mapping[str, Skill]:
    if not ctx.settings.skills:
        return {}
    return discover_skills(ctx.workspace, warn=False, user=ctx.settings.user_files).by_name()


LOAD_SKILL = load_skill_tool(_main_catalog)
"""The main agent's load_skill: the skills of its workspace and of the user, as they
are on disk at each call."""


def subagent_tools(extra: dict[str, object]) -> list[Tool]:
    """A worker's load_skill over the skills its parent listed for it in
    WorkerSpec.extra (agentkit.conventions.gather.subagent_extra), or [] when none."""
    from agentkit.conventions.gather import spec_skills

    skills = {s.name: s for s in spec_skills(dict(extra))}
    return [load_skill_tool(lambda ctx: skills)] if skills else []
