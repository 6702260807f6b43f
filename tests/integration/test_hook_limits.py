"""Hooks as real processes against their limits (issue 31 items 1, 5, 7): output past
1 MB, reasons past 10,000 characters, "always" keyed by what a hook asked, and
Claude Code's ``updatedInput``; the real openai client against FakeOpenAIServer,
docs/approvals.md §4-§6."""

from __future__ import annotations

import json
import resource
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from subagent_helpers import script, scripted_settings, wait_until
from switch_fixtures import (
    model_fixture,  # noqa: F401  (the model fixture)
    server_fixture,  # noqa: F401  (the server fixture)
)

from agentkit import events as ev
from agentkit.chat import Session
from agentkit.policy.hook_process import OUTPUT_MAX, collect
from agentkit.policy.reasons import REASON_MAX
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer

ASK_BY_COMMAND = """\
import json, sys
data = json.load(sys.stdin)
reason = "runs " + data["tool_input"]["command"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "ask", "permissionDecisionReason": reason}}))
"""

REWRITE = """\
import json, sys
data = json.load(sys.stdin)
update = json.loads(sys.argv[1])
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "updatedInput": update}}))
"""


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user hooks file


def pre_tool_use(command: str, matcher: str = "", timeout: float | None = None) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        handler["timeout"] = timeout
    return {"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [handler]}]}}


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    return scripted_settings(server, "en", **overrides)


def python_hook(folder: Path, source: str, *args: str) -> str:
    path = folder / "hook.py"
    path.write_text(source, encoding="utf-8")
    return " ".join(shlex.quote(p) for p in (sys.executable, str(path), *args))


def results(request: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def write(path: str, call_id: str = "call_w") -> dict[str, Any]:
    return {"name": "write_file", "id": call_id, "arguments": {"path": path, "content": "hi\n"}}


def command(text: str, call_id: str) -> dict[str, Any]:
    return {"name": "run_command", "id": call_id, "arguments": {"command": text}}


# ------------------------------------------------------------------ output past the cap
def test_collect_reads_at_most_the_cap_from_a_hook_that_prints_forever() -> None:
    proc = subprocess.Popen(
        ["yes"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        got = collect(proc, b"{}", timeout=60, cap=OUTPUT_MAX)
    finally:
        proc.kill()
        proc.wait()
    assert got.overflow == "stdout" and not got.timed_out
    assert OUTPUT_MAX < len(got.stdout) <= OUTPUT_MAX + 65_536


def test_a_hook_printing_without_end_is_killed_and_reported_not_read_whole(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    settings = settings_for(server, hooks=pre_tool_use("yes", timeout=60))
    with Session(workspace, settings, prewarm=False) as session:
        events: list[ev.Event] = []
        session.subscribe(events.append)
        session.send("go", 60)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    [failed] = [e for e in events if isinstance(e, ev.HookFailed)]
    assert failed.hook == "yes" and "printed more than 1 MB on stdout" in failed.problem
    assert (workspace / "notes.txt").exists()  # a failed hook does not block
    assert grown_kib < 64 * 1024, f"the agent grew by {grown_kib} KiB"


def test_a_long_exit_2_reason_reaches_the_model_cut_with_a_note(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    source = "import sys\nsys.stderr.write('x' * 900_000)\nsys.exit(2)\n"
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    settings = settings_for(server, hooks=pre_tool_use(python_hook(tmp_path, source)))
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 60)
    result = results(server.requests[-1])["call_w"]
    assert result.endswith("x" * 100 + "... [cut: 10,000 of 900,000 characters]")
    assert result.count("x") == REASON_MAX
    assert not (workspace / "notes.txt").exists()


def test_a_persons_long_deny_note_reaches_the_model_cut(
    workspace: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    settings = settings_for(server, approvals={"write_file": "ask"})
    note = "n" * 100_000
    with Session(
        workspace, settings, prewarm=False, on_approval=lambda row: ("deny", note)
    ) as session:
        events: list[ev.Event] = []
        session.subscribe(events.append)
        session.send("go", 60)
    result = results(server.requests[-1])["call_w"]
    assert '... [cut: 10,000 of 100,000 characters]"' in result
    assert result.count("n") - "denied this write_file call".count("n") <= REASON_MAX + 10
    [answered] = [e for e in events if isinstance(e, ev.ApprovalAnswered)]
    assert answered.note == "n" * REASON_MAX + "... [cut: 10,000 of 100,000 characters]"


# ------------------------------------------------------------------ "always"
def test_always_for_one_hook_reason_does_not_cover_another(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    script(
        model,
        [
            {"tool_calls": [command("echo curl-version", "call_1")]},
            {"tool_calls": [command("echo curl-version", "call_2")]},
            {"tool_calls": [command("echo rm-important", "call_3")]},
            "done",
        ],
    )
    hook = python_hook(tmp_path, ASK_BY_COMMAND)
    asked: list[dict[str, Any]] = []

    def answer(row: dict[str, Any]) -> str:
        asked.append(row)
        return "allow_always" if len(asked) == 1 else "deny"

    settings = settings_for(server, hooks=pre_tool_use(hook, "run_command"))
    with Session(workspace, settings, prewarm=False, on_approval=answer) as session:
        session.send("go", 60)
    assert [r["key"] for r in asked] == [
        "hook-reason:run_command:runs echo curl-version",
        "hook-reason:run_command:runs echo rm-important",
    ]
    assert asked[0]["always"] == (
        "run_command calls a PreToolUse hook asks about with the reason 'runs echo curl-version'"
    )
    found = results(server.requests[-1])
    assert "curl-version" in found["call_2"]  # the same reason: allowed without asking
    assert found["call_3"].startswith("Error: denied: the user denied")


def test_an_old_whole_tool_key_does_not_cover_a_hooks_ask(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    settings = settings_for(
        server, hooks=pre_tool_use(python_hook(tmp_path, ASK_BY_COMMAND), "run_command")
    )
    # The model's replies go by the conversation's turns: one script for both sessions.
    script(model, ["hello", {"tool_calls": [command("echo rm-important", "call_1")]}, "done"])
    with Session(workspace, settings, prewarm=False) as session:
        session.send("hi", 30)
        conversation_id = session.id
    path = workspace / ".agentkit" / "conversations" / f"{conversation_id}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["approvals"] = {"always": ["run_command"]}  # how an older agentkit saved it
    path.write_text(json.dumps(data), encoding="utf-8")
    asked: list[dict[str, Any]] = []
    with Session(
        workspace,
        settings,
        prewarm=False,
        conversation_id=conversation_id,
        on_approval=lambda row: asked.append(row) or "deny",
    ) as session:
        session.send("go", 30)
    assert [r["key"] for r in asked] == ["hook-reason:run_command:runs echo rm-important"]
    assert results(server.requests[-1])["call_1"].startswith("Error: denied")


# ------------------------------------------------------------------ updatedInput
def test_updated_input_rewrites_the_path_a_real_tool_uses(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    update = json.dumps({"path": "safe/notes.txt", "content": "sanitised\n"})
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    settings = settings_for(server, hooks=pre_tool_use(python_hook(tmp_path, REWRITE, update)))
    with Session(workspace, settings, prewarm=False) as session:
        events: list[ev.Event] = []
        session.subscribe(events.append)
        session.send("go", 60)
    assert not (workspace / "notes.txt").exists()
    assert (workspace / "safe" / "notes.txt").read_text(encoding="utf-8") == "sanitised\n"
    result = results(server.requests[-1])["call_w"]
    assert "a PreToolUse hook replaced this call's input; it ran with: " in result
    assert '"path": "safe/notes.txt"' in result
    [done] = [e for e in events if isinstance(e, ev.ToolCallFinished)]
    assert '"path": "safe/notes.txt"' in done.output


def test_updated_input_is_checked_by_the_rules_again(
    workspace: Path, tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    update = json.dumps({"path": "secret.env", "content": "x\n"})
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    settings = settings_for(
        server,
        approvals={"write_file:*.env": "deny"},
        hooks=pre_tool_use(python_hook(tmp_path, REWRITE, update)),
    )
    with Session(workspace, settings, prewarm=False) as session:
        session.send("go", 60)
    assert results(server.requests[-1])["call_w"].startswith("Error: denied: the approvals rule")
    assert not (workspace / "secret.env").exists() and not (workspace / "notes.txt").exists()


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        ({"path": 7}, "path"),
        ({"content": "no path"}, "path: Field required"),
        ([1, 2], "updatedInput must be a JSON object"),
    ],
)
def test_an_invalid_updated_input_is_refused_with_a_tool_error(
    workspace: Path,
    tmp_path: Path,
    model: Any,
    server: FakeOpenAIServer,
    update: Any,
    expected: str,
) -> None:
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    hook = python_hook(tmp_path, REWRITE, json.dumps(update))
    with Session(workspace, settings_for(server, hooks=pre_tool_use(hook)), prewarm=False) as s:
        s.send("go", 60)
    result = results(server.requests[-1])["call_w"]
    assert result.startswith(
        "Error: invalid_argument: a PreToolUse hook gave this write_file call a new input"
    )
    assert expected in result and result.endswith("The call did not run.")
    assert not (workspace / "notes.txt").exists()


# ------------------------------------------------------------------ the web API's note
def test_a_long_deny_note_through_the_web_api_is_cut_like_everywhere(
    tmp_path: Path, model: Any, server: FakeOpenAIServer
) -> None:
    from web_helpers import JSON, SseReader

    from agentkit.webchat import create_app
    from agentkit.webchat.serve import BackgroundServer

    workspace = (tmp_path / "web").resolve()
    workspace.mkdir()
    script(model, [{"tool_calls": [write("notes.txt")]}, "ok"])
    app = create_app(workspace, settings_for(server, approvals={"write_file": "ask"}))
    web = BackgroundServer(app).start()
    try:
        with httpx.Client(base_url=web.url, timeout=30) as client:

            def post(path: str, body: dict[str, Any]) -> httpx.Response:
                return client.post(path, content=json.dumps(body), headers=JSON)

            cid = post("/api/conversations", {}).json()["id"]
            reader = SseReader(f"{web.url}/api/conversations/{cid}/events?after=0")
            assert reader.connected.wait(10)
            post(f"/api/conversations/{cid}/messages", {"text": "go"})
            assert wait_until(lambda: "ApprovalRequested" in reader.types())
            [asked] = [e for e in reader.events if e["type"] == "ApprovalRequested"]
            assert asked["always"] == "every call the approvals rule 'write_file' asks about"
            body = {"decision": "deny", "note": "w" * 100_000}
            url = f"/api/conversations/{cid}/approvals/{asked['request_id']}"
            assert post(url, body).status_code == 200
            assert wait_until(lambda: "AllWorkDone" in reader.types())
            reader.close()
    finally:
        web.stop()
    result = results(server.requests[-1])["call_w"]
    assert '... [cut: 10,000 of 100,000 characters]"' in result
    assert "w" * (REASON_MAX + 1) not in result
