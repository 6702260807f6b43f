"""A GBNF grammar (llama.cpp's constrained decoding) for prompted tool calls.

The reply it allows is one JSON object ``{"name": N, "arguments": A}`` where N is
one of the offered tools (or the final-answer pseudo tool) and A matches that
tool's JSON schema, so every call a model writes parses, even on a tiny model.
The schema support is what tool schemas use: objects, strings, enums, integers,
numbers, booleans, null, arrays, ``anyOf``/``oneOf``/type lists; anything else
becomes any JSON value. A string's ``minLength``/``maxLength`` and a small
integer range (``minimum``/``maximum``, at most :data:`_RANGE_LIMIT` values) are
kept, so a bounded argument cannot come out of bounds: unbounded, a tiny model
wrote a 280-character create_sub_agent summary, refused past 200, twice in a row.
Objects get their required properties, in order, and no optional ones: these
keep their defaults, because a tiny model fills every slot it is offered with
noise (``"offset": 0``, ``"limit": 1``... measured on Gemma 3 270M, which then
looped on the refused call).
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.llm._call_schema import allowed_calls

_BASE = r"""ws ::= ([ \t\n] ([ \t\n])?)?
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
string ::= "\"" char* "\""
integer ::= "-"? ([0-9] | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"
"""
_RANGE_LIMIT = 1000
"""An integer range with at most this many values is spelt out; a wider one is not."""
_LENGTH_LIMIT = 4000
"""A string bound past this many characters is left out (llama.cpp expands repeats)."""
_PRIMITIVES = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}


def _literal(value: Any) -> str:
    """A GBNF string literal matching ``value`` as compact JSON."""
    return json.dumps(json.dumps(value, ensure_ascii=False), ensure_ascii=False)


class _Builder:
    def __init__(self) -> None:
        self.rules: list[str] = []
        self._count = 0

    def rule(self, body: str, hint: str = "r") -> str:
        self._count += 1
        name = f"{hint}-{self._count}"
        self.rules.append(f"{name} ::= {body}")
        return name

    def schema(self, schema: Any) -> str:
        """Return a rule name or expression matching ``schema``."""
        if not isinstance(schema, dict):
            return "value"
        if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
            return self.rule(" | ".join(_literal(v) for v in schema["enum"]), "enum")
        if "const" in schema:
            return _literal(schema["const"])
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return self.rule(" | ".join(self.schema(o) for o in options), "any")
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.rule(" | ".join(self.schema({**schema, "type": k}) for k in kind), "any")
        if kind == "object" or (kind is None and "properties" in schema):
            return self.object(schema)
        if kind == "array":
            item = self.schema(schema.get("items"))
            body = f'"[" ws ({item} (ws "," ws {item})*)? ws "]"'
            return self.rule(body, "array")
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return self.integer(schema)
        return _PRIMITIVES.get(str(kind), "value")

    def string(self, schema: dict[str, Any]) -> str:
        low, high = _whole(schema.get("minLength")), _whole(schema.get("maxLength"))
        low = low if low is not None and low <= _LENGTH_LIMIT else 0
        if high is None or high > _LENGTH_LIMIT or high < low:
            return "string" if not low else self.rule(f'"\\"" char{{{low},}} "\\""', "str")
        return self.rule(f'"\\"" char{{{low},{high}}} "\\""', "str")

    def integer(self, schema: dict[str, Any]) -> str:
        low, high = _whole(schema.get("minimum")), _whole(schema.get("maximum"))
        if low is None or high is None or not 0 <= high - low < _RANGE_LIMIT:
            return "integer"
        return self.rule(" | ".join(f'"{n}"' for n in range(low, high + 1)), "int")

    def object(self, schema: dict[str, Any]) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return "object"
        required = [k for k in schema.get("required") or [] if k in properties]
        if not required:
            return self.rule('"{" ws "}"', "obj")
        pairs = [f'{_literal(k)} ws ":" ws {self.schema(properties[k])}' for k in required]
        body = ' ws "," ws '.join(pairs)
        return self.rule(f'"{{" ws {body} ws "}}"', "obj")


def _whole(value: Any) -> int | None:
    """``value`` when it is a whole number (not a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


def tool_call_grammar(tools: list[dict[str, Any]], answer_name: str | None) -> str:
    """Return a GBNF grammar whose sentences are exactly the valid calls.

    Args:
        tools: the request's tool schemas (``{"type": "function", "function":
            {"name", "parameters"}}``); entries of another shape are skipped.
        answer_name: the final-answer pseudo tool, taking ``{"text": string}``; None
            leaves it out (a call is required).

    Returns:
        The grammar text (root rule ``root``), for llama.cpp's ``grammar`` field.
    """
    builder = _Builder()
    choices: list[str] = []
    for name, parameters in allowed_calls(tools, answer_name):
        arguments = builder.schema(parameters)
        body = f'{_literal(name)} ws "," ws "\\"arguments\\"" ws ":" ws {arguments}'
        choices.append(builder.rule(body, "call"))
    root = f'root ::= "{{" ws "\\"name\\"" ws ":" ws ({" | ".join(choices)}) ws "}}"'
    return "\n".join([root, *builder.rules, _BASE])
