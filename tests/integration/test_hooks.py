"""Hooks end to end: the user's commands at agentkit's events, for the main agent (in its
process) and for sub-agents (in their worker processes), over the real openai client and
FakeOpenAIServer (docs/approvals.md §4-§5; issue 22)."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from subagent_helpers import (
    call,
    calls,
    finish,
    script,
    scripted_settings,
    wait_until,
    who,
)
from switch_fixtures import (
    model_fixture,  # noqa: F401  (the model fixture)
    server_fixture,  # noqa: F401  (the server fixture)
)

from agentkit import Agent
from agentkit import events as ev
from agentkit.chat import Session
from agentkit.errors import ConfigurationError
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer

HOOK = """\
import json, os, sys
log, code, out, err = sys.argv[1:5]
data = json.load(sys.stdin)
with open(log, "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"payload": data, "cwd": os.getcwd(), "env": dict(os.environ)}) + "\\n")
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(int(code))
"""


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user hooks file


class Hook:
    """A command hook that records what it was given and answers as told."""

    def __init__(self, folder: Path, name: str) -> None:
        self.script = folder / "hook.py"
        self.script.write_text(HOOK)
        self.log = folder / f"{name}.jsonl"

    def command(self, code: int = 0, out: str = "", err: str = "") -> str:
        parts = [sys.executable, str(self.script), str(self.log), str(code), out, err]
        return " ".join(shlex.quote(p) for p in parts)

    def runs(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


def hooks(
    event: str, command: str, matcher: str = "", timeout: float | None = None
) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        handler["timeout"] = timeout
    return {"hooks": {event: [{"matcher": matcher, "hooks": [handler]}]}}


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    return scripted_settings(server, "en", **overrides)


def recorded(session: Session) -> list[ev.Event]:
    found: list[ev.Event] = []
    session.subscribe(found.append)
    return found


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


WRITE = {
    "name": "write_file",
    "id": "call_w",
    "arguments": {"path": "notes.txt", "content": "hi\n"},
}


def test_pre_tool_use_exit_2_blocks_the_call_with_stderr_as_the_reason(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    hook = Hook(tmp_path, "pre")
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    settings = settings_for(
        server, hooks=hooks("PreToolUse", hook.command(2, "", "no notes here"), "write_file")
    )
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 30)
        conversation_id = session.id
    result = tool_results(server.requests[-1])["call_w"]
    assert (
        result
        == "Error: blocked_by_hook: a PreToolUse hook blocked this write_file call: no notes here"
    )
    assert not (workspace / "notes.txt").exists()
    [run] = hook.runs()
    payload = run["payload"]
    assert payload["hook_event_name"] == "PreToolUse"
    assert payload["session_id"] == payload["conversation_id"] == conversation_id
    assert (payload["tool_name"], payload["tool_input"], payload["tool_use_id"]) == (
        "write_file", WRITE["arguments"], "call_w"
    )  # fmt: skip
    assert payload["agent_id"] is None and payload["cwd"] == str(workspace)
    assert payload["transcript_path"].endswith(f"{conversation_id}.json")
    assert run["cwd"] == str(workspace)


def test_a_hook_that_asks_joins_the_approval_path_and_its_context_reaches_the_model(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    hook = Hook(tmp_path, "pre")
    answer = json.dumps(
        {"decision": "ask", "reason": "a write", "additional_context": "notes.txt is shared"}
    )
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    settings = settings_for(server, hooks=hooks("PreToolUse", hook.command(0, answer)))
    asked: list[dict[str, Any]] = []
    with Session(
        workspace, settings, prewarm=False, on_approval=lambda row: asked.append(row) or "allow"
    ) as session:
        session.send("go", 30)
    assert asked[0]["reason"] == "a PreToolUse hook asks the user first: a write"
    assert asked[0]["key"] == "hook-reason:write_file:a write"
    assert (workspace / "notes.txt").exists()
    after = server.requests[-1]["messages"]
    at = next(i for i, m in enumerate(after) if m.get("tool_call_id") == "call_w")
    assert after[at + 1] == {"role": "system", "content": "[PreToolUse hook] notes.txt is shared"}


def test_post_tool_use_sees_the_result_and_its_objection_reaches_the_model(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    hook = Hook(tmp_path, "post")
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    settings = settings_for(
        server, hooks=hooks("PostToolUse", hook.command(2, "", "trailing newline missing"))
    )
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 30)
    [run] = hook.runs()
    payload = run["payload"]
    assert payload["hook_event_name"] == "PostToolUse" and payload["tool_name"] == "write_file"
    assert payload["tool_response"].startswith("Created notes.txt") and payload["ok"] is True
    assert payload["error_code"] is None and payload["duration_ms"] >= 0
    result = tool_results(server.requests[-1])["call_w"]
    assert result.startswith("Created notes.txt")
    assert result.endswith("\n\n[PostToolUse hook: trailing newline missing]")


def test_a_hook_that_hangs_is_killed_at_its_timeout_and_reported(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    command = "sleep 61.25 & sleep 61.5"  # a child of its own too: both must end

    def left() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [""])[-1] in ("61.25", "61.5")
        ]

    script(model, [{"tool_calls": [WRITE]}, "ok"])
    settings = settings_for(server, hooks=hooks("PreToolUse", command, timeout=0.5))
    with Session(workspace, settings, prewarm=False) as session:
        events = recorded(session)
        session.send("go", 30)
    [failed] = [e for e in events if isinstance(e, ev.HookFailed)]
    assert failed.hook_event_name == "PreToolUse" and failed.hook == command
    assert "timed out after 0.5 s and was killed" in failed.problem
    assert (workspace / "notes.txt").exists()  # a failed hook does not block
    assert wait_until(lambda: not left(), 10), left()


def test_a_hook_that_prints_garbage_is_passed_over_with_a_warning(
    workspace: Path,
    tmp_path: Path,
    model: Any,
    server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = Hook(tmp_path, "pre")
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    settings = settings_for(
        server, hooks=hooks("PreToolUse", hook.command(0, "\x01\x02 not json at all"))
    )
    with (
        caplog.at_level(logging.WARNING, "agentkit"),
        Session(workspace, settings, prewarm=False) as session,
    ):
        events = recorded(session)
        session.send("go", 30)
    [failed] = [e for e in events if isinstance(e, ev.HookFailed)]
    assert "not a JSON object" in failed.problem
    assert any("PreToolUse hook" in r.getMessage() for r in caplog.records)
    assert (workspace / "notes.txt").exists()


def test_hooks_get_a_scrubbed_environment(
    workspace: Path,
    tmp_path: Path,
    model: Any,
    server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "sk-proj-" + "A1b2C3d4" * 5
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("DEPLOY_TOKEN", "hunter2hunter2")
    monkeypatch.setenv("PLAIN_SETTING", "kept")
    hook = Hook(tmp_path, "pre")
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    settings = settings_for(server, api_key=key, hooks=hooks("PreToolUse", hook.command()))
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 30)
    env = hook.runs()[0]["env"]
    assert "OPENAI_API_KEY" not in env and "DEPLOY_TOKEN" not in env
    assert not any(key in value for value in env.values())
    assert env["PLAIN_SETTING"] == "kept"
    assert env["AGENTKIT_PROJECT_DIR"] == env["CLAUDE_PROJECT_DIR"] == str(workspace)


def test_a_sub_agents_tool_hooks_run_in_its_worker_with_its_agent_id(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    hook = Hook(tmp_path, "pre")
    sub = [calls(call("write_file", path="sub_agent_results/agent_1/a.txt", content="x")), finish()]
    blocking = call("create_sub_agent", agent_id=1, summary="writer", task="write a.txt")
    script(model, [calls(blocking), "done"], {1: sub})
    settings = settings_for(
        server, hooks=hooks("PreToolUse", hook.command(2, "", "read-only review"), "write_file")
    )
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 60)
    [run] = hook.runs()
    payload = run["payload"]
    assert payload["agent_id"] == 1 and payload["agent_type"] == "default"
    assert payload["tool_name"] == "write_file"
    assert payload["agent_transcript_path"].endswith("agent_1/.subagent/conversations.json")
    assert run["env"]["AGENTKIT_PROCESS_MARK"].startswith("agentkit-")  # the worker's own mark
    results = tool_results([r for r in server.requests if who(r) == 1][-1])
    assert any(
        "a PreToolUse hook blocked this write_file call: read-only review" in t
        for t in results.values()
    )
    assert not (workspace / "sub_agent_results/agent_1/a.txt").exists()


def test_a_continued_sub_agent_runs_the_tool_hooks_too(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    """continue_sub_agent (the control plane) starts a worker whose spec carries the
    conversation's tool hooks, as create_sub_agent's does."""
    hook = Hook(tmp_path, "pre")
    write = lambda name: calls(  # noqa: E731
        call("write_file", path=f"sub_agent_results/agent_1/{name}", content="x")
    )
    sub = [write("a.txt"), finish(), write("b.txt"), finish()]  # the continued run: steps 2, 3
    main = [
        calls(call("create_sub_agent", agent_id=1, summary="writer", task="write a.txt")),
        calls(call("continue_sub_agent", agent_id=1, task="now write b.txt")),
        "done",
    ]
    script(model, main, {1: sub})
    settings = settings_for(
        server, subagent_control=True, hooks=hooks("PreToolUse", hook.command(0), "write_file")
    )
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 60)
    paths = [run["payload"]["tool_input"]["path"] for run in hook.runs()]
    assert paths == ["sub_agent_results/agent_1/a.txt", "sub_agent_results/agent_1/b.txt"]
    assert all(run["payload"]["agent_id"] == 1 for run in hook.runs())
    assert (workspace / "sub_agent_results/agent_1/b.txt").exists()


def test_subagent_start_and_stop_hooks_see_the_agent_id_and_stop_context_reaches_the_model(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    start, stop = Hook(tmp_path, "start"), Hook(tmp_path, "stop")
    config = {
        "hooks": {
            "SubagentStart": [{"hooks": [{"type": "command", "command": start.command()}]}],
            "SubagentStop": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": stop.command(
                                0, json.dumps({"additional_context": "check a.txt"})
                            ),
                        }
                    ]
                }
            ],
        }
    }
    (workspace / ".agentkit").mkdir()
    (workspace / ".agentkit" / "hooks.json").write_text(json.dumps(config))
    background = call(
        "create_sub_agent", agent_id=7, summary="writer", task="t", run_in_background=True
    )
    script(model, [calls(background), "started", "heard"], {7: [finish("Wrote the notes.")]})
    with Session(workspace, settings_for(server), prewarm=False) as session:
        events = recorded(session)
        session.send("go", 60)
        assert wait_until(lambda: sum(isinstance(e, ev.RoundFinished) for e in events) >= 2, 60)
    assert wait_until(lambda: bool(start.runs()))
    assert start.runs()[0]["payload"]["agent_id"] == 7
    [stopped] = stop.runs()
    payload = stopped["payload"]
    assert (payload["hook_event_name"], payload["agent_id"], payload["status"]) == (
        "SubagentStop",
        7,
        "completed",
    )
    assert "Wrote the notes." in payload["result_summary"]
    main = [r for r in server.requests if who(r) is None][-1]["messages"]
    assert {"role": "system", "content": "[SubagentStop hook] check a.txt"} in main


def test_user_prompt_submit_can_refuse_a_message_or_add_context(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    hook = Hook(tmp_path, "prompt")
    script(model, ["ok"])
    refusing = settings_for(
        server, hooks=hooks("UserPromptSubmit", hook.command(2, "", "no secrets in prompts"))
    )
    with (
        Session(workspace, refusing, prewarm=False) as session,
        pytest.raises(
            ConfigurationError, match="UserPromptSubmit hook refused the message: no secrets"
        ),
    ):
        session.post("my password is x")
    assert server.requests == []
    adding = settings_for(
        server, hooks=hooks("UserPromptSubmit", hook.command(0, "today is release day"))
    )
    with Session(workspace, adding, prewarm=False) as session:
        session.send("hello", 30)
    messages = server.requests[-1]["messages"]
    assert messages[-2:] == [
        {"role": "user", "content": "hello"},
        {"role": "system", "content": "[UserPromptSubmit hook] today is release day"},
    ]
    assert hook.runs()[-1]["payload"]["prompt"] == "hello"


def test_a_stop_hook_sends_the_agent_back_to_work(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    marker = tmp_path / "stopped-once"
    command = f"test -e {shlex.quote(str(marker))} && exit 0; touch {shlex.quote(str(marker))}; echo 'run the tests first' >&2; exit 2"
    script(model, ["first answer", "tests pass"])
    with Session(
        workspace, settings_for(server, hooks=hooks("Stop", command)), prewarm=False
    ) as session:
        assert session.send("go", 30).final_text == "tests pass"
    last = server.requests[-1]["messages"][-1]
    assert last == {
        "role": "system",
        "content": "A Stop hook asks you to go on: run the tests first",
    }


def test_session_start_and_end_hooks(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    start, end = Hook(tmp_path, "start"), Hook(tmp_path, "end")
    config = {
        "hooks": {
            "SessionStart": [
                {"hooks": [{"type": "command", "command": start.command(0, "branch: main")}]}
            ],
            "SessionEnd": [{"hooks": [{"type": "command", "command": end.command()}]}],
        }
    }
    script(model, ["ok"])
    with Session(workspace, settings_for(server, hooks=config), prewarm=False) as session:
        session.send("hi", 30)
        conversation_id = session.id
    with Session(
        workspace,
        settings_for(server, hooks=config),
        prewarm=False,
        conversation_id=conversation_id,
    ):
        pass
    assert [r["payload"]["source"] for r in start.runs()] == ["startup", "resume"]
    assert [r["payload"]["reason"] for r in end.runs()] == ["close", "close"]
    assert {"role": "system", "content": "[SessionStart hook] branch: main"} in server.requests[0][
        "messages"
    ]


def test_python_hooks_on_an_agent(workspace: Path, model: Any, server: FakeOpenAIServer) -> None:
    seen: list[dict[str, Any]] = []

    def no_env_files(payload: dict[str, Any]) -> dict[str, Any] | None:
        if payload["tool_input"].get("path", "").endswith(".env"):
            return {"decision": "deny", "reason": "never .env"}
        return None

    env_write = {
        "name": "write_file",
        "id": "call_e",
        "arguments": {"path": ".env", "content": "X=1"},
    }
    script(model, [{"tool_calls": [env_write, WRITE]}, "ok"])
    with Agent(workspace, settings_for(server), hooks={"PreToolUse": no_env_files}) as agent:
        agent.add_hook("PostToolUse", lambda payload: seen.append(payload), matcher="write_file")
        agent.run("go")
    results = tool_results(server.requests[-1])
    assert (
        results["call_e"]
        == "Error: blocked_by_hook: a PreToolUse hook blocked this write_file call: never .env"
    )
    assert [p["tool_input"]["path"] for p in seen] == ["notes.txt"]
    with pytest.raises(ConfigurationError, match="'PreTool' is not a hook event"):
        Session(workspace, settings_for(server), prewarm=False, hooks={"PreTool": print})


def test_a_malformed_hooks_file_is_a_startup_error_naming_the_file_and_the_field(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    path = workspace / ".agentkit" / "hooks.json"
    path.parent.mkdir()
    path.write_text(
        '{"hooks": {"PreToolUse": [{"matcher": "x", "hooks": [{"type": "command", "timeout": "soon"}]}]}}'
    )
    with pytest.raises(
        ConfigurationError, match=rf"{path}: hooks.PreToolUse\[0\].hooks\[0\].command"
    ):
        Session(workspace, settings_for(server), prewarm=False)
    path.write_text("{}")  # fixed: the conversation can be opened (the failed start let go of it)
    with Session(workspace, settings_for(server), prewarm=False):
        pass


def test_independent_hooks_run_at_once(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    # Each waits for the other's mark: run one after the other they would time out.
    a = f"touch {first}; for i in $(seq 50); do test -e {second} && exit 0; sleep 0.1; done; exit 1"
    b = f"touch {second}; for i in $(seq 50); do test -e {first} && exit 0; sleep 0.1; done; exit 1"
    config = {
        "hooks": {
            "PreToolUse": [
                {"hooks": [{"type": "command", "command": a}, {"type": "command", "command": b}]}
            ]
        }
    }
    script(model, [{"tool_calls": [WRITE]}, "ok"])
    with Session(workspace, settings_for(server, hooks=config), prewarm=False) as session:
        events = recorded(session)
        session.send("go", 30)
    assert not [e for e in events if isinstance(e, ev.HookFailed)]
