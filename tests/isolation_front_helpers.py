"""Shared by the front ends' isolation tests (terminal chat, web, ACP, Python API):
a real git workspace and a FakeOpenAIServer script whose main agent starts isolated
sub-agents (each rewrites one line of ``app.py``) and a shared one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import git_helpers
from git_helpers import git as git
from subagent_helpers import Router, call, calls, finish

APP = "def main():\n    return 1\n\nprint(main())\n"


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """``root`` as a git repository with one commit of ``files`` (default: app.py)."""
    return git_helpers.make_repo(root, files or {"app.py": APP})


def version(n: int) -> str:
    """app.py as sub-agent ``n`` leaves it (``return n + 1``)."""
    return APP.replace("return 1", f"return {n + 1}")


def create(agent_id: int, isolation: str = "isolated", **more: Any) -> dict[str, Any]:
    """A create_sub_agent call for sub-agent ``agent_id``."""
    return call(
        "create_sub_agent",
        agent_id=agent_id,
        summary=f"work {agent_id}",
        task=f"make main return {agent_id + 1}",
        isolation=isolation,
        **more,
    )


def two_isolated_and_a_shared(*after: Any) -> Router:
    """Main: one batch starting sub-agents 1 and 2 (isolated, each rewriting app.py's
    one line) and 3 (shared, writing notes.txt), then ``after`` (default "done")."""
    subs = {
        i: [
            calls(call("write_file", path="app.py", content=version(i))),
            finish(f"app.py now returns {i + 1}."),
        ]
        for i in (1, 2)
    }
    subs[3] = [calls(call("write_file", path="notes.txt", content="n\n")), finish("notes.")]
    return Router(
        main=[calls(create(1), create(2), create(3, "shared")), *(after or ("done",))],
        subs=subs,
    )
