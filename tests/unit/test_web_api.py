"""The web chat's HTTP API and event stream against the real server on loopback
(uvicorn in a thread, httpx, a scripted model on FakeOpenAIServer)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_deliverables_viewer_refuses_hard_linked_files_like_the_file_tools(
    workspace: Path, tmp_path: Path
) -> None:
    from agentkit import Settings
    from agentkit.webchat import files

    outside = tmp_path / "outside.txt"
    outside.write_text("secret outside\n")
    folder = workspace / "sub_agent_results" / "agent_1"
    (folder / ".subagent").mkdir(parents=True)
    (folder / "plain.txt").write_text("fine\n")
    os.link(outside, folder / "linked.txt")
    os.link(outside, folder / ".subagent" / "conversations.json")
    strict = Settings(model="m", api_key="k")
    where = "sub_agent_results/agent_1"
    assert files.read_file(workspace, strict, where, "plain.txt")["text"] == "fine\n"
    for view in (
        lambda s: files.read_file(workspace, s, where, "linked.txt"),
        lambda s: files.transcript(workspace, s, where),
    ):
        with pytest.raises(files.ViewError) as refused:
            view(strict)
        assert refused.value.status == 403 and "hard links" in str(refused.value)
        assert "secret" not in str(refused.value)
    lenient = Settings(model="m", api_key="k", allow_hard_links=True)
    shown = files.read_file(workspace, lenient, where, "linked.txt")
    assert shown["text"] == "secret outside\n"


def test_symlinks_in_deliverables_are_listed_with_their_targets_size(
    workspace: Path, tmp_path: Path
) -> None:
    from agentkit import Settings
    from agentkit.webchat import files

    where = "sub_agent_results/agent_1"
    folder = workspace / where
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("12345")
    (tmp_path / "outside").mkdir()
    os.symlink(folder / "sub", folder / "linkdir")
    os.symlink(folder / "sub" / "a.txt", folder / "linkfile.txt")
    os.symlink(tmp_path / "outside", folder / "outdir")
    settings = Settings(model="m", api_key="k")
    listed = {f["path"]: f for f in files.list_files(workspace, settings, where)["files"]}
    assert sorted(listed) == ["linkdir", "linkfile.txt", "outdir", "sub/a.txt"]
    assert listed["linkdir"]["symlink"] and listed["linkdir"]["dir"]
    assert listed["linkfile.txt"]["symlink"] and listed["linkfile.txt"]["size"] == 5
    assert listed["outdir"]["symlink"] and listed["outdir"]["size"] is None
    assert listed["sub/a.txt"] == {
        "path": "sub/a.txt", "size": 5, "type": "text/plain", "symlink": False, "dir": False,
    }  # fmt: skip
    assert files.read_file(workspace, settings, where, "linkdir/a.txt")["text"] == "12345"
    with pytest.raises(files.ViewError):
        files.read_file(workspace, settings, where, "outdir/x.txt")
