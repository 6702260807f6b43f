"""The caps on what hooks and people say, what "always" covers, and a hook's
``updatedInput``, in process (issue 31 items 1, 5, 7; docs/approvals.md §4-§6): the
gate with Python hooks, the broker with a real Conversation, the front ends' texts."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from agentkit import events as ev
from agentkit.acp.permissions import permission_request
from agentkit.chat.approvals import ApprovalBroker
from agentkit.cli.approve import approval_text
from agentkit.conversation import Conversation
from agentkit.policy.approvals import ApprovalPolicy
from agentkit.policy.hook_config import HookConfig
from agentkit.policy.hooks import HookRunner, PythonHook, interpret
from agentkit.policy.reasons import REASON_MAX, cap_reason
from agentkit.settings import Settings
from agentkit.tools.base import ToolResult
from agentkit.tools.gate import AskAnswer, AskRequest, ToolGate, always_covers, ask_key

SETTINGS = Settings(model="m", api_key="k", language="en")
TEN_MB = 10 * 1024 * 1024


def gate(
    tmp_path: Path, hook: Any, answer: AskAnswer | None = None, rules: dict[str, str] | None = None
) -> tuple[ToolGate, list[AskRequest]]:
    asked: list[AskRequest] = []

    def ask(request: AskRequest, cancel: threading.Event) -> AskAnswer:
        asked.append(request)
        return answer or AskAnswer("allow")

    runner = HookRunner(
        HookConfig(),
        workspace=tmp_path,
        settings=SETTINGS,
        python={"PreToolUse": [PythonHook(hook)]},
    )
    return ToolGate(ApprovalPolicy(rules or {}), ask, runner, "en"), asked


def run(g: ToolGate, arguments: dict[str, Any], **kwargs: Any) -> ToolResult:
    return g.run(
        "run_command", arguments, "c1", threading.Event(), lambda: ToolResult("ran"), **kwargs
    )


def test_cap_reason_cuts_once_and_says_so() -> None:
    assert cap_reason("short") == "short"
    cut = cap_reason("x" * 25_000)
    assert cut == "x" * REASON_MAX + "... [cut: 10,000 of 25,000 characters]"
    assert cap_reason(cut) == cut  # cutting again keeps the first note


def test_a_10_mb_exit_2_reason_is_cut_to_the_cap() -> None:
    decision, reason, _, _ = interpret("PreToolUse", 2, "", "r" * TEN_MB)
    assert decision == "deny"
    assert reason == "r" * REASON_MAX + f"... [cut: 10,000 of {TEN_MB:,} characters]"


def test_a_hooks_10_mb_deny_reason_reaches_the_model_cut(tmp_path: Path) -> None:
    g, _ = gate(tmp_path, lambda p: {"decision": "deny", "reason": "d" * TEN_MB})
    result = run(g, {"command": "ls"})
    assert result.error_code == "blocked_by_hook"
    assert result.output.endswith("d" * 10 + f"... [cut: 10,000 of {TEN_MB:,} characters]")
    assert len(result.output) < REASON_MAX + 200


def test_a_persons_long_note_is_cut_by_the_gate_too(tmp_path: Path) -> None:
    g, _ = gate(tmp_path, lambda p: {"decision": "ask"}, AskAnswer("deny", "n" * 50_000))
    result = run(g, {"command": "ls"})
    assert '... [cut: 10,000 of 50,000 characters]"' in result.output
    assert len(result.output) < REASON_MAX + 200


def test_always_is_keyed_by_the_hooks_reason_or_the_exact_input(tmp_path: Path) -> None:
    def by_command(payload: dict[str, Any]) -> dict[str, Any]:
        command = payload["tool_input"]["command"]
        return {"decision": "ask", "reason": "" if command == "pwd" else f"runs {command}"}

    g, asked = gate(tmp_path, by_command)
    for command in ("curl --version", "rm -rf important", "pwd"):
        run(g, {"command": command})
    assert [r.key for r in asked] == [
        "hook-reason:run_command:runs curl --version",
        "hook-reason:run_command:runs rm -rf important",
        'hook-input:run_command:{"command": "pwd"}',
    ]
    assert always_covers(asked[1].key) == (
        "run_command calls a PreToolUse hook asks about with the reason 'runs rm -rf important'"
    )
    assert always_covers(asked[2].key).startswith("this exact run_command call")
    long = ask_key("write_file", None, "", {"path": "a", "content": "c" * 5_000})
    assert long.startswith("hook-input:write_file:sha256:") and len(long) < 100
    assert long != ask_key("write_file", None, "", {"path": "a", "content": "d" * 5_000})


def test_a_rule_and_a_hook_asking_together_need_both_to_be_remembered(tmp_path: Path) -> None:
    g, asked = gate(
        tmp_path, lambda p: {"decision": "ask", "reason": "network"}, rules={"run_command": "ask"}
    )
    run(g, {"command": "curl x"})
    assert asked[0].key == "run_command & hook-reason:run_command:network"
    assert always_covers(asked[0].key) == (
        "run_command calls a PreToolUse hook asks about with the reason 'network', "
        "where the approvals rule 'run_command' asks too"
    )
    assert ask_key("run_command", "run_command", None, {}) == "run_command"
    assert always_covers("run_command") == "every call the approvals rule 'run_command' asks about"


def broker(conversation: Conversation) -> tuple[ApprovalBroker, list[ev.Event]]:
    events: list[ev.Event] = []
    made = ApprovalBroker(
        conversation, settings=lambda: SETTINGS, emit=events.append, save=lambda: None
    )
    made.subscribe(lambda row: None)
    return made, events


def ask_in_thread(made: ApprovalBroker, request: AskRequest) -> tuple[threading.Thread, list[Any]]:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(made.ask(request, threading.Event())))
    thread.start()
    return thread, box


def pending_id(made: ApprovalBroker) -> str:
    for _ in range(500):
        rows = made.pending()
        if rows:
            return str(rows[0]["request_id"])
        threading.Event().wait(0.01)
    raise AssertionError("no request")


def test_the_broker_cuts_every_front_ends_deny_note() -> None:
    made, events = broker(Conversation())
    request = AskRequest("write_file", {"path": "a"}, "asks", "write_file", "c1")
    thread, box = ask_in_thread(made, request)
    made.approve(pending_id(made), "deny", "z" * 100_000)
    thread.join(10)
    expected = "z" * REASON_MAX + "... [cut: 10,000 of 100,000 characters]"
    assert box[0].note == expected
    [answered] = [e for e in events if isinstance(e, ev.ApprovalAnswered)]
    assert answered.note == expected


def test_always_for_one_key_does_not_cover_another_and_old_keys_stay_narrow() -> None:
    conversation = Conversation(approvals={"always": ["run_command"]})  # an older file's key
    made, events = broker(conversation)
    curl = ask_key("run_command", None, "runs curl", {"command": "curl"})
    rm = ask_key("run_command", None, "runs rm", {"command": "rm"})
    thread, box = ask_in_thread(made, AskRequest("run_command", {"command": "curl"}, "", curl))
    made.approve(pending_id(made), "allow_always")
    thread.join(10)
    assert box[0].decision == "allow"
    thread, box = ask_in_thread(made, AskRequest("run_command", {"command": "rm"}, "", rm))
    request_id = pending_id(made)  # asked: "always" for curl did not cover it
    assert made.pending()[0]["key"] == rm
    made.approve(request_id, "deny")
    thread.join(10)
    thread, box = ask_in_thread(made, AskRequest("run_command", {"command": "curl"}, "", curl))
    thread.join(10)
    assert box[0].by == "always"
    assert made.always() == sorted(["run_command", curl])
    asked = [e for e in events if isinstance(e, ev.ApprovalRequested)]
    assert [e.always for e in asked] == [always_covers(curl), always_covers(rm)]


def test_every_front_end_says_what_always_allows(tmp_path: Path) -> None:
    covers = always_covers("hook-reason:run_command:runs curl")
    row = {
        "request_id": "ap_1", "agent_id": None, "tool": "run_command",
        "arguments": {"command": "curl"}, "reason": "asks", "key": "k", "always": covers,
    }  # fmt: skip
    assert f'"always" allows {covers}, for this conversation' in approval_text(row)
    _, options = permission_request(row, tmp_path, "en")
    assert [o.name for o in options] == ["Allow once", f"Always allow {covers}", "Reject"]


def test_updated_input_replaces_the_input_after_the_tools_check(tmp_path: Path) -> None:
    checked: list[dict[str, Any]] = []

    def rewrite(used: dict[str, Any]) -> tuple[str | None, str | None]:
        checked.append(used)
        return (None, None) if isinstance(used.get("command"), str) else ("command: bad", None)

    hook = {
        "hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls -l"}}
    }
    g, _ = gate(tmp_path, lambda p: hook)
    result = run(g, {"command": "ls"}, rewrite=rewrite)
    assert checked == [{"command": "ls -l"}]
    assert (
        result.output
        == 'ran\n\na PreToolUse hook replaced this call\'s input; it ran with: {"command": "ls -l"}'
    )
    assert result.meta["updated_input"] == {"command": "ls -l"}
    bad = {"hookSpecificOutput": {"updatedInput": {"command": 3}}}
    g, _ = gate(tmp_path, lambda p: bad)
    refused = run(g, {"command": "ls"}, rewrite=rewrite)
    assert refused.error_code == "invalid_argument" and "command: bad" in refused.output
    g, _ = gate(tmp_path, lambda p: {"hookSpecificOutput": {"updatedInput": "rm -rf /"}})
    refused = run(g, {"command": "ls"}, rewrite=rewrite)
    assert "updatedInput must be a JSON object" in refused.output


def test_a_python_hooks_long_exception_and_stop_reason_are_cut(tmp_path: Path) -> None:
    def broken(payload: dict[str, Any]) -> None:
        raise ValueError("e" * 1_000_000)

    runner = HookRunner(
        HookConfig(),
        workspace=tmp_path,
        settings=SETTINGS,
        python={
            "PreToolUse": [PythonHook(broken)],
            "Stop": [PythonHook(lambda p: {"continue": False, "stopReason": "s" * 50_000})],
        },
    )
    [problem] = runner.run("PreToolUse", "run_command", {}).problems
    assert problem.endswith("... [cut: 10,000 of 1,000,019 characters]")
    stopped = runner.run("Stop", "", {})
    assert stopped.blocked and stopped.reason.endswith("[cut: 10,000 of 50,000 characters]")
