"""Which environment variables reach a command (agentkit/process/secrets.py; hardening item 7).

A table of names and values, each asserted dropped or kept, then the same table through
a real ``run_command env``. Key-shaped values are assembled at run time (no key-like
literal in the repository for scanners to flag); none of them is a real credential.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from secret_cases import TABLE

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.shell import SHELL_TOOLS


def test_run_command_env_shows_no_secret(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = {name for name, _, _ in TABLE}
    for name in ("PATH", "HOME", "PWD", "OLDPWD", "TERM", "LANG", "LC_ALL", "PYTHONPATH"):
        names.discard(name)  # the command needs the real ones; their rule is in the table
    chosen = {}
    for name, value, dropped in TABLE:
        if name in names and name not in chosen:
            if dropped and len(value) < 12:  # make it findable in the output
                value = f"{value}-{uuid.uuid4().hex}"
            chosen[name] = (value, dropped)
    for name, (value, _) in chosen.items():
        monkeypatch.setenv(name, value)
    settings = Settings(model="m", api_key="test-key", language="en")
    ctx = ToolContext(workspace=workspace, settings=settings, process_mark=uuid.uuid4().hex)
    result = ToolRegistry(SHELL_TOOLS).execute("run_command", {"command": "env"}, ctx)
    assert result.ok, result.output
    output = result.output
    lines = set(output.splitlines())
    for name, (value, dropped) in chosen.items():
        if dropped:
            assert not any(line.startswith(f"{name}=") for line in lines), name
            assert value not in output, name
        else:
            assert f"{name}={value}" in lines, name
