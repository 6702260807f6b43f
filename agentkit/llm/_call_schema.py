"""A JSON schema for prompted tool calls, sent as the standard ``response_format``.

The same constraint as :mod:`agentkit.llm._grammar`, in the form most servers with
constrained decoding accept: OpenAI's ``response_format: {"type": "json_schema",
"json_schema": {"name", "schema"}}``, which vLLM, llama.cpp's ``llama-server``,
Ollama, LM Studio and SGLang honour, while most of them ignore llama.cpp's
``grammar`` field without a word (llama-cpp-python is the exception: it takes the
grammar and refuses this type). The reply it allows is one JSON object
``{"name": N, "arguments": A}``: N one of the offered tools (or the final-answer
pseudo tool), A that tool's arguments narrowed as the grammar narrows them:
required properties only (a tiny model fills every optional slot with noise),
no others (``additionalProperties: false``), bounds, enums and types kept.
"""

from __future__ import annotations

from typing import Any

__all__ = ["allowed_calls", "tool_call_response_format", "tool_call_schema"]

ANSWER_ARGUMENTS: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
"""The final-answer pseudo tool's arguments: ``{"text": string}``."""
# Keywords kept as they are; the rest (descriptions, titles, defaults, formats a
# decoder may not know) is left out of the constraint.
_KEPT = ("type", "enum", "const", "minLength", "maxLength", "minimum", "maximum")


def narrow(schema: Any) -> dict[str, Any]:
    """Return the constraint for a value matching ``schema`` (a JSON schema; anything
    else allows any value): objects keep their required properties only, in order."""
    if not isinstance(schema, dict):
        return {}
    out: dict[str, Any] = {k: schema[k] for k in _KEPT if k in schema}
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            out["anyOf"] = [narrow(o) for o in options]
    kind = schema.get("type")
    if kind == "array" and "items" in schema:
        out["items"] = narrow(schema["items"])
    properties = schema.get("properties")
    if (kind == "object" or kind is None) and isinstance(properties, dict):
        required = [k for k in schema.get("required") or [] if k in properties]
        out.update(
            type="object",
            properties={k: narrow(properties[k]) for k in required},
            required=required,
            additionalProperties=False,
        )
    return out


def allowed_calls(
    tools: list[dict[str, Any]], answer_name: str | None
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(name, parameters schema)`` of each call a constrained reply may make:
    the offered tools (``{"type": "function", "function": {"name", "parameters"}}``;
    entries of another shape, or without a name, are skipped; a missing schema
    allows any arguments) and, unless ``answer_name`` is None, the final-answer
    pseudo tool. Shared by the JSON schema here and the grammar (_grammar)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(function, dict) and isinstance(name, str) and name:
            parameters = function.get("parameters")
            found.append((name, parameters if isinstance(parameters, dict) else {}))
    if answer_name:
        found.append((answer_name, ANSWER_ARGUMENTS))
    return found


def tool_call_schema(tools: list[dict[str, Any]], answer_name: str | None) -> dict[str, Any]:
    """Return the JSON schema whose instances are exactly the valid calls.

    Args:
        tools: the request's tool schemas (``{"type": "function", "function":
            {"name", "parameters"}}``); entries of another shape are skipped.
        answer_name: the final-answer pseudo tool, taking ``{"text": string}``; None
            leaves it out (a call is required).

    Returns:
        ``{"anyOf": [{"type": "object", "properties": {"name": {"enum": [N]},
        "arguments": ...}, ...}, ...]}``.
    """
    choices = [
        {
            "type": "object",
            "properties": {"name": {"enum": [name]}, "arguments": narrow(parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for name, parameters in allowed_calls(tools, answer_name)
    ]
    return {"anyOf": choices}


def tool_call_response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` request field carrying ``schema``."""
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}
