"""SubAgentResult (agentkit.spawn): the seed's blocking create_sub_agent result, typed."""

from __future__ import annotations

import dataclasses

import pytest

from agentkit import SubAgentRefused, SubAgentResult
from agentkit.errors import AgentkitError

BLOCKING = {
    "success": True,
    "agent_id": 1,
    "status": "completed",
    "summary": "生成API文档",
    "message": "子智能体1 已完成任务",
    "deliverables_dir": "docs/api",
    "deliverables_files": ["api.md", "endpoints.json"],
    "result_summary": "已生成 API 文档，包含 15 个端点的详细说明。",
    "sub_conversation_id": "conv_abc123",
    "stats": {
        "runtime_seconds": 120,
        "files_read": 8,
        "searches": 3,
        "web_pages": 0,
        "commands": 2,
    },
}


def test_every_field_of_the_specification_s_example_is_typed() -> None:
    result = SubAgentResult.from_blocking(BLOCKING)
    assert result.agent_id == 1 and result.status == "completed" and result.success
    assert result.summary == "生成API文档" and result.message == "子智能体1 已完成任务"
    assert result.deliverables_dir == "docs/api"
    assert result.deliverables_files == ("api.md", "endpoints.json")
    assert result.result_summary.startswith("已生成 API 文档")
    assert result.sub_conversation_id == "conv_abc123"
    assert result.stats == BLOCKING["stats"] and result.stats is not BLOCKING["stats"]
    assert result.output is None and result.raw is BLOCKING
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "failed"  # type: ignore[misc]


def test_a_typed_result_is_the_output_and_a_failure_is_not_a_success() -> None:
    ended = {**BLOCKING, "success": False, "status": "timeout", "result": {"pages": 3}}
    result = SubAgentResult.from_blocking(ended)
    assert result.output == {"pages": 3}
    assert not result.success and result.status == "timeout"


def test_a_refusal_is_an_agentkit_error_carrying_the_tool_s_json() -> None:
    refusal = {"success": False, "agent_id": 2, "error": "too many running"}
    error = SubAgentRefused("too many running", refusal)
    assert isinstance(error, AgentkitError)
    assert str(error) == error.error == "too many running" and error.result is refusal
