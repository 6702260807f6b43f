"""An isolated sub-agent's worker (issue 34, worker side), run for real: a forkserver
worker, the real openai client against FakeOpenAIServer, real git, real commands, with
and without bubblewrap. Its spec carries a copy made here with plain git (a worktree of
a repository in a temp folder, and the deliverables link), as the parent would.

What it checks: its file tools and commands work in the copy and leave the workspace
alone; its deliverables folder is the real one; a write to the workspace's absolute
path is refused; git works in the copy; it asks for no write claim; in the sandbox the
real workspace cannot be written by a command."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from git_helpers import git
from subagent_helpers import Router, call, calls, finish, scripted_settings

from agentkit.subagent.contract import ClaimAnswer, ClaimRequest, Result, WorkerSpec
from agentkit.subagent.launchers.local import LocalLauncher
from agentkit.subagent.record import load_record, record_path
from agentkit.testing import FakeOpenAIServer

DELIVERABLES = "sub_agent_results/agent_1"
BRANCH = "agentkit/conv/agent-1"


def make_copy(real: Path) -> dict[str, Any]:
    """A repository at ``real`` and the sub-agent's worktree of it, with its deliverables
    link, as agentkit.isolation makes them; returns the Copy dict."""
    (real / "src").mkdir(parents=True)
    (real / "src/app.py").write_text("real = 1\n")
    (real / ".gitignore").write_text(".agentkit/\nsub_agent_results/\n")
    git(real, "init", "-q", "-b", "main")
    git(real, "add", "-A")
    git(real, "commit", "-q", "-m", "base")
    base = git(real, "rev-parse", "HEAD").strip()
    root = real / ".agentkit/worktrees/conv/agent-1"
    git(real, "worktree", "add", "-q", "-b", BRANCH, str(root), base)
    (real / DELIVERABLES).mkdir(parents=True)
    (root / "sub_agent_results").mkdir()
    (root / DELIVERABLES).symlink_to(real / DELIVERABLES, target_is_directory=True)
    return {"kind": "worktree", "root": str(root), "worktree": str(root),
            "git_dir": str(real / ".git"), "prefix": "", "branch": BRANCH, "base": base,
            "base_ref": "refs/agentkit/bases/conv/agent-1", "exclude": [DELIVERABLES],
            "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip


def run_worker(spec: WorkerSpec) -> tuple[Result, list[ClaimRequest]]:
    """Start the worker, answer its claims (granting them: the test counts them), return
    its Result and the claims it asked for."""
    handle = LocalLauncher().start(spec)
    claims: list[ClaimRequest] = []
    try:
        while True:
            message = handle.channel.receive(timeout=120)
            assert message is not None, "the worker went silent"
            if isinstance(message, ClaimRequest):
                claims.append(message)
                handle.channel.send(ClaimAnswer(message.request, None))
            elif isinstance(message, Result):
                handle.join(60)
                return message, claims
    finally:
        handle.kill(0.5)
        handle.close()


def tool_outputs(deliverables: Path) -> list[str]:
    record = load_record(record_path(deliverables))
    return [str(m.get("content")) for m in record["messages"] if m.get("role") == "tool"]


def test_an_isolated_worker_works_in_its_copy(tmp_path: Path, command_sandbox: str) -> None:
    real = (tmp_path / "ws").resolve()
    copy = make_copy(real)
    root = Path(copy["root"])
    escape = f"echo y > {real}/escape.txt; echo y >> {real}/src/app.py; echo rc=$?"
    if command_sandbox == "none":  # unconfined commands run with the user's rights
        escape = "echo unconfined"
    script = [
        calls(call("write_file", path="src/app.py", content="copy = 2\n")),
        calls(call("write_file", path=f"{DELIVERABLES}/report.md", content="# Report\n")),
        calls(call("run_command", command="echo x > out.txt && git status --short")),
        calls(call("write_file", path=str(real / "src/app.py"), content="escaped\n")),
        calls(call("search_workspace", pattern="Report", path=DELIVERABLES)),
        calls(call("run_command", command=escape)),
        calls(call("run_command", command="cat report.md", cwd=DELIVERABLES)),
        finish(),
    ]
    with FakeOpenAIServer(Router([], {1: script})) as server:
        settings = scripted_settings(server, "en", command_sandbox=command_sandbox)
        spec = WorkerSpec(
            agent_id=1, summary="s", task="t", timeout_seconds=120,
            deliverables_dir=DELIVERABLES, deliverables_path=str(real / DELIVERABLES),
            workspace=str(real), sub_conversation_id="conv_sub_1",
            settings=settings.model_dump(), process_mark=f"agentkit-test-{uuid.uuid4().hex}",
            created_at="2026-01-01T00:00:00Z", extra={"isolation": copy},
        )  # fmt: skip
        result, claims = run_worker(spec)
        # The prompt names the copy as the workspace, not the real one.
        system = server.requests[0]["messages"][0]["content"]
        assert str(root) in system
    assert result.status == "completed", result.error
    assert claims == []  # its copy is its own: it asks nobody
    # write_file and the command wrote the copy; the workspace is as it was.
    assert (root / "src/app.py").read_text() == "copy = 2\n"
    assert (root / "out.txt").read_text() == "x\n"
    assert (real / "src/app.py").read_text() == "real = 1\n"
    assert not (real / "out.txt").exists()
    # The deliverables folder is the real one, reached through the copy's link.
    assert (real / DELIVERABLES / "report.md").read_text() == "# Report\n"
    assert (root / DELIVERABLES).is_symlink()
    outputs = tool_outputs(real / DELIVERABLES)
    assert f"{DELIVERABLES}/report.md" in outputs[1]
    # git works in the copy, sandboxed or not: it sees the copy's change and new file.
    assert " M src/app.py" in outputs[2] and "?? out.txt" in outputs[2], outputs[2]
    assert "outside_workspace" in outputs[3]
    assert f"{DELIVERABLES}/report.md:1:# Report" in outputs[4], outputs[4]
    assert "# Report" in outputs[6]
    # The worker's record is in the real deliverables folder, as for every sub-agent.
    record = json.loads(record_path(real / DELIVERABLES).read_text())
    assert record["status"] == "completed"
    if command_sandbox == "bwrap":
        # The real workspace is hidden and read-only inside the sandbox.
        assert "Read-only file system" in outputs[5] and "rc=1" in outputs[5], outputs[5]
        assert not (real / "escape.txt").exists()
        assert (real / "src/app.py").read_text() == "real = 1\n"
    # The branch and the user's HEAD are where they were: nothing was committed.
    assert git(real, "rev-parse", "HEAD") == git(real, "rev-parse", BRANCH)
    assert git(real, "status", "--short") == ""


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_a_copy_made_by_the_engine(tmp_path: Path, command_sandbox: str, kind: str) -> None:
    # The copy as the parent makes it (agentkit.isolation), in a repository and in a
    # plain folder (a private snapshots repository): the sub-agent's edits and its
    # command's output are its changes; its deliverables are not.
    from agentkit.isolation import Copy, changes, create_copy, link_deliverables

    real = (tmp_path / "ws").resolve()
    (real / "src").mkdir(parents=True)
    (real / "src/app.py").write_text("real = 1\n")
    if kind == "git":
        git(real, "init", "-q", "-b", "main")
        git(real, "add", "-A")
        git(real, "commit", "-q", "-m", "base")
    made = create_copy(real, "conv", 1, exclude=[DELIVERABLES])
    link_deliverables(made, DELIVERABLES, real / DELIVERABLES)
    script = [
        calls(call("edit_file", path="src/app.py", old_string="real", new_string="copy")),
        calls(call("write_file", path=f"{DELIVERABLES}/report.md", content="# Report\n")),
        calls(call("run_command", command="echo x > out.txt && git status --short")),
        finish(),
    ]
    with FakeOpenAIServer(Router([], {1: script})) as server:
        settings = scripted_settings(server, "en", command_sandbox=command_sandbox)
        spec = WorkerSpec(
            agent_id=1, summary="s", task="t", timeout_seconds=120,
            deliverables_dir=DELIVERABLES, deliverables_path=str(real / DELIVERABLES),
            workspace=str(real), sub_conversation_id="conv_sub_1",
            settings=settings.model_dump(), process_mark=f"agentkit-test-{uuid.uuid4().hex}",
            created_at="2026-01-01T00:00:00Z", extra={"isolation": made.to_dict()},
        )  # fmt: skip
        result, claims = run_worker(spec)
    assert result.status == "completed", result.error
    assert claims == []
    assert (real / "src/app.py").read_text() == "real = 1\n"
    assert (real / DELIVERABLES / "report.md").read_text() == "# Report\n"
    status = tool_outputs(real / DELIVERABLES)[2]
    assert "src/app.py" in status and "out.txt" in status, status
    found = changes(Copy.from_dict(made.to_dict()))
    assert sorted(f.path for f in found.files) == ["out.txt", "src/app.py"]
