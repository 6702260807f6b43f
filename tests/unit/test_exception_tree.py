"""Every exception class agentkit defines derives from AgentkitError.

The test imports every module of the package and looks at each class defined there,
so a new exception that forgets the base fails here, not in an embedding application
whose ``except AgentkitError`` misses it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import agentkit
from agentkit.errors import AgentkitError

# Modules whose optional dependency may be missing on a test machine: skipped, not failed.
_OPTIONAL = ("ray", "opentelemetry", "playwright", "llama_cpp")


def _modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(agentkit.__path__, "agentkit.")]


def _exception_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] in _OPTIONAL:
                continue
            raise
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


def test_every_module_is_walked() -> None:
    names = _modules()
    assert "agentkit.webchat.api" in names and "agentkit.cli.terminal" in names


def test_every_exception_derives_from_agentkit_error() -> None:
    classes = _exception_classes()
    assert len(classes) > 20  # the walk found the package's exceptions
    strays = [
        f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, AgentkitError)
    ]
    assert strays == []


@pytest.mark.parametrize(
    ("module", "name", "builtin"),
    [
        ("agentkit.errors", "ConfigFileError", ValueError),
        ("agentkit.llm._json", "JSONTooDeep", ValueError),
        ("agentkit.conventions.files", "ConventionFileError", ValueError),
        ("agentkit.acp.content", "PromptError", ValueError),
        ("agentkit.testing.server", "ScriptExhausted", RuntimeError),
        ("agentkit.tools.imported", "ToolNotImportable", TypeError),
    ],
)
def test_builtin_bases_kept(module: str, name: str, builtin: type[BaseException]) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, AgentkitError) and issubclass(cls, builtin)
