"""OpenTelemetry traces (agentkit.tracing) with the real SDK exporting OTLP over HTTP to a
real receiver on 127.0.0.1 (tests/otlp_receiver.py, which keeps span kind, links and
resources); the real openai client against FakeOpenAIServer; real worker processes.
The same tree through Arize Phoenix is tests/e2e/test_tracing_phoenix.py."""

from __future__ import annotations

import json

import pytest
from tracing_helpers import (
    HAVE_SDK,
    NO_SDK,
)

from agentkit import tracing
from agentkit.tracing import setup

needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason=NO_SDK)
WARNING = "agentkit: traces are not reaching"


def test_the_standard_variables_decide_whether_and_what_to_trace() -> None:
    assert not setup.wanted({})
    assert setup.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"})
    assert setup.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/v1/traces"})
    assert setup.wanted({"OTEL_TRACES_EXPORTER": "console"})
    assert not setup.wanted({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert not setup.wanted({"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert setup.exporters_named({"OTEL_TRACES_EXPORTER": "otlp, console"}) == ["otlp", "console"]
    for on in ("true", "True", "SPAN_ONLY", "span_and_event"):
        assert setup.capture_content({setup.CONTENT_VAR: on})
    for off in ("", "false", "NO_CONTENT", "EVENT_ONLY"):
        assert not setup.capture_content({setup.CONTENT_VAR: off})


@needs_sdk
@pytest.mark.parametrize("protocol", ["grpc", "http/json"])
def test_an_unsupported_protocol_turns_tracing_off_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    try:
        with caplog.at_level("WARNING", logger="agentkit.tracing"):
            assert tracing.configure() is False
    finally:
        tracing.shutdown()
    assert not tracing.enabled()
    assert f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported" in caplog.text


def test_captured_input_keeps_the_newest_messages_that_fit_and_says_how_many_were_cut() -> None:
    from agentkit.tracing.content import CONTENT_MAX_CHARS, input_messages

    body = "x" * 1000
    messages = [{"role": "user", "content": f"{i} {body}"} for i in range(500)]
    captured = json.loads(input_messages(messages, ()))
    assert len(json.dumps(captured)) < CONTENT_MAX_CHARS + 2000
    note, *kept = captured
    assert note["role"] == "system"
    assert note["parts"][0]["content"] == f"[{500 - len(kept)} older messages cut]"
    numbers = [int(m["parts"][0]["content"].split()[0]) for m in kept]
    assert numbers == list(range(500 - len(kept), 500)) and 40 < len(kept) < 500
    small = json.loads(input_messages(messages[:3], ()))
    assert [m["parts"][0]["content"].split()[0] for m in small] == ["0", "1", "2"]
