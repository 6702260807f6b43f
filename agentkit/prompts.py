"""Loading and rendering the prompt and message templates of ``agentkit/prompts/<lang>/``.

Every text the model reads (system prompts, tool descriptions, the seed's message
templates) is a plain file there, so it can be reviewed and translated without
touching code. ``zh`` holds the seed's templates word for word; ``en`` a faithful
rendering. The values the templates fill in about the machine (``{workspace}``,
``{system}``, ``{current_time}``) are here too (:func:`prompt_values`).
"""

from __future__ import annotations

import functools
import platform
import string
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

LANGUAGES = ("zh", "en")


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@functools.lru_cache(maxsize=256)
def load(language: str, name: str) -> str:
    """Return the text of ``prompts/<language>/<name>`` (UTF-8).

    ``auto`` (a conversation not given any text yet) reads ``en``. Raises
    FileNotFoundError when the template does not exist; ValueError for an unknown
    language.
    """
    if language == "auto":  # before a conversation's first text settles it (agentkit.language)
        language = "en"
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; use one of {LANGUAGES}")
    path = resources.files("agentkit") / "prompts" / language
    for part in name.split("/"):  # one step at a time: Traversable.joinpath takes one on 3.10
        path = path / part
    return path.read_text(encoding="utf-8")


def render(language: str, name: str, **values: Any) -> str:
    """Render template ``name`` with ``str.format`` fields filled from ``values``.

    Unknown fields are left as written rather than raising, so a template edit
    cannot crash a run. Trailing newlines of the file are stripped.
    """
    text = load(language, name).rstrip("\n")
    return string.Formatter().vformat(text, (), _Missing(values))


@functools.lru_cache(maxsize=256)
def tool_description(language: str, tool: str, fallback: str = "") -> tuple[str, dict[str, str]]:
    """Return ``(description, {parameter: description})`` for ``tool``.

    Reads ``prompts/<language>/tools/<tool>.md``: the description, then optionally a
    line ``## parameters`` followed by ``- name: text`` lines. Falls back to
    ``fallback`` (a user tool's own docstring) when no file exists.
    """
    try:
        text = load(language, f"tools/{tool}.md")
    except (FileNotFoundError, ValueError):
        return fallback, {}
    head, _, params_part = text.partition("\n## parameters\n")
    params: dict[str, str] = {}
    current: str | None = None
    for line in params_part.splitlines():
        if line.startswith("- ") and ":" in line:
            current, _, doc = line[2:].partition(":")
            current = current.strip()
            params[current] = doc.strip()
        elif current and line.strip():
            params[current] += "\n" + line.strip()
    return head.strip(), params


@functools.lru_cache(maxsize=32)
def table(language: str, name: str) -> dict[str, str]:
    """Return the ``key = template`` lines of ``prompts/<language>/<name>`` as a dict
    (lines starting with ``#`` are comments)."""
    entries: dict[str, str] = {}
    for line in load(language, name).splitlines():
        key, sep, template = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            entries[key.strip()] = template.strip()
    return entries


def phrase(language: str, key: str, **values: Any) -> str:
    """Render the short message ``key`` of ``prompts/<language>/phrases.txt``.

    Raises KeyError for an unknown key (a bug, caught by the tests).
    """
    template = table(language, "phrases.txt")[key]
    return string.Formatter().vformat(template, (), _Missing(values))


def last_action(language: str, tool: str, arguments: dict[str, Any] | None) -> str:
    """Return the short progress phrase for a tool call, e.g. ``正在读取 src/app.py``.

    Long argument values are shortened to 60 characters; unknown tools get the
    generic ``default`` entry of ``actions.txt``. A call with ``dry_run`` true takes
    the ``<tool>.dry_run`` entry when there is one (a merge only checked).
    """
    actions = table(language, "actions.txt")
    generic = actions.get("default", "{tool}")
    template = actions.get(tool) or generic
    if (arguments or {}).get("dry_run") in (True, "true"):
        template = actions.get(f"{tool}.dry_run") or template
    values: dict[str, Any] = {"tool": tool}
    for key, value in (arguments or {}).items():
        text = " ".join(str(value).split())
        values[key] = text if len(text) <= 60 else text[:57] + "..."
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    if not fields <= values.keys():  # a call without an argument its phrase names
        template = generic  # (never "Creating sub-agent {agent_id}" to a person)
    return string.Formatter().vformat(template, (), _Missing(values))


def describe_system() -> str:
    """Return e.g. ``Linux 6.1 (x86_64), Python 3.11.7``."""
    return f"{platform.system()} {platform.release()} ({platform.machine()}), Python {platform.python_version()}"


def current_time() -> str:
    """Return the local time as ``2026-03-10 12:00:00 +0800``."""
    return datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def prompt_values(workspace: Path) -> dict[str, str]:
    """Return the ``{workspace}``, ``{system}`` and ``{current_time}`` template values (docs/specification.md §5)."""
    return {
        "workspace": str(workspace),
        "system": describe_system(),
        "current_time": current_time(),
    }
