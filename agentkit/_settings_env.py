"""Where Settings may be read from the environment: the documented names, and only those.

One job: the environment source of :class:`agentkit.settings.Settings`. Each field is
read from ``AGENTKIT_<FIELD_NAME>``, and ``api_key`` / ``base_url`` also from the openai
package's own ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``; exact, case-sensitive names,
so a generic ``API_KEY`` or ``BASE_URL`` meant for another program is never read
(docs/architecture.md §6).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

__all__ = ["ENV_PREFIX", "OPENAI_ENV_NAMES", "DocumentedEnvSource", "env_names"]

ENV_PREFIX = "AGENTKIT_"
OPENAI_ENV_NAMES = {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL"}
"""The openai package's own environment names, read after ``AGENTKIT_<FIELD>``."""


def env_names(field_name: str) -> tuple[str, ...]:
    """Return the environment names that may set ``field_name``, first one winning.

    ``("AGENTKIT_<FIELD>",)``, plus ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` for
    ``api_key`` / ``base_url``. Exact, case-sensitive names; nothing else is read.
    """
    names = (ENV_PREFIX + field_name.upper(),)
    extra = OPENAI_ENV_NAMES.get(field_name)
    return (*names, extra) if extra else names


class DocumentedEnvSource(PydanticBaseSettingsSource):
    """Settings source reading only :func:`env_names` from ``os.environ``.

    Replaces pydantic-settings' own environment source, which would also treat the
    field names and every alias (``api_key``, ``BASE_URL``...) as environment names, in
    any case. Values are the raw strings; the fields' validators parse them.
    """

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Return ``(value or None, the name it came from, False)``."""
        for name in env_names(field_name):
            if name in os.environ:
                return os.environ[name], name, False
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        """Return ``{field_name: raw string}`` for each field set in the environment."""
        found: dict[str, Any] = {}
        for field_name, field in self.settings_cls.model_fields.items():
            value, _, _ = self.get_field_value(field, field_name)
            if value is not None:
                found[field_name] = value
        return found
