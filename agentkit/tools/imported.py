"""User tools given by import reference, so that sub-agent workers can load them too.

A worker is another process (a forkserver child, or a Ray actor on another node):
Python objects do not travel there, import references do, the way
``Settings.web_search_provider`` does. ``Settings.tools`` holds references:

* ``package.module:attribute`` naming a :class:`Tool`, a list/tuple of tools, or a
  function ``fn(params: Model[, ctx])`` (made a tool offered to both agents);
* ``package.module`` alone: its ``TOOLS`` list when it has one, else every
  module-level :class:`Tool`.

Every agent imports the references and registers the tools whose ``agents`` field
names it (``main``, ``subagents`` or ``both``). A tool object given to the Python API
(``Agent(tools=[...])``) and meant for sub-agents is turned into its reference at
registration (:func:`reference_of`), which says at once, with the fix, when it
cannot reach a worker: defined in ``__main__``, inside a function, or a lambda.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from typing import Any, Literal

from agentkit.errors import ConfigurationError
from agentkit.tools.base import Tool, tool_from_function

log = logging.getLogger("agentkit")

__all__ = ["ToolNotImportable", "load_reference", "reference_of", "tools_for", "worker_settings"]


class ToolNotImportable(ConfigurationError, TypeError):
    """A tool offered to sub-agents cannot be imported by a worker (the message says why
    and how to fix it)."""


_FIX = (
    "sub-agents run in other processes and import their tools by reference "
    "(module:attribute); define it at the top level of an importable module "
    "(e.g. mytools.py beside your script, or a package) and import it from there"
)


def _resolve(module_name: str, attribute: str) -> Any:
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def reference_of(tool: Tool) -> str:
    """Return ``module:attribute`` by which a worker imports ``tool``.

    Looks at ``tool.source`` (set by tool_from_function), then for the Tool object
    among the module-level names of its function's module. Raises
    ToolNotImportable (naming the tool, the reason and the fix) for a tool defined in
    ``__main__``, in a function (closure), as a lambda, or not found at module level.
    """
    func = getattr(tool.func, "__wrapped__", tool.func)
    module_name = getattr(func, "__module__", None) or ""
    qualname = getattr(func, "__qualname__", "") or ""
    if tool.source:
        module_name, _, qualname = tool.source.partition(":")
    where = f"tool {tool.name!r}"
    if module_name == "__main__":
        raise ToolNotImportable(f"{where} is defined in __main__ (the script being run): {_FIX}")
    if "<lambda>" in qualname:
        raise ToolNotImportable(f"{where} is a lambda: {_FIX}")
    if "<locals>" in qualname:
        raise ToolNotImportable(f"{where} is defined inside a function (a closure): {_FIX}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolNotImportable(
            f"{where}: module {module_name!r} cannot be imported: {exc}"
        ) from None
    for attribute, value in vars(module).items():
        if value is tool:  # the Tool object itself: a worker gets it whole
            return f"{module_name}:{attribute}"
    if tool.source:  # a function a worker turns into a tool (its name and docstring)
        try:
            found = _resolve(module_name, qualname)
        except AttributeError as exc:
            raise ToolNotImportable(
                f"{where}: {tool.source} cannot be imported ({exc}): {_FIX}"
            ) from None
        if callable(found):
            return tool.source
    raise ToolNotImportable(
        f"{where} is not a module-level name of {module_name!r} (built at run time?): {_FIX}"
    )


def load_reference(reference: str) -> list[Tool]:
    """Import one ``Settings.tools`` entry and return its tools (see the module docstring).

    Raises ConfigurationError naming the reference when it cannot be imported or names
    nothing usable as a tool.
    """
    module_name, _, attribute = reference.strip().partition(":")
    try:
        target = _resolve(module_name, attribute) if attribute else None
        module = importlib.import_module(module_name) if not attribute else None
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"tool reference {reference!r} cannot be imported: {exc}") from exc
    if module is not None:
        listed = getattr(module, "TOOLS", None)
        items: Iterable[Any] = (
            listed
            if listed is not None
            else [v for v in vars(module).values() if isinstance(v, Tool)]
        )
    elif isinstance(target, (list, tuple)):
        items = target
    else:
        items = [target]
    tools: list[Tool] = []
    for item in items:
        if isinstance(item, Tool):
            tools.append(item)
        elif callable(item):
            try:
                tool = tool_from_function(item, agents="both")
            except TypeError as exc:
                raise ConfigurationError(f"tool reference {reference!r}: {exc}") from exc
            tool.source = reference if attribute else tool.source
            tools.append(tool)
        else:
            raise ConfigurationError(
                f"tool reference {reference!r} names {type(item).__name__}, not a Tool or function"
            )
    return tools


def tools_for(references: Iterable[str], agent: Literal["main", "subagents"]) -> list[Tool]:
    """Import ``references`` and return the tools offered to ``agent``.

    A reference that fails is logged in one line and skipped: a broken user module
    must not stop the agent (its tools are then missing, and the model is told by an
    ``unknown_tool`` error if it asks for one)."""
    tools: list[Tool] = []
    for reference in references:
        try:
            loaded = load_reference(reference)
        except ConfigurationError as exc:
            log.warning("agentkit: %s", exc)
            continue
        tools.extend(t for t in loaded if t.agents in (agent, "both"))
    return tools


def worker_settings(settings: Any, tools: Iterable[Tool]) -> Any:
    """Return ``settings`` with the references of ``tools`` offered to sub-agents added
    to ``Settings.tools`` (a copy when any is added, else ``settings`` itself).

    Raises ToolNotImportable at once for such a tool that a worker could not import.
    """
    wanted = [reference_of(t) for t in tools if t.agents in ("subagents", "both")]
    new = [r for r in wanted if r not in settings.tools]
    if not new:
        return settings
    return settings.model_copy(update={"tools": [*settings.tools, *new]})
