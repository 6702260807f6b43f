"""The approval ↔ ``session/request_permission`` mapping (agentkit.acp.permissions), on
the library's own models: the request an editor gets, and its answers back."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("acp")

from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from agentkit.acp.permissions import OPTIONS, decision_of, permission_request


def dumped(model: object) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[attr-defined]


def test_a_main_agent_request_names_its_card_and_offers_three_choices(tmp_path: Path) -> None:
    row = {
        "request_id": "apr_1",
        "agent_id": None,
        "tool": "run_command",
        "arguments": {"command": "rm -rf build"},
        "reason": "rule ask: run_command(rm *)",
        "key": "run_command(rm -rf build)",
        "call_id": "call_7",
    }
    card, options = permission_request(row, tmp_path, "en")
    assert dumped(card) == {
        "toolCallId": "call_7",
        "title": "Running rm -rf build",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": "rm -rf build"},
        "content": [
            {
                "type": "content",
                "content": {"type": "text", "text": "Asks because: rule ask: run_command(rm *)"},
            }
        ],
    }
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow", "allow_once"),
        ("allow_always", "allow_always"),
        ("deny", "reject_once"),
    ]


def test_a_subagent_request_gets_a_card_of_its_own(tmp_path: Path) -> None:
    row = {
        "request_id": "apr_2",
        "agent_id": 3,
        "tool": "write_file",
        "arguments": {"path": "src/a.py", "content": "x"},
        "reason": "",
        "call_id": "call_in_the_worker",
    }
    card, _ = permission_request(row, tmp_path, "en")
    got = dumped(card)
    assert got["toolCallId"] == "approval-apr_2"
    assert got["title"].startswith("Sub-agent 3: ") and "src/a.py" in got["title"]
    assert got["kind"] == "edit"
    assert got["locations"] == [{"path": str(tmp_path / "src" / "a.py")}]
    assert "content" not in got


def test_a_malformed_request_still_makes_a_card(tmp_path: Path) -> None:
    card, options = permission_request({"request_id": "apr_3", "arguments": "[1"}, tmp_path, "en")
    got = dumped(card)
    assert got["toolCallId"] == "approval-apr_3" and got["kind"] == "other"
    assert len(options) == len(OPTIONS)


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("allow", ("allow", None)),
        ("allow_always", ("allow_always", None)),
        ("deny", ("deny", "rejected in the editor")),
        ("made-up", None),
    ],
)
def test_the_editors_choice_becomes_a_decision(option: str, expected: object) -> None:
    response = RequestPermissionResponse(
        outcome=AllowedOutcome(outcome="selected", option_id=option)
    )
    assert decision_of(response) == expected


def test_a_cancelled_answer_decides_nothing() -> None:
    assert (
        decision_of(RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))) is None
    )
    assert decision_of(None) is None
