"""The tool registry: it runs tool calls, and every failure (unknown tool, bad
arguments, ToolError, any exception) becomes an ``Error:`` result; nothing raises
into the loop (docs/architecture.md §3, Tools). Tools themselves are defined in
:mod:`agentkit.tools.base`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from agentkit.errors import ToolError
from agentkit.tools._ignored import ignored_arguments, ignored_note
from agentkit.tools.base import Agents, Tool, ToolContext, ToolResult, to_result, tool_from_function
from agentkit.tools.os_errors import os_error_kind
from agentkit.tools.paths import PATH_ARGUMENTS, resolved_subject

if TYPE_CHECKING:
    pass

__all__ = ["ToolCallLike", "ToolRegistry"]


def _format_validation_error(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(arguments)"
        parts.append(f"{loc}: {err.get('msg')}")
    return f"invalid arguments for {tool}: " + "; ".join(parts)


class ToolCallLike(Protocol):
    """What :meth:`ToolRegistry.run` reads of a tool call (``agentkit.llm.ToolCall`` fits):
    the name, the parsed arguments (None when unusable), why the call cannot run and
    the code of that error (``invalid_argument``, ``too_many_tool_calls``)."""

    name: str
    arguments: dict[str, Any] | None
    error: str | None
    error_code: str


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

    def unregister(self, name: str) -> Tool | None:
        """Remove the tool called ``name``; returns it, or None when there was none."""
        self._schemas.clear()
        return self._tools.pop(name, None)

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

    def execute(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        ctx: ToolContext,
        call_id: str | None = None,
    ) -> ToolResult:
        """Run one tool call and return its result; never raises (except KeyboardInterrupt).

        Unknown tool, invalid arguments, ToolError and any other exception become
        ``ToolResult.error`` with codes ``unknown_tool``, ``invalid_argument``,
        the os_error_kind of an uncaught OSError, and ``internal_error``.

        Arguments the tool's parameters do not name (``timeout`` for
        ``timeout_seconds``) are ignored, as before, but the result then ends with a
        one-line note in the conversation language naming them and the closest
        parameter (``prompts/<lang>/phrases.txt`` ``ignored_arguments``), placed by
        :meth:`ToolResult.with_note`: a JSON result (the seed tools') gets it as a
        ``"note"`` key, its other fields unchanged. ``meta["ignored_arguments"]``
        lists them.

        A call with valid arguments passes ``ctx.gate`` first, when there is one
        (approval rules and hooks: agentkit.tools.gate; ``call_id`` is the model's id
        of the call).
        """
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolResult.error(
                "unknown_tool", f"there is no tool named {name!r}; available tools: {known}"
            )
        ignored = ignored_arguments(tool.params, arguments)
        result = self._run(tool, arguments, ctx, call_id)
        if not ignored:
            return result
        noted = result.with_note(ignored_note(tool.name, tool.params, ignored, ctx.language))
        noted.meta["ignored_arguments"] = ignored
        return noted

    def _run(
        self, tool: Tool, arguments: dict[str, Any] | None, ctx: ToolContext, call_id: str | None
    ) -> ToolResult:
        name = tool.name
        try:
            params = tool.params.model_validate(arguments or {})
        except ValidationError as exc:
            own = _own_refusal(tool, exc, arguments or {}, ctx)
            return own or ToolResult.error("invalid_argument", _format_validation_error(name, exc))
        if ctx.gate is None:
            return _call(tool, params, ctx)
        try:
            given = arguments or {}
            # The rules and hooks judge the file a path reaches through links too.
            resolved = resolved_subject(ctx, name, given)
            chosen = params
            judged = (given, resolved)

            def rewrite(used: dict[str, Any]) -> tuple[str | None, str | None]:
                # A hook's updatedInput: checked like the model's arguments, then run.
                nonlocal chosen, judged
                try:
                    chosen = tool.params.model_validate(used)
                except ValidationError as exc:
                    return _format_validation_error(name, exc), None
                judged = (used, resolved_subject(ctx, name, used))
                return None, judged[1]

            def execute() -> ToolResult:  # the file judged must still be the one reached
                return _path_changed(ctx, name, *judged) or _call(tool, chosen, ctx)

            return ctx.gate.run(name, given, call_id, ctx.cancel, execute, resolved, rewrite)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a gate bug must not end the loop either
            return ToolResult.error("internal_error", f"{name}: approvals and hooks failed: {exc}")

    def run(self, call: ToolCallLike, ctx: ToolContext) -> ToolResult:
        """Run one tool call as the model sent it (an ``agentkit.llm.ToolCall``);
        never raises (except KeyboardInterrupt). An unknown, empty or malformed
        name gets ``unknown_tool`` and runs nothing; a call that cannot run
        (``call.error``: arguments not parsed into a JSON object, one call too many)
        gets :meth:`unusable_arguments` with ``call.error_code``; everything else is
        :meth:`execute`."""
        if call.name not in self._tools:
            return self.execute(call.name, None, ctx)
        if call.error is not None or call.arguments is None:
            reason = call.error or "the arguments are not a JSON object"
            return self.unusable_arguments(call.name, reason, ctx, call.error_code)
        return self.execute(call.name, call.arguments, ctx, getattr(call, "id", None))

    def unusable_arguments(
        self, name: str, reason: str, ctx: ToolContext, code: str = "invalid_argument"
    ) -> ToolResult:
        """Answer a call whose arguments could not be parsed into a JSON object
        (``reason`` says why): the tool's own refusal when it has an
        ``on_invalid_arguments`` hook (given a ValidationError of type
        ``json_invalid``), else ``Error: invalid_argument: ...``. Another ``code``
        (``too_many_tool_calls``: a call beyond ``max_tool_calls_per_turn``)
        answers ``Error: <code>: <reason>`` for every tool."""
        if code != "invalid_argument":
            return ToolResult.error(code, reason)
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


def _call(tool: Tool, params: BaseModel, ctx: ToolContext) -> ToolResult:
    """Run ``tool`` on validated ``params``; every failure becomes an error result
    (see :meth:`ToolRegistry.execute`)."""
    name = tool.name
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


def _path_changed(
    ctx: ToolContext, name: str, arguments: dict[str, Any], judged: str | None
) -> ToolResult | None:
    """``path_changed`` when the call's path now reaches another file than ``judged``,
    the one the approval rules and hooks saw (a link made or swapped meanwhile, for
    instance while a person decided), else None."""
    now = resolved_subject(ctx, name, arguments)
    if now == judged:
        return None
    spelled = arguments.get(PATH_ARGUMENTS.get(name, ""), ".")
    return ToolResult.error(
        "path_changed",
        f"{spelled} now leads to {now or 'a path the tool refuses'}, not to {judged}, the "
        f"file the approval rules and hooks judged; nothing was done. Call {name} again "
        "to have the new target judged.",
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
