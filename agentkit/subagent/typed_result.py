"""finish_task with a typed result: a profile's ``output_schema`` (docs/control-plane.md §4).

One job: the finish_task of a sub-agent whose profile carries a JSON Schema (built in
the worker), and the check of a result when it is given (a profile's schema is
checked when the profile is loaded: agentkit.profiles). It takes
the seed's ``success`` and ``summary`` plus a ``result`` object, which must be valid
against the schema when ``success`` is true (the ``jsonschema`` package, draft 2020-12
unless the schema names another). A wrong one is refused naming the failing field's
path (``$.items[0].id``), and the sub-agent may try again, at most
``subagent_max_nudges`` times; the next wrong one ends it as failed with the
validation error. A valid one reaches the parent with the Result, and is returned as
``result`` in create_sub_agent's JSON and the notification. Without ``output_schema``,
finish_task is the seed's (agentkit.subagent.worker.hooks.make_finish_tool).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from agentkit import prompts
from agentkit.subagent import inputs
from agentkit.tools.base import Tool, ToolContext

__all__ = ["TypedFinishParams", "make_typed_finish_tool", "schema_error"]

FINISH = "finish_task"


class TypedFinishParams(BaseModel):
    """finish_task's parameters under an output_schema: the seed's plus ``result``."""

    success: inputs.Flag
    summary: inputs.FinishSummary
    result: Any = None


def schema_error(schema: dict[str, Any], value: Any) -> str | None:
    """The most relevant reason ``value`` breaks ``schema``, as ``$.path: message``,
    or None when it is valid."""
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    error = best_match(validator_for(schema)(schema).iter_errors(value))
    return None if error is None else f"{error.json_path}: {error.message}"


def _parsed(value: Any, schema: dict[str, Any]) -> Any:
    """A result a model sent as JSON text is read as JSON, unless the schema wants text."""
    if isinstance(value, str) and schema.get("type") != "string":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def make_typed_finish_tool(
    on_finish: Callable[[bool, str, Any], str | None],
    schema: dict[str, Any],
    language: str,
    max_refusals: int,
) -> Tool:
    """Return finish_task taking a ``result`` valid against ``schema``.

    ``on_finish(success, summary, result)`` records the end (``result`` None unless
    success); after ``max_refusals`` refused results, the next wrong one ends the
    sub-agent as failed with the validation error (``on_finish(False, why, None)``).
    Results are the seed's JSON; a refusal is ``success: false`` with ``error``."""
    refused = 0

    def finish(p: TypedFinishParams, ctx: ToolContext) -> dict[str, Any]:
        nonlocal refused
        result = _parsed(p.result, schema) if p.success else None
        problem = None
        if p.success:
            problem = (
                prompts.phrase(language, "result_missing")
                if result is None
                else schema_error(schema, result)
            )
        if problem is not None:
            refused += 1
            if refused > max_refusals:
                why = prompts.phrase(language, "result_invalid_final", error=problem)
                on_finish(False, why, None)
                return {"success": False, "error": why, "will_terminate": True}
            left = max_refusals - refused + 1
            error = prompts.phrase(language, "result_invalid", error=problem, left=left)
            return {"success": False, "error": error, "will_terminate": False}
        warning = on_finish(p.success, p.summary, result)
        answer: dict[str, Any] = {
            "success": True,
            "message": prompts.phrase(language, "finish_ok"),
            "will_terminate": True,
        }
        if warning:
            answer["warning"] = warning
        return answer

    return Tool(
        FINISH,
        TypedFinishParams,
        finish,
        on_invalid_arguments=inputs.refusal_hook(FINISH, will_terminate=False),
        json_schema=_parameters(schema, language),
    )


def _parameters(schema: dict[str, Any], language: str) -> dict[str, Any]:
    """finish_task's parameter schema: the seed's two, and ``result`` as ``schema``."""
    _, docs = prompts.tool_description(language, FINISH)
    described = prompts.phrase(language, "result_param")
    if isinstance(schema.get("description"), str):
        described = f"{described} {schema['description']}"
    result = {**schema, "description": described}
    return {
        "type": "object",
        "properties": {
            "success": {"type": "boolean", "description": docs.get("success", "")},
            "summary": {"type": "string", "description": docs.get("summary", "")},
            "result": result,
        },
        "required": ["success", "summary"],
    }
