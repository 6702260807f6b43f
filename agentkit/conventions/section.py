"""The conventions' part of an agent's instructions: AGENTS.md texts, the skill list.

One job: render what agentkit.conventions gathered into the text appended to an
agent's system prompt, in the conversation's language (templates in
``prompts/<lang>/conventions/``). The section starts with a blank line, so that the
system prompt without it is exactly the prompt before it; it is "" when there is
nothing to say, and then nothing changes.

* AGENTS.md: a short heading, one sentence on precedence, then each file in an
  ``<agents_md path="...">`` block (the files' own headings stay theirs), farthest
  first; a cut is said in a line naming the files and the characters left out.
* Skills: a heading, one sentence on how to use them, then one ``- name: description``
  line per skill under its folder, in precedence order. The list is capped at
  ``Settings.skills_list_max_chars``: long descriptions are shortened first (never
  below :data:`MIN_DESCRIPTION`), then the last skills are left out, and a line says
  how many.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import TYPE_CHECKING

from agentkit import prompts

if TYPE_CHECKING:
    from agentkit.conventions.agents_md import AgentsMd
    from agentkit.conventions.skills import Skill

__all__ = ["MIN_DESCRIPTION", "render_agents_md", "render_section", "render_skill_list"]

MIN_DESCRIPTION = 40
"""Characters a description keeps, at least, when the list is shortened."""


def render_section(
    agents: AgentsMd, skills: Sequence[Skill], language: str, list_max_chars: int
) -> str:
    """Return the section: ``"\\n\\n" + AGENTS.md part`` and/or ``"\\n\\n" + skill
    list``, or "" when there are neither files nor skills."""
    parts = []
    if agents.files or agents.cut_files:
        parts.append(render_agents_md(agents, language))
    if skills:
        parts.append(render_skill_list(skills, language, list_max_chars))
    return "".join("\n\n" + part for part in parts)


def render_agents_md(agents: AgentsMd, language: str) -> str:
    """Return the AGENTS.md part (module docstring)."""
    blocks = [f'<agents_md path="{escape(f.label)}">\n{f.text}\n</agents_md>' for f in agents.files]
    if agents.cut_chars:
        blocks.append(
            prompts.phrase(
                language,
                "agents_md_cut",
                chars=agents.cut_chars,
                files=", ".join(agents.cut_files),
                limit=agents.limit,
            )
        )
    return prompts.render(language, "conventions/agents_md.txt", files="\n\n".join(blocks))


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,.;:") + "…"


def _lines(skills: Sequence[Skill], limit: int | None) -> list[str]:
    """The list's lines, each description cut at ``limit`` characters (None: whole)."""
    lines: list[str] = []
    folder = None
    for skill in skills:
        if skill.folder != folder:
            folder = skill.folder
            lines.append(f"{folder}/:")
        description = skill.description if limit is None else _shorten(skill.description, limit)
        where = "" if skill.label.endswith(f"/{skill.name}/SKILL.md") else f" ({skill.label})"
        lines.append(f"- {skill.name}: {description}{where}")
    return lines


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _largest(low: int, high: int, fits: Callable[[int], bool]) -> int | None:
    """The largest ``n`` in ``[low, high]`` with ``fits(n)`` (monotonic), or None."""
    best = None
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


def _fitted(skills: Sequence[Skill], budget: int) -> tuple[list[str], int]:
    """Return the lines within ``budget`` characters and how many skills were left out
    (binary searches: a skill list may hold hundreds of skills)."""
    lines = _lines(skills, None)
    if _size(lines) <= budget:
        return lines, 0
    longest = max(len(s.description) for s in skills)
    limit = _largest(MIN_DESCRIPTION, longest, lambda n: _size(_lines(skills, n)) <= budget)
    if limit is not None:
        return _lines(skills, limit), 0
    keep = _largest(
        1, len(skills) - 1, lambda n: _size(_lines(skills[:n], MIN_DESCRIPTION)) <= budget
    )
    keep = keep or 1
    return _lines(skills[:keep], MIN_DESCRIPTION), len(skills) - keep


def render_skill_list(skills: Sequence[Skill], language: str, list_max_chars: int) -> str:
    """Return the skill list (module docstring) for ``skills`` in precedence order."""
    lines, left_out = _fitted(skills, list_max_chars)
    if left_out:
        lines.append(prompts.phrase(language, "skills_not_listed", count=left_out))
    return prompts.render(language, "conventions/skills.txt", skills="\n".join(lines))
