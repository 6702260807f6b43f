"""The approval rules, the hook configuration and the reading of hook output, as plain
functions (agentkit/policy/; docs/approvals.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentkit.chat.setup import check_settings
from agentkit.conversation import state_path
from agentkit.errors import ConfigurationError
from agentkit.policy.approvals import ApprovalPolicy, Verdict, check_rules, split_command_line
from agentkit.policy.hook_config import HookConfig, HookConfigError, load_hooks, parse_hooks
from agentkit.policy.hooks import HookOutcome, interpret
from agentkit.profiles import AgentProfile, ProfileError
from agentkit.settings import Settings


def test_unlisted_tools_are_allowed_and_an_empty_policy_allows_everything() -> None:
    assert ApprovalPolicy().decide("run_command", {"command": "rm -rf /"}) == Verdict("allow")
    policy = ApprovalPolicy({"write_file": "ask"})
    assert policy.decide("read_file", {"path": "a"}) == Verdict("allow")
    assert policy.decide("write_file", {"path": "a"}) == Verdict("ask", "write_file")


def test_the_most_specific_key_wins() -> None:
    policy = ApprovalPolicy(
        {
            "*": "deny",
            "mcp__*": "ask",
            "mcp__github__*": "allow",
            "mcp__github__delete_repo": "deny",
            "run_command": "allow",
            "run_command:git *": "ask",
            "run_command:git status*": "allow",
        }
    )
    assert policy.decide("mcp__github__delete_repo", {}) == Verdict(
        "deny", "mcp__github__delete_repo"
    )
    assert policy.decide("mcp__github__list", {}) == Verdict("allow", "mcp__github__*")
    assert policy.decide("mcp__time__now", {}) == Verdict("ask", "mcp__*")
    assert policy.decide("web_search", {"query": "x"}) == Verdict("deny", "*")
    assert policy.decide("run_command", {"command": "ls"}) == Verdict("allow", "run_command")
    assert policy.decide("run_command", {"command": "git push"}) == Verdict(
        "ask", "run_command:git *"
    )
    assert policy.decide("run_command", {"command": "git status -s"}) == Verdict(
        "allow", "run_command:git status*"
    )


def test_a_command_line_is_matched_command_by_command_and_the_strictest_wins() -> None:
    policy = ApprovalPolicy({"run_command:git push*": "ask", "run_command:rm -rf*": "deny"})
    for line in [
        "cd repo && git push origin main",
        "make; git   push",
        "FOO=1 git push",
        "echo $(git push)",
        "echo `git push`",
        "true | git push -f",
    ]:
        assert policy.decide("run_command", {"command": line}).decision == "ask", line
    verdict = policy.decide("run_command", {"command": "git push && rm -rf build"})
    assert verdict == Verdict("deny", "run_command:rm -rf*")
    assert policy.decide("run_command", {"command": "git pull"}).decision == "allow"
    assert split_command_line("a 'b  c' && d\ne") == ["a b  c", "d", "e"]
    assert split_command_line("unbalanced 'quote && git push") == ["unbalanced 'quote", "git push"]


def test_path_rules_match_the_normalised_path() -> None:
    policy = ApprovalPolicy({"write_file:*.env": "deny", "edit_file:src/*": "ask"})
    assert policy.decide("write_file", {"path": "./config/.env"}).decision == "deny"
    assert policy.decide("write_file", {"path": "notes.txt"}).decision == "allow"
    assert policy.decide("edit_file", {"path": "./src/../src/a.py"}) == Verdict(
        "ask", "edit_file:src/*"
    )
    # A missing or odd subject leaves the tool-name rules to decide.
    assert policy.decide("edit_file", {"path": 3}).decision == "allow"
    assert policy.decide("edit_file", None).decision == "allow"


@pytest.mark.parametrize(
    ("rules", "problem"),
    [
        ({"write_file": "maybe"}, "must be allow, ask or deny"),
        ({"": "ask"}, "give a tool name"),
        ({"mcp__x__y:pattern": "ask"}, "only run_command"),
        ({"run_command:  ": "ask"}, "pattern after ':' is empty"),
        (["write_file"], "JSON object"),
    ],
)
def test_bad_rules_are_refused_naming_the_key(rules: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_rules(rules)


def test_settings_refuse_a_malformed_approvals_value_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTKIT_APPROVALS", '{"run_command:git push*": "ask"}')
    assert Settings().approvals == {"run_command:git push*": "ask"}
    monkeypatch.setenv("AGENTKIT_APPROVALS", "{not json")
    with pytest.raises(ValidationError, match="approvals"):
        Settings()
    monkeypatch.setenv("AGENTKIT_APPROVALS", '{"write_file": "sometimes"}')
    with pytest.raises(ValidationError, match="approvals.write_file"):
        Settings()
    monkeypatch.setenv("AGENTKIT_APPROVALS", '{"run_command:": "ask"}')
    with pytest.raises(ConfigurationError, match="^approvals: key 'run_command:'"):
        check_settings(Settings(model="m", api_key="k"))  # at startup: every front end


def test_a_profile_carries_approval_rules() -> None:
    profile = AgentProfile.from_dict({"name": "careful", "approvals": {"run_command": "ask"}})
    assert profile.approvals == {"run_command": "ask"}
    assert AgentProfile.from_dict(profile.to_dict()).approvals == {"run_command": "ask"}
    with pytest.raises(ProfileError, match="approvals: key 'run_command'"):
        AgentProfile.from_dict({"name": "bad", "approvals": {"run_command": "perhaps"}})


def _hooks(**events: object) -> dict[str, object]:
    return {"hooks": events}


def test_hook_matchers_follow_claude_code() -> None:
    config = parse_hooks(
        _hooks(
            PreToolUse=[
                {"matcher": "write_file|edit_file", "hooks": [{"type": "command", "command": "a"}]},
                {"matcher": "mcp__github__.*", "hooks": [{"type": "command", "command": "b"}]},
                {"matcher": "*", "hooks": [{"type": "command", "command": "c"}]},
                {"hooks": [{"type": "command", "command": "c"}]},  # the same command: once
            ],
            Stop=[{"matcher": "ignored", "hooks": [{"type": "command", "command": "s"}]}],
        ),
        "test",
    )

    def names(tool: str) -> list[str]:
        return [h.command for h in config.matching("PreToolUse", tool)]

    assert names("write_file") == ["a", "c"]
    assert names("edit_file") == ["a", "c"]
    assert names("read_file") == ["c"]
    assert names("mcp__github__create_issue") == ["b", "c"]
    assert names("write") == ["c"]  # a list of names is exact
    assert [h.command for h in config.matching("Stop")] == ["s"]  # Stop takes no matcher
    again = HookConfig.from_dict(config.to_dict())
    assert again.matching("PreToolUse", "edit_file") == config.matching("PreToolUse", "edit_file")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "must be a JSON object"),
        (_hooks(PreToolUSe=[]), "hooks.PreToolUSe: not an agentkit hook event"),
        (_hooks(PreToolUse={}), "hooks.PreToolUse: must be a list"),
        (
            _hooks(PreToolUse=[{"matcher": "x"}]),
            r"hooks.PreToolUse\[0\].hooks: must be a non-empty list",
        ),
        (
            _hooks(PreToolUse=[{"matcher": "(", "hooks": [{"command": "x"}]}]),
            r"\[0\].matcher: not a valid",
        ),
        (
            _hooks(PreToolUse=[{"hooks": [{"type": "http", "url": "x"}]}]),
            r"hooks\[0\].type: 'http'",
        ),
        (_hooks(PreToolUse=[{"hooks": [{"type": "command"}]}]), r"hooks\[0\].command: must be"),
        (_hooks(PreToolUse=[{"hooks": [{"command": "x", "timeout": -1}]}]), r"hooks\[0\].timeout"),
        (_hooks(PreToolUse=[{"hooks": [{"command": "x", "if": "Bash(*)"}]}]), "unknown key"),
        ({"hooks": {}, "permissions": {}}, "unknown key.*permissions"),
    ],
)
def test_a_malformed_hooks_value_names_the_field(data: object, field: str) -> None:
    with pytest.raises(HookConfigError, match=f"^Settings.hooks: .*{field}"):
        parse_hooks(data, "Settings.hooks")


def test_hook_files_add_up_and_a_bad_file_is_named(workspace: Path, tmp_path: Path) -> None:
    user = tmp_path / "config" / "agentkit" / "hooks.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps(_hooks(Stop=[{"hooks": [{"command": "user"}]}])))
    local = workspace / ".agentkit" / "hooks.json"
    local.parent.mkdir()
    local.write_text(json.dumps(_hooks(Stop=[{"hooks": [{"command": "workspace"}]}])))
    setting = {"Stop": [{"hooks": [{"command": "setting"}]}]}
    config = load_hooks(state_path(workspace), setting, user.parent)
    assert [h.command for h in config.matching("Stop")] == ["user", "workspace", "setting"]
    assert [h.source for h in config.matching("Stop")] == [str(user), str(local), "Settings.hooks"]
    local.write_text('{"hooks": {"Stop": [{"hooks": [{"command": 7}]}]}}')
    with pytest.raises(HookConfigError, match=rf"^{local}: hooks.Stop\[0\].hooks\[0\].command"):
        load_hooks(state_path(workspace), {}, user.parent)
    local.write_text("{broken")
    with pytest.raises(HookConfigError, match=rf"^{local}: not valid JSON"):
        load_hooks(state_path(workspace), {}, user.parent)


def test_settings_refuse_malformed_hooks_naming_the_field() -> None:
    settings = Settings(model="m", api_key="k", hooks={"Stop": [{"matcher": ""}]})
    with pytest.raises(ConfigurationError, match=r"^Settings.hooks: hooks.Stop\[0\].hooks"):
        check_settings(settings)  # at startup: every front end


@pytest.mark.parametrize(
    ("code", "out", "err", "expected"),
    [
        (0, "", "", (None, "", None, None)),
        (
            2,
            '{"decision": "allow"}',
            "no pushes on Friday\n",
            ("deny", "no pushes on Friday", None, None),
        ),
        (0, '{"decision": "deny", "reason": "r"}', "", ("deny", "r", None, None)),
        (0, '{"decision": "ask", "additional_context": "c"}', "", ("ask", "", "c", None)),
        (0, '{"decision": "block", "reason": "b"}', "", ("deny", "b", None, None)),
        (0, '{"decision": "approve"}', "", ("allow", "", None, None)),
        (
            0,
            json.dumps(
                {
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "ask",
                        "permissionDecisionReason": "why",
                        "additionalContext": "ctx",
                    }
                }
            ),  # fmt: skip
            "",
            ("ask", "why", "ctx", None),
        ),
        (0, '{"continue": false, "stopReason": "halt"}', "", ("deny", "halt", None, None)),
    ],
)
def test_hook_output_is_read_as_claude_code_reads_it(
    code: int, out: str, err: str, expected: tuple[object, ...]
) -> None:
    assert interpret("PreToolUse", code, out, err) == expected


def test_hook_errors_and_garbage_do_not_block() -> None:
    decision, _, _, problem = interpret("PreToolUse", 1, "", "boom\nmore")
    assert decision is None and problem == "exited with status 1: boom"
    decision, _, _, problem = interpret("PreToolUse", 0, "{not json", "")
    assert decision is None and problem is not None and "not valid JSON" in problem
    decision, _, _, problem = interpret("PreToolUse", 0, "\x00\x01garbage", "")
    assert decision is None and problem is not None and "not a JSON object" in problem
    decision, _, _, problem = interpret("PreToolUse", 0, '{"decision": "maybe"}', "")
    assert decision is None and problem is not None and "'maybe'" in problem
    # Plain text is context where Claude Code reads it so.
    assert interpret("UserPromptSubmit", 0, "today is a holiday", "") == (
        None, "", "today is a holiday", None
    )  # fmt: skip


def test_the_strictest_hook_wins() -> None:
    outcome = HookOutcome()
    outcome.add("allow", "fine", "one")
    outcome.add("ask", "check", None)
    outcome.add("allow", "", "two")
    assert (outcome.decision, outcome.reason, outcome.context) == ("ask", "check", ["one", "two"])
    outcome.add("deny", "no", None)
    outcome.add("deny", "never", None)
    assert outcome.blocked and outcome.reason == "no\nnever"


def test_a_state_folder_that_is_a_file_has_no_hooks_file(workspace: Path, tmp_path: Path) -> None:
    (workspace / ".agentkit").write_text("not a folder")  # the run fails later, saying why
    assert load_hooks(state_path(workspace), {}, tmp_path / "config" / "agentkit").empty
