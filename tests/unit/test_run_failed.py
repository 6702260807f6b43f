"""RunResult.raise_for_status: a run that did not succeed raises RunFailed (kind, message,
status, the result); a done one returns the result itself, so the call chains."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentkit
from agentkit import AgentkitError, RunFailed, RunResult


def result(**fields: object) -> RunResult:
    values: dict[str, object] = {
        "final_text": "ok",
        "conversation_id": "conv_1",
        "status": "done",
        "transcript_path": Path("/w/.agentkit/conversations/conv_1.json"),
    }
    values.update(fields)
    return RunResult(**values)  # type: ignore[arg-type]


def test_a_done_run_returns_itself_unchanged() -> None:
    done = result(stats={"turns": 2})
    before = done.to_dict()
    assert done.raise_for_status() is done
    assert done.to_dict() == before


def test_a_failed_run_raises_with_its_error_kind_message_and_result() -> None:
    failed = result(
        final_text=None,
        status="failed",
        error="authentication (HTTP 401): invalid key",
        error_kind="authentication",
    )
    with pytest.raises(RunFailed) as caught:
        failed.raise_for_status()
    exc = caught.value
    assert isinstance(exc, AgentkitError)
    assert exc.kind == "authentication"
    assert exc.message == "authentication (HTTP 401): invalid key"
    assert str(exc) == "authentication (HTTP 401): invalid key"
    assert exc.status == "failed"
    assert exc.result is failed
    # Code that reads the status sees what it saw before.
    assert failed.status == "failed" and failed.error_kind == "authentication"


def test_a_spent_budget_is_its_kind() -> None:
    spent = result(status="failed", error="the budget is spent", error_kind="budget_exhausted")
    with pytest.raises(RunFailed) as caught:
        spent.raise_for_status()
    assert caught.value.kind == "budget_exhausted"


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_without_a_known_kind_the_kind_is_the_status(status: str) -> None:
    ended = result(final_text=None, status=status)
    with pytest.raises(RunFailed) as caught:
        ended.raise_for_status()
    assert caught.value.kind == status
    assert caught.value.status == status
    assert caught.value.message == f"the run ended {status}"


def test_run_failed_is_public() -> None:
    assert agentkit.RunFailed is RunFailed
    assert "RunFailed" in agentkit.__all__
