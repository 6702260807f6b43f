"""Hook configuration: the shape Claude Code users already write, from files and Settings.

One job: read and check the hooks (docs/approvals.md §4)::

    {"hooks": {"PreToolUse": [
        {"matcher": "write_file|edit_file",
         "hooks": [{"type": "command", "command": "./check.sh", "timeout": 10}]}]}}

Sources, all of them used (their hooks add up, in this order):
``$XDG_CONFIG_HOME/agentkit/hooks.json`` (default ``~/.config/agentkit/hooks.json``),
``<workspace>/.agentkit/hooks.json`` (a folder the agents' tools cannot write), then
``Settings.hooks`` (the same object, or only its ``"hooks"`` member; JSON in
``AGENTKIT_HOOKS``). A malformed file or value is refused when the session starts,
naming the file and the field (:class:`HookConfigError`).

Events: :data:`HOOK_EVENTS`. Matchers as in Claude Code: ``"*"``, ``""`` or none match
everything; a matcher of letters, digits, ``_``, ``-``, spaces, ``|`` and ``,`` is a list
of exact names; anything else is a regular expression searched in the name (unanchored:
``^write_file$`` for one tool). Tool events match the tool name, SubagentStart/Stop the
profile name (``default`` without one), SessionStart its source (``startup``,
``resume``), SessionEnd its reason (``close``); UserPromptSubmit and Stop take no matcher.
A handler is ``{"type": "command", "command": "...", "timeout": seconds}`` (read by a
strict pydantic model: unknown keys refused, ``timeout`` a finite number of seconds above
0 and at most ``MAX_SECONDS``); other types (``http``, ``prompt``, ``agent``,
``mcp_tool``) are refused rather than silently skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Gt, Le
from pydantic import BeforeValidator, Field, ValidationError

from agentkit.configfile import StrictModel, field_error
from agentkit.errors import ConfigFileError
from agentkit.settings._types import MAX_SECONDS

__all__ = [
    "HOOK_EVENTS",
    "TOOL_EVENTS",
    "CommandHook",
    "HookConfig",
    "HookConfigError",
    "HookGroup",
    "hook_files",
    "load_hooks",
    "parse_hooks",
]

HOOK_EVENTS = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "SessionStart",
    "SessionEnd",
)
"""The events a hook can be given for (Claude Code's names)."""

TOOL_EVENTS = ("PreToolUse", "PostToolUse")
"""The events of one tool call; a sub-agent's run in its own worker process."""

_NO_MATCHER = ("UserPromptSubmit", "Stop")
_NAMES = re.compile(r"^[A-Za-z0-9_\-\s,|]*$")


class HookConfigError(ConfigFileError):
    """A hooks file or setting that cannot be used: ``path`` is the file (or
    ``Settings.hooks``), ``field`` the dotted field (``hooks.Stop[0].hooks[1].timeout``)."""


@dataclass(frozen=True)
class CommandHook:
    """One command hook: ``command`` run by ``/bin/sh -c`` in the workspace, within
    ``timeout`` seconds (None: ``Settings.hook_timeout_seconds``); ``source`` the file
    (or ``Settings.hooks``) it came from."""

    command: str
    timeout: float | None = None
    source: str = ""


@dataclass(frozen=True)
class HookGroup:
    """A matcher and its hooks, for one event (see the module docstring for matchers)."""

    matcher: str
    hooks: tuple[CommandHook, ...]

    def matches(self, name: str) -> bool:
        """True when the matcher admits ``name`` (a tool, profile, source or reason)."""
        text = self.matcher.strip()
        if text in ("", "*"):
            return True
        if _NAMES.match(text):
            return name in {n.strip() for n in re.split(r"[|,]", text)}
        return re.search(text, name) is not None


@dataclass(frozen=True)
class HookConfig:
    """The hooks of every event, sources merged (see :func:`load_hooks`)."""

    events: dict[str, tuple[HookGroup, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when no hook is configured."""
        return not any(self.events.values())

    def has(self, event: str) -> bool:
        """True when ``event`` has at least one group."""
        return bool(self.events.get(event))

    def matching(self, event: str, name: str = "") -> list[CommandHook]:
        """The hooks to run for ``event`` on ``name``, in configuration order, identical
        commands once (as Claude Code dedupes identical handlers)."""
        found: dict[str, CommandHook] = {}
        for group in self.events.get(event, ()):
            if event in _NO_MATCHER or group.matches(name):
                for hook in group.hooks:
                    found.setdefault(hook.command, hook)
        return list(found.values())

    def only(self, *events: str) -> HookConfig:
        """The same configuration with only ``events`` (what a worker needs)."""
        return HookConfig({e: g for e, g in self.events.items() if e in events and g})

    def to_dict(self) -> dict[str, Any]:
        """The ``{"hooks": {...}}`` shape again (JSON-able; for a worker's spec)."""
        return {
            "hooks": {
                event: [
                    {
                        "matcher": group.matcher,
                        "hooks": [
                            {
                                "type": "command",
                                "command": h.command,
                                "timeout": h.timeout,
                                "source": h.source,
                            }  # fmt: skip
                            for h in group.hooks
                        ],
                    }
                    for group in groups
                ]
                for event, groups in self.events.items()
            }
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HookConfig:
        """Rebuild what :meth:`to_dict` made (checked again; raises HookConfigError)."""
        return parse_hooks(data, "the worker's spec", keep_source=True)


def _merge(configs: list[HookConfig]) -> HookConfig:
    events: dict[str, tuple[HookGroup, ...]] = {}
    for config in configs:
        for event, groups in config.events.items():
            events[event] = events.get(event, ()) + groups
    return HookConfig(events)


def parse_hooks(data: Any, source: str, *, keep_source: bool = False) -> HookConfig:
    """Check and return one source's hooks: ``{"hooks": {EVENT: [GROUP, ...]}}`` (an
    optional ``"description"`` beside it) or the inner ``{EVENT: [...]}`` alone.

    Raises HookConfigError naming ``source`` and the field (``hooks.PreToolUse[0].matcher``).
    """
    if not isinstance(data, dict):
        raise HookConfigError(source, "", 'must be a JSON object with a "hooks" key')
    if "hooks" in data:
        extra = set(data) - {"hooks", "description", "$schema"}
        if extra:
            raise HookConfigError(source, "", f"unknown key(s) {', '.join(sorted(extra))}")
        data = data["hooks"]
        if not isinstance(data, dict):
            raise HookConfigError(source, "hooks", "must be an object of events")
    events: dict[str, tuple[HookGroup, ...]] = {}
    for event, groups in data.items():
        where = f"hooks.{event}"
        if event not in HOOK_EVENTS:
            raise HookConfigError(
                source, where, f"not an agentkit hook event; known: {', '.join(HOOK_EVENTS)}"
            )
        if not isinstance(groups, list):
            raise HookConfigError(source, where, "must be a list of {matcher, hooks} objects")
        events[event] = tuple(
            _group(group, f"{where}[{i}]", source, keep_source) for i, group in enumerate(groups)
        )
    return HookConfig(events)


def _group(data: Any, where: str, source: str, keep_source: bool) -> HookGroup:
    if not isinstance(data, dict):
        raise HookConfigError(source, where, 'must be an object with "hooks" (and a "matcher")')
    extra = set(data) - {"matcher", "hooks"}
    if extra:
        raise HookConfigError(source, where, f"unknown key(s) {', '.join(sorted(extra))}")
    matcher = data.get("matcher") or ""
    if not isinstance(matcher, str):
        raise HookConfigError(source, f"{where}.matcher", "must be text")
    if not _NAMES.match(matcher.strip()) and matcher.strip() != "*":
        try:
            re.compile(matcher.strip())
        except re.error as exc:
            raise HookConfigError(
                source, f"{where}.matcher", f"not a valid regular expression: {exc}"
            ) from None
    handlers = data.get("hooks")
    if not isinstance(handlers, list) or not handlers:
        raise HookConfigError(source, f"{where}.hooks", "must be a non-empty list of hooks")
    return HookGroup(
        matcher,
        tuple(
            _handler(h, f"{where}.hooks[{i}]", source, keep_source) for i, h in enumerate(handlers)
        ),
    )


def _command(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty command line")
    return value


def _seconds(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a number of seconds")  # not "5", not true
    return value


class _Handler(StrictModel):
    """One handler as written; unknown keys, NaN and infinity refused."""

    type: Literal["command"] = "command"
    command: Annotated[str, BeforeValidator(_command)] = Field(default="", validate_default=True)
    timeout: Annotated[float, BeforeValidator(_seconds), Gt(0), Le(MAX_SECONDS)] | None = None
    statusMessage: str | None = None
    source: str | None = None  # only in a worker's spec (keep_source)


def _handler(data: Any, where: str, source: str, keep_source: bool) -> CommandHook:
    if not isinstance(data, dict):
        raise HookConfigError(
            source, where, 'must be an object {"type": "command", "command": ...}'
        )
    kind = data.get("type", "command")
    if kind != "command":
        raise HookConfigError(
            source,
            f"{where}.type",
            f'{kind!r} hooks are not supported; agentkit runs "command" hooks',
        )
    if "source" in data and not keep_source:
        raise HookConfigError(source, f"{where}.source", "unknown key")
    try:
        spec = _Handler.model_validate(data)
    except ValidationError as exc:
        error = field_error(exc, source, HookConfigError, _Handler)
        raise HookConfigError(source, f"{where}.{error.field}", error.message) from None
    return CommandHook(spec.command, spec.timeout, spec.source or source)


def hook_files(state_dir: Path, user_dir: Path | None) -> list[Path]:
    """The hooks files, in the order their hooks run: the user's (``user_dir``:
    agentkit.settings.user_config_dir(); None: not read), then the workspace's
    (``state_dir``: its ``.agentkit``, agentkit.conversation.state_path)."""
    user = [user_dir / "hooks.json"] if user_dir is not None else []
    return [*user, state_dir / "hooks.json"]


def load_hooks(
    state_dir: Path, setting: dict[str, Any] | None, user_dir: Path | None
) -> HookConfig:
    """Read every source (see the module docstring) and return the merged hooks.

    ``state_dir``: the workspace's ``.agentkit`` folder; ``setting``: ``Settings.hooks``
    (empty: none); ``user_dir``: the user's agentkit folder (both passed in so this
    module imports neither settings nor conversation). Raises HookConfigError naming the
    file and the field for a file that is not JSON or not in the hooks shape, or that
    cannot be read.
    """
    configs: list[HookConfig] = []
    for path in hook_files(state_dir, user_dir):
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # no such file (its folder is none)
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise HookConfigError(str(path), "", f"cannot be read: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise HookConfigError(str(path), "", f"not valid JSON: {exc}") from None
        configs.append(parse_hooks(data, str(path)))
    if setting:
        configs.append(parse_hooks(setting, "Settings.hooks"))
    return _merge(configs)
