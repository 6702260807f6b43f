"""What one agent is given from the conventions, and how it reaches it.

One job: :func:`gather` reads AGENTS.md and skills for one agent (the main agent, or a
sub-agent working in a deliverables folder under a profile) into a
:class:`Conventions`: the section for its system prompt, the files used, and the
skills it may load. The main agent gets it at the start of every round
(:func:`sync_first_message`, called by agentkit.chat.setup.refresh_conventions); a
sub-agent from its WorkerSpec: the parent gathers when it creates the sub-agent
(:func:`subagent_extra`; the user's files are then the user's machine's even when the
worker runs on another Ray node), the worker only reads the spec
(:func:`spec_section`, :func:`spec_skills`, :func:`record_metadata`).

Why the first system message is rebuilt at a round's start, rather than a system note
added when AGENTS.md changed: the model then holds one current copy of the user's
rules, not a history of versions to reconcile; the conversation does not grow with
each edit; and compaction keeps the leading system message, while a note would be
summarised away with the old turns. Only the section's characters at the end of that
message are replaced (their count and digest are in the conversation's
``conventions`` metadata): the seed's text before them, and the time it gives,
stay as they were, byte for byte. The cost: a provider's prompt cache starts again
after an edit, once per edit.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.conventions.agents_md import read_agents_md
from agentkit.conventions.section import render_section
from agentkit.conventions.skills import Skill, discover_skills

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.settings import Settings

log = logging.getLogger("agentkit")

__all__ = [
    "Conventions",
    "gather",
    "record_metadata",
    "spec_section",
    "spec_skills",
    "subagent_extra",
    "sync_first_message",
]

EXTRA_KEY = "conventions"
"""The key of WorkerSpec.extra, of a sub-agent's record and of a conversation file."""


@dataclass(frozen=True)
class Conventions:
    """What one agent is given.

    Attributes:
        text: the section appended to its system prompt ("" when there is nothing).
        agents_md: the AGENTS.md files used, as shown (farthest first).
        skills: the skills it may load (those left out of a capped list too).
    """

    text: str = ""
    agents_md: tuple[str, ...] = ()
    skills: tuple[Skill, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """The files used, for a transcript: ``{"agents_md": [path...], "skills":
        [{"name", "file"}...]}``, each key only when there is something."""
        data: dict[str, Any] = {}
        if self.agents_md:
            data["agents_md"] = list(self.agents_md)
        if self.skills:
            data["skills"] = [{"name": s.name, "file": s.label} for s in self.skills]
        return data


def allowed_skills(skills: Sequence[Skill], allowed: Sequence[str] | None) -> tuple[Skill, ...]:
    """The ``skills`` an allow-list admits (names or ``*`` patterns; None admits all)."""
    if allowed is None:
        return tuple(skills)
    return tuple(s for s in skills if any(fnmatchcase(s.name, p) for p in allowed))


def gather(
    workspace: Path,
    settings: Settings,
    *,
    deliverables: Path | None = None,
    allowed: Sequence[str] | None = None,
) -> Conventions:
    """Read the conventions for one agent (never raises; problems are warnings).

    Args:
        workspace: the resolved workspace root.
        settings: ``agents_md``, ``agents_md_max_chars``, ``skills``,
            ``skills_list_max_chars``, ``language`` and ``api_key`` (warned about when a
            file holds it) are used.
        deliverables: a sub-agent's deliverables folder (absolute): the AGENTS.md
            files down to it are read too.
        allowed: a profile's ``skills`` allow-list (None: every skill).
    """
    agents = read_agents_md(workspace, settings, deliverables)
    skills: tuple[Skill, ...] = ()
    if settings.skills:
        found = discover_skills(
            workspace, hidden=[settings.api_key], user=settings.user_files
        ).skills
        skills = allowed_skills(found, allowed)
    text = render_section(agents, skills, settings.language, settings.skills_list_max_chars)
    return Conventions(text, agents.labels, skills)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def sync_first_message(conversation: Conversation, found: Conventions) -> bool:
    """Make the conversation's first message, when it is the system prompt, end with
    ``found.text`` in place of the section it ended with (module docstring), and set
    ``conversation.conventions``. Returns True when the message changed."""
    messages = conversation.messages
    if not messages or messages[0].get("role") != "system":
        return False
    content = messages[0].get("content")
    if not isinstance(content, str):
        return False
    meta = conversation.conventions
    chars = meta.get("section_chars")
    old = ""
    if isinstance(chars, int) and 0 < chars <= len(content):
        tail = content[len(content) - chars :]
        if _digest(tail) == meta.get("section_sha256"):
            old = tail  # else someone changed the end of it: keep that, add ours after
    conversation.conventions = (
        {
            **found.metadata(),
            "section_chars": len(found.text),
            "section_sha256": _digest(found.text),
        }
        if found.text
        else {}
    )
    if found.text == old:
        return False
    messages[0] = {**messages[0], "content": content[: len(content) - len(old)] + found.text}
    return True


def subagent_extra(
    workspace: Path, settings: Settings, deliverables: Path, profile: dict[str, Any] | None
) -> dict[str, Any]:
    """Return the WorkerSpec.extra entries for a new sub-agent's conventions:
    ``{"conventions": {"text", "agents_md", "skills": [Skill.to_dict()...]}}``, or {}
    when there is nothing (the spec, the worker's prompt and its record stay as without
    conventions). ``profile``: the AgentProfile dict it was created with."""
    allowed = profile.get("skills") if profile else None
    try:
        found = gather(workspace, settings, deliverables=deliverables, allowed=allowed)
    except Exception as exc:  # a convention file must not stop a sub-agent
        log.warning("agentkit: AGENTS.md and skills could not be read: %s", exc)
        return {}
    if not found.text:
        return {}
    return {
        EXTRA_KEY: {
            "text": found.text,
            "agents_md": list(found.agents_md),
            "skills": [s.to_dict() for s in found.skills],
        }
    }


def _spec_entry(extra: dict[str, Any]) -> dict[str, Any]:
    entry = extra.get(EXTRA_KEY)
    return entry if isinstance(entry, dict) else {}


def spec_section(extra: dict[str, Any]) -> str:
    """The section a worker appends to its system prompt ("" when none), from its
    WorkerSpec.extra."""
    text = _spec_entry(extra).get("text")
    return text if isinstance(text, str) else ""


def spec_skills(extra: dict[str, Any]) -> tuple[Skill, ...]:
    """The skills a worker may load, from its WorkerSpec.extra (damaged entries skipped)."""
    skills = []
    for item in _spec_entry(extra).get("skills") or ():
        try:
            skills.append(Skill.from_dict(item))
        except (KeyError, TypeError):
            continue
    return tuple(skills)


def record_metadata(extra: dict[str, Any]) -> dict[str, Any] | None:
    """The ``conventions`` entry of a sub-agent's record (the files used), or None."""
    entry = _spec_entry(extra)
    if not entry:
        return None
    return Conventions(
        agents_md=tuple(entry.get("agents_md") or ()), skills=spec_skills(extra)
    ).metadata()
