"""Prompted tool calling: tools described in the prompt, calls read from the reply.

For servers or models without working native tool calls (``Settings.tool_calling``
``prompted``, or ``auto`` once native calls proved broken). The translation
happens here, at the client boundary; the transcript keeps the standard OpenAI
shape (assistant ``tool_calls`` plus ``role: tool`` messages):

- the tools go into the system prompt in a compact form
  (``prompts/<lang>/tool_calling.txt``); no ``tools`` parameter is sent;
- an assistant message with tool calls goes as its text plus one JSON object
  ``{"name": ..., "arguments": {...}}`` per call, the format the model is asked for;
- a tool result goes as a user message naming the call
  (``prompts/<lang>/tool_result.txt``): every chat template keeps user messages,
  while many drop ``role: tool`` ones; consecutive user messages are joined, since
  some templates require user and assistant turns to alternate;
- the reply is read back into tool calls: a JSON call (bare, fenced or in
  ``<tool_call>`` tags) of an offered tool; a call of :data:`ANSWER_TOOL` is the
  final answer; a JSON object naming no offered tool is a call with an error (the
  model is told), not a phantom tool.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentkit import prompts
from agentkit.llm import _text_toolcalls
from agentkit.llm._json import JSONTooDeep, loads
from agentkit.llm._toolcall_accumulator import mint_call_id
from agentkit.llm.turns import AssistantTurn, ToolCall

#: The pseudo tool a prompted model calls to give its final answer.
ANSWER_TOOL = "final_answer"
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?。！？])(?:\s|$)", re.DOTALL)
_DESCRIPTION_CHARS = 160
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode


def _type_name(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {_type_name(schema.get('items'))}"
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " | ".join(_type_name(o) for o in options)
    return str(kind or "any")


def _short(text: str) -> str:
    text = " ".join(text.split())
    found = _FIRST_SENTENCE.match(text)
    text = found.group(1) if found else text
    return text if len(text) <= _DESCRIPTION_CHARS else text[: _DESCRIPTION_CHARS - 1] + "…"


def describe_tool(tool: dict[str, Any]) -> str | None:
    """One line ``- name(arg: type, opt?: type): first sentence`` for a tool schema;
    None for an entry that is not a function tool."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    required = set(parameters.get("required") or []) if isinstance(parameters, dict) else set()
    args = []
    for key, schema in (properties or {}).items():
        mark = "" if key in required else "?"
        args.append(f"{key}{mark}: {_type_name(schema)}")
    description = _short(str(function.get("description") or ""))
    line = f"- {function['name']}({', '.join(args)})"
    return f"{line}: {description}" if description else line


def tools_prompt(tools: list[dict[str, Any]], language: str) -> str:
    """The system-prompt section describing ``tools`` and the reply format."""
    lines = [line for line in (describe_tool(t) for t in tools) if line]
    # No worked example: a tiny model copies its file names (measured on Gemma 3 270M).
    return prompts.render(language, "tool_calling.txt", tools="\n".join(lines), answer=ANSWER_TOOL)


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    raw = function.get("arguments")
    try:
        arguments = loads(raw) if isinstance(raw, str) and raw.strip() else raw or {}
    except ValueError:
        arguments = {}
    return _dumps({"name": function.get("name") or "", "arguments": arguments})


def to_wire(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], language: str
) -> list[dict[str, Any]]:
    """Translate standard messages into the prompted form (see the module docstring).

    Args:
        messages: the conversation in OpenAI shape (not modified).
        tools: the tools offered with this request.
        language: ``zh`` or ``en``, for the prompt texts.

    Returns:
        New messages holding only system, user and assistant roles with text content.
    """
    section = tools_prompt(tools, language)
    out: list[dict[str, Any]] = []
    if messages and messages[0].get("role") == "system":
        first = str(messages[0].get("content") or "")
        out.append({"role": "system", "content": f"{first}\n\n{section}" if first else section})
        rest = messages[1:]
    else:
        out.append({"role": "system", "content": section})
        rest = messages
    for message in rest:
        role = message.get("role")
        if role == "assistant":
            parts = [str(message.get("content") or "")]
            parts += [_call_text(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            out.append({"role": "assistant", "content": "\n".join(p for p in parts if p)})
            continue
        if role == "tool":
            text = prompts.render(
                language,
                "tool_result.txt",
                tool=message.get("name") or "",
                call_id=message.get("tool_call_id") or "",
                content=_content_text(message.get("content")),
            )
            message = {"role": "user", "content": text}
        elif role not in ("user", "system"):
            message = {"role": "user", "content": _content_text(message.get("content"))}
        previous = out[-1] if len(out) > 1 else None
        if (
            previous is not None
            and previous["role"] == "user"
            and message.get("role") == "user"
            and isinstance(previous.get("content"), str)
            and isinstance(message.get("content"), str)
        ):
            out[-1] = {"role": "user", "content": f"{previous['content']}\n\n{message['content']}"}
        else:
            out.append(message)
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def read_reply(turn: AssistantTurn, tools: list[dict[str, Any]]) -> AssistantTurn:
    """Turn the calls a prompted model wrote in ``turn.content`` into tool calls.

    A call of :data:`ANSWER_TOOL` becomes the content (the final answer). A JSON
    object with a ``name`` that is no offered tool becomes a call carrying
    ``error`` (answered as a tool error, never run). Plain text stays the answer.
    Returns ``turn``, changed in place.
    """
    content = turn.content
    if turn.tool_calls or not content:
        return turn
    offered = {t.get("function", {}).get("name") for t in tools if isinstance(t, dict)}
    names = {n for n in offered if isinstance(n, str) and n} | {ANSWER_TOOL}
    found, remaining = _text_toolcalls.extract(content, names)
    if not found:
        stray = _cut_call(content, names) if turn.finish_reason == "length" else None
        stray = stray or _stray_call(content)
        if stray is not None:
            turn.tool_calls = [stray]
            turn.content, turn.finish_reason = None, "tool_calls"
            turn.warnings.append(f"the model's call of {stray.name!r} is unusable: {stray.error}")
        return turn
    calls: list[ToolCall] = []
    answers: list[str] = []
    for name, arguments in found:
        if name == ANSWER_TOOL:
            text = arguments.get("text")
            answers.append(text if isinstance(text, str) else _dumps(arguments))
            continue
        call = ToolCall(id=mint_call_id(), name=name, arguments=arguments)
        call.arguments_raw = call.wire()["function"]["arguments"]
        calls.append(call)
    text = "\n\n".join(p for p in [remaining, *answers] if p) or None
    turn.tool_calls = calls
    turn.content = text
    turn.finish_reason = "tool_calls" if calls else turn.finish_reason
    return turn


_NAME_RE = re.compile(r'^\s*\{\s*"name"\s*:\s*"([^"]+)"')


def _cut_call(content: str, names: set[str]) -> ToolCall | None:
    """A call cut off by the token limit (its JSON never closed), as a call with an
    error, so the model is told rather than its fragment taken for an answer."""
    found = _NAME_RE.match(content)
    if found is None or found.group(1) not in names or found.group(1) == ANSWER_TOOL:
        return None
    return ToolCall(
        id=mint_call_id(),
        name=found.group(1),
        arguments=None,
        arguments_raw=content,
        error="the reply was cut off before the arguments were complete; "
        "use shorter arguments (for example write a long file in parts)",
    )


def _stray_call(content: str) -> ToolCall | None:
    """A JSON object with a string ``name`` that names no offered tool, or one nested
    too deeply to read, as an erroneous call."""
    text = content.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = loads(text)
    except JSONTooDeep as exc:
        named = _NAME_RE.match(text)
        return ToolCall(
            id=mint_call_id(),
            name=named.group(1) if named else "",
            arguments=None,
            arguments_raw=text,
            error=f"invalid arguments: {exc}",
        )
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    if not isinstance(value.get("arguments", value.get("parameters")), dict):
        return None
    name = value["name"]
    return ToolCall(
        id=mint_call_id(),
        name=name,
        arguments=None,
        arguments_raw=text,
        error=f"there is no tool named {name!r}; call one of the listed tools, or {ANSWER_TOOL}",
    )
