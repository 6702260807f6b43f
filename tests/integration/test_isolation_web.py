"""The web chat's API for isolated sub-agents (issue 34; docs/web-api.md): an isolated
sub-agent's changes and diff, a dry run, a merge, the conflict report in words, a
discard that must be confirmed, and the refusals; over HTTP against a real server,
real workers on copies of a real git repository, the model played by
FakeOpenAIServer."""

from __future__ import annotations

from pathlib import Path

import pytest
from isolation_front_helpers import APP, git, make_repo, two_isolated_and_a_shared, version
from subagent_helpers import wait_until
from web_helpers import running_web

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
        assert unconfirmed.status_code == 400 and '"confirm"' in unconfirmed.json()["error"]
        assert web.post(f"{base}/2/discard", {"confirm": False}).status_code == 400
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
