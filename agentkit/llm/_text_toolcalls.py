"""Opt-in fallback: tool calls that a model wrote as text.

Some local models put the call in ``content`` as their chat template taught them:
``<tool_call>{...}</tool_call>`` (Hermes, Qwen), ``<function=NAME>...</function>``
(Llama 3.1, Qwen3-Coder's ``<parameter=KEY>`` form), or a bare or ```json-fenced
``{"name": ..., "arguments"|"parameters": {...}}`` object or list
(docs/providers.md cases 60, 61). Only names of offered tools with
parseable arguments are accepted; a fenced or bare object must be the whole content
or its last block, so quoted examples in prose are left alone. JSON nested deeper
than ``_json.MAX_DEPTH`` is not read as a call.
"""

from __future__ import annotations

import re
from typing import Any

from agentkit.llm._json import loads

_TAG_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FUNCTION_RE = re.compile(r"<function=([\w.\-]+)>\s*(.*?)\s*</function>", re.DOTALL)
_PARAM_RE = re.compile(r"<parameter=([\w.\-]+)>\s*(.*?)\s*</parameter>", re.DOTALL)
_FENCE_RE = re.compile(r"```(?:json|tool_call|tool)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def _as_call(obj: Any, offered: set[str]) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or name not in offered:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = loads(args) if args.strip() else {}
        except ValueError:
            return None
    return (name, args) if isinstance(args, dict) else None


def _json_calls(text: str, offered: set[str]) -> list[tuple[str, dict[str, Any]]] | None:
    try:
        value = loads(text)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item, offered) for item in items]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _function_call(name: str, body: str, offered: set[str]) -> tuple[str, dict[str, Any]] | None:
    if name not in offered:
        return None
    if body.startswith("{"):
        try:
            whole = loads(body)
        except ValueError:
            return None
        return (name, whole) if isinstance(whole, dict) else None
    args: dict[str, Any] = {}
    for key, raw in _PARAM_RE.findall(body):
        try:
            args[key] = loads(raw)
        except ValueError:
            args[key] = raw
    if not args and body:
        return None
    return name, args


def extract(content: str, offered: set[str]) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """Find tool calls written as text.

    Args:
        content: the assistant text.
        offered: names of the tools offered with the request.

    Returns:
        ``(calls, remaining_text)``: calls as ``(name, arguments)`` in order, and the
        content with the accepted envelopes removed (stripped). No calls: ``([], content)``.
    """
    if not offered or not content:
        return [], content
    calls: list[tuple[str, dict[str, Any]]] = []
    remaining = content

    def take_tag(match: re.Match[str]) -> str:
        found = _json_calls(match.group(1), offered)
        if found is None:
            return match.group(0)
        calls.extend(found)
        return ""

    def take_function(match: re.Match[str]) -> str:
        found = _function_call(match.group(1), match.group(2), offered)
        if found is None:
            return match.group(0)
        calls.append(found)
        return ""

    if "<tool_call>" in remaining:
        remaining = _TAG_RE.sub(take_tag, remaining)
    if "<function=" in remaining:
        remaining = _FUNCTION_RE.sub(take_function, remaining)
    if calls:
        return calls, remaining.strip()
    fence = _FENCE_RE.search(content)
    if fence:
        found = _json_calls(fence.group(1).strip(), offered)
        if found:
            return found, content[: fence.start()].strip()
    stripped = content.strip()
    if stripped[:1] in ("{", "["):
        found = _json_calls(stripped, offered)
        if found:
            return found, ""
    return [], content
