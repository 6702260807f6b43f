"""Chat messages encoded once, and request bodies built from them.

One job: :class:`WireMessage`, a read-only chat message as it is sent that keeps
its JSON (compact, UTF-8) and its token count, and :func:`encode_body`, the bytes
of a request body in which each WireMessage's JSON is used as it is. The bytes are
exactly those of encoding the whole body at once (``json.JSONEncoder(
ensure_ascii=False, separators=(",", ":"))``, UTF-8 with lone surrogates replaced
by ``?``), so the wire format does not change; a long conversation then costs a join
per request instead of a full encode, and its token count a sum (issue 27: at 1,000
messages the encode was 40 % of a turn's CPU).

agentkit.context.ContextWindow makes the WireMessages (one per message, kept until
the message changes); any other list of plain dicts is encoded as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["WireMessage", "encode_body"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _to_bytes(text: str) -> bytes:
    # "replace": a lone surrogate (half an emoji from somewhere) must not fail the request.
    return text.encode("utf-8", "replace")


class WireMessage(dict[str, Any]):
    """A chat message as sent (OpenAI shape), read-only, that remembers its JSON and
    token count.

    Args:
        message: the message's fields, copied (shallowly: values are shared, and
            must not be changed in place either; agentkit replaces a stored
            message's content or tool calls, never edits them).
        tokens: its token count when the caller has it (default: counted on first
            use, agentkit.tokens.count_message).

    Raises TypeError on any change (``m[k] = v``, ``update``, ``pop``...): build a new
    message instead. Copies (``dict(m)``, ``{**m}``, copy, pickle) are plain dicts.
    """

    __slots__ = ("_json", "_tokens")

    def __init__(self, message: Mapping[str, Any], tokens: int | None = None) -> None:
        super().__init__(message)
        self._json: bytes | None = None
        self._tokens = tokens

    @property
    def json(self) -> bytes:
        """The message's compact JSON, UTF-8 (encoded on first use, then kept)."""
        if self._json is None:
            self._json = _to_bytes(_dumps(self))
        return self._json

    @property
    def tokens(self) -> int:
        """Tokens of the message with the per-message overhead (agentkit.tokens)."""
        if self._tokens is None:
            from agentkit.tokens import count_message

            self._tokens = count_message(self)
        return self._tokens

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a WireMessage is read-only (it keeps its encoding): build a new one")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def encode_body(body: Mapping[str, Any]) -> bytes:
    """Return the UTF-8 JSON of a Chat Completions request ``body`` (compact, keys in
    order), using the kept JSON of every :class:`WireMessage` in ``body["messages"]``.

    Byte for byte what encoding the whole body would give; the body is copied once
    (the message fragments are joined with the fields around them). Raises TypeError
    (or ValueError) for a value JSON cannot encode, as ``json`` does.
    """
    messages = body.get("messages")
    if not messages or not isinstance(messages, list) or not all(isinstance(k, str) for k in body):
        return _to_bytes(_dumps(body))
    before: list[str] = []
    after: list[str] = []
    side = before
    for key, value in body.items():
        if key == "messages":
            side = after
        else:
            side.append(_dumps(key) + ":" + _dumps(value))
    head = _to_bytes("{" + "".join(part + "," for part in before) + '"messages":[')
    tail = _to_bytes("]" + "".join("," + part for part in after) + "}")
    fragments = [m.json if type(m) is WireMessage else _to_bytes(_dumps(m)) for m in messages]
    fragments[0] = head + fragments[0]
    fragments[-1] = fragments[-1] + tail
    return b",".join(fragments)
