"""Isolated sub-agents on a real Ray cluster need no shared storage (issue 34,
agentkit.subagent.launchers.ray_isolation): the sub-agent runs on a node that cannot see
the workspace at all (a node in its own mount namespace, an empty tmpfs over the
workspace's parent, as in tests/e2e/test_ray_launcher_cluster.py, where a shared
sub-agent fails there). Its copy travels as a git bundle; it edits a file and writes a
deliverable in a folder of the node's own; the driver has both in place when the main
agent is told, the change merges, and the node's folder is gone afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from git_helpers import git
from subagent_helpers import Router, call, calls, finish

from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer

RESULTS = "sub_agent_results/agent_1"


def ray_settings(server: FakeOpenAIServer, cluster: Any, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "en",
        "max_retries": 0,
        "subagent_timeout_min": 2,
        "subagent_launcher": "ray",
        "ray_address": cluster.address,
        "ray_num_cpus": 0.25,
        "command_sandbox": "none",
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def cluster(ray_cluster: Any) -> Iterator[Any]:
    """The session's cluster; afterwards no sub-agent host actor may be alive."""
    yield ray_cluster
    assert ray_cluster.wait_no_hosts() == [], "a sub-agent host actor outlived its test"


@pytest.mark.ray
@pytest.mark.slow
def test_an_isolated_sub_agent_runs_on_a_node_without_the_workspace(
    tmp_path: Path, cluster: Any, ray_node_without_workspace: Path
) -> None:
    workspace = ray_node_without_workspace / tmp_path.name / "ws"
    workspace.mkdir(parents=True)
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    head = git(workspace, "rev-parse", "HEAD")
    probe = (
        f"pwd > {RESULTS}/where.txt; "
        f"if [ -e {workspace}/a.txt ]; then echo seen; else echo unseen; fi >> {RESULTS}/where.txt; "
        "echo 'two (from the node)' >> a.txt"
    )
    sub = [
        calls(call("run_command", command=probe)),
        calls(call("write_file", path=f"{RESULTS}/report.md", content="# made on the node\n")),
        finish("edited a.txt and wrote the report"),
    ]
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="s", task="t")), "went on"],
        subs={1: sub},
    )
    with FakeOpenAIServer(router) as server:
        settings = ray_settings(
            server,
            cluster,
            ray_resources={"no_shared_disk": 1},
            ray_num_cpus=0,
            subagent_isolation="always",
        )
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("go")
            tool = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"][-1]
            data = json.loads(tool["content"])
            report = agent.manager.merge(1)
    assert result.status == "done" and result.final_text == "went on"
    assert data["status"] == "completed", data
    assert data["changes"] == {"files": 1, "insertions": 1, "deletions": 0}
    assert data["merged"] is False
    # The worker worked in a node-local copy and could not see the workspace.
    where, seen = (workspace / RESULTS / "where.txt").read_text().splitlines()
    assert "agentkit-isolated-" in where and not where.startswith(str(ray_node_without_workspace))
    assert seen == "unseen"
    # Its deliverable was streamed back before the main agent was told (read in the
    # tool result's listing), and the node's folder is gone now that the driver has it.
    assert (workspace / RESULTS / "report.md").read_text() == "# made on the node\n"
    assert "report.md" in json.dumps(data)
    assert not Path(where).exists()
    # The change merges into the workspace; the user's HEAD did not move.
    assert report.status == "merged"
    assert (workspace / "a.txt").read_text() == "one\ntwo (from the node)\n"
    assert git(workspace, "rev-parse", "HEAD") == head
