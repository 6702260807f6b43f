"""Tool definitions and the per-run tool context (the registry that runs tool calls is
:mod:`agentkit.tools.registry`).

A tool is a plain function ``func(params, ctx) -> str | dict | ToolResult`` whose
parameters are a pydantic model; the JSON schema sent to the model is generated
from that model. Descriptions come from ``prompts/<lang>/tools/<name>.md`` when
the tool does not carry its own (docs/architecture.md §3, Tools).
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ValidationError

from agentkit.settings import Settings

if TYPE_CHECKING:
    from agentkit.process.sandbox import WriteScope
    from agentkit.tools.gate import ToolGate


@dataclass
class ToolResult:
    """What a tool returns (docs/tools.md §1 envelope).

    ``output`` is the text the model sees; for a failure it begins with ``Error:``.
    ``meta`` holds machine-readable facts (exit code, truncation, sizes).
    ``messages``: messages the engine appends after the batch's tool results, for
    text that is the user's rather than a tool's output (a skill's instructions,
    agentkit.conventions.tool), so it is not read as data nor shrunk as old output.
    """

    output: str
    ok: bool = True
    error_code: str | None = None
    truncated: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def error(cls, code: str, message: str, **meta: Any) -> ToolResult:
        """Build a failed result whose output is ``Error: <code>: <message>``."""
        return cls(output=f"Error: {code}: {message}", ok=False, error_code=code, meta=meta)

    def with_note(self, note: str) -> ToolResult:
        """Return a copy with ``note`` added for the model: a JSON result (a dict the
        tool returned) gains a ``"note"`` key (after a note it has already) and stays
        JSON, serialised as :func:`to_result` does; a text result gets the note on a
        line of its own after a blank line. ``ok``, the error code and meta stay."""
        value = self.meta.get("json")
        if isinstance(value, dict):
            own = value.get("note")
            noted = {**value, "note": f"{own}\n{note}" if own else note}
            output = json.dumps(noted, ensure_ascii=False, indent=2, default=str)
            return replace(self, output=output, meta={**self.meta, "json": noted})
        return replace(self, output=f"{self.output.rstrip()}\n\n{note}")


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
        write_scope: where this agent's sandboxed commands may write in the workspace
            (a sub-agent: its deliverables folder and the files it claimed, set by
            agentkit.subagent.worker.sandbox_scope); None: the whole workspace.
        gate: approval rules and tool hooks every call passes (agentkit.tools.gate),
            or None: calls run as they are.
        shared_roots: absolute folders outside the workspace that the file tools may
            read and write as if they were inside it (agentkit.tools.paths). An isolated
            sub-agent works in its own copy of the workspace (agentkit.isolation), but
            its deliverables folder is the real workspace's, reached from the copy
            through a symbolic link at the same relative path: that real folder is its
            shared root, so its report lands where the parent reads it. Empty: none.
    """

    workspace: Path
    settings: Settings
    cancel: threading.Event = field(default_factory=threading.Event)
    claim_write: WriteClaim = _no_claim
    file_state: dict[str, Any] = field(default_factory=dict)
    process_mark: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    owner: str | None = None
    write_scope: WriteScope | None = None
    gate: ToolGate | None = None
    shared_roots: tuple[Path, ...] = ()

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
