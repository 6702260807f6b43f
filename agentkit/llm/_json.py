"""Parsing JSON that a model server sent, with its nesting bounded.

``json.loads`` recurses once per level: 10,000 nested brackets in a model's
tool-call arguments raised ``RecursionError``, which no ``except ValueError``
catches, and ended the whole run. And a value that parsed near the recursion
limit would fail later (cleaning it, saving the transcript). So everything read
from a model (stream events, bodies, error bodies, arguments, calls written as
text) goes through :func:`loads`: tool-call arguments at most :data:`MAX_DEPTH`
levels, a whole event or body :data:`REPLY_MAX_DEPTH`; deeper is
:class:`JSONTooDeep`, a ValueError, which each caller answers as it answers bad JSON.
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.errors import AgentkitError

#: Levels of arrays and objects accepted in tool-call arguments (rarely more than five).
MAX_DEPTH = 100
#: Levels accepted in a whole stream event or body: the arguments' limit plus room for
#: the envelope around them (choices, message, tool_calls, function).
REPLY_MAX_DEPTH = MAX_DEPTH + 20


class JSONTooDeep(AgentkitError, ValueError):
    """JSON nested deeper than a limit of levels (a ValueError)."""

    def __init__(self, max_depth: int = MAX_DEPTH) -> None:
        super().__init__(f"JSON nested deeper than {max_depth} levels")


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``, refusing values nested deeper than ``max_depth`` levels.

    Raises:
        JSONTooDeep: too deep (also when the decoder ran out of stack).
        json.JSONDecodeError: not JSON.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONTooDeep(max_depth) from None
    check_depth(value, text, max_depth)
    return value


def check_depth(value: Any, text: str | bytes | None = None, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`JSONTooDeep` when ``value`` (decoded JSON) nests deeper than
    ``max_depth`` levels. ``text``, its source, lets shallow values skip the walk: a
    value cannot nest deeper than the number of brackets that open in its text."""
    if isinstance(text, bytes) and text.count(b"{") + text.count(b"[") <= max_depth:
        return
    if isinstance(text, str) and text.count("{") + text.count("[") <= max_depth:
        return
    if _deeper_than(value, max_depth):
        raise JSONTooDeep(max_depth)


def _deeper_than(value: Any, limit: int) -> bool:
    # Iterative: a recursive walk would hit the very limit this guards against.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
