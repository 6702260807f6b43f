"""Every recorded provider reply in shared/testdata/providers, served over real HTTP by
FakeOpenAIServer and read by the real LLMClient (real openai client), must give the
case's ``expected`` outcome (see that folder's README for the notation)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentkit.errors import ContextLengthExceeded, LLMError
from agentkit.llm import ONCE_ONLY_KINDS, LLMClient
from agentkit.llm.turns import AssistantTurn
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer, RawChunks, RawResponse

# shared/ lies beside the clone (as CI lays it); AGENTKIT_TEST_SHARED names another place.
SHARED = Path(
    os.environ.get("AGENTKIT_TEST_SHARED") or Path(__file__).resolve().parents[3] / "shared"
)
PROVIDERS = SHARED / "testdata" / "providers"
CASES = sorted(PROVIDERS.glob("*.json")) if PROVIDERS.is_dir() else []
# Keys of "expected" that describe behaviour for people, not values to check.
PROSE_KEYS = {"behavior", "history_rule"}
MAX_RETRIES = 2
RETRY_MAX_DELAY = 0.05


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }


def _reply(case: dict[str, Any]) -> RawChunks | RawResponse:
    status = int(case.get("http_status", 200))
    headers = case.get("headers")
    if "chunks" in case:
        return RawChunks(case["chunks"], status=status, headers=headers)
    return RawResponse(case["response"], status=status, headers=headers)


def _request(case: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    request = case.get("request") or {}
    messages = request.get("messages") or [{"role": "user", "content": "Please help."}]
    if case["expected"].get("warning") == "context_truncated_by_server":
        # The case's note: the client-side estimate of the prompt is ~31000 tokens.
        messages = [{"role": "user", "content": "word " * 31_000}]
    names = {call["name"] for call in case["expected"].get("tool_calls", [])} | {"lookup"}
    return messages, [_tool(name) for name in sorted(names)]


@pytest.mark.parametrize("path", CASES or [None], ids=[p.stem for p in CASES] or ["absent"])
def test_provider_case(path: Path | None) -> None:
    if path is None:
        # A missing data folder is a broken checkout, not an optional extra: say so.
        pytest.fail(
            f"no provider cases at {PROVIDERS}: these tests read shared/testdata beside "
            "the clone (or in AGENTKIT_TEST_SHARED)",
            pytrace=False,
        )
    case = json.loads(path.read_text(encoding="utf-8"))
    expected = case["expected"]
    messages, tools = _request(case)
    request = case.get("request") or {}
    retries: list[tuple[str, int, float]] = []

    with FakeOpenAIServer(lambda body: _reply(case)) as server:
        settings = Settings(
            model=request.get("model", "test-model"),
            base_url=server.base_url,
            api_key="test-key",
            stream=bool(case.get("stream", "chunks" in case)),
            max_output_tokens=request.get("max_tokens"),
            max_retries=MAX_RETRIES,
            retry_base_delay=0.001,
            retry_max_delay=RETRY_MAX_DELAY,
            retry_total_seconds=0,  # a failing case fails after max_retries, not an outage
        )
        # X1 is opt-in; enabling it everywhere also checks it stays out of other cases.
        with LLMClient(settings, text_tool_call_fallback=True) as client:

            def on_retry(error: LLMError, attempt: int, delay: float) -> None:
                retries.append((error.kind, attempt, delay))

            if expected.get("error", {}).get("kind") == "truncated_tool_call":
                # Retried once (T4); then, per issue 2, the turn comes back with the
                # calls marked unusable, so the engine answers them with tool errors
                # and never runs them.
                turn = client.complete(messages, tools, on_retry=on_retry)
                assert [r[0] for r in retries] == ["truncated_tool_call"]
                assert len(server.requests) == 2
                assert turn.tool_calls and all(
                    c.arguments is None and c.error for c in turn.tool_calls
                )
                assert turn.finish_reason == "length"
            elif expected["result"] == "error":
                with pytest.raises(LLMError) as info:
                    client.complete(messages, tools, on_retry=on_retry)
                _check_error(info.value, expected, len(server.requests), retries)
            else:
                assert expected["result"] == "assistant_turn"
                turn = client.complete(messages, tools, on_retry=on_retry)
                _check_turn(turn, expected)
                assert len(server.requests) == 1, retries
        sent = server.requests[0]
        assert sent["model"] == settings.model
        assert sent["messages"] == messages
        assert bool(sent.get("stream")) == settings.stream


def _check_error(
    error: LLMError, expected: dict[str, Any], requests: int, retries: list[tuple[str, int, float]]
) -> None:
    for key in expected:
        assert key in PROSE_KEYS | {"result", "error", "raw_finish_reason"}, f"unchecked {key!r}"
    want = expected["error"]
    assert error.kind == want["kind"], error.one_line()
    assert error.retryable == want["retryable"]
    assert error.one_line().startswith(want["kind"])
    if "raw_finish_reason" in expected:
        assert error.code == expected["raw_finish_reason"]
    for key, value in want.items():
        if key in ("kind", "retryable"):
            continue
        if key == "limit_tokens":
            assert isinstance(error, ContextLengthExceeded)
            assert error.limit_tokens == value
        elif key == "requested_tokens":
            assert isinstance(error, ContextLengthExceeded)
            assert error.requested_tokens == value
        elif key == "input_tokens":  # with max_tokens: the request needed both
            assert isinstance(error, ContextLengthExceeded)
            assert error.requested_tokens == value + want["max_tokens"]
        elif key == "max_tokens":
            assert "input_tokens" in want
        elif key == "max_retries":
            assert requests == 1 + value
        elif key == "side":
            assert value == "input"
            assert error.status is not None  # refused as an HTTP error: the input was judged
        else:
            pytest.fail(f"unchecked expected error key {key!r}")
    if not error.retryable:
        assert requests == 1 and not retries
    elif error.retry_after is not None and error.retry_after > RETRY_MAX_DELAY:
        assert requests == 1  # the hint exceeds the cap: fail fast
    else:
        budget = 1 if error.kind in ONCE_ONLY_KINDS else MAX_RETRIES
        assert requests == 1 + budget
        assert [r[1] for r in retries] == list(range(1, budget + 1))
        assert {r[0] for r in retries} == {error.kind}


def _check_turn(turn: AssistantTurn, expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if key in PROSE_KEYS or key == "result":
            continue
        if key == "finish_reason":
            assert turn.finish_reason == value
        elif key == "raw_finish_reason":
            assert turn.raw_finish_reason == value
        elif key in ("content", "content_partial"):
            assert turn.content == value
        elif key == "reasoning":
            assert turn.reasoning == value
        elif key == "usage":
            assert not turn.usage.estimated
            got = {k: getattr(turn.usage, k) for k in value}
            assert got == value
        elif key == "warning":
            assert any(w.startswith(value) for w in turn.warnings), turn.warnings
        elif key == "tool_calls":
            _check_calls(turn, value)
        else:
            pytest.fail(f"unchecked expected key {key!r}")
    if "tool_calls" not in expected:
        assert turn.tool_calls == []
    if turn.finish_reason != "content_filter":
        assert not any(w.startswith("dropped") for w in turn.warnings)


def _check_calls(turn: AssistantTurn, calls: list[dict[str, Any]]) -> None:
    assert turn.finish_reason == "tool_calls"
    assert [c.name for c in turn.tool_calls] == [c["name"] for c in calls]
    known = {c["id"] for c in calls if c["id"] != "<synthesized>"}
    for got, want in zip(turn.tool_calls, calls, strict=True):
        assert got.error is None, got.error
        assert got.arguments == want["arguments"]
        if want["id"] == "<synthesized>":
            assert got.id.startswith("call_") and len(got.id) > 10
            assert got.id not in known
        else:
            assert got.id == want["id"]  # echoed byte for byte (H3)
        wire = got.wire()
        assert json.loads(wire["function"]["arguments"]) == want["arguments"]
    ids = [c.id for c in turn.tool_calls]
    assert len(set(ids)) == len(ids)
