"""Typed results: the main agent's ``final_result`` tool, a profile's ``output_type``.

One job: turn a pydantic model into what the model is offered and check what it
gives back.

* **The main agent** (``agent.run(task, output_type=Model)``): an :class:`OutputSpec`
  adds a ``final_result`` tool whose parameters are the model's JSON schema (the way
  pydantic-ai's tool output works on any tool-calling endpoint). The engine
  (agentkit.engine) hands it each ``final_result`` call: a valid one ends the run
  with the instance; a wrong one is refused naming each failing field, and a plain
  text answer is told to call ``final_result``; both count as one of
  ``output_retries`` retries, after which the run fails with ``output_invalid``.
  Without an OutputSpec nothing here is used: requests stay as they were.
* **Sub-agents** (``AgentProfile(..., output_type=Model)``): the profile's
  ``output_schema`` is the model's JSON schema, checked in the worker
  (agentkit.subagent.typed_result); the class stays in the parent process, named by a
  key (:func:`register_type`), and the parent validates the worker's JSON into an
  instance (:func:`typed_output`) for ``SubAgentFinished.output``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

from agentkit import prompts
from agentkit.tools.base import ToolResult

if TYPE_CHECKING:
    from agentkit.engine_roles import Step
    from agentkit.llm.turns import ToolCall

__all__ = [
    "FINAL_RESULT",
    "ModelT",
    "OutputT",
    "OutputSpec",
    "output_spec",
    "register_type",
    "registered_type",
    "typed_output",
    "validation_errors",
]

log = logging.getLogger("agentkit")

FINAL_RESULT = "final_result"
"""The name of the tool the main agent gives its typed answer with."""

MAX_ERRORS = 5
"""Failing fields named in one refusal (the rest are counted)."""

MAX_ERROR_CHARS = 2000
"""Cap on a refusal's list of errors, characters (a huge input echoed is cut)."""

T = TypeVar("T", bound=BaseModel)

ModelT = TypeVar("ModelT", bound=BaseModel)
"""The pydantic model a run's ``output_type`` names (``Agent.run``'s overloads)."""

OutputT = TypeVar("OutputT", default=Any)
"""``RunResult[OutputT]``'s output type: the ``output_type`` model, Any without one."""


def validation_errors(exc: ValidationError) -> str:
    """``exc``'s failing fields as one line: ``field.path: message; ...`` (at most
    MAX_ERRORS named, the text capped at MAX_ERROR_CHARS characters)."""
    parts = []
    errors = exc.errors(include_url=False, include_input=False)
    for error in errors[:MAX_ERRORS]:
        where = ".".join(str(p) for p in error["loc"]) or "(the arguments)"
        parts.append(f"{where}: {error['msg']}")
    if len(errors) > MAX_ERRORS:
        parts.append(f"and {len(errors) - MAX_ERRORS} more")
    text = "; ".join(parts)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


@dataclass
class OutputSpec(Generic[T]):
    """The typed output one run asks of the main agent, and what it got.

    Args:
        model: the pydantic model class the answer must validate against.
        retries: wrong answers (refused final_result calls, plain-text answers)
            allowed before the run fails with ``output_invalid``; a valid answer
            starts the count again (a later round may answer anew).

    Attributes:
        value: the last valid instance given (None until one is).
    """

    model: type[T]
    retries: int
    value: T | None = None
    _refused: int = 0
    _last_errors: str = ""
    _accepted: bool = False  # a final_result of the current batch was valid
    _schemas: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def tool_schema(self, language: str) -> dict[str, Any]:
        """The ``tools[]`` entry of ``final_result``: the model's JSON schema as its
        parameters (its docstring, if any, kept in the schema's description); made
        once per language (every request and token count asks for it)."""
        cached = self._schemas.get(language)
        if cached is None:
            parameters = self.model.model_json_schema()
            parameters.pop("title", None)
            cached = {
                "type": "function",
                "function": {
                    "name": FINAL_RESULT,
                    "description": prompts.phrase(language, "final_result_tool"),
                    "parameters": parameters,
                },
            }
            self._schemas[language] = cached
        return cached

    def check(self, call: ToolCall, language: str) -> ToolResult:
        """Validate one ``final_result`` call; returns its tool result: accepted, or
        an error naming each failing field and the tries left."""
        if call.arguments is None:  # not JSON at all: said as the parser said it
            problem = call.error or "the arguments are not a JSON object"
        else:
            try:
                value = self.model.model_validate(call.arguments)
            except ValidationError as exc:
                problem = validation_errors(exc)
            else:
                with self._lock:
                    self.value, self._accepted, self._refused = value, True, 0
                return ToolResult(prompts.phrase(language, "final_result_ok"))
        left = self._refuse(problem)
        text = prompts.phrase(language, "final_result_invalid", errors=problem, left=left)
        return ToolResult.error("invalid_output", text)

    def _refuse(self, problem: str) -> int:
        """Count one wrong answer; returns the tries left (0 or more)."""
        with self._lock:
            self._refused += 1
            self._last_errors = problem
            return max(0, self.retries - self._refused + 1)

    def after_tools(self, language: str) -> Step | None:
        """After a batch of tool results: a Step ending the run (a valid final_result:
        ``done``; retries spent: ``output_invalid``), or None to go on."""
        from agentkit.engine_roles import Step

        with self._lock:
            accepted, self._accepted = self._accepted, False
        if accepted:
            return Step(stop=True)
        return self._spent(language)

    def on_text(self, language: str) -> Step:
        """A plain-text answer: tell the model to call final_result (one retry), or end
        the run with ``output_invalid`` once the retries are spent."""
        from agentkit.engine_roles import Step

        left = self._refuse(prompts.phrase(language, "final_result_text"))
        spent = self._spent(language)
        if spent is not None:
            return spent
        text = prompts.phrase(language, "final_result_missing", left=left)
        return Step(messages=[{"role": "system", "content": text}])

    def _spent(self, language: str) -> Step | None:
        from agentkit.engine_roles import Step

        with self._lock:
            if self._refused <= self.retries:
                return None
            count, errors = self._refused, self._last_errors
        error = prompts.phrase(language, "final_result_failed", count=count, errors=errors)
        return Step(error=error, error_kind="output_invalid")

    def text(self) -> str | None:
        """The valid instance as JSON text (the run's ``final_text``), or None."""
        value = self.value
        return None if value is None else value.model_dump_json()


def output_spec(output_type: type[T] | None, retries: int) -> OutputSpec[T] | None:
    """An OutputSpec for ``output_type`` (None: none). Raises TypeError when
    ``output_type`` is not a pydantic BaseModel subclass, ValueError for a negative
    ``retries``."""
    if output_type is None:
        return None
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise TypeError(f"output_type must be a pydantic BaseModel subclass, not {output_type!r}")
    if retries < 0:
        raise ValueError(f"output_retries must be 0 or more, not {retries}")
    return OutputSpec(output_type, retries)


# ------------------------------------------------------------- sub-agents' types
_TYPES: dict[str, type[BaseModel]] = {}
_TYPES_LOCK = threading.Lock()


def register_type(model: type[BaseModel]) -> str:
    """Keep ``model`` in this process under a key (``module:QualName``, with ``#2``...
    when another class has that name) and return the key: a profile's dict (which
    reaches workers as JSON) names its output_type by it. Raises TypeError for
    anything but a pydantic BaseModel subclass."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"output_type must be a pydantic BaseModel subclass, not {model!r}")
    base = f"{model.__module__}:{model.__qualname__}"
    with _TYPES_LOCK:
        key, n = base, 1
        while _TYPES.get(key, model) is not model:
            n += 1
            key = f"{base}#{n}"
        _TYPES[key] = model
        return key


def registered_type(key: Any) -> type[BaseModel] | None:
    """The class :func:`register_type` kept under ``key``, or None."""
    if not isinstance(key, str):
        return None
    with _TYPES_LOCK:
        return _TYPES.get(key)


def typed_output(profile: dict[str, Any] | None, value: Any) -> Any:
    """A sub-agent's result ``value`` (JSON, checked against the schema in the
    worker) as an instance of its profile's ``output_type`` when it has one; else
    ``value`` unchanged. A value the class refuses (a validator stricter than the
    schema) stays JSON, logged."""
    model = registered_type((profile or {}).get("output_type"))
    if model is None or value is None:
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        log.warning(
            "a sub-agent's result does not validate as %s: %s",
            model.__qualname__,
            validation_errors(exc),
        )
        return value


def to_json(value: Any) -> Any:
    """``value`` as plain JSON data (a pydantic instance dumped, ``mode="json"``)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value
