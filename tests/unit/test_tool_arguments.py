"""Arguments a tool does not take (issue 20 item 9): still accepted, but the result
says which were ignored and what was probably meant, in the conversation language;
the seed tools' JSON stays valid with its fields unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentkit import Settings
from agentkit.subagent.worker.hooks import make_finish_tool
from agentkit.tools import ToolContext, ToolRegistry, base_tools

NOTES = {
    "en": "Note: ignored argument(s) that read_file does not have: "
    "lines, file_path (did you mean path?).",
    "zh": "注意：read_file 没有以下参数，已忽略：lines、file_path（是否想用 path？）。",
}


def context(workspace: Path, language: str) -> ToolContext:
    return ToolContext(workspace=workspace, settings=Settings(model="m", language=language))


@pytest.mark.parametrize("language", sorted(NOTES))
def test_unknown_arguments_get_a_note_and_the_rest_is_unchanged(
    workspace: Path, language: str
) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    registry = ToolRegistry(base_tools())
    ctx = context(workspace, language)
    plain = registry.execute("read_file", {"path": "a.txt"}, ctx)
    noted = registry.execute("read_file", {"path": "a.txt", "lines": 5, "file_path": "b.txt"}, ctx)
    assert "ignored_arguments" not in plain.meta
    assert noted.ok and noted.output == plain.output.rstrip() + "\n\n" + NOTES[language]
    assert noted.meta["ignored_arguments"] == ["lines", "file_path"]


def test_a_failed_call_gets_the_note_too(workspace: Path) -> None:
    registry = ToolRegistry(base_tools())
    result = registry.execute(
        "read_file", {"path": "missing.txt", "pth": "x"}, context(workspace, "en")
    )
    assert not result.ok and result.output.startswith("Error:")
    assert result.output.endswith("pth (did you mean path?).")


def test_seed_json_gets_a_note_key_and_keeps_its_fields(workspace: Path) -> None:
    finished: list[tuple[bool, str]] = []
    registry = ToolRegistry([make_finish_tool(lambda s, t: finished.append((s, t)), "zh")])
    ctx = context(workspace, "zh")
    summary = "完成了报告，写入 report.md，包含三条关键发现和后续建议。"
    plain = json.loads(
        registry.execute("finish_task", {"success": True, "summary": summary}, ctx).output
    )
    result = registry.execute(
        "finish_task", {"success": True, "summary": summary, "sucess": True}, ctx
    )
    data = json.loads(result.output)
    assert data == {
        **plain,
        "note": "注意：finish_task 没有以下参数，已忽略：sucess（是否想用 success？）。",
    }
    assert list(data)[:-1] == list(plain)  # the seed's fields first, as they were
    assert finished == [(True, summary)] * 2


def test_a_seed_tools_own_refusal_gets_the_note_in_its_json(workspace: Path) -> None:
    registry = ToolRegistry([make_finish_tool(lambda s, t: None, "en")])
    result = registry.execute(
        "finish_task", {"success": True, "sumary": "x"}, context(workspace, "en")
    )
    data = json.loads(result.output)
    assert data["success"] is False and "summary" in data["error"]
    assert data["note"].endswith("sumary (did you mean summary?).")
