"""The web chat's request bodies: one pydantic model per body, and the API's error.

One job: turn a request's JSON object into a checked body, or an :class:`ApiError`
400 whose message names the field (``unknown key "x"``, ``"text" must be a string,
not int``). Every model is a :class:`agentkit.configfile.StrictModel`: unknown keys
and NaN or infinite numbers are refused; no value is converted to a string. The
whole body is capped by ``MAX_BODY`` (agentkit.webchat.api) before it is parsed, so
each text is too.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import Field, ValidationError, field_validator

from agentkit.configfile import StrictModel
from agentkit.errors import AgentkitError

__all__ = [
    "ApiError",
    "ApprovalAnswer",
    "ContinueBody",
    "ControlText",
    "MessageBody",
    "NewConversation",
    "RenameBody",
    "SwitchBody",
    "parse_body",
]

MAX_TEXT = 1_000_000
"""Longest text field, characters: the body's own cap (``MAX_BODY`` bytes)."""


class ApiError(AgentkitError):
    """An error answered as ``{"error": message}`` with ``status`` (an HTTP status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _message_not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("the message is empty")
    return value


class NewConversation(StrictModel):
    """``POST /api/conversations``: an optional title."""

    title: str | None = Field(default=None, max_length=MAX_TEXT)


class RenameBody(StrictModel):
    """``PATCH /api/conversations/{cid}``: the new title."""

    title: str = Field(max_length=MAX_TEXT)


class SwitchBody(StrictModel):
    """``POST /api/switch``: the conversation left and the one opened (None: a new one)."""

    leaving: str | None = Field(default=None, max_length=MAX_TEXT)
    to: str | None = Field(default=None, max_length=MAX_TEXT)


class MessageBody(StrictModel):
    """``POST /api/conversations/{cid}/messages``: the user's message."""

    text: str = Field(default="", max_length=MAX_TEXT, validate_default=True)

    _text = field_validator("text")(_message_not_blank)


class ApprovalAnswer(StrictModel):
    """``POST .../approvals/{request_id}``: the decision and an optional note."""

    decision: str = Field(max_length=MAX_TEXT, description='"allow", "allow_always" or "deny"')
    note: str | None = Field(default=None, max_length=MAX_TEXT)


class ControlText(StrictModel):
    """``POST .../subagents/{aid}/answer`` and ``/message``: the text sent."""

    text: str = Field(max_length=MAX_TEXT, description="a non-empty string")

    _text = field_validator("text")(_not_blank)


class ContinueBody(StrictModel):
    """``POST .../subagents/{aid}/continue``: the new task."""

    task: str = Field(max_length=MAX_TEXT, description="a non-empty string")

    _task = field_validator("task")(_not_blank)


BodyT = TypeVar("BodyT", bound=StrictModel)


def parse_body(model: type[BodyT], data: dict[str, Any]) -> BodyT:
    """``data`` (a request's JSON object) as a ``model``.

    Raises:
        ApiError: 400, one line naming the first field at fault: ``unknown key "x"
            (known: text)``, ``give "title" (a title (a string))``, ``"text" must be a
            string, not int``, ``"text": the message is empty``.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, _message(model, exc)) from None


def _message(model: type[StrictModel], exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    # A misspelt key is told as such, not as the missing key it was meant to be.
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = first.get("loc", ())
    field = str(loc[0]) if loc else ""
    info = model.model_fields.get(field)
    what = (info.description if info else None) or (
        "a string or null"
        if info is not None and info.default is None and not info.is_required()
        else "a string"
    )
    kind, value = first.get("type", ""), first.get("input")
    if kind == "extra_forbidden":
        return f'unknown key "{field}" (known: {", ".join(model.model_fields)})'
    if kind == "missing":
        return f'give "{field}" ({what})'
    if kind == "string_too_long":
        return f'"{field}" is longer than {MAX_TEXT} characters'
    if kind == "value_error":
        return f'"{field}": ' + str(first.get("msg", "")).removeprefix("Value error, ")
    if kind.endswith("_type") or kind == "finite_number":
        return f'"{field}" must be {what}, not {_json_type(value)}'
    return f'"{field}": {first.get("msg", "invalid")}'


def _json_type(value: Any) -> str:
    return "null" if value is None else type(value).__name__
