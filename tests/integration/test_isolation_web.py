"""The web chat's API for isolated sub-agents (issue 34; docs/web-api.md): an isolated
sub-agent's changes and diff, a dry run, a merge, the conflict report in words, a
discard that must be confirmed, and the refusals; over HTTP against a real server,
real workers on copies of a real git repository, the model played by
FakeOpenAIServer."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from isolation_front_helpers import (
    APP,
    create,
    git,
    make_repo,
    two_isolated_and_a_shared,
    version,
)
from subagent_helpers import Router, call, calls, finish, wait_until
from web_helpers import running_web

from agentkit.subagent.record import read_record

pytestmark = pytest.mark.slow


def test_changes_merge_conflict_and_discard_over_http(workspace: Path) -> None:
    make_repo(workspace)
    head = git(workspace, "rev-parse", "HEAD")
    with running_web(workspace, two_isolated_and_a_shared(), subagent_isolation="available") as web:
        cid = web.new_conversation()
        assert web.post(f"/api/conversations/{cid}/messages", {"text": "go"}).status_code == 202
        session = web.server.app.state.agentkit.workspace.get(cid)
        assert wait_until(lambda: session.last_result is not None, 60)
        rows = web.client.get(f"/api/conversations/{cid}").json()["subagent_rows"]
        isolated = {r["agent_id"]: r.get("merged") for r in rows if "merged" in r}
        assert isolated == {1: False, 2: False}  # the page's sign of an isolated row
        base = f"/api/conversations/{cid}/subagents"

        changes = web.client.get(f"{base}/1/changes")
        assert changes.status_code == 200, changes.text
        data = changes.json()
        assert data["summary"] == "sub-agent #1: 1 file changed, +1 -1 (not merged)"
        (file,) = data["files"]
        assert (file["path"], file["insertions"], file["deletions"]) == ("app.py", 1, 1)
        assert "-    return 1\n+    return 2\n" in file["diff"] and data["cut"] == 0

        assert web.post(f"{base}/1/merge", {"dry_run": "yes"}).status_code == 400
        dry = web.post(f"{base}/1/merge", {"dry_run": True}).json()
        assert dry["ok"] and dry["report"]["dry_run"] and (workspace / "app.py").read_text() == APP
        merged = web.post(f"{base}/1/merge", {}).json()
        assert merged["ok"] and merged["lines"][1:] == ["  app.py"]
        assert (workspace / "app.py").read_text() == version(1)
        assert web.client.get(f"{base}/1/changes").json()["merged"] is True

        conflict = web.post(f"{base}/2/merge", {})
        assert conflict.status_code == 200
        assert conflict.json()["ok"] is False and conflict.json()["lines"] == [
            "sub-agent #2's changes conflict with the workspace in 1 file; nothing was written:",
            "  app.py: the workspace and the sub-agent changed the same lines",
        ]
        assert (workspace / "app.py").read_text() == version(1)

        unconfirmed = web.post(f"{base}/2/discard", {})
        # One plain sentence (it read: give "confirm" (true (discarding drops ...)))
        asked = 'To discard, send {"confirm": true}: discarding drops the sub-agent\'s work.'
        assert unconfirmed.status_code == 400 and unconfirmed.json()["error"] == asked
        refused = web.post(f"{base}/2/discard", {"confirm": False})
        assert refused.status_code == 400 and refused.json()["error"] == asked
        wrong = web.post(f"{base}/2/discard", {"confirm": "yes"}).json()["error"]
        assert wrong == '"confirm" must be true or false, not str'
        assert "agent-2" in git(workspace, "branch", "--list", "agentkit/*")
        dropped = web.post(f"{base}/2/discard", {"confirm": True})
        assert dropped.status_code == 200 and dropped.json()["discarded"] is True
        assert "agent-2" not in git(workspace, "branch", "--list", "agentkit/*")

        again = web.post(f"{base}/2/merge", {})
        assert again.status_code == 409 and again.json()["reason"] == "discarded"
        shared = web.client.get(f"{base}/3/changes")
        assert shared.status_code == 409 and shared.json()["reason"] == "shared"
        assert web.client.get(f"{base}/9/changes").status_code == 404
    assert git(workspace, "rev-parse", "HEAD") == head


def _finished(web: Any, workspace: Path) -> str:
    """A conversation whose isolated sub-agents 1 and 2 ended with their copies unmerged."""
    cid = web.new_conversation()
    assert web.post(f"/api/conversations/{cid}/messages", {"text": "go"}).status_code == 202
    session = web.server.app.state.agentkit.workspace.get(cid)
    assert wait_until(lambda: session.last_result is not None, 60)
    return str(cid)


def _branches(workspace: Path) -> list[str]:
    return git(workspace, "branch", "--list", "--format=%(refname:short)", "agentkit/*").split()


def test_deleting_a_conversation_with_unmerged_copies_asks_then_keeps_them(
    workspace: Path,
) -> None:
    """Regression: DELETE dropped the conversation and with it the only way agentkit
    finds its sub-agents' worktrees and branches. Now it refuses in words until told
    what to do; ``copies=keep`` deletes it and says how to remove the branches."""
    make_repo(workspace)
    with running_web(workspace, two_isolated_and_a_shared(), subagent_isolation="available") as web:
        cid = _finished(web, workspace)
        refused = web.client.delete(f"/api/conversations/{cid}")
        assert refused.status_code == 409, refused.text
        data = refused.json()
        assert data["reason"] == "unmerged_copies" and "not merged" in data["error"]
        one = {"files": 1, "insertions": 1, "deletions": 1}
        assert [(c["agent_id"], c["changes"], c["running"]) for c in data["copies"]] == [
            (1, one, False),
            (2, one, False),
        ]
        assert [c["branch"] for c in data["copies"]] == _branches(workspace)
        assert web.client.get(f"/api/conversations/{cid}").status_code == 200  # still there

        assert web.post(f"/api/conversations/{cid}/subagents/1/merge", {}).json()["ok"]
        bad = web.client.delete(f"/api/conversations/{cid}?copies=later")
        assert bad.status_code == 400 and '"keep"' in bad.json()["error"]
        kept = web.client.delete(f"/api/conversations/{cid}?copies=keep")
        assert kept.status_code == 200, kept.text
        (copy,) = kept.json()["copies"]  # the merged one is not asked about
        assert copy["agent_id"] == 2 and copy["branch"] in kept.json()["kept"]
        assert web.client.get(f"/api/conversations/{cid}").status_code == 404
        assert copy["branch"] in _branches(workspace)
        worktrees = git(workspace, "worktree", "list").count("\n")
        for command in copy["remove"]:  # what the answer says to run, run as said
            subprocess.run(shlex.split(command), cwd=workspace, check=True, capture_output=True)
        assert copy["branch"] not in _branches(workspace)
        assert git(workspace, "worktree", "list").count("\n") == worktrees - 1
    assert (workspace / "app.py").read_text() == version(1)


def test_deleting_with_copies_discard_drops_them_and_marks_their_records(
    workspace: Path,
) -> None:
    make_repo(workspace)
    with running_web(workspace, two_isolated_and_a_shared(), subagent_isolation="available") as web:
        cid = _finished(web, workspace)
        assert len(_branches(workspace)) == 2
        dropped = web.client.delete(f"/api/conversations/{cid}?copies=discard")
        assert dropped.status_code == 200, dropped.text
        assert dropped.json()["discarded"] is True
        assert [c["agent_id"] for c in dropped.json()["copies"]] == [1, 2]
        assert web.client.get(f"/api/conversations/{cid}").status_code == 404
    assert _branches(workspace) == []
    assert git(workspace, "worktree", "list").count("\n") == 1
    for n in (1, 2):
        record = read_record(workspace / f"sub_agent_results/agent_{n}", workspace)
        assert record is not None and record["discarded"] is True
    assert (workspace / "app.py").read_text() == APP  # the workspace untouched


def test_copies_that_changed_no_file_are_dropped_without_asking(workspace: Path) -> None:
    """Regression (a fresh user's trial): an isolated sub-agent that only read left a
    copy with 0 changes, and deleting its conversation was refused until someone
    chose keep or discard. A copy without changes (counted again at the delete) holds
    no work: it is dropped and the conversation deleted; one with changes still asks."""
    make_repo(workspace)
    router = Router(
        main=[calls(create(1), create(2)), "done"],
        subs={
            1: [calls(call("read_file", path="app.py")), finish("read it.")],
            2: [calls(call("write_file", path="app.py", content=version(2))), finish("done.")],
        },
    )
    with running_web(workspace, router, subagent_isolation="available") as web:
        cid = _finished(web, workspace)
        refused = web.client.delete(f"/api/conversations/{cid}")
        assert refused.status_code == 409 and refused.json()["reason"] == "unmerged_copies"
        assert web.post(f"/api/conversations/{cid}/subagents/2/discard", {"confirm": True}).json()
        record = read_record(workspace / "sub_agent_results/agent_1", workspace)
        assert record is not None and record["changes"]["files"] == 0
        stray = Path(record["isolation"]["worktree"]) / "edited-by-hand.txt"
        stray.write_text("a person's edit after the end\n")  # counted now: work to keep
        again = web.client.delete(f"/api/conversations/{cid}")
        assert again.status_code == 409, again.text
        assert [c["agent_id"] for c in again.json()["copies"]] == [1]
        stray.unlink()
        deleted = web.client.delete(f"/api/conversations/{cid}")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["discarded"] is True
        assert [c["agent_id"] for c in deleted.json()["copies"]] == [1]
        assert web.client.get(f"/api/conversations/{cid}").status_code == 404
    assert _branches(workspace) == []
    assert git(workspace, "worktree", "list").count("\n") == 1
    record = read_record(workspace / "sub_agent_results/agent_1", workspace)
    assert record is not None and record["discarded"] is True
