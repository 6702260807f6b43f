"""Known secrets are scrubbed out of error texts where the error is made
(agentkit.process.redact): LLMError, ToolError, MCP failures, the model server's
reply cut to an excerpt, and the exception event a span records (the real OTel SDK
with its in-memory exporter). The end-to-end surfaces (stderr, ``run --json``, the
conversation file, a sub-agent's record, an OTLP export) are in
tests/integration/test_key_echo.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agentkit.errors import ContextLengthExceeded, LLMError, OutsideTextError, ToolError
from agentkit.llm._errors import classify
from agentkit.mcp.client import MCPFailure
from agentkit.process.redact import MIN_SECRET_CHARS, known_secrets, remember, scrub_error

# Assembled, so that no key-like literal sits in the source; not of a known key shape
# (no "sk-"), so only the known-secret rule can find it; "/" and "+" differ URL-encoded.
KEY = "gw" + "/7Hq2+Lp9Xz4Rv8Nm3Tb"
MASK = "[REDACTED]"


@pytest.fixture(autouse=True)
def known_key() -> None:
    remember(KEY)


def basic(secret: str, user: str = "user") -> str:
    return base64.b64encode(f"{user}:{secret}".encode()).decode()


def test_an_llm_error_made_with_the_key_never_holds_it() -> None:
    text = (
        f"Incorrect API key provided: Bearer {KEY}; as sent: {quote(KEY, safe='')}; "
        f"Authorization: Basic {basic(KEY)}"
    )
    error = LLMError("authentication", text, status=401)
    for shown in (error.message, str(error), error.one_line(), repr(error), *error.args):
        assert KEY not in shown and quote(KEY, safe="") not in shown
        assert basic(KEY) not in shown
    assert error.message.count(MASK) == 3
    assert error.message.startswith("Incorrect API key provided: Bearer [REDACTED];")
    # A message set later (the retry plan appends why it gave up) is scrubbed too.
    error.message = f"{KEY} (gave up after 3 retries)"
    assert str(error) == error.message == "[REDACTED] (gave up after 3 retries)"
    overflow = ContextLengthExceeded(f"prompt is too long for {KEY}", status=400)
    assert KEY not in str(overflow) and MASK in str(overflow)


def test_short_placeholder_keys_mask_nothing() -> None:
    remember("k", "x", "abc")
    text = "the key k was not accepted: check x and abc (kkk)"
    assert scrub_error(text) == text
    assert str(LLMError("authentication", text)) == text
    assert all(len(s) >= MIN_SECRET_CHARS for s in known_secrets(["k", "short"]))


def test_environment_secrets_otlp_headers_and_dropped_names_are_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token, db, otlp, dropped = (
        "tok" + "-4f8a2c9e1b7d",
        "pa" + "ss-9271-hunter",
        "Zm9v" + "YmFyYmF6cXV4",
        "plain" + "-value-31415",
    )
    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    monkeypatch.setenv("DB_PASSWORD", db)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-team=a,authorization=Bearer%20{otlp}")
    monkeypatch.setenv("UNUSUAL_NAME", dropped)
    text = f"failed: {token} {db} {otlp} {dropped}"
    assert scrub_error(text) == f"failed: {MASK} {MASK} {MASK} {dropped}"
    remember(drop=["UNUSUAL_*"])  # Settings.command_env_drop, as LLMClient passes it
    assert scrub_error(text) == f"failed: {MASK} {MASK} {MASK} {MASK}"
    assert scrub_error("x-team=a") == "x-team=a"  # a header value under 8 characters


def test_tool_and_mcp_errors_are_scrubbed() -> None:
    error = ToolError("http_error", f"https://search.example: 401 invalid key {KEY}")
    assert KEY not in error.message and KEY not in str(error) and MASK in error.message
    failure = MCPFailure(f"MCP server 'docs': token {quote(KEY, safe='')} refused")
    assert str(failure) == f"MCP server 'docs': token {MASK} refused"


@pytest.mark.parametrize(
    "make",
    [
        lambda text: LLMError("authentication", text),
        lambda text: ToolError("http_error", text),
        MCPFailure,
        type("ThirdError", (OutsideTextError,), {}),  # a new error from outside text
    ],
)
def test_every_error_built_from_outside_text_is_scrubbed_now_and_later(make: Any) -> None:
    error = make(f"echoed {KEY}")
    assert isinstance(error, OutsideTextError)
    for shown in (error.message, str(error), repr(error), *error.args):
        assert KEY not in shown
    assert error.message == f"echoed {MASK}"
    error.message = f"{KEY} (gave up)"  # a message set later is scrubbed too
    assert str(error) == error.message == f"{MASK} (gave up)" and error.args == (error.message,)


def test_a_key_cut_in_half_by_the_excerpt_does_not_leak() -> None:
    # A plain-text body is cut to 500 characters: scrubbing after the cut would miss
    # the half key left at its end.
    text = "x" * (495 - len("key ")) + "key " + KEY + " and more"
    error = classify(401, None, text)
    assert KEY[:5] not in error.message and error.kind == "authentication"
    raw = {"error": {"message": "refused", "metadata": {"raw": "y" * 190 + KEY}}}
    assert KEY[:5] not in classify(401, raw).message


def test_unknown_keys_of_a_known_shape_and_url_passwords_are_scrubbed() -> None:
    other = "sk-" + "ant-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    text = f"upstream said {other} at https://bob:pa55w0rd@gw.example/v1"
    assert scrub_error(text) == f"upstream said {MASK} at https://bob:{MASK}@gw.example/v1"
    plain = "max_tokens=5000 is too large; request id req_8f2Kx9QmZ71bL0aVn3YpT6cW4rD5sE"
    assert scrub_error(plain) == plain  # no name or entropy guessing in error texts


def test_a_span_records_the_exception_scrubbed_message_and_stack_trace() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentkit.tracing.spans import record_exception

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    try:
        try:
            raise ValueError(f"gateway echoed {KEY}")
        except ValueError as cause:
            raise RuntimeError(f"wrapped: {basic(KEY)}") from cause
    except RuntimeError as exc:
        span = tracer.start_span("chat fake", record_exception=False)
        record_exception(span, exc, ("another-hidden-value",))
        span.end()
    (finished,) = exporter.get_finished_spans()
    (event,) = finished.events
    attributes = dict(event.attributes or {})
    assert event.name == "exception" and attributes["exception.type"] == "RuntimeError"
    dumped = json.dumps(attributes)
    assert KEY not in dumped and basic(KEY) not in dumped
    assert attributes["exception.message"] == f"wrapped: {MASK}"
    stack = str(attributes["exception.stacktrace"])
    assert "ValueError: gateway echoed [REDACTED]" in stack and "RuntimeError" in stack
    provider.shutdown()


def test_an_mcp_tool_error_result_is_scrubbed_before_it_is_cut(tmp_path: Path) -> None:
    from mcp.types import CallToolResult, TextContent

    from agentkit.mcp.tools import render_result

    echoed = "z" * 40 + f" refused token {KEY}"
    result = CallToolResult(content=[TextContent(type="text", text=echoed)], isError=True)
    rendered = render_result(result, tmp_path, "docs", max_chars=10_000)
    assert rendered.error_code == "mcp_tool_error"
    assert KEY not in rendered.output and "refused token [REDACTED]" in rendered.output
