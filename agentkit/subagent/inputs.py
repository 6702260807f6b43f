"""What the seed tools accept as arguments, and how a bad argument is refused.

One job: the input rules of create_sub_agent, terminate_sub_agent,
get_sub_agent_status and finish_task, of the control plane's tools
(docs/control-plane.md §1: their texts are non-empty and at most
:data:`CONTROL_TEXT_MAX` characters, ``mode`` is ``all`` or ``any``) and of
create_sub_agent's ``isolation`` (``shared`` or ``isolated``, docs/isolation.md)
(docs/specification.md §1 gives the seed tools' types: ``agent_id``
int, ``agent_ids`` list[int], ``timeout_seconds`` int, ``run_in_background`` and
``success`` bool, ``summary``/``task``/``deliverables_dir`` str), as pydantic
``BeforeValidator`` types, and the seed-shaped JSON refusal a tool answers when
its arguments break them (``{"success": false, ..., "error": ...}``, never the
generic ``Error: invalid_argument`` text).

The rules (pydantic's lax mode would coerce ``true`` to 1 and ``"yes"`` to True;
these replace it):

- **Whole numbers** (``agent_id``, each of ``agent_ids``, ``timeout_seconds``):
  a JSON integer; a JSON number with no fractional part (``3.0``: JSON has one
  number type, and some clients write every number that way); or a string of
  decimal digits with an optional sign (``"3"``, models quote numbers now and
  then). Never a boolean, ``null`` (except ``timeout_seconds``, below), a
  fractional or non-finite number (``3.5``, ``NaN``), other text, a list or an
  object. Ranges (1-99, 60-3600 s) are checked later by admission, which names
  the limit.
- ``agent_ids``: a non-empty list of whole numbers; a bare whole number means a
  list of one (models often send ``1`` for ``[1]``). An id named twice counts once
  (first-seen order kept: one status row each), and more than :data:`AGENT_ID_MAX`
  different ids (more than a conversation can have) is refused, naming the limit.
- **Flags** (``run_in_background``, ``success``): JSON ``true``/``false``, or the
  strings ``"true"``/``"false"`` (any case). Never ``1``/``0``, ``"yes"``,
  ``"on"`` or ``null`` (except as below): they are not a clear answer.
- **Text** (``summary``, ``task``): a JSON string; surrounding whitespace is
  dropped and an empty (or whitespace-only) text is refused. create_sub_agent's
  ``summary`` (seed: 10-30 characters) has its whitespace runs joined into one
  space (it is shown on one line in every status row and notification) and is
  refused past :data:`SUMMARY_MAX` characters, asking for 10-30: the model can
  fix that at once, while cutting it would hide what it meant. finish_task's
  ``summary`` (seed: 50-200 characters) is kept whole in the record, however
  long; notifications cap it (``SubAgentManager.capped_summary``).
- **Optional arguments** (``deliverables_dir``, ``run_in_background``,
  ``timeout_seconds``): ``null`` means "not given" and takes the default (what
  OpenAI's strict function-calling mode sends for an omitted optional field).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from agentkit import prompts

if TYPE_CHECKING:
    from agentkit.tools.base import InvalidArgumentsHook, ToolContext

CONTROL_TEXT_MAX = 20_000
"""Characters of a control-plane text (a message, an answer, a question, a continued
task); a longer one is refused, naming the limit (docs/control-plane.md)."""
STEER_QUEUE_MAX = 10
"""Steering messages one sub-agent may hold unread (taken, not yet before its model);
a further one is refused, saying so (docs/control-plane.md §2)."""
STEER_QUEUE_CHARS = 50_000
"""Characters those unread messages may hold together; likewise refused past it."""
SUMMARY_MAX = 200
"""create_sub_agent's summary is refused past this many characters (seed: 10-30)."""
AGENT_ID_MIN, AGENT_ID_MAX = 1, 99
"""The range of a sub-agent id (seed §1: 1-99); admission refuses any other."""

_WHOLE = re.compile(r"[+-]?\d{1,18}")


def _refuse(phrase: str, value: Any) -> PydanticCustomError:
    # The error's ctx carries the phrase key and the value; the refusal renders it
    # in the conversation's language (validators do not know the language).
    ctx = {"phrase": phrase, "value": _shown(value)}
    return PydanticCustomError("seed_input", "{phrase}: {value}", ctx)


def _shown(value: Any) -> str:
    """The value as the model wrote it (JSON spelling), at most 40 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def whole_number(value: Any) -> int:
    """Return ``value`` as an int under the whole-number rule (module docstring);
    raises PydanticCustomError ``arg_not_whole`` otherwise."""
    if isinstance(value, bool):  # bool is an int subclass: test it first
        raise _refuse("arg_not_whole", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    raise _refuse("arg_not_whole", value)


def _id_list(value: Any) -> list[int]:
    if not isinstance(value, list):
        try:  # a bare whole number means a list of one (module docstring)
            return [whole_number(value)]
        except PydanticCustomError:  # "all", an object: say a list is wanted
            raise _refuse("arg_not_id_list", value) from None
    if not value:
        raise _refuse("arg_ids_empty", value)
    # One row per id, in the order first named: [1]*1000 is one agent, not 1,000 rows.
    ids = list(dict.fromkeys(whole_number(item) for item in value))
    if len(ids) > AGENT_ID_MAX:
        raise PydanticCustomError(
            "seed_input",
            "{phrase}",
            {"phrase": "arg_too_many_ids", "count": len(ids), "max": AGENT_ID_MAX},
        )
    return ids


def flag(value: Any) -> bool:
    """Return ``value`` as a bool under the flag rule (module docstring); raises
    PydanticCustomError ``arg_not_flag`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _refuse("arg_not_flag", value)


def _text(value: Any, empty_phrase: str) -> str:
    if not isinstance(value, str):
        raise _refuse("arg_not_text", value)
    text = value.strip()
    if not text:
        raise _refuse(empty_phrase, value)
    return text


def _create_summary(value: Any) -> str:
    text = " ".join(_text(value, "summary_empty").split())
    if len(text) > SUMMARY_MAX:
        raise PydanticCustomError(
            "seed_input",
            "{phrase}",
            {"phrase": "summary_too_long", "length": len(text), "max": SUMMARY_MAX},
        )
    return text


def _control_text(value: Any) -> str:
    text = _text(value, "control_text_empty")
    if len(text) > CONTROL_TEXT_MAX:
        raise PydanticCustomError(
            "seed_input",
            "{phrase}",
            {"phrase": "control_text_too_long", "length": len(text), "max": CONTROL_TEXT_MAX},
        )
    return text


def steer_limit(
    queued: list[str], text: str, why: str = ""
) -> tuple[Literal["control_text_too_long", "message_queue_full"], dict[str, int]] | None:
    """Why steering message ``text`` cannot join a sub-agent's unread ``queued`` texts:
    ``(phrase key, its values)`` when it is over :data:`CONTROL_TEXT_MAX` characters
    or the queue would pass :data:`STEER_QUEUE_MAX` messages or
    :data:`STEER_QUEUE_CHARS` characters; None when it may. ``why`` (a worker's
    refusal: ``too_long``, ``queue_full``) forces that answer."""
    count, chars = len(queued), sum(len(t) for t in queued)
    if why == "too_long" or len(text) > CONTROL_TEXT_MAX:
        return "control_text_too_long", {"length": len(text), "max": CONTROL_TEXT_MAX}
    if why == "queue_full" or count >= STEER_QUEUE_MAX or chars + len(text) > STEER_QUEUE_CHARS:
        values = {"count": count, "chars": chars, "max": STEER_QUEUE_MAX}
        return "message_queue_full", {**values, "max_chars": STEER_QUEUE_CHARS}
    return None


def wait_mode(value: Any) -> str:
    """Return wait_for_sub_agents' ``mode`` (``all`` or ``any``, any case); raises
    PydanticCustomError ``arg_not_mode`` otherwise."""
    if isinstance(value, str) and value.strip().lower() in ("all", "any"):
        return value.strip().lower()
    raise _refuse("arg_not_mode", value)


def isolation_mode(value: Any) -> str:
    """Return create_sub_agent's ``isolation`` (``shared`` or ``isolated``, any case);
    raises PydanticCustomError ``arg_not_isolation`` otherwise."""
    if isinstance(value, str) and value.strip().lower() in ("shared", "isolated"):
        return value.strip().lower()
    raise _refuse("arg_not_isolation", value)


def _optional_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    raise _refuse("arg_not_text", value)


def or_default(rule: Callable[[Any], Any], default: Any) -> BeforeValidator:
    """Validator for an optional argument: ``null`` gives ``default``, anything
    else must pass ``rule``."""
    return BeforeValidator(lambda value: default if value is None else rule(value))


WholeNumber = Annotated[int, BeforeValidator(whole_number)]
# The bounds also go into the JSON schema (minimum/maximum, maxLength): a model
# shown them, or a grammar built from them (agentkit.llm._grammar), stays within.
AgentId = Annotated[
    int,
    BeforeValidator(whole_number),
    Field(json_schema_extra={"minimum": AGENT_ID_MIN, "maximum": AGENT_ID_MAX}),
]
IdList = Annotated[list[int], BeforeValidator(_id_list)]
Flag = Annotated[bool, BeforeValidator(flag)]
CreateSummary = Annotated[
    str,
    BeforeValidator(_create_summary),
    Field(json_schema_extra={"minLength": 1, "maxLength": SUMMARY_MAX}),
]
Task = Annotated[
    str,
    BeforeValidator(lambda v: _text(v, "task_empty")),
    Field(json_schema_extra={"minLength": 1}),
]
FinishSummary = Annotated[str, BeforeValidator(lambda v: _text(v, "finish_summary_empty"))]
OptionalText = Annotated[str | None, BeforeValidator(_optional_text)]
ControlText = Annotated[
    str,
    BeforeValidator(_control_text),
    Field(json_schema_extra={"minLength": 1, "maxLength": CONTROL_TEXT_MAX}),
]


def refusal_text(tool: str, exc: ValidationError, language: str) -> str:
    """Return what is wrong with the arguments and what to do, one sentence per
    bad argument, in ``language`` (phrases ``arg_*``, ``*_empty``,
    ``summary_too_long``)."""
    parts = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        ctx = err.get("ctx") or {}
        if err.get("type") == "seed_input":
            values = {k: v for k, v in ctx.items() if k != "phrase"}
            parts.append(prompts.phrase(language, ctx["phrase"], field=field, **values))
        elif err.get("type") == "json_invalid":  # the engine could not parse them
            parts.append(prompts.phrase(language, "arg_unusable", reason=ctx.get("error")))
        elif err.get("type") == "missing":
            parts.append(prompts.phrase(language, "arg_missing", field=field))
        else:  # e.g. the arguments are not an object
            parts.append(prompts.phrase(language, "arg_invalid", field=field, problem=err["msg"]))
    parts.append(prompts.phrase(language, "arg_call_again", tool=tool))
    return ("" if language == "zh" else " ").join(parts)  # zh sentences end in 。


def refusal(
    tool: str, extra: dict[str, Any]
) -> Callable[[ValidationError, dict[str, Any], str], dict[str, Any]]:
    """Return the refusal builder of ``tool``: ``(exc, arguments, language) ->``
    the seed-shaped JSON ``{"success": false, ["agent_id": id,] "error": text,
    **extra}``. ``agent_id`` is there when the arguments hold a usable one."""

    def build(exc: ValidationError, arguments: dict[str, Any], language: str) -> dict[str, Any]:
        result: dict[str, Any] = {"success": False}
        if "agent_id" in arguments:
            try:
                result["agent_id"] = whole_number(arguments["agent_id"])
            except PydanticCustomError:
                pass  # not a usable id: leave it out rather than echo a wrong type
        result["error"] = refusal_text(tool, exc, language)
        return {**result, **extra}

    return build


def refusal_hook(tool: str, **extra: Any) -> InvalidArgumentsHook:
    """Return the ``Tool.on_invalid_arguments`` hook answering ``tool``'s seed-shaped
    refusal (:func:`refusal`, with ``extra`` keys) in the context's language."""
    build = refusal(tool, extra)

    def hook(exc: ValidationError, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return build(exc, arguments, ctx.language)

    return hook
