"""Reading configuration files: the strict model base, the one error shape, YAML headers.

One job: turn a config document (a hooks or MCP JSON file, an agent profile's or a
skill's YAML header) into checked values, or a :class:`agentkit.errors.ConfigFileError`
naming the file and the field. :class:`StrictModel` is the pydantic base of such
documents: unknown keys are refused, and so is any number that is NaN or infinite
(the number rule, docs/architecture.md "Numbers read from outside").
:func:`read_front_matter` is the one reader of ``---`` YAML headers (skills and
profiles).
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agentkit.errors import ConfigFileError

__all__ = ["StrictModel", "field_error", "finite_numbers", "read_front_matter"]

_UNION_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}
_UNQUOTED = re.compile(r"^([A-Za-z_][\w-]*):[ \t]+(?![\"'|>\[{])(.*:[ \t].*)$")


class StrictModel(BaseModel):
    """A config document's pydantic model: unknown keys and NaN or infinite numbers are
    refused; values are frozen once read."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def field_error(
    exc: ValidationError,
    path: str,
    cls: type[ConfigFileError] = ConfigFileError,
    model: type[BaseModel] | None = None,
) -> ConfigFileError:
    """The first problem of ``exc`` as a ``cls`` naming ``path`` and the field
    (``hooks.PreToolUse[0].timeout``), with pydantic's message and the value refused;
    an unknown key of ``model`` is told with the keys it knows."""
    first = exc.errors(include_url=False)[0]
    field = ""
    for part in first.get("loc", ()):
        if isinstance(part, str) and ("[" in part or part in _UNION_TAGS):
            continue  # which member of a union pydantic tried, not a key
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = "unknown key"
        if model is not None:
            message += f"; known: {', '.join(sorted(model.model_fields))}"
    elif "input" in first and not isinstance(first["input"], (dict, list)):
        message += f" (got {first['input']!r})"
    return cls(path, field, message)


def finite_numbers(value: Any, field: str) -> Any:
    """Return ``value`` (JSON-like: dicts, lists, scalars) when every number in it is
    finite; a free-form value (a JSON Schema) escapes the typed fields' checks, and a
    NaN in it would be sent to the model server as invalid JSON.

    Raises:
        ConfigFileError: (path empty) naming the first non-finite number's place, e.g.
            ``output_schema.properties.n.maximum``.
    """
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigFileError("", where, f"must be a finite number (got {item!r})")
        if isinstance(item, dict):
            stack.extend((f"{where}.{k}", v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return value


def read_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown file with a YAML header into ``(header, body)``.

    The text must start with a ``---`` line (after an optional byte-order mark); the
    header ends at the next ``---`` line. A header that YAML cannot read is read again
    with the values of ``key: a: b`` lines quoted (the Agent Skills client guide's
    leniency). An empty header is ``{}``. The body is the text after the closing line,
    stripped.

    Raises:
        ConfigFileError: (path and field empty: the caller names the file) no opening or
            closing ``---``, YAML that cannot be read, or a header that is not a mapping.
    """
    import yaml

    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigFileError("", "", "the file must start with a --- line opening the YAML header")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ConfigFileError("", "", "the YAML header has no closing --- line")
    raw = "\n".join(lines[1:end])
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        header = yaml.load(raw, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        quoted = "\n".join(_UNQUOTED.sub(_quote, line) for line in raw.splitlines())
        try:
            header = yaml.load(quoted, Loader=loader)  # noqa: S506
        except yaml.YAMLError:
            why = " ".join(str(exc).split())
            raise ConfigFileError("", "", f"the YAML header cannot be read: {why}") from None
    if header is None:
        header = {}
    if not isinstance(header, dict):
        raise ConfigFileError("", "", "the YAML header must be a mapping of keys to values")
    return header, "\n".join(lines[end + 1 :]).strip()


def _quote(match: re.Match[str]) -> str:
    value = match.group(2).replace("\\", "\\\\").replace('"', '\\"')
    return f'{match.group(1)}: "{value}"'
