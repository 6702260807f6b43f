"""The public API: what ``agentkit.__all__`` promises is importable, documented and lazy."""

from __future__ import annotations

import importlib
import inspect
import re
import types
import typing

import pytest

import agentkit

PUBLIC_MODULES = ["agentkit", "agentkit.testing", "agentkit.events", "agentkit.tracing"]


def _alias_doc(name: str) -> str:
    """The docstring under a type alias's definition (``Name = Literal[...]`` then a
    string): an alias object cannot carry one of its own."""
    module = importlib.import_module(agentkit._LAZY.get(name, "agentkit.errors"))
    found = re.search(
        rf'^{name} = [^\n]*(?:\n[ \]].*)*\n"""(.*?)"""', inspect.getsource(module), re.M | re.S
    )
    return found.group(1) if found else ""


@pytest.mark.parametrize("name", agentkit.__all__)
def test_every_public_name_resolves_and_is_documented(name: str) -> None:
    obj = getattr(agentkit, name)
    assert obj is not None
    alias = typing.get_origin(obj) in (typing.Literal, typing.Union, types.UnionType)
    doc = _alias_doc(name) if alias else inspect.getdoc(obj) or ""
    assert len(doc) >= 20, f"agentkit.{name} needs a docstring saying what it is"


def test_all_is_sorted_unique_and_complete() -> None:
    names = agentkit.__all__
    assert len(names) == len(set(names))
    assert names == sorted(names)
    # The names a user meets in the README's tour are all public.
    for name in ["Agent", "Settings", "RunResult", "Tool", "ToolContext", "SubAgentFinished"]:
        assert name in names
    # And those of the embedding API (issue 33): profiles, typed sub-agent events, and
    # the error a failed run raises.
    for name in ["AgentProfile", "AgentkitError", "RunFailed", "SubAgentEvent", "Workspace"]:
        assert name in names


def test_the_isolation_types_are_public() -> None:
    """A spawn handle's changes(), merge() and discard() (issue 34) return and raise these."""
    from agentkit.isolation import types

    for name in ["Changes", "Conflict", "FileChange", "IsolationError", "MergeReport"]:
        assert name in agentkit.__all__ and getattr(agentkit, name) is getattr(types, name)
    assert issubclass(agentkit.IsolationError, agentkit.AgentkitError)


def test_the_embedding_imports_work() -> None:
    from agentkit import Agent, AgentkitError, AgentProfile, RunFailed, RunResult, Settings
    from agentkit.profiles import AgentProfile as Profile

    assert AgentProfile is Profile
    assert issubclass(RunFailed, AgentkitError)
    assert callable(RunResult.raise_for_status)
    assert Agent.__name__ == "Agent" and Settings.__name__ == "Settings"


def test_the_package_ships_its_types() -> None:
    """py.typed marks the package as typed (PEP 561): without it a user's mypy sees
    every agentkit name as Any."""
    from pathlib import Path

    assert (Path(agentkit.__file__).parent / "py.typed").is_file()


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = agentkit.Nope  # type: ignore[attr-defined]


@pytest.mark.parametrize("module", PUBLIC_MODULES[1:])
def test_submodule_all_resolves(module: str) -> None:
    mod = __import__(module, fromlist=["__all__"])
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"


def test_exceptions_form_one_tree() -> None:
    for name in [
        "ApprovalError",
        "Cancelled",
        "ConfigurationError",
        "ContextLengthExceeded",
        "LLMError",
        "RunFailed",
        "ToolError",
    ]:
        assert issubclass(getattr(agentkit, name), agentkit.AgentkitError), name


def test_every_event_is_public() -> None:
    from agentkit import events

    for name in events.__all__:
        if name != "EventHandler":
            assert name in agentkit.__all__, name
