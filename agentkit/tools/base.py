"""Tool definitions, the per-run tool context, and the registry that runs tool calls.

A tool is a plain function ``func(params, ctx) -> str | dict | ToolResult`` whose
parameters are a pydantic model; the JSON schema sent to the model is generated
from that model. Descriptions come from ``prompts/<lang>/tools/<name>.md`` when
the tool does not carry its own. The registry turns every failure (unknown tool,
bad arguments, ToolError, any exception) into an ``Error:`` result; nothing
raises into the loop (docs/architecture.md §3, Tools).
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ValidationError

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.os_errors import os_error_kind


@dataclass
class ToolResult:
    """What a tool returns (docs/tools.md §1 envelope).

    ``output`` is the text the model sees; for a failure it begins with ``Error:``.
    ``meta`` holds machine-readable facts (exit code, truncation, sizes).
    """

    output: str
    ok: bool = True
    error_code: str | None = None
    truncated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, code: str, message: str, **meta: Any) -> ToolResult:
        """Build a failed result whose output is ``Error: <code>: <message>``."""
        return cls(output=f"Error: {code}: {message}", ok=False, error_code=code, meta=meta)


WriteClaim = Callable[[Path], None]
"""Called with an absolute path before a tool writes it; raises ToolError("write_conflict", ...)
when another running agent owns the file."""


def _no_claim(path: Path) -> None:
    return None


@dataclass
class ToolContext:
    """Everything a tool may use besides its parameters.

    Attributes:
        workspace: absolute, resolved workspace root.
        settings: the run's Settings.
        cancel: set when the run is cancelled; long tools poll it.
        claim_write: write-claim hook (sub-agents ask their parent; see subagent/).
        file_state: per-conversation memory of files read (encoding, eol, snapshot),
            keyed by absolute path; used by edit_file and write_file.
        process_mark: value of the AGENTKIT_PROCESS_MARK variable given to every command,
            so all processes of this agent can be found and killed (subagent timeouts).
        owner: the conversation the tools work for (its id), or None; background
            services of its commands end when it is closed.
    """

    workspace: Path
    settings: Settings
    cancel: threading.Event = field(default_factory=threading.Event)
    claim_write: WriteClaim = _no_claim
    file_state: dict[str, Any] = field(default_factory=dict)
    process_mark: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    owner: str | None = None

    @property
    def language(self) -> str:
        """The conversation language, ``zh`` or ``en``."""
        return self.settings.language


Agents = Literal["main", "subagents", "both"]
"""Which agents a tool is offered to: the main agent, the sub-agents, or both."""

ToolFunc = Callable[[Any, ToolContext], "str | dict[str, Any] | ToolResult"]
InvalidArgumentsHook = Callable[
    [ValidationError, dict[str, Any], ToolContext], "str | dict[str, Any] | ToolResult"
]


@dataclass
class Tool:
    """A tool the model can call.

    Attributes:
        name: the function name the model uses.
        params: pydantic model of the parameters (its JSON schema is sent to the model).
        func: ``func(params, ctx)``; returns text, a JSON-able dict (sent as JSON), or a ToolResult.
        description: text for the model; empty means "load prompts/<lang>/tools/<name>.md".
        counter: the seed stat this tool counts into (files_read, searches, web_pages,
            commands) or None.
        action: last_action template key in prompts/<lang>/actions.txt (default: name).
        on_invalid_arguments: ``hook(exc, arguments, ctx)`` rendering this tool's own
            answer when its arguments fail validation (the seed tools answer in their
            JSON shape); None gives ``Error: invalid_argument: ...``.
        agents: ``main`` (default), ``subagents`` or ``both``. A tool reaches
            sub-agents by import reference (agentkit.tools.imported), so one offered
            to them must be importable: checked when it is registered.
        json_schema: the parameters' JSON schema as given (MCP tools); None
            generates it from ``params``.
        source: its ``module:attribute`` import reference, when known.
    """

    name: str
    params: type[BaseModel]
    func: ToolFunc
    description: str = ""
    counter: str | None = None
    action: str | None = None
    on_invalid_arguments: InvalidArgumentsHook | None = None
    agents: Agents = "main"
    json_schema: dict[str, Any] | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if self.agents not in get_args(Agents):
            raise ValueError(
                f"tool {self.name!r}: agents must be 'main', 'subagents' or 'both', "
                f"not {self.agents!r}"
            )

    def schema(self, language: str) -> dict[str, Any]:
        """Return the OpenAI ``tools[]`` entry for this tool in ``language``."""
        if self.json_schema is not None:
            from agentkit.prompts import tool_description

            description, _ = tool_description(language, self.name, self.description)
            return {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": description,
                    "parameters": self.json_schema,
                },
            }
        return _schema(self.name, self.params, self.description, language)


@functools.lru_cache(maxsize=512)
def _schema(name: str, params: type[BaseModel], fallback: str, language: str) -> dict[str, Any]:
    # Cached: pydantic's schema generation costs ~5 ms a tool, which every
    # sub-agent would pay at start (the forkserver warms this cache).
    from agentkit.prompts import tool_description

    description, param_docs = tool_description(language, name, fallback)
    parameters = params.model_json_schema()
    parameters.pop("title", None)
    parameters.pop("description", None)  # the model's docstring is for developers
    for key, prop in parameters.get("properties", {}).items():
        prop.pop("title", None)
        if key in param_docs:
            prop["description"] = param_docs[key]
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _format_validation_error(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {err.get('msg')}")
    return f"invalid arguments for {tool}: " + "; ".join(parts)


class ToolRegistry:
    """The tools offered in one conversation, by name, in registration order.

    Use :meth:`register` with a :class:`Tool`, or :meth:`tool` as a decorator on a
    function whose first parameter is annotated with a pydantic model.
    """

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._schemas: dict[str, list[dict[str, Any]]] = {}
        self._closers: list[Callable[[], None]] = []
        for tool in tools or []:
            self.register(tool)

    def on_close(self, closer: Callable[[], None]) -> None:
        """Call ``closer()`` at :meth:`close` (tools holding resources: MCP sessions)."""
        self._closers.append(closer)

    def close(self) -> None:
        """Release what the tools hold (each closer once; their errors are ignored)."""
        while self._closers:
            try:
                self._closers.pop()()
            except Exception:  # closing must not fail the caller's close
                pass

    def register(self, tool: Tool) -> Tool:
        """Add or replace ``tool``; returns it."""
        self._tools[tool.name] = tool
        self._schemas.clear()
        return tool

    def tool(
        self,
        func: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        counter: str | None = None,
        agents: Agents = "main",
    ) -> Any:
        """Decorator: register ``func(params: Model, ctx: ToolContext)`` (ctx optional).

        The description defaults to the function's docstring. Raises TypeError when the
        first parameter is not annotated with a pydantic model.
        """

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register(
                tool_from_function(
                    fn, name=name, description=description, counter=counter, agents=agents
                )
            )
            return fn

        return wrap(func) if func is not None else wrap

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name`` or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Return the tool names in registration order."""
        return list(self._tools)

    def schemas(self, language: str) -> list[dict[str, Any]]:
        """Return the ``tools`` list for a request (cached per language)."""
        cached = self._schemas.get(language)
        if cached is None:
            cached = [t.schema(language) for t in self._tools.values()]
            self._schemas[language] = cached
        return cached

    def execute(self, name: str, arguments: dict[str, Any] | None, ctx: ToolContext) -> ToolResult:
        """Run one tool call and return its result; never raises (except KeyboardInterrupt).

        Unknown tool, invalid arguments, ToolError and any other exception become
        ``ToolResult.error`` with codes ``unknown_tool``, ``invalid_argument``,
        the os_error_kind of an uncaught OSError, and ``internal_error``.
        """
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolResult.error(
                "unknown_tool", f"there is no tool named {name!r}; available tools: {known}"
            )
        try:
            params = tool.params.model_validate(arguments or {})
        except ValidationError as exc:
            own = _own_refusal(tool, exc, arguments or {}, ctx)
            return own or ToolResult.error("invalid_argument", _format_validation_error(name, exc))
        started = time.monotonic()
        try:
            result = to_result(tool.func(params, ctx))
        except ToolError as exc:
            return ToolResult.error(exc.code, exc.message)
        except OSError as exc:  # a file system failure no tool caught: say which kind
            return ToolResult.error(os_error_kind(exc), f"{name} failed: {exc}")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a tool bug, even sys.exit(), must not end the loop
            return ToolResult.error("internal_error", f"{name} failed: {type(exc).__name__}: {exc}")
        result.meta.setdefault("duration_seconds", round(time.monotonic() - started, 3))
        return result

    def unusable_arguments(self, name: str, reason: str, ctx: ToolContext) -> ToolResult:
        """Answer a call whose arguments could not be parsed into a JSON object
        (``reason`` says why): the tool's own refusal when it has an
        ``on_invalid_arguments`` hook (given a ValidationError of type
        ``json_invalid``), else ``Error: invalid_argument: ...``."""
        tool = self._tools.get(name)
        if tool is not None:
            line = {"type": "json_invalid", "loc": (), "input": "", "ctx": {"error": reason}}
            exc = ValidationError.from_exception_data(name, [line])  # type: ignore[list-item]
            own = _own_refusal(tool, exc, {}, ctx)
            if own is not None:
                return own
        return ToolResult.error(
            "invalid_argument",
            f"the arguments of this {name} call could not be used: {reason}. "
            f"Call {name} again with one complete JSON object.",
        )


def _own_refusal(
    tool: Tool, exc: ValidationError, arguments: dict[str, Any], ctx: ToolContext
) -> ToolResult | None:
    """The tool's on_invalid_arguments answer, or None (no hook, or it failed)."""
    if tool.on_invalid_arguments is None:
        return None
    try:
        return to_result(tool.on_invalid_arguments(exc, arguments, ctx))
    except Exception:  # a broken hook: the caller falls back to the generic error
        return None


def to_result(value: Any) -> ToolResult:
    """Normalise a tool's return value (str, dict, ToolResult) into a ToolResult.

    A dict is sent as JSON (ensure_ascii off, so Chinese stays readable); a dict with
    ``"success": false`` counts as a failure (seed tools' refusal shape).
    """
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        ok = value.get("success", True) is not False
        return ToolResult(
            output=json.dumps(value, ensure_ascii=False, indent=2, default=str),
            ok=ok,
            meta={"json": value},
        )
    text = "" if value is None else str(value)
    return ToolResult(output=text, ok=not text.startswith("Error:"))


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    counter: str | None = None,
    agents: Agents = "main",
) -> Tool:
    """Build a Tool from ``fn(params: Model[, ctx])``; see :meth:`ToolRegistry.tool`.

    ``source`` is set to ``fn``'s ``module:qualname`` (its import reference)."""
    sig = inspect.signature(fn)
    hints = inspect.get_annotations(fn, eval_str=True)
    params = list(sig.parameters.values())
    if not params:
        raise TypeError(
            f"{fn.__name__}: the first parameter must be annotated with a pydantic model"
        )
    model = hints.get(params[0].name)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(
            f"{fn.__name__}: the first parameter must be annotated with a pydantic model"
        )
    takes_ctx = len(params) > 1

    def call(p: Any, ctx: ToolContext) -> Any:
        return fn(p, ctx) if takes_ctx else fn(p)

    return Tool(
        name=name or fn.__name__,
        params=model,
        func=call,
        description=description if description is not None else inspect.getdoc(fn) or "",
        counter=counter,
        agents=agents,
        source=f"{fn.__module__}:{fn.__qualname__}",
    )
