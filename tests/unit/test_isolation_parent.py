"""Isolation, the parent side's pieces that need no engine (issue 34; docs/isolation.md):
the setting and its environment name, create_sub_agent's schema (off and always: byte
for byte the seed's; available: plus ``isolation``), the tools offered, the rule that
decides whether a start is isolated, the argument rule, a profile's default, the
notification's extra line (only for isolated sub-agents), the result and status rows'
``changes``/``merged``, and write claims. In-process only."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentkit import prompts
from agentkit.chat.setup import build_registry
from agentkit.profiles import ProfileError, parse_profile
from agentkit.settings import Settings
from agentkit.subagent import inputs
from agentkit.subagent.claims import Claims
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.isolated import Isolation, choose, continued, refusal
from agentkit.subagent.notify import render_notifications
from agentkit.subagent.results import blocking_result, status_result
from agentkit.subagent.seed_tools import CreateIsolationParams, make_main_tools
from agentkit.subagent.state import STATUS_KEYS, SubAgent

# sha256 of json.dumps(schema, ensure_ascii=False, sort_keys=True) of create_sub_agent
# as the model saw it before isolation existed (no profiles); off and always keep it.
SEED_SCHEMA_SHA256 = {
    "en": "806107e30c3c7a91088356fe96436f60dfd4b3ebf028cc74ab2227f6765d156e",
    "zh": "61a4f5be55a998424804ccbe070200dba2e359b4b1e67b0f836e9cffdbb6d0bb",
}
COPY = {
    "kind": "worktree",
    "root": "/w/.agentkit/worktrees/c/agent-1",
    "worktree": "/w/.agentkit/worktrees/c/agent-1",
    "git_dir": "/w/.git",
    "prefix": "",
    "branch": "agentkit/c/agent-1",
    "base": "0" * 40,
    "base_ref": "refs/agentkit/bases/c/agent-1",
    "exclude": ["out/1"],
    "created_at": "",
}


def _settings(mode: str = "off", **more: Any) -> Settings:
    return Settings(model="m", api_key="k", subagent_isolation=mode, **more)


def _create_schema(mode: str, language: str) -> dict[str, Any]:
    def nobody() -> Any:
        raise AssertionError("not called")

    tool = make_main_tools(nobody, isolation=mode)[0]
    assert tool.name == "create_sub_agent"
    return tool.schema(language)


def _digest(schema: dict[str, Any]) -> str:
    text = json.dumps(schema, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("mode", ["off", "always"])
def test_off_and_always_keep_create_sub_agent_s_schema_byte_for_byte(
    mode: str, language: str
) -> None:
    assert _digest(_create_schema(mode, language)) == SEED_SCHEMA_SHA256[language]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_available_adds_only_isolation_shared_by_default(language: str) -> None:
    seed = _create_schema("off", language)
    schema = _create_schema("available", language)
    props = schema["function"]["parameters"]["properties"]
    assert list(props) == [*seed["function"]["parameters"]["properties"], "isolation"]
    assert props["isolation"]["enum"] == ["shared", "isolated"]
    assert props["isolation"]["default"] == "shared"
    words = "shared" if language == "en" else "默认"
    assert words in props["isolation"]["description"]
    del props["isolation"]
    assert schema == seed  # nothing else moved: description, required, the other fields


def test_the_isolation_argument_takes_either_mode_any_case_and_refuses_others() -> None:
    base = {"agent_id": 1, "summary": "s", "task": "t"}
    assert CreateIsolationParams.model_validate({**base, "isolation": " ISOLATED "}).isolation == (
        "isolated"
    )
    assert CreateIsolationParams.model_validate({**base, "isolation": None}).isolation == "shared"
    for bad in ("copy", 1, True):
        with pytest.raises(ValidationError) as caught:
            CreateIsolationParams.model_validate({**base, "isolation": bad})
        text = inputs.refusal_text("create_sub_agent", caught.value, "en")
        assert 'isolation must be "shared" or "isolated"' in text
        assert "必须是" in inputs.refusal_text("create_sub_agent", caught.value, "zh")


@pytest.mark.parametrize(
    ("mode", "offered"),
    [("off", False), ("available", True), ("always", True)],
)
def test_the_merge_tools_are_offered_whenever_isolation_is_not_off(
    tmp_path: Path, mode: str, offered: bool
) -> None:
    registry = build_registry(True, [], lambda: None, tmp_path, _settings(mode))  # type: ignore[arg-type,return-value]
    names = [t["function"]["name"] for t in registry.schemas("en")]
    tail = ["merge_sub_agent", "discard_sub_agent_changes"]
    assert (names[-2:] == tail) is offered
    assert ("merge_sub_agent" in names) is offered
    if offered:
        merge = next(t for t in registry.schemas("zh") if t["function"]["name"] == tail[0])
        params = merge["function"]["parameters"]
        assert set(params["properties"]) == {"agent_id", "dry_run"}
        assert params["required"] == ["agent_id"]
        assert "三方合并" in merge["function"]["description"]


def test_the_environment_sets_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTKIT_SUBAGENT_ISOLATION", "always")
    assert Settings(model="m", api_key="k").subagent_isolation == "always"
    monkeypatch.setenv("AGENTKIT_SUBAGENT_ISOLATION", "sometimes")
    with pytest.raises(ValidationError):
        Settings(model="m", api_key="k")


def test_who_is_isolated_off_never_always_always_available_asks_then_profile() -> None:
    isolated, shared = {"isolation": "isolated"}, {"isolation": "shared"}
    assert not choose(_settings("off"), "isolated", isolated)
    assert choose(_settings("always"), "shared", shared)
    available = _settings("available")
    assert not choose(available, None, None)
    assert choose(available, None, isolated)
    assert not choose(available, "shared", isolated)  # asked: the profile's default yields
    assert choose(available, "isolated", shared)


def test_code_asking_what_the_setting_rules_out_is_refused_with_the_reason() -> None:
    assert "off" in (refusal(_settings("off"), "isolated") or "")
    assert "always" in (refusal(_settings("always"), "shared") or "")
    assert refusal(_settings("available"), "isolated") is None
    assert refusal(_settings("off"), None) is None


def test_a_continued_run_keeps_its_copy_or_follows_the_setting() -> None:
    earlier = Isolation(copy=dict(COPY), changes={"files": 1, "insertions": 2, "deletions": 0})
    kept = continued(_settings("available"), earlier, None)
    assert kept is not None and kept.copy == COPY and kept.changes is None
    merged = Isolation(copy=dict(COPY), merged=True)
    again = continued(_settings("available"), merged, None)
    assert again is not None and again.merged  # make_copy then drops it for a fresh one
    assert continued(_settings("available"), None, None) is None  # shared stays shared
    fresh = continued(_settings("always"), None, None)
    assert fresh is not None and fresh.copy is None
    assert continued(_settings("off"), earlier, None) is None


def test_a_profile_may_set_the_default_and_nothing_else() -> None:
    text = "---\nname: fixer\nisolation: isolated\n---\nFix it."
    profile = parse_profile(text, "fixer.md", "fixer")
    assert profile.isolation == "isolated" and profile.to_dict()["isolation"] == "isolated"
    plain = parse_profile("---\nname: plain\n---\nx", "plain.md", "plain")
    assert "isolation" not in plain.to_dict()  # a profile's dict as before isolation
    with pytest.raises(ProfileError, match="isolation"):
        parse_profile("---\nname: bad\nisolation: maybe\n---\nx", "bad.md", "bad")


# ----------------------------------------------------------- what the model is told
def _agent(isolation: Isolation | None = None) -> SubAgent:
    spec = WorkerSpec(
        1, "fix the bug", "task", 600, "out/1", "/nonexistent/out/1", "/nonexistent",
        "sub1", {}, "m", "t",
    )  # fmt: skip
    agent = SubAgent(spec=spec, background=True, started=0.0, isolation=isolation)
    agent.status, agent.runtime_seconds, agent.result_summary = "completed", 5, "done"
    return agent


def _template(language: str, agent: SubAgent) -> str:
    return prompts.render(
        language,
        "subagent/notify_system.txt",
        agent_id=1,
        summary="fix the bug",
        **agent.stats(),
        deliverables_dir="out/1",
        result_summary="done",
    )


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_shared_notification_is_the_template_word_for_word(language: str) -> None:
    agent = _agent()
    text = render_notifications(language, [agent], "notify_system", lambda a: "done")
    assert text == _template(language, agent)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_isolated_notification_adds_one_line_with_its_changes(language: str) -> None:
    changes = {"files": 2, "insertions": 7, "deletions": 3}
    agent = _agent(Isolation(copy=dict(COPY), changes=changes))
    text = render_notifications(language, [agent], "notify_system", lambda a: "done")
    head, _, line = text.rpartition("\n")
    assert head == _template(language, agent)
    assert "2" in line and "+7 -3" in line
    assert "merge_sub_agent(agent_id=1)" in line and "discard_sub_agent_changes" in line
    nothing = _agent(
        Isolation(copy=dict(COPY), changes={"files": 0, "insertions": 0, "deletions": 0})
    )
    quiet = render_notifications(language, [nothing], "notify_system", lambda a: "done")
    assert (
        quiet.count("\n") == text.count("\n") and "merge_sub_agent" not in quiet.rpartition("\n")[2]
    )


def test_results_and_rows_carry_changes_and_merged_only_when_isolated(tmp_path: Path) -> None:
    settings = _settings("available")
    shared, isolated = _agent(), _agent(Isolation(copy=dict(COPY), changes={"files": 1}))
    plain = blocking_result(shared, settings, tmp_path)
    assert "changes" not in plain and "merged" not in plain
    result = blocking_result(isolated, settings, tmp_path)
    assert result["changes"] == {"files": 1} and result["merged"] is False
    assert list(result)[: len(plain)] == list(plain)  # the seed's keys first, in order
    rows = status_result([1], {1: shared}, {}, settings)["agents"]
    assert list(rows[0]) == list(STATUS_KEYS)
    rows = status_result([1], {1: isolated}, {}, settings)["agents"]
    assert list(rows[0]) == [*STATUS_KEYS, "changes", "merged"]
    earlier = {2: {"agent_id": 2, "status": "completed", "isolation": COPY, "merged": True}}
    row = status_result([2], {}, earlier, settings)["agents"][0]
    assert row["merged"] is True and row["changes"] is None


def test_an_isolated_sub_agent_claims_nothing_and_never_refuses_the_main_agent() -> None:
    claims = Claims()
    claims.claim_folder(1, Path("/w/out/1"))
    claims.mark_isolated(1)
    claims.claim_folder(2, Path("/w/out/2"))
    assert claims.claim_file(1, Path("/w/src/a.py")) is None
    assert claims.files == {}  # nothing recorded for the isolated one
    assert claims.owner_of(Path("/w/src/a.py"), None) is None
    assert claims.owner_of(Path("/w/out/1/x.md"), None) is None  # the main agent may write
    assert claims.claim_file(2, Path("/w/src/a.py")) is None  # a shared one is not refused
    assert claims.claim_file(2, Path("/w/out/1/x.md")) == 1  # but keeps out of its folder
    claims.release(1)
    assert 1 not in claims.isolated


def test_an_ended_agent_is_announced_only_once_its_end_is_recorded(tmp_path: Path) -> None:
    """Its status is final before its copy is saved and counted (finalise runs after):
    until ``done`` is set, no notification takes it (it would say "could not be
    counted") and the round waits for it as for an agent calling finish_task."""
    from agentkit.subagent.manager import SubAgentManager

    manager = SubAgentManager(workspace=tmp_path, settings=_settings("available"))
    agent = _agent(Isolation(copy=dict(COPY)))  # status completed, changes not counted yet
    manager.table.add(agent)
    assert not agent.ended()
    assert manager.take_finished() == [] and not manager.has_unannounced()
    assert manager.any_finishing()
    agent.isolation = Isolation(
        copy=dict(COPY), changes={"files": 1, "insertions": 1, "deletions": 1}
    )
    agent.done.set()
    assert agent.ended() and not manager.any_finishing()
    assert manager.take_finished() == [agent]
    text = render_notifications("en", [agent], "notify_system", lambda a: "done")
    assert "1 files, +1 -1 lines" in text and "could not be counted" not in text


@pytest.mark.parametrize("language", ["en", "zh"])
def test_only_an_isolated_sub_agent_s_system_prompt_adds_the_own_copy_paragraph(
    language: str, tmp_path: Path
) -> None:
    """The seed's system prompt says the sub-agent shares the workspace: a shared
    sub-agent's prompt stays that template byte for byte; an isolated one's gets one
    paragraph after it (its own copy, merged by the main agent, the shared
    deliverables folder, no git commit)."""
    from agentkit.prompts import prompt_values
    from agentkit.subagent.worker.setup import opening

    when = "2025-01-01 00:00"
    settings = Settings(model="m", api_key="k", language=language)
    spec = WorkerSpec(
        1, "fix", "task", 600, "out/1", str(tmp_path / "out/1"), str(tmp_path), "sub1", {}, "m", "t"
    )  # fmt: skip
    shared = opening(spec, settings, None, when)[0]["content"]
    seed = prompts.render(
        language, "subagent/system.txt", **{**prompt_values(tmp_path), "current_time": when}
    )
    assert shared == seed
    root = tmp_path / ".agentkit/worktrees/c/agent-1"
    root.mkdir(parents=True)
    copy = {**COPY, "root": str(root), "worktree": str(root)}
    isolated_spec = replace(spec, extra={"isolation": copy})
    isolated = opening(isolated_spec, settings, None, when)[0]["content"]
    own = prompts.render(
        language, "subagent/system.txt", **{**prompt_values(root), "current_time": when}
    )
    paragraph = prompts.render(language, "subagent/isolated_system.txt")
    assert isolated == own + "\n\n" + paragraph
    assert "git commit" in paragraph and paragraph.count("\n\n") == 1  # heading + one paragraph
    assert ("merge" in paragraph) if language == "en" else ("合并" in paragraph)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_merge_and_discard_calls_are_labelled_in_words(language: str) -> None:
    """Not "Calling merge_sub_agent": the progress phrase the terminal, the web page
    and the ACP card's title show says what the call does (a dry run: a check)."""
    from agentkit.acp.toolcalls import describe
    from agentkit.prompts import last_action

    merge = last_action(language, "merge_sub_agent", {"agent_id": 1})
    check = last_action(language, "merge_sub_agent", {"agent_id": 1, "dry_run": True})
    drop = last_action(language, "discard_sub_agent_changes", {"agent_id": 1})
    expected = {
        "en": (
            "Merging sub-agent 1's changes",
            "Checking whether sub-agent 1's changes merge",
            "Discarding sub-agent 1's changes",
        ),
        "zh": (
            "正在合并子智能体 1 的修改",
            "正在检查子智能体 1 的修改能否合并",
            "正在丢弃子智能体 1 的修改",
        ),
    }
    assert (merge, check, drop) == expected[language]
    no_check = last_action(language, "merge_sub_agent", {"agent_id": 1, "dry_run": False})
    assert no_check == merge
    card = describe("merge_sub_agent", {"agent_id": 1}, merge, Path("/w"))
    assert card.title == merge and "merge_sub_agent" not in card.title


def test_a_person_is_told_a_link_s_target_and_why_the_merge_refused_it() -> None:
    from agentkit.chat.isolation import FileDiff, conflict_words
    from agentkit.isolation.types import Conflict

    detail = "the symbolic link points to '/etc/passwd', outside the workspace; nothing was written"
    words = conflict_words(Conflict("pw", "unsafe_link", detail=detail))
    assert words == f"pw: {detail}"
    link = FileDiff("pw", "added", 1, 0, False, "", "/etc/passwd")
    assert link.to_dict()["link_target"] == "/etc/passwd"
    assert "link_target" not in FileDiff("a.py", "added", 1, 0, False, "").to_dict()
