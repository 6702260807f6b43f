"""Settings: every knob of agentkit, read from arguments first, then the environment.

Environment fallbacks, and ONLY these exact (case-sensitive) names (docs/architecture.md §6):
every field as ``AGENTKIT_<FIELD_NAME>`` (for example ``AGENTKIT_MODEL``,
``AGENTKIT_LANGUAGE``, ``AGENTKIT_MAX_CONCURRENT_SUBAGENTS``), plus ``OPENAI_API_KEY`` and
``OPENAI_BASE_URL`` (the openai package's own names; ``AGENTKIT_*`` wins when both are
set). A generic ``API_KEY``, ``BASE_URL``, ``api_key`` or ``model`` in the environment is
ignored, so that a key meant for another service never goes to this endpoint, nor this
key to another host. Constructor arguments take field names (and, as before, the alias
spellings such as ``OPENAI_API_KEY=``). List fields accept a comma-separated string from
the environment.
Defaults for sub-agent limits come from the seed specification
(docs/specification.md §1 and §8).

Map: the fields are four mixins by concern, :class:`Settings` adds the sources, the
validators and ``read_only_paths``: ``_model.py`` (the endpoint, the loop, prompted
tool calls), ``_tools.py`` (files, search, commands and their sandbox, the web),
``_subagents.py`` (the seed's limits, the control plane, where workers run),
``_extensions.py`` (user tools, MCP, profiles, AGENTS.md and skills, approvals and
hooks), ``_types.py`` (CommaList, MiB).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agentkit._settings_env import (  # ENV_PREFIX, env_names re-exported
    ENV_PREFIX,
    OPENAI_ENV_NAMES,
    DocumentedEnvSource,
    env_names,
)
from agentkit.settings._extensions import ExtensionFields
from agentkit.settings._model import ModelFields
from agentkit.settings._subagents import SubAgentFields
from agentkit.settings._tools import ToolFields
from agentkit.settings._types import MiB

RANGE_PAIRS: tuple[tuple[str, str], ...] = (
    ("subagent_timeout_min", "subagent_timeout_max"),
    ("subagent_timeout_min", "subagent_default_timeout"),
    ("subagent_default_timeout", "subagent_timeout_max"),
    ("retry_base_delay", "retry_max_delay"),
)
"""Fields that must be in order, (lower, upper): a smallest and a largest, a default
within them, a first delay and the cap on every delay. The lower one comes first in
the fields' order or not: the pair is checked when its later field is read."""

__all__ = ["ENV_PREFIX", "OPENAI_ENV_NAMES", "MiB", "Settings", "env_names", "user_config_dir"]


def user_config_dir() -> Path:
    """Return ``$XDG_CONFIG_HOME/agentkit`` (default ``~/.config/agentkit``): the user's
    AGENTS.md and skills (agentkit.conventions)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "agentkit"


class Settings(ExtensionFields, SubAgentFields, ToolFields, ModelFields, BaseSettings):
    """All configuration of an Agent and its sub-agents (pydantic model).

    Units: durations in seconds, sizes in bytes, lengths in characters unless a
    name says lines or tokens. Raises ``pydantic.ValidationError`` on bad values.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        populate_by_name=True,
        extra="ignore",
        validate_default=True,
        allow_inf_nan=False,  # no NaN or infinity in any float, nested ones too
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments first, then only the documented environment names (no .env, no
        secrets folder: neither was ever configured)."""
        return init_settings, DocumentedEnvSource(settings_cls)

    @field_validator(
        "read_only_roots",
        "command_allow",
        "command_deny",
        "command_env_passthrough",
        "command_env_drop",
        "web_allow_hosts",
        "command_writable_paths",
        "tools",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, (list, tuple)):
            return [str(part) for part in value]
        return value

    @field_validator(
        "ray_resources",
        "ray_label_selector",
        "mcp_servers",
        "agent_profiles",
        "approvals",
        "hooks",
        "model_prices",
        mode="before",
    )
    @classmethod
    def _json_mapping(cls, value: Any) -> Any:
        # From the environment these come as JSON text.
        if isinstance(value, (list, tuple)):  # agent_profiles: AgentProfile objects too
            return [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
        if isinstance(value, str):
            import json

            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(f"must be JSON (got {value!r})") from exc
        return value

    @field_validator("model_prices")
    @classmethod
    def _model_prices(cls, value: Any) -> Any:
        from agentkit.cost import check_model_prices

        return check_model_prices(value)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value and not value.strip().lower().startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {value!r})")
        return value.strip() if value else value

    @field_validator(*dict.fromkeys(name for pair in RANGE_PAIRS for name in pair))
    @classmethod
    def _ranges_in_order(cls, value: Any, info: ValidationInfo) -> Any:
        # A pair given out of order would be accepted and then refuse every use of it
        # ("timeout_seconds must be between 5000 and 3600"): say so at the start. A field
        # validator, not a model one, so that the error shows this value, never the
        # other arguments (api_key among them).
        name = info.field_name
        for low, high in RANGE_PAIRS:
            if name not in (low, high) or (low if name == high else high) not in info.data:
                continue  # another pair, or its other field is not read yet or was refused
            values = {**info.data, name: value}
            if values[low] > values[high]:
                raise ValueError(f"{low} ({values[low]}) must not be above {high} ({values[high]})")
        return value

    def read_only_paths(self) -> list[Path]:
        """Return ``read_only_roots`` as resolved absolute paths, and the user's skills
        folder (``~/.config/agentkit/skills``) when ``skills`` is on and it exists, so
        that read_file and sandboxed commands reach a user-level skill's files."""
        paths = [Path(p).expanduser().resolve() for p in self.read_only_roots]
        skills = user_config_dir() / "skills"  # agentkit.conventions.skills.user_skills_dir
        if self.skills and self.user_files and skills.is_dir():
            paths.append(skills.resolve())
        return paths
