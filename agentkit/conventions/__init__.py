"""Project conventions: AGENTS.md files and Agent Skills, read for every agent.

The map:

* :mod:`~agentkit.conventions.files`: reading the user's files safely (regular, UTF-8,
  bounded, project files inside the workspace), warnings once, and the warning when a
  file holds what looks like a secret (the text is the user's: sent as written).
* :mod:`~agentkit.conventions.agents_md`: which AGENTS.md files an agent reads (the
  user's, the workspace's, and for a sub-agent those down to its deliverables folder,
  nearest last) and the ``agents_md_max_chars`` cap.
* :mod:`~agentkit.conventions.skills`: finding and parsing ``SKILL.md`` files
  (``.agents/skills``, ``.agentkit/skills``, ``~/.config/agentkit/skills``, in that
  precedence), skipped files with their reason.
* :mod:`~agentkit.conventions.section`: the text appended to a system prompt: the
  AGENTS.md blocks and the capped skill list (name and description only).
* :mod:`~agentkit.conventions.tool`: the ``load_skill(name)`` tool (the body and the
  paths of the skill's other files).
* :mod:`~agentkit.conventions.gather`: one agent's :class:`Conventions`; the main
  agent's first system message kept current at each round's start; a sub-agent's
  share carried in its WorkerSpec.

Without AGENTS.md files and skills every function here gives nothing, and no request
changes. Settings: ``agents_md``, ``agents_md_max_chars``, ``skills``,
``skills_list_max_chars``; profiles' ``skills`` allow-list (agentkit.profiles).
"""

from __future__ import annotations

from agentkit.conventions.gather import Conventions, gather, subagent_extra, sync_first_message
from agentkit.conventions.skills import Skill, SkillScan, discover_skills

__all__ = [
    "Conventions",
    "Skill",
    "SkillScan",
    "discover_skills",
    "gather",
    "subagent_extra",
    "sync_first_message",
]
