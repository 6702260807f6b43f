"""``agentkit acp`` driven by the official ACP TypeScript SDK (``@agentclientprotocol/sdk``).

tests/acp_node_client.mjs runs under ``node`` with the SDK that ``.ci/run`` installs in
``.ci/node/node_modules`` (or ``AGENTKIT_TEST_NODE_MODULES``): initialize, a new
session, a prompt with tool calls and a blocking sub-agent, a cancel during a second
blocking sub-agent, an unknown session; then a second agent process lists and loads
the session and continues it. This side plays the model and checks the files and
processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from acp_helpers import AGENT, agent_env
from subagent_helpers import Router, call, calls, finish

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

MODULES = Path(
    os.environ.get(
        "AGENTKIT_TEST_NODE_MODULES",
        str(Path(__file__).parents[2] / ".ci" / "node" / "node_modules"),
    )
)
SCRIPT = Path(__file__).resolve().parents[1].joinpath("acp_node_client.mjs")


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None or not (MODULES / "@agentclientprotocol" / "sdk").is_dir():
        pytest.skip(f"needs node and @agentclientprotocol/sdk in {MODULES} (.ci/run installs it)")
    return node


def drive(node: str, workspace: Path, server: FakeOpenAIServer, mode: str) -> dict[str, Any]:
    """Run the Node client in ``mode``; returns its RESULT object."""
    config = {
        "modules": str(MODULES),
        "agent": list(AGENT),
        "cwd": str(workspace),
        "env": agent_env(server.base_url),
        "mode": mode,
    }
    done = subprocess.run(
        [node, str(SCRIPT), json.dumps(config)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result


def test_the_typescript_sdk_drives_a_whole_session(workspace: Path) -> None:
    node = node_or_skip()
    (workspace / "a.txt").write_text("hello\n")
    router = Router(
        main=[
            calls(call("read_file", path="a.txt")),
            calls(call("edit_file", path="a.txt", old_string="hello", new_string="bye")),
            calls(call("create_sub_agent", agent_id=1, summary="write the report", task="report")),
            "All done, and the report is written.",
            calls(call("create_sub_agent", agent_id=2, summary="a long job", task="sleep")),
            "Loaded and continued.",
        ],
        subs={
            1: [
                calls(
                    call("write_file", path="sub_agent_results/agent_1/report.md", content="# r\n")
                ),
                finish(),
            ],
            2: [calls(call("run_command", command="sleep 60", timeout_seconds=600)), finish()],
        },
    )
    with FakeOpenAIServer(router) as server:
        result = drive(node, workspace, server, "session")

    assert result["answer"] == "All done, and the report is written."
    cards = {c["title"]: c for c in result["cards"]}
    assert list(cards) == [
        "Reading a.txt",
        "Editing a.txt",
        "Creating sub-agent 1: write the report",
    ]
    assert [c["kind"] for c in result["cards"]] == ["read", "edit", "think"]
    for card in result["cards"]:
        assert card["statuses"][:2] == ["pending", "in_progress"]
    assert cards["Editing a.txt"]["content"] == [
        {"type": "diff", "path": str(workspace / "a.txt"), "oldText": "hello\n", "newText": "bye\n"}
    ]
    assert (workspace / "sub_agent_results" / "agent_1" / "report.md").read_text() == "# r\n"
    assert result["cancelledCard"] == "failed"
    assert "conv_unknown" in result["unknownSession"]
    assert result["firstExit"] == 0

    assert result["listed"] == [[result["sessionId"], "do the work"]]
    assert result["replayed"][0] == "user_message_chunk"
    assert result["replayedUser"] == "do the worknow the long job"
    assert [status for _title, status in result["replayedCards"]] == [
        "completed",
        "completed",
        "completed",
        "failed",
    ]
    assert result["afterLoad"] == "Loaded and continued."
    assert result["secondExit"] == 0


def test_subagents_become_child_sessions_for_a_client_that_opts_in(workspace: Path) -> None:
    node = node_or_skip()
    router = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="write the report", task="Write r.md")
            ),
            calls(call("create_sub_agent", agent_id=2, summary="a long job", task="Sleep a while")),
            "Both reported.",
        ],
        subs={
            1: [
                calls(call("write_file", path="sub_agent_results/agent_1/r.md", content="r\n")),
                finish(),
            ],
            2: [calls(call("run_command", command="sleep 60", timeout_seconds=600)), finish()],
        },
    )
    with FakeOpenAIServer(router) as server:
        result = drive(node, workspace, server, "children")
    sid = result["sessionId"]
    announced = {u["sessionId"]: u for u in reversed(result["parent"])}  # the first of each
    assert announced[f"{sid}/sub-agent-1"] == {
        "sessionUpdate": "subagent_update",
        "sessionId": f"{sid}/sub-agent-1",
        "title": "Sub-agent 1: write the report",
        "description": "Write r.md",
        "capabilities": {"cancel": {}},
        "cwd": str(workspace),
        "state": {"state": "running"},
    }
    ended = {u["sessionId"]: u["state"] for u in result["parent"]}  # the last of each
    assert ended[f"{sid}/sub-agent-1"] == {"state": "idle", "stopReason": "end_turn"}
    assert ended[f"{sid}/sub-agent-2"] == {"state": "idle", "stopReason": "cancelled"}

    first = result["child1"]
    assert first[0]["sessionUpdate"] == "user_message_chunk"
    assert "Write r.md" in first[0]["content"]["text"]
    # The card, then its updates by id: the record is a journal now, so the call can be
    # read before its result (a card in progress, then completed by a later update).
    card = next(u for u in first if u.get("title") == "Writing sub_agent_results/agent_1/r.md")
    writes = [u for u in first if u.get("toolCallId") == card["toolCallId"]]
    assert writes[-1]["status"] == "completed"
    second = result["child2"]
    commands = [
        u
        for u in second
        if u.get("toolCallId")
        == next(x["toolCallId"] for x in second if x.get("title") == "Running sleep 60")
    ]
    assert commands[0]["status"] == "in_progress"
    # Cancelling the child kills its command; the card ends either way the race goes:
    # ``failed`` when the worker died before its record held the result, or with the
    # result the record kept (the command's death by SIGKILL, which run_command reports
    # as a finished command, as the live mapping would).
    last = commands[-1]
    if last["status"] == "completed":
        assert "killed by SIGKILL" in last["content"][0]["content"]["text"]
    else:
        assert last["status"] == "failed"
    assert result["answer"] == "Both reported."
    assert result["exit"] == 0
