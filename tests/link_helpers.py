"""Shared set-up for the hard-link tests (unit and processes): a file outside the
workspace, like /etc/shadow, with a hard link to it inside the workspace.

Import ``linked_fixture`` into a test module to use the ``linked`` fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext

SECRET = "root:$6$topsecrethash:19000:0:99999:7:::\n"


def make_ctx(workspace: Path, **overrides: object) -> ToolContext:
    settings = Settings(model="m", api_key="k", language="en", **overrides)  # type: ignore[arg-type]
    return ToolContext(workspace=workspace, settings=settings)


@pytest.fixture(name="linked")
def linked_fixture(tmp_path: Path, workspace: Path) -> Path:
    """A file outside the workspace (like /etc/shadow) with a hard link inside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "shadow"
    secret.write_text(SECRET)
    os.link(secret, workspace / "notes.txt")
    (workspace / "plain.txt").write_text("root is fine here\n")
    return secret
