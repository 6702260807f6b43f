"""Agent profiles: named kinds of sub-agent (a prompt, a tool allow-list, a model).

A profile is a Markdown file with a YAML header, ``NAME.md`` in
``<workspace>/.agentkit/agents/`` or ``$XDG_CONFIG_HOME/agentkit/agents/`` (default
``~/.config/agentkit/agents/``; the workspace's wins by name), or an
:class:`AgentProfile` given in Python (``Settings.agent_profiles``, which wins)::

    ---
    name: searcher
    description: Finds things on the web and in the code; cheap model.
    tools: [read_file, search_workspace, web_search, extract_webpage, mcp__time__*]
    skills: [web-research]
    model: gpt-4o-mini
    temperature: 0.2
    max_turns: 30
    timeout_seconds: 300
    approvals: {"run_command": "ask"}
    ---
    Search broadly first, then read the best sources in full. Cite every URL.

Header keys (those other agent tools use): ``name`` (default: the file name),
``description``, ``tools`` (allow-list of built-in, custom and MCP tool names, ``*``
patterns allowed, a list or a comma-separated string; ``finish_task`` is always
kept; absent: every tool), ``skills`` (allow-list of the Agent Skills its sub-agents
see, names or ``*`` patterns, in the same forms; absent: every skill; agentkit.conventions),
``model``, ``base_url``, ``api_key_env`` (the name of the variable holding the key, never
the key), ``temperature``, ``max_turns``,
``timeout_seconds`` (the default when create_sub_agent gives none), ``max_tokens`` (the
token budget of one run, instead of ``subagent_max_tokens``), ``output_schema`` (a
JSON Schema: finish_task then takes a ``result`` object valid against it;
docs/control-plane.md), ``isolation`` (``shared`` or ``isolated``: its sub-agents'
default when ``subagent_isolation`` is ``available``; docs/isolation.md) and
``approvals`` (approval rules for its sub-agents, over ``Settings.approvals``:
agentkit.policy.approvals; docs/approvals.md). The body is
appended after the seed's sub-agent system prompt, which stays word for word.

In Python, ``AgentProfile(..., output_type=Model)`` (a pydantic model class) gives the
``output_schema`` from the model, and ``SubAgentFinished.output`` the validated
instance in the parent process (agentkit.output); its dict names the class by a key
(``output_type``) that only this process resolves (a worker checks the schema).

The header is read by agentkit.configfile (the reader skills share) into a strict model:
an unknown key is refused, ``max_turns``, ``timeout_seconds`` and ``max_tokens`` are
whole numbers from 1 (leave a key out for the default), ``temperature`` is 0 to 2, and
NaN or infinity is refused anywhere. A refused profile is a :class:`ProfileError`
naming its file and the key; the other profiles still load.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, ValidationError, field_validator

from agentkit.configfile import StrictModel, field_error, finite_numbers, read_front_matter
from agentkit.conversation import state_path
from agentkit.errors import ConfigFileError
from agentkit.output import register_type, registered_type
from agentkit.settings import Settings

__all__ = ["AgentProfile", "ProfileError", "load_profiles", "parse_profile", "profile_dirs"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")


class ProfileError(ConfigFileError):
    """A profile file or object that cannot be used: ``path`` is its file (or
    ``Settings.agent_profiles``), ``field`` the header key; the message says why."""


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("must be a number, not true or false")
    return value


Count = Annotated[int, BeforeValidator(_no_bool), Field(ge=1, le=10**9)]
"""A header count (max_turns, timeout_seconds, max_tokens): a whole number from 1; 0 is
refused (it once meant "no limit" silently: leave the key out for that)."""


class _Header(StrictModel):
    """A profile's header keys (plus ``prompt`` and ``source``), as read; the checks
    here are the number rule (finite, in range) and the keys' types."""

    name: str = Field(default="", validate_default=True)
    description: str | int | float | None = None
    prompt: str | None = None
    source: str | None = None
    tools: Any = None  # a list or a comma-separated string: _names checks it
    skills: Any = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: Annotated[float, BeforeValidator(_no_bool), Field(ge=0, le=2)] | None = None
    max_turns: Count | None = None
    timeout_seconds: Count | None = None
    max_tokens: Count | None = None
    output_schema: Any = None
    approvals: Any = None
    output_type: str | None = None  # agentkit.output.register_type's key (Python only)
    isolation: Literal["shared", "isolated"] | None = None

    @field_validator("name", mode="before")
    @classmethod
    def _name_text(cls, value: Any) -> Any:
        name = "" if value is None else str(value) if isinstance(value, int) else value
        if isinstance(name, str) and not _NAME.match(name):
            raise ValueError("use 1-40 letters, digits, _ or -")
        return name


@dataclass(frozen=True)
class AgentProfile:
    """One agent profile (see the module docstring for the meaning of each field).

    ``tools`` None means every tool, ``skills`` None every skill; ``max_tokens`` None
    means ``subagent_max_tokens``; ``output_schema`` None the seed's finish_task;
    ``source`` is the file it came from or ``python``; ``output_type`` a pydantic
    model class (Python only): ``output_schema`` is then its JSON schema, and the
    parent validates a sub-agent's result into an instance (agentkit.output).
    Raises TypeError for an ``output_type`` that is not a pydantic model class.
    """

    name: str
    description: str = ""
    prompt: str = ""
    tools: tuple[str, ...] | None = None
    skills: tuple[str, ...] | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_turns: int | None = None
    timeout_seconds: int | None = None
    max_tokens: int | None = None
    output_schema: dict[str, Any] | None = None
    source: str = "python"
    approvals: dict[str, str] = field(default_factory=dict)
    output_type: type[BaseModel] | None = None
    isolation: Literal["shared", "isolated"] | None = None

    def __post_init__(self) -> None:
        if self.output_type is not None:
            register_type(self.output_type)  # TypeError for anything but a model class
            if self.output_schema is None:
                schema = _output_schema(self.output_type.model_json_schema())
                object.__setattr__(self, "output_schema", schema)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for Settings.agent_profiles and the worker): ``output_type``
        as its key in this process (agentkit.output.register_type), absent without one."""
        data = asdict(self)
        data["tools"] = list(self.tools) if self.tools is not None else None
        data["skills"] = list(self.skills) if self.skills is not None else None
        if self.isolation is None:  # absent: the dict stays as before isolation existed
            del data["isolation"]
        if self.output_type is None:
            del data["output_type"]
        else:
            data["output_type"] = register_type(self.output_type)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "python") -> AgentProfile:
        """Build and check a profile from header-like keys (plus ``prompt``, ``source``).
        Raises ProfileError naming ``source`` (the file, or ``Settings.agent_profiles``)
        and the bad key."""
        origin = str(data.get("source") or source)  # the profile's own, kept as before
        where = source if source != "python" else origin
        try:
            header = _Header.model_validate(data)
        except ValidationError as exc:
            raise field_error(exc, where, ProfileError, _Header) from None
        try:
            tools = _names(header.tools, "tools", "tools must be a list of tool names")
            skills = _names(header.skills, "skills", "skills must be a list of skill names")
            approvals = _rules(header.approvals)
            output_schema = _output_schema(header.output_schema)
        except ProfileError as exc:
            raise exc.at(where) from None
        return cls(
            name=header.name,
            description=" ".join(str(header.description or "").split()),
            prompt=(header.prompt or "").strip(),
            tools=tuple(tools) if tools is not None else None,
            skills=tuple(skills) if skills is not None else None,
            model=header.model or None,
            base_url=header.base_url or None,
            api_key_env=header.api_key_env or None,
            temperature=header.temperature,
            max_turns=header.max_turns,
            timeout_seconds=header.timeout_seconds,
            max_tokens=header.max_tokens,
            output_schema=output_schema,
            source=origin,
            approvals=approvals,
            # None in a worker (the class lives in the parent: the schema is checked)
            output_type=registered_type(header.output_type),
            isolation=header.isolation,
        )

    def allows(self, tool: str) -> bool:
        """True when the allow-list admits ``tool`` (finish_task always)."""
        if self.tools is None or tool == "finish_task":
            return True
        return any(fnmatchcase(tool, pattern) for pattern in self.tools)

    def apply(self, settings: Settings) -> Settings:
        """Return a copy of a worker's ``settings`` with this profile's model, endpoint,
        temperature and max_turns."""
        update: dict[str, Any] = {}
        if self.model:
            update["model"] = self.model
        if self.base_url:
            update["base_url"] = self.base_url
        if self.api_key_env and os.environ.get(self.api_key_env):
            update["api_key"] = os.environ[self.api_key_env]
        if self.temperature is not None:
            update["temperature"] = self.temperature
        if self.max_turns:
            update["subagent_max_turns"] = self.max_turns
        return settings.model_copy(update=update) if update else settings


def _rules(value: Any) -> dict[str, str]:
    """A profile's approval rules (agentkit.policy.approvals.check_rules); raises
    ProfileError naming the bad key."""
    if value is None:
        return {}
    from agentkit.policy.approvals import check_rules

    try:
        return check_rules(value)
    except ValueError as exc:
        raise ProfileError("", "approvals", str(exc)) from None


def _output_schema(value: Any) -> dict[str, Any] | None:
    """The profile's output_schema (None when absent): an object the jsonschema package
    accepts as a schema of its draft (draft 2020-12 unless ``$schema`` names another).
    Raises ProfileError naming where it is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProfileError("", "output_schema", "must be a JSON Schema object")
    try:
        finite_numbers(value, "output_schema")  # it reaches the model in finish_task's schema
    except ConfigFileError as exc:
        raise ProfileError("", exc.field, exc.message) from None
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(value).check_schema(value)
    except SchemaError as exc:
        where = "".join(f"[{p!r}]" for p in exc.path) or "(the schema)"
        raise ProfileError(
            "", "output_schema", f"not a valid JSON Schema at {where}: {exc.message}"
        ) from None
    return dict(value)


def _names(value: Any, key: str, problem: str) -> list[str] | None:
    """An allow-list given as a list or a comma-separated string (None when absent).
    Raises ProfileError(``problem``) naming ``key`` for anything else."""
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if value is not None and not (
        isinstance(value, list) and all(isinstance(t, str) for t in value)
    ):
        raise ProfileError("", key, problem)
    return value


def parse_profile(text: str, source: str, default_name: str) -> AgentProfile:
    """Parse a profile file's text (``---`` YAML header ``---`` then the body).
    Raises ProfileError saying what is wrong."""
    try:
        header, body = read_front_matter(text)
    except ConfigFileError as exc:
        raise ProfileError(source, "", exc.message) from None
    header.setdefault("name", default_name)
    if "output_type" in header:  # a class cannot be named from a file
        raise ProfileError(
            source, "output_type", "is for AgentProfile in Python; a file gives output_schema"
        )
    return AgentProfile.from_dict({**header, "prompt": body}, source=source)


def profile_dirs(workspace: Path, *, user: bool = True) -> list[Path]:
    """The profile folders, lowest priority first: the user's (unless ``user`` is off:
    ``Settings.user_files``), then the workspace's."""
    if not user:
        return [state_path(workspace, "agents")]
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path(base) / "agentkit" / "agents", state_path(workspace, "agents")]


def load_profiles(
    workspace: Path, settings: Settings
) -> tuple[dict[str, AgentProfile], dict[str, str]]:
    """Return ``(usable profiles by name, {name: why it is refused})``.

    A profile refused by a later source replaces a usable one of the same name (the
    model is then told why it cannot be used, rather than silently given another)."""
    found: dict[str, AgentProfile] = {}
    refused: dict[str, str] = {}
    entries: list[tuple[str, Any]] = []
    for folder in profile_dirs(workspace, user=settings.user_files):
        if folder.is_dir():
            entries.extend((str(p), p) for p in sorted(folder.glob("*.md")))
    entries.extend(("Settings.agent_profiles", d) for d in settings.agent_profiles)
    for source, item in entries:
        name = item.stem if isinstance(item, Path) else str(item.get("name", "?"))
        try:
            if isinstance(item, Path):
                profile = parse_profile(item.read_text(encoding="utf-8"), source, name)
            else:
                profile = AgentProfile.from_dict(dict(item), source)
        except ProfileError as exc:  # it names the file and the field
            refused[name] = str(exc)
            found.pop(name, None)
            continue
        except (OSError, UnicodeDecodeError) as exc:
            refused[name] = f"{source}: {exc}"
            found.pop(name, None)
            continue
        found[profile.name] = profile
        refused.pop(profile.name, None)
    return found, refused


def profiles_section(profiles: dict[str, AgentProfile], language: str) -> str:
    """The part of the main agent's system prompt listing the profiles ("" when none)."""
    if not profiles:
        return ""
    from agentkit import prompts

    rows = "\n".join(
        f"- {p.name}: {p.description or '-'}"
        + (f" (timeout_seconds {p.timeout_seconds})" if p.timeout_seconds else "")
        for p in profiles.values()
    )
    return "\n\n" + prompts.render(language, "profiles.txt", profiles=rows)


def check_profiles(workspace: Path, settings: Settings) -> tuple[list[str], bool]:
    """Return ``(report lines, all good)`` for ``agentkit profiles``: one line per
    profile (name, source, description, model, tools) and one per problem: a refused
    file, or an allow-list entry naming no built-in or Settings.tools tool (MCP names,
    ``mcp__...``, are not checked: that would start the servers)."""
    from agentkit.tools import base_tools
    from agentkit.tools.imported import tools_for

    known = {t.name for t in base_tools()} | {"finish_task"}
    known |= {t.name for t in tools_for(settings.tools, "subagents")}
    usable, refused = load_profiles(workspace, settings)
    skills = _skill_names(workspace, settings)
    lines: list[str] = []
    good = not refused
    for profile in usable.values():
        tools = ", ".join(profile.tools) if profile.tools is not None else "(all tools)"
        lines.append(
            f"{profile.name}: {profile.description or '-'}\n"
            f"    source: {profile.source}\n    model: {profile.model or '(the default)'}"
            f"  timeout_seconds: {profile.timeout_seconds or '-'}\n    tools: {tools}\n"
            f"    skills: {_allowed_skills(profile, skills)}"
        )
        problems = [
            f"{pattern!r} names no known tool"
            for pattern in profile.tools or ()
            if not pattern.startswith("mcp__") and not any(fnmatchcase(n, pattern) for n in known)
        ] + [
            f"{pattern!r} names no skill found"
            for pattern in profile.skills or ()
            if not any(fnmatchcase(n, pattern) for n in skills)
        ]
        good = good and not problems
        lines.extend(f"    problem: {problem}" for problem in problems)
    for name, why in refused.items():
        lines.append(f"{name}: refused: {why}")
    if not usable and not refused:
        lines.append(
            "no agent profiles (put NAME.md files in "
            + " or ".join(str(d) for d in profile_dirs(workspace))
            + ")"
        )
    return lines, good


def _skill_names(workspace: Path, settings: Settings) -> list[str]:
    """The names of the skills found (none when skills are off)."""
    if not settings.skills:
        return []
    from agentkit.conventions.skills import discover_skills

    return [s.name for s in discover_skills(workspace, warn=False, user=settings.user_files).skills]


def _allowed_skills(profile: AgentProfile, names: list[str]) -> str:
    """The skills line of ``agentkit profiles``: those the profile lets its sub-agents see."""
    if profile.skills is None:
        return "(all skills)" + (f": {', '.join(names)}" if names else ": none found")
    allowed = [n for n in names if any(fnmatchcase(n, p) for p in profile.skills)]
    return ", ".join(allowed) or "(none)"
