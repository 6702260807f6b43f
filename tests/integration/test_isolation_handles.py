"""The Python API's spawn handles on isolated sub-agents (issue 34; docs/guide/
python-api.md): ``changes()``, ``merge(dry_run=...)`` and ``discard()`` on
SubAgentHandle and their awaited twins on AsyncSubAgentHandle, with the refusals as
IsolationError. Real workers on copies of a real git repository, the model played by
FakeOpenAIServer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from isolation_front_helpers import APP, git, make_repo, version
from subagent_helpers import Gate, Router, call, calls, finish, scripted_settings

from agentkit import Agent, AgentkitError, Changes, IsolationError, MergeReport
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


def writes(n: int) -> list[object]:
    return [calls(call("write_file", path="app.py", content=version(n))), finish("ok")]


def test_changes_merge_and_discard_on_the_handles(workspace: Path) -> None:
    make_repo(workspace)
    gate = Gate()
    router = Router(
        main=["ok"] * 10,
        subs={
            1: writes(1),
            2: [gate.hold(writes(2)[0]), finish("ok")],
            3: writes(3),
            4: [finish("ok")],
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(server, "en", subagent_isolation="available")
        with Agent(workspace=workspace, settings=settings) as agent:
            first = agent.spawn("return 2", summary="one", isolation="isolated")
            held = agent.spawn("return 3", summary="two", isolation="isolated")
            first.result(timeout=60)
            found = first.changes()
            assert isinstance(found, Changes)
            assert found.summary() == {"files": 1, "insertions": 1, "deletions": 1}
            assert [f.path for f in found.files] == ["app.py"]
            dry = first.merge(dry_run=True)
            assert isinstance(dry, MergeReport) and dry.status == "merged" and dry.dry_run
            assert (workspace / "app.py").read_text() == APP
            done = first.merge()
            assert done.files == ("app.py",) and not done.dry_run
            assert (workspace / "app.py").read_text() == version(1)
            with pytest.raises(IsolationError, match="merged already") as again:
                first.merge()
            assert isinstance(again.value, AgentkitError)
            # Still running: refused, and nothing written.
            with pytest.raises(IsolationError, match="still running"):
                held.merge()
            gate.event.set()
            held.result(timeout=60)
            conflict = held.merge()
            assert conflict.status == "conflicts" and conflict.conflicts[0].path == "app.py"
            assert conflict.conflicts[0].reason == "both_modified"
            held.discard()
            assert "agent-2" not in git(workspace, "branch", "--list", "agentkit/*")
            with pytest.raises(IsolationError, match="discarded already"):
                held.changes()

            async def awaited() -> None:
                third = await agent.aspawn("return 4", summary="three", isolation="isolated")
                await third.result()
                assert (await third.changes()).summary()["files"] == 1
                # Its base is the workspace after the first merge: it would apply.
                assert (await third.merge(dry_run=True)).status == "merged"
                await third.discard()
                with pytest.raises(IsolationError, match="discarded already"):
                    await third.merge()

            asyncio.run(awaited())
            shared = agent.spawn("notes", summary="shared", isolation="shared")
            shared.result(timeout=60)
            with pytest.raises(IsolationError, match="shared"):
                shared.changes()
    assert (workspace / "app.py").read_text() == version(1)
