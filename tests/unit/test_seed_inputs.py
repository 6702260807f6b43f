"""Seed-tool inputs the specification rules out are refused in the seed's JSON
(hardening item 8; docs/specification.md §1, §8; rules in agentkit/subagent/inputs.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from seed_input_helpers import (
    Setup,
    run,
    setup_fixture,  # noqa: F401  (the setup fixture)
)

from agentkit import prompts
from agentkit.subagent.seed_tools import (
    CreateSubAgentParams,
    GetSubAgentStatusParams,
)
from agentkit.subagent.worker.hooks import FinishTaskParams
from agentkit.tools.registry import ToolRegistry

LONG = "长" * 201
OK = {"agent_id": 1, "summary": "分析日志文件", "task": "读取日志并写报告"}

# (tool, the model's arguments as JSON text, field the error must name, agent_id expected)
BAD: list[tuple[str, str, str, int | None]] = [
    ("create_sub_agent", '{"agent_id": true, "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": false, "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": null, "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": 3.5, "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": "3.5", "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": "three", "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": [3], "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": {"id": 3}, "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": NaN, "summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"summary": "s", "task": "t"}', "agent_id", None),
    ("create_sub_agent", '{"agent_id": 2, "summary": "", "task": "t"}', "summary", 2),
    ("create_sub_agent", '{"agent_id": 2, "summary": " \\n\\t ", "task": "t"}', "summary", 2),
    ("create_sub_agent", f'{{"agent_id": 2, "summary": "{LONG}", "task": "t"}}', "summary", 2),
    (
        "create_sub_agent",
        f'{{"agent_id": 2, "summary": "{"x" * 5000}", "task": "t"}}',
        "summary",
        2,
    ),
    ("create_sub_agent", '{"agent_id": 2, "summary": 42, "task": "t"}', "summary", 2),
    ("create_sub_agent", '{"agent_id": 2, "summary": null, "task": "t"}', "summary", 2),
    ("create_sub_agent", '{"agent_id": 2, "task": "t"}', "summary", 2),
    ("create_sub_agent", '{"agent_id": "2", "summary": "s", "task": ""}', "task", 2),
    ("create_sub_agent", '{"agent_id": 2, "summary": "s", "task": "  \\n "}', "task", 2),
    ("create_sub_agent", '{"agent_id": 2, "summary": "s", "task": null}', "task", 2),
    ("create_sub_agent", '{"agent_id": 2, "summary": "s", "task": ["a"]}', "task", 2),
    ("create_sub_agent", '{"agent_id": 2, "summary": "s"}', "task", 2),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "timeout_seconds": true}',
        "timeout_seconds",
        2,
    ),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "timeout_seconds": 600.5}',
        "timeout_seconds",
        2,
    ),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "timeout_seconds": "ten"}',
        "timeout_seconds",
        2,
    ),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "run_in_background": 1}',
        "run_in_background",
        2,
    ),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "run_in_background": "yes"}',
        "run_in_background",
        2,
    ),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "deliverables_dir": 5}',
        "deliverables_dir",
        2,
    ),
    (
        "create_sub_agent",
        '{"agent_id": 2, "summary": "s", "task": "t", "deliverables_dir": ["a"]}',
        "deliverables_dir",
        2,
    ),
    ("terminate_sub_agent", '{"agent_id": true}', "agent_id", None),
    ("terminate_sub_agent", '{"agent_id": 2.5}', "agent_id", None),
    ("terminate_sub_agent", '{"agent_id": null}', "agent_id", None),
    ("terminate_sub_agent", '{"agent_id": "x"}', "agent_id", None),
    ("terminate_sub_agent", "{}", "agent_id", None),
    ("get_sub_agent_status", '{"agent_ids": true}', "agent_ids", None),
    ("get_sub_agent_status", '{"agent_ids": []}', "agent_ids", None),
    ("get_sub_agent_status", '{"agent_ids": [1, true]}', "agent_ids", None),
    ("get_sub_agent_status", '{"agent_ids": [1.5]}', "agent_ids", None),
    ("get_sub_agent_status", '{"agent_ids": [[1]]}', "agent_ids", None),
    ("get_sub_agent_status", '{"agent_ids": null}', "agent_ids", None),
    ("get_sub_agent_status", '{"agent_ids": "all"}', "agent_ids", None),
    ("get_sub_agent_status", "{}", "agent_ids", None),
]

# Folders admission refuses: agentkit's state folder and sub-agents' record folders.
RESERVED = [
    (".agentkit", ".agentkit"),
    (".agentkit/conversations", ".agentkit"),
    ("./.agentkit/x/../y", ".agentkit"),
    ("old/.subagent", ".subagent"),
    ("sub_agent_results/agent_7/.subagent/x", ".subagent"),
]


@pytest.mark.parametrize(("tool", "text", "field", "agent_id"), BAD)
def test_bad_argument_gets_seed_json_refusal(
    setup: Setup, tool: str, text: str, field: str, agent_id: int | None
) -> None:
    answer = run(setup, tool, text)
    expected = ["success", "agent_id", "error"] if agent_id is not None else ["success", "error"]
    if tool == "get_sub_agent_status":
        expected.append("agents")
    assert list(answer) == expected
    assert answer["success"] is False
    assert answer.get("agent_id") == agent_id
    assert field in answer["error"] and tool in answer["error"]
    manager = setup.manager
    assert manager.starts == 0 and manager.agents == {} and not manager.claims.folders


@pytest.mark.parametrize(
    "text",
    [
        '{"success": "yes", "summary": "done"}',
        '{"success": 1, "summary": "done"}',
        '{"success": null, "summary": "done"}',
        '{"summary": "done"}',
        '{"success": true, "summary": ""}',
        '{"success": true, "summary": "   \\n"}',
        '{"success": true, "summary": null}',
        '{"success": true, "summary": 7}',
        '{"success": true}',
    ],
)
def test_bad_finish_task_is_refused_and_does_not_end(setup: Setup, text: str) -> None:
    answer = run(setup, "finish_task", text)
    assert list(answer) == ["success", "error", "will_terminate"]
    assert answer["success"] is False and answer["will_terminate"] is False
    assert "finish_task" in answer["error"]
    assert setup.finished == []


def test_long_finish_summary_is_kept_whole(setup: Setup) -> None:
    text = "结果" * 3000
    result = setup.registry.execute("finish_task", {"success": "TRUE", "summary": text}, setup.ctx)
    assert result.ok and json.loads(result.output)["will_terminate"] is True
    assert setup.finished == [(True, text)]


@pytest.mark.parametrize(("folder", "named"), RESERVED)
def test_reserved_deliverables_dir_is_refused(setup: Setup, folder: str, named: str) -> None:
    (setup.ctx.workspace / ".agentkit" / "conversations").mkdir(parents=True)
    text = json.dumps({**OK, "deliverables_dir": folder})
    answer = run(setup, "create_sub_agent", text)
    assert list(answer) == ["success", "agent_id", "error"]
    assert answer["agent_id"] == 1 and named in answer["error"]
    assert "sub_agent_results/agent_1" in answer["error"]  # says what to use instead
    manager = setup.manager
    assert manager.starts == 0 and manager.agents == {}


def test_unparseable_arguments_get_seed_json(setup: Setup) -> None:
    result = setup.registry.unusable_arguments("terminate_sub_agent", "truncated JSON", setup.ctx)
    answer = json.loads(result.output)
    assert not result.ok and answer["success"] is False and "truncated JSON" in answer["error"]
    plain = ToolRegistry().unusable_arguments("read_file", "truncated JSON", setup.ctx)
    assert plain.output.startswith("Error: invalid_argument:")


@pytest.mark.parametrize(
    ("given", "held"),
    [
        ({"agent_id": "3"}, {"agent_id": 3}),
        ({"agent_id": " 7 "}, {"agent_id": 7}),
        ({"agent_id": 4.0}, {"agent_id": 4}),
        ({"timeout_seconds": "900"}, {"timeout_seconds": 900}),
        ({"timeout_seconds": 1200.0}, {"timeout_seconds": 1200}),
        ({"timeout_seconds": None}, {"timeout_seconds": 600}),
        ({"run_in_background": "true"}, {"run_in_background": True}),
        ({"run_in_background": "FALSE"}, {"run_in_background": False}),
        ({"run_in_background": None}, {"run_in_background": False}),
        ({"deliverables_dir": None}, {"deliverables_dir": None}),
        ({"summary": "  分析\n  日志  "}, {"summary": "分析 日志"}),
        ({"summary": "s" * 200}, {"summary": "s" * 200}),
        ({"task": "  做事  "}, {"task": "做事"}),
    ],
)
def test_accepted_create_values(given: dict[str, Any], held: dict[str, Any]) -> None:
    params = CreateSubAgentParams.model_validate({**OK, **given})
    assert {k: getattr(params, k) for k in held} == held


def test_a_bare_value_that_is_no_id_is_told_a_list_is_wanted(setup: Setup) -> None:
    """Regression (a new user's trial): {"agent_ids": "all"} was told agent_ids "must
    be a whole number such as 3", though it is a list."""
    answer = run(setup, "get_sub_agent_status", '{"agent_ids": "all"}')
    language = setup.manager.settings.language
    wanted = prompts.phrase(language, "arg_not_id_list", field="agent_ids", value='"all"')
    assert wanted in answer["error"] and "[1, 2]" in answer["error"]


def test_accepted_status_and_finish_values() -> None:
    assert GetSubAgentStatusParams.model_validate({"agent_ids": 2}).agent_ids == [2]
    ids = GetSubAgentStatusParams.model_validate({"agent_ids": ["2", 3.0, 4]}).agent_ids
    assert ids == [2, 3, 4]
    done = FinishTaskParams.model_validate({"success": "false", "summary": " 完成 "})
    assert done.success is False and done.summary == "完成"
