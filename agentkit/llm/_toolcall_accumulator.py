"""Assembling tool calls from streamed deltas and parsing their arguments.

Slots are keyed by ``index`` when present; ids and names set only from non-empty
values (names assigned, never appended); a new call at a reused index (Ollama,
Gemini) or without any index (Moonshot); whole calls in one delta; ids minted for
calls without one; unknown per-call fields kept; ids made unique within the turn;
arguments accepted as object, string or double-encoded string; only unambiguous repairs
(trailing junk, ``}{``-joined objects); truncated, invalid or too deeply nested
JSON reported, never guessed; at most ``max_tool_calls_per_turn`` calls of a turn
run. docs/providers.md §1 maps its rules to these functions.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentkit.llm._json import JSONTooDeep, check_depth, loads
from agentkit.llm._pieces import Pieces
from agentkit.llm.turns import ToolCall

_KNOWN_CALL_KEYS = frozenset(("index", "id", "type", "function"))
_DECODER = json.JSONDecoder()
#: Valid function names (OpenAI's rule: letters, digits, _ and -, at most 64; dots too,
#: as some servers namespace tools).
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def mint_call_id() -> str:
    """Return a fresh ``call_<24 hex>`` id for a call the server sent without one."""
    return "call_" + uuid.uuid4().hex[:24]


class _Slot:
    __slots__ = ("id", "name", "parts", "obj", "extra", "split", "touched_args")

    def __init__(self, *, split: bool = False) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.parts = Pieces()  # argument fragments
        self.obj: Any = None  # arguments sent as a JSON value instead of a string
        self.extra: dict[str, Any] = {}
        self.split = split  # opened by the reused-index / missing-index rules
        self.touched_args = False

    def args_complete(self) -> bool:
        if self.obj is not None:
            return True
        if not self.parts.last.rstrip().endswith("}"):
            return False
        try:
            loads(self.parts.join())
        except ValueError:
            return False
        return True


class ToolCallAccumulator:
    """Collects tool-call deltas (streamed) or whole calls (non-streamed) in order."""

    def __init__(self) -> None:
        self.slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}

    def add(self, delta: Any) -> None:
        """Apply one entry of ``delta.tool_calls`` (or of ``message.tool_calls``)."""
        if not isinstance(delta, dict):
            return
        index = delta.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            index = None
        call_id = delta.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        function = delta.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        name = name if isinstance(name, str) and name else None
        args = function.get("arguments")

        if index is not None:
            slot = self._by_index.get(index)
            if slot is None:
                slot = self._open(index)
            elif self._new_call_at_reused_index(slot, call_id, name):
                slot = self._open(index, split=True)
        else:
            slot = self.slots[-1] if self.slots else None
            if slot is None:
                slot = self._open(None)
            elif self._new_call_without_index(slot, call_id, name):
                slot = self._open(None, split=True)

        if call_id and not slot.id:
            slot.id = call_id  # never rewrite a known id
        if name:
            slot.name = name  # assigned, not appended
        if isinstance(args, str):
            if args:
                slot.parts.append(args)
                slot.touched_args = True
        elif args is not None:
            slot.obj = args  # an object instead of a string
            slot.touched_args = True
        for key, value in delta.items():
            if key not in _KNOWN_CALL_KEYS and value is not None:
                slot.extra[key] = value  # kept and sent back, e.g. Gemini extra_content

    def _open(self, index: int | None, *, split: bool = False) -> _Slot:
        slot = _Slot(split=split)
        self.slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    @staticmethod
    def _new_call_at_reused_index(slot: _Slot, call_id: str | None, name: str | None) -> bool:
        # A new call at a reused index: a different id together with a name, or (no id)
        # a name while the slot already holds a name and complete JSON arguments.
        if call_id and slot.id and call_id != slot.id:
            return name is not None
        return bool(not call_id and name and slot.name and slot.args_complete())

    @staticmethod
    def _new_call_without_index(slot: _Slot, call_id: str | None, name: str | None) -> bool:
        # No index: a new id opens a slot; so does a name when the current slot is named,
        # id-less and finished. Anything else continues the most recent slot.
        if call_id:
            if slot.id:
                return call_id != slot.id
            return bool(slot.name and slot.args_complete())
        return bool(name and slot.name and not slot.id and slot.args_complete())

    def finish(self, warnings: list[str]) -> tuple[list[ToolCall], bool]:
        """Return the calls (ids minted and made unique, arguments parsed) and whether
        any looks truncated.

        Repairs are described in ``warnings``.
        """
        calls: list[ToolCall] = []
        truncated = False
        previous: _Slot | None = None
        for slot in self.slots:
            if (
                slot.split
                and not slot.touched_args
                and not slot.id
                and previous is not None
                and slot.name == previous.name
            ):
                continue  # a name re-sent after the call was complete: not a new call
            previous = slot
            parsed = parse_arguments(slot.obj if slot.obj is not None else slot.parts.join())
            truncated = truncated or parsed.truncated
            call = _call(slot, parsed)
            calls.append(call)
            if parsed.note:
                warnings.append(f"tool call {call.id} ({call.name}): {parsed.note}")
            for extra_args in parsed.more:
                more = ToolCall(
                    id=mint_call_id(),
                    name=call.name,
                    arguments=extra_args,
                    arguments_raw=json.dumps(extra_args, ensure_ascii=False),
                )
                calls.append(more)
        unique_ids(calls, warnings)
        return calls, truncated


def _call(slot: _Slot, parsed: ParsedArguments) -> ToolCall:
    name = slot.name or ""
    call = ToolCall(
        id=slot.id or mint_call_id(),
        name=name,
        arguments=parsed.arguments,
        arguments_raw=parsed.raw,
        error=parsed.error,
        extra=dict(slot.extra),
    )
    if not name and call.error is None:
        call.error = "the tool call has no function name"
    elif not _NAME_RE.fullmatch(name) and call.error is None:
        # e.g. "write_file:" from a server that parsed its own prompt format
        call.error = f"{name!r} is not a valid tool name"
    return call


def unique_ids(calls: list[ToolCall], warnings: list[str]) -> None:
    """Give every call of one turn its own id, in place and in order: the first call
    with an id keeps it, a later one with the same id gets a minted one (each
    call's id must be answered by exactly one tool result)."""
    seen: set[str] = set()
    for position, call in enumerate(calls, 1):
        if call.id in seen:
            fresh = mint_call_id()
            warnings.append(
                f"tool call {position} repeated the id {call.id!r} of an earlier call "
                f"of this reply; it was given the id {fresh} (rule S9)"
            )
            call.id = fresh
        seen.add(call.id)


def cap_tool_calls(calls: list[ToolCall], limit: int, warnings: list[str]) -> None:
    """Leave at most ``limit`` of one turn's ``calls`` to run, in place: the later
    ones stay, so every id is answered, but carry a ``too_many_tool_calls``
    error, so they are answered without running. A note goes to ``warnings``."""
    if len(calls) <= limit:
        return
    message = (
        f"not run: this reply asked for {len(calls)} tool calls and at most {limit} run per "
        f"reply (max_tool_calls_per_turn); the first {limit} ran. Ask for this call again "
        "in a later reply if it is still needed."
    )
    for call in calls[limit:]:
        call.error, call.error_code = message, "too_many_tool_calls"
    warnings.append(f"{len(calls) - limit} of {len(calls)} tool calls not run (rule S10)")


@dataclass
class ParsedArguments:
    """Result of :func:`parse_arguments`."""

    arguments: dict[str, Any] | None
    raw: str
    error: str | None = None
    truncated: bool = False
    note: str | None = None
    more: list[dict[str, Any]] = field(default_factory=list)


def parse_arguments(raw: Any) -> ParsedArguments:
    """Parse tool-call arguments: repair only the unambiguous, report the rest.

    Args:
        raw: the arguments as received: a JSON string (maybe empty, double-encoded,
            followed by junk or by more objects) or an already decoded value.

    Returns:
        ParsedArguments: ``arguments`` is a dict, or None with ``error`` explaining why
        (also for arguments nested deeper than ``_json.MAX_DEPTH`` levels);
        ``truncated`` is True when the JSON stops mid-value (the reply was cut off);
        ``more`` holds further objects of ``}{``-joined arguments (separate calls).
    """
    try:
        parsed = _parse(raw)
        for value in (parsed.arguments, *parsed.more):
            check_depth(value)
    except (JSONTooDeep, RecursionError) as exc:
        text = raw if isinstance(raw, str) else ""
        reason = exc if isinstance(exc, JSONTooDeep) else JSONTooDeep()
        return ParsedArguments(None, text, error=f"invalid arguments: {reason}")
    return parsed


def _parse(raw: Any) -> ParsedArguments:
    if isinstance(raw, dict):
        check_depth(raw)  # before json.dumps recurses into it
        return ParsedArguments(raw, json.dumps(raw, ensure_ascii=False, separators=(",", ":")))
    if not isinstance(raw, str):
        check_depth(raw)
        text = json.dumps(raw, ensure_ascii=False)
        return ParsedArguments(
            None, text, error=f"arguments must be a JSON object, got {text[:80]}"
        )
    text = raw.strip()
    if not text:
        return ParsedArguments({}, raw)
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        return _parse_damaged(raw, text, exc)
    if isinstance(value, str):  # double-encoded
        try:
            value = loads(value)
        except json.JSONDecodeError as exc:
            return ParsedArguments(None, raw, error=f"invalid JSON arguments: {exc}")
        if isinstance(value, dict):
            return ParsedArguments(value, raw, note="decoded double-encoded arguments")
    if not isinstance(value, dict):
        kind = type(value).__name__
        return ParsedArguments(None, raw, error=f"arguments must be a JSON object, got {kind}")
    return ParsedArguments(value, raw)


def _parse_damaged(raw: str, text: str, exc: json.JSONDecodeError) -> ParsedArguments:
    try:
        first, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        # Stops inside a value: cut off. Anything else: invalid, never guessed.
        tail = text[exc.pos :]
        truncated = (
            exc.pos >= len(text)
            or exc.msg.startswith("Unterminated string")
            or any(literal.startswith(tail) for literal in ("true", "false", "null"))
        )
        what = "truncated JSON arguments (the reply was cut off)" if truncated else "invalid JSON"
        return ParsedArguments(None, raw, error=f"{what}: {exc}", truncated=truncated)
    if not isinstance(first, dict):
        return ParsedArguments(None, raw, error=f"invalid JSON arguments: {exc}")
    rest = text[end:].strip()
    if rest and not rest.strip("}]) \n\t"):
        return ParsedArguments(first, raw, note=f"removed stray {rest[:20]!r} after the arguments")
    more: list[dict[str, Any]] = []
    while rest.startswith("{"):
        try:
            obj, end = _DECODER.raw_decode(rest)
        except json.JSONDecodeError:
            break
        if not isinstance(obj, dict):
            break
        more.append(obj)
        rest = rest[end:].strip()
    if more and not rest:
        note = f"split {len(more) + 1} concatenated argument objects into separate calls"
        return ParsedArguments(first, raw, note=note, more=more)
    return ParsedArguments(None, raw, error=f"invalid JSON arguments: {exc}")
