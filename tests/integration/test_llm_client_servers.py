"""LLMClient against FakeOpenAIServer over real HTTP: retries, hints, cancel, modes, and
provider quirks beyond the recorded cases (docs/providers.md rules cited per test)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentkit.errors import Cancelled, ContextLengthExceeded, LLMError
from agentkit.llm import LLMClient
from agentkit.llm.turns import AssistantTurn
from agentkit.settings import Settings
from agentkit.testing import ErrorReply, FakeOpenAIServer, RawChunks, RawResponse, Reply

USER = [{"role": "user", "content": "Please help."}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    for name in ("read_file", "get_weather", "search")
]
RATE_LIMIT = {
    "error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
}


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "test-model",
        "base_url": server.base_url,
        "api_key": "test-key",
        "max_retries": 3,
        "retry_base_delay": 0.001,
        "retry_max_delay": 2.0,
    }
    values.update(overrides)
    return Settings(**values)


class Run:
    """A server with a script, a client on it, and what the callbacks saw."""

    def __init__(self, replies: list[Any], **overrides: Any) -> None:
        self.server = FakeOpenAIServer(replies)
        self.overrides = overrides
        self.retries: list[tuple[str, int, float]] = []
        self.texts: list[str] = []

    def __enter__(self) -> Run:
        self.server.start()
        self.client = LLMClient(settings_for(self.server, **self.overrides))
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.stop()

    def complete(self, tools: list[dict[str, Any]] | None = TOOLS, **kw: Any) -> AssistantTurn:
        return self.client.complete(
            kw.pop("messages", USER),
            tools,
            on_text=self.texts.append,
            on_retry=lambda e, n, d: self.retries.append((e.kind, n, d)),
            **kw,
        )


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
        **extra,
    }


def call_delta(
    index: int | None = 0, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"function": {}}
    if index is not None:
        entry["index"] = index
    if id is not None:
        entry["id"] = id
    if name is not None:
        entry["function"]["name"] = name
    if args is not None:
        entry["function"]["arguments"] = args
    return {"tool_calls": [entry]}


DONE = {"__sse__": "done"}
HERMES_CALL = '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'


def whole(finish: str, **message: Any) -> dict[str, Any]:
    """A non-streamed response body with one choice."""
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}
    return {"choices": [choice]}


def wire_call(id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- retries and hints (E2, E3) ---------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "message", "delay"),
    [
        ({"retry-after": "0.2"}, "Rate limit reached", 0.2),
        ({"retry-after-ms": "150"}, "Rate limit reached", 0.15),
        (
            {"x-ratelimit-reset-requests": "250ms", "x-ratelimit-remaining-requests": "0"},
            "Slow down",
            0.25,
        ),
        ({}, "Rate limit reached. Please try again in 120ms.", 0.12),
    ],
)
def test_rate_limit_hint_is_honoured(headers: dict[str, str], message: str, delay: float) -> None:
    body = {"error": {"message": message, "type": "requests", "code": "rate_limit_exceeded"}}
    with Run([ErrorReply(429, body, headers), "fine"]) as run:
        turn = run.complete()
    assert turn.content == "fine"
    assert len(run.server.requests) == 2
    assert run.retries == [("rate_limit", 1, pytest.approx(delay))]


def test_retry_after_http_date_is_honoured() -> None:
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 1))
    with Run([ErrorReply(503, None, {"retry-after": when}), "ok"]) as run:
        assert run.complete().content == "ok"
    ((kind, attempt, delay),) = run.retries
    assert kind == "overloaded" and attempt == 1 and 0 <= delay <= 2


def test_retry_after_above_the_cap_fails_fast() -> None:
    with Run(
        [ErrorReply(429, RATE_LIMIT, {"retry-after": "86400"}), "never"], retry_max_delay=5
    ) as run:
        started = time.monotonic()
        with pytest.raises(LLMError) as info:
            run.complete()
        assert time.monotonic() - started < 10
    assert info.value.kind == "rate_limit" and info.value.retryable
    assert info.value.retry_after == 86400
    assert len(run.server.requests) == 1 and run.retries == []


def test_quota_is_not_retried() -> None:
    body = {"error": {"message": "余额不足", "code": "1113"}}  # Zhipu: 429 meaning billing
    with Run([ErrorReply(429, body), "never"]) as run, pytest.raises(LLMError) as info:
        run.complete()
    assert info.value.kind == "quota_exhausted" and not info.value.retryable
    assert info.value.status == 429
    assert len(run.server.requests) == 1


def test_retries_stop_after_max_retries_with_backoff() -> None:
    run = Run(
        [ErrorReply(500)] * 5,
        max_retries=2,
        retry_base_delay=0.01,
        retry_max_delay=0.02,
        retry_total_seconds=0,
    )
    with run, pytest.raises(LLMError) as info:
        run.complete()
    assert info.value.kind == "server_error" and info.value.status == 500
    assert "HTTP 500" in info.value.one_line()
    assert len(run.server.requests) == 3
    assert [r[1] for r in run.retries] == [1, 2]
    assert all(0 <= r[2] <= 0.02 for r in run.retries)  # full jitter under the cap


def test_connection_drop_mid_stream_is_retried_then_succeeds() -> None:
    first = Reply(content="This partial answer will be replaced", disconnect_after=3)
    with Run([first, "Complete answer."]) as run:
        turn = run.complete()
    assert turn.content == "Complete answer."
    assert run.retries[0][:2] == ("connection", 1)
    # E6: the UI saw the partial text, then the retry signal, then the new text.
    assert "".join(run.texts).endswith("Complete answer.")
    assert "".join(run.texts).startswith("This partial")


def test_server_gone_is_a_connection_error() -> None:
    server = FakeOpenAIServer(["x"]).start()
    settings = settings_for(server, max_retries=1)
    server.stop()
    with LLMClient(settings) as client, pytest.raises(LLMError) as info:
        client.complete(USER, None)
    assert info.value.kind == "connection" and info.value.retryable


def test_slow_server_times_out() -> None:
    run = Run([Reply(content="late", latency=3)], request_timeout=0.3, max_retries=0)
    with run, pytest.raises(LLMError) as info:
        run.complete()
    assert info.value.kind == "timeout" and info.value.retryable


def test_in_band_error_event_is_retried() -> None:
    broken = RawChunks(
        [chunk({"content": "Hel"}), {"error": {"message": "upstream died", "type": "server_error"}}]
    )
    with Run([broken, "Hello"]) as run:
        assert run.complete().content == "Hello"
    assert run.retries[0][0] == "server_error"


def test_html_error_page_is_a_retryable_server_error() -> None:
    page = "<html><head><title>502 Bad Gateway</title></head><body><h1>nginx</h1></body></html>"
    run = Run(
        [ErrorReply(502, {"__raw_body__": page}, {"content-type": "text/html"})], max_retries=0
    )
    with run, pytest.raises(LLMError) as info:
        run.complete()
    assert info.value.kind == "server_error" and info.value.retryable
    assert "502 Bad Gateway" in info.value.message and "<" not in info.value.message


def test_max_tokens_refused_switches_to_max_completion_tokens() -> None:
    refusal = {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
    with Run([ErrorReply(400, refusal), "ok", "again"], max_output_tokens=100) as run:
        assert run.complete().content == "ok"
        assert run.complete().content == "again"  # remembered for the session
    first, second, third = run.server.requests
    assert first["max_tokens"] == 100 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 100 and "max_tokens" not in second
    assert third["max_completion_tokens"] == 100


def test_mid_conversation_system_message_refused_is_resent_as_user_for_the_session() -> None:
    refusal = {"error": {"message": "System message must be at the beginning."}}

    def handler(request: dict[str, Any]) -> Any:
        if "system" in [m["role"] for m in request["messages"][1:]]:
            return ErrorReply(400, refusal)
        return "ok"

    messages = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "NOTICE"},
    ]
    with FakeOpenAIServer(handler) as server, LLMClient(settings_for(server)) as client:
        assert client.complete(messages, None).content == "ok"
        assert client.shape.allow_mid_system is False
        assert client.complete(messages, None).content == "ok"  # remembered: one request
        sent = [r["messages"] for r in server.requests]
    assert len(sent) == 3
    assert sent[0] == messages
    assert sent[1] == sent[2] == [*messages[:2], {"role": "user", "content": "NOTICE"}]
    assert messages[2]["role"] == "system"  # the caller's list is left as it was


def test_mid_conversation_system_messages_off_by_setting() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "system", "content": "N"}]
    with Run(["ok"], system_role_after_start=False) as run:
        run.client.complete(messages, None)
    assert run.server.requests[0]["messages"][1] == {"role": "user", "content": "N"}


def test_other_refusals_are_not_mistaken_for_the_system_role() -> None:
    bad = {"error": {"message": "Invalid tool schema", "type": "invalid_request_error"}}
    with Run([ErrorReply(400, bad), "never"]) as run, pytest.raises(LLMError) as info:
        run.complete()
    assert info.value.kind == "invalid_request"
    assert len(run.server.requests) == 1


# -- empty replies (F4) -----------------------------------------------------------


def test_empty_streamed_reply_with_tools_is_retried_without_streaming() -> None:
    with Run(["", "", "Now with text."]) as run:
        turn = run.complete()
    assert turn.content == "Now with text."
    streams = [bool(r.get("stream")) for r in run.server.requests]
    assert streams == [True, True, False]
    assert [r[:2] for r in run.retries] == [("empty_response", 1), ("empty_response", 2)]


def test_empty_reply_every_time_becomes_an_empty_answer() -> None:
    # Issue 6: llama.cpp's server answered streamed tool requests with nothing; after
    # the retries the empty turn is handed on (the loop decides), never a crash.
    with Run(["", "", "", "unused"]) as run:
        turn = run.complete()
    assert turn.content is None and turn.tool_calls == []
    assert any("empty" in w for w in turn.warnings)
    assert len(run.server.requests) == 3


def test_empty_reply_is_not_retried_when_retries_are_off() -> None:
    with Run(["", "unused"], max_retries=0) as run:
        turn = run.complete()
    assert turn.content is None and len(run.server.requests) == 1


def test_retry_numbers_count_every_retry_of_a_call() -> None:
    with Run([ErrorReply(503), "", "", "text"]) as run:
        assert run.complete().content == "text"
    assert [r[:2] for r in run.retries] == [
        ("overloaded", 1),
        ("empty_response", 2),
        ("empty_response", 3),
    ]


def test_empty_reply_without_tools_is_returned() -> None:
    with Run([""]) as run:
        turn = run.complete(tools=None)
    assert turn.content is None and turn.finish_reason == "stop"
    assert len(run.server.requests) == 1


# -- cancel -----------------------------------------------------------------------


def test_cancel_before_the_request_sends_nothing() -> None:
    cancel = threading.Event()
    cancel.set()
    with Run(["x"]) as run, pytest.raises(Cancelled):
        run.complete(cancel=cancel)
    assert run.server.requests == []


def test_cancel_while_streaming() -> None:
    cancel = threading.Event()
    slow = Reply(content="word " * 40, chunk_delay=0.2)
    with Run([slow]) as run:
        run.client.settings.stream = True
        started = time.monotonic()
        with pytest.raises(Cancelled):
            run.client.complete(USER, None, cancel=cancel, on_text=lambda _t: cancel.set())
        assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "slow",
    [Reply(content="late", latency=30), Reply(content="one two three four", chunk_delay=30)],
    ids=["waiting-for-headers", "stalled-stream"],
)
def test_cancel_aborts_a_blocked_read(slow: Reply) -> None:
    cancel = threading.Event()
    with Run([slow, "next"]) as run:
        timer = threading.Timer(0.3, cancel.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            run.complete(cancel=cancel)
        assert time.monotonic() - started < 10  # not the server's 30 s
        timer.join()
        assert len(run.server.requests) == 1 and run.retries == []
        # The client recovers: the next request opens a fresh connection.
        assert run.complete(cancel=threading.Event()).content == "next"


def test_cancel_watchdog_thread_ends_when_idle() -> None:
    with Run(["x"]) as run:
        run.complete(cancel=threading.Event())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        t.name == "agentkit-cancel-watchdog" for t in threading.enumerate()
    ):
        time.sleep(0.05)
    assert not any(t.name == "agentkit-cancel-watchdog" for t in threading.enumerate())


def test_cancel_while_waiting_to_retry() -> None:
    cancel = threading.Event()
    with Run([ErrorReply(503), "never"], retry_base_delay=30, retry_max_delay=30) as run:
        started = time.monotonic()
        with pytest.raises(Cancelled):
            run.client.complete(USER, None, cancel=cancel, on_retry=lambda *a: cancel.set())
        assert time.monotonic() - started < 10
    assert len(run.server.requests) == 1


# -- modes and usage ----------------------------------------------------------------


def test_non_stream_mode() -> None:
    reply = {
        "content": "Reading it.",
        "reasoning": "The user wants a file.",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}, "id": "call_X"}],
    }
    with Run([reply], stream=False, temperature=0.2, max_output_tokens=50) as run:
        turn = run.complete()
    sent = run.server.requests[0]
    assert "stream" not in sent and "stream_options" not in sent
    assert sent["temperature"] == 0.2 and sent["max_tokens"] == 50 and sent["tools"] == TOOLS
    assert turn.content == "Reading it." and run.texts == ["Reading it."]
    assert turn.reasoning == "The user wants a file."
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_X", "read_file", {"path": "a.txt"})
    ]
    assert turn.finish_reason == "tool_calls" and not turn.usage.estimated
    assert turn.message()["tool_calls"][0]["function"]["arguments"] == '{"path":"a.txt"}'


def test_stream_requests_usage_and_sends_the_key() -> None:
    with Run(["hi"]) as run:
        turn = run.complete()
    sent, record = run.server.requests[0], run.server.records[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert record.headers["authorization"] == "Bearer test-key"
    assert turn.usage.prompt_tokens > 0 and not turn.usage.estimated


@pytest.mark.parametrize("stream", [True, False])
def test_usage_is_estimated_when_absent(stream: bool) -> None:
    if stream:
        reply: Any = RawChunks(
            [chunk({"role": "assistant", "content": "Hello there"}, None), chunk({}, "stop"), DONE]
        )
    else:
        reply = RawResponse(whole("stop", content="Hello there"))
    with Run([reply], stream=stream) as run:
        turn = run.complete(messages=[{"role": "user", "content": "Say hello " * 50}])
    assert turn.content == "Hello there"
    assert turn.usage.estimated
    assert turn.usage.prompt_tokens > 50 and 1 <= turn.usage.completion_tokens <= 5
    assert turn.usage.total_tokens == turn.usage.prompt_tokens + turn.usage.completion_tokens


# -- quirks beyond the recorded cases -------------------------------------------------


def _quirks() -> Iterator[tuple[str, Any, dict[str, Any]]]:
    # (id, reply, expected: content / calls [(name, args) or (name, None, error-prefix)] / finish / ...)
    yield (
        "qwen-null-ids-on-continuations",
        RawChunks(
            [
                chunk(call_delta(0, "call_q1", "read_file", "")),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": None,
                                "type": None,
                                "function": {"name": None, "arguments": '{"path":'},
                            }
                        ]
                    }
                ),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "",
                                "function": {"name": "", "arguments": ' "a.md"}'},
                            }
                        ]
                    }
                ),
                chunk({}, "tool_calls"),
                DONE,
            ]
        ),
        {"calls": [("call_q1", "read_file", {"path": "a.md"})]},
    )
    yield (
        "ollama-parallel-same-index-no-ids",
        RawChunks(
            [
                chunk(call_delta(0, None, "get_weather", '{"city": "Paris"}')),
                chunk(call_delta(0, None, "get_weather", '{"city": "Rome"}')),
                chunk({}, "tool_calls"),
                DONE,
            ]
        ),
        {
            "calls": [
                (None, "get_weather", {"city": "Paris"}),
                (None, "get_weather", {"city": "Rome"}),
            ]
        },
    )
    yield (
        "lmstudio-empty-name-on-continuations",
        RawChunks(
            [
                chunk(call_delta(0, "call_l1", "search", "")),
                chunk(call_delta(0, None, "", '{"query":')),
                chunk(call_delta(0, None, "", '"x"}')),
                chunk({}, "tool_calls"),
                DONE,
            ]
        ),
        {"calls": [("call_l1", "search", {"query": "x"})]},
    )
    yield (
        "gemini-stream-stop-with-calls-and-signature",
        RawChunks(
            [
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "function-call-1",
                                "type": "function",
                                "function": {"name": "search", "arguments": '{"query":"q"}'},
                                "extra_content": {"google": {"thought_signature": "sig=="}},
                            }
                        ]
                    }
                ),
                chunk({}, "stop"),
                DONE,
            ]
        ),
        {"calls": [("function-call-1", "search", {"query": "q"})], "signature": "sig=="},
    )
    yield (
        "invalid-json-arguments-become-a-call-error",
        RawChunks(
            [
                chunk(call_delta(0, "call_b1", "search", '{"query": "a",}')),
                chunk({}, "tool_calls"),
                DONE,
            ]
        ),
        {"calls": [("call_b1", "search", None, "invalid JSON")]},
    )
    yield (
        "double-encoded-arguments",
        RawResponse(
            whole(
                "tool_calls",
                tool_calls=[wire_call("call_d", "search", json.dumps('{"query": "x"}'))],
            )
        ),
        {
            "calls": [("call_d", "search", {"query": "x"})],
            "warning": "tool call call_d (search): decoded double-encoded",
        },
    )
    yield (
        "concatenated-objects-split-into-calls",
        RawChunks(
            [
                chunk(call_delta(0, "call_c", "get_weather", '{"city":"A"}{"city":"B"}')),
                chunk({}, "tool_calls"),
                DONE,
            ]
        ),
        {
            "calls": [
                ("call_c", "get_weather", {"city": "A"}),
                (None, "get_weather", {"city": "B"}),
            ],
            "warning": "tool call call_c",
        },
    )
    yield (
        "vllm-reasoning-field",
        RawChunks(
            [
                chunk({"reasoning": "Think. "}),
                chunk({"reasoning": "Done."}),
                chunk({"content": "Answer"}),
                chunk({}, "stop"),
                DONE,
            ]
        ),
        {"content": "Answer", "reasoning": "Think. Done."},
    )
    yield (
        "azure-prompt-filter-chunk-first",
        RawChunks(
            [
                {
                    "id": "",
                    "object": "",
                    "model": "",
                    "choices": [],
                    "prompt_filter_results": [{"prompt_index": 0}],
                },
                chunk({"role": "assistant", "content": "Fine."}),
                chunk({}, "stop"),
                DONE,
            ]
        ),
        {"content": "Fine."},
    )
    yield (
        "zhipu-sensitive-finish",
        RawChunks([chunk({"content": "Some"}), chunk({}, "sensitive"), DONE]),
        {"content": "Some", "finish": "content_filter"},
    )
    yield (
        "length-without-tools",
        RawChunks([chunk({"content": "A long"}), chunk({}, "length"), DONE]),
        {"content": "A long", "finish": "length"},
    )
    yield (
        "refusal",
        RawChunks([chunk({"refusal": "I can't help with that."}), chunk({}, "stop"), DONE]),
        {"refusal": "I can't help with that."},
    )
    yield (
        "deepseek-blank-lines-before-body",
        RawResponse({"__raw_body__": "\n\n\n" + json.dumps(whole("stop", content="Hi"))}),
        {"content": "Hi"},
    )
    yield (
        "data-lines-without-blank-separators",
        RawChunks(
            [
                "data: " + json.dumps(chunk({"content": "a"})) + "\n",
                "data: " + json.dumps(chunk({"content": "b"}, "stop")) + "\n\n",
                DONE,
            ]
        ),
        {"content": "ab"},
    )
    yield (
        "hermes-tool-call-as-text-not-read-by-default",
        RawResponse(whole("stop", content=HERMES_CALL)),
        {"content": HERMES_CALL},
    )


QUIRKS = list(_quirks())


@pytest.mark.parametrize(("reply", "expected"), [q[1:] for q in QUIRKS], ids=[q[0] for q in QUIRKS])
def test_quirk(reply: Any, expected: dict[str, Any]) -> None:
    with Run([reply], stream=isinstance(reply, RawChunks)) as run:
        turn = run.complete()
    assert len(run.server.requests) == 1
    assert turn.content == expected.get("content")
    assert turn.reasoning == expected.get("reasoning")
    calls = expected.get("calls", [])
    assert turn.finish_reason == expected.get("finish", "tool_calls" if calls else "stop")
    assert len(turn.tool_calls) == len(calls)
    for got, want in zip(turn.tool_calls, calls, strict=True):
        assert got.name == want[1]
        assert got.id == want[0] if want[0] else got.id.startswith("call_")
        assert got.arguments == want[2]
        if len(want) > 3:
            assert got.error is not None and got.error.startswith(want[3])
            assert got.wire()["function"]["arguments"] == "{}"  # T5: never replay bad JSON
        else:
            assert got.error is None
    if "signature" in expected:
        wire = turn.message()["tool_calls"][0]
        assert wire["extra_content"]["google"]["thought_signature"] == expected["signature"]
    if "warning" in expected:
        assert any(w.startswith(expected["warning"]) for w in turn.warnings)
    else:
        assert turn.warnings == []
    if "refusal" in expected:
        assert turn.extra["refusal"] == expected["refusal"]


def test_text_tool_calls_read_when_enabled() -> None:
    content = 'Let me look.\n<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
    with FakeOpenAIServer([content, content]) as server:
        settings = settings_for(server, stream=False)
        with LLMClient(settings, text_tool_call_fallback=True) as client:
            turn = client.complete(USER, TOOLS)
            unknown_tool = client.complete(USER, TOOLS[:1])
    assert turn.content == "Let me look." and turn.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("search", {"query": "x"})]
    assert unknown_tool.tool_calls == [] and unknown_tool.content == content


def test_truncated_tool_call_is_retried_with_more_room_then_answered_as_error() -> None:
    cut = RawChunks(
        [
            chunk(call_delta(0, "call_t", "search", '{"query": "a very long')),
            chunk({}, "length"),
            DONE,
        ]
    )
    with Run([cut, cut, "unused"], max_output_tokens=64) as run:
        turn = run.complete()
    assert [r.get("max_tokens") for r in run.server.requests] == [64, 128]
    # Issue 2: the model gets a tool error saying so; the call is never run.
    [call] = turn.tool_calls
    assert call.name == "search" and call.arguments is None
    assert "cut off" in (call.error or "")
    assert turn.finish_reason == "length"


def test_content_filter_drops_tool_calls() -> None:
    filtered = RawChunks(
        [
            chunk(call_delta(0, "call_f", "search", '{"query": "x"}')),
            chunk({}, "content_filter"),
            DONE,
        ]
    )
    with Run([filtered]) as run:
        turn = run.complete()
    assert turn.finish_reason == "content_filter" and turn.tool_calls == []
    assert any("dropped 1 tool call" in w for w in turn.warnings)


@pytest.mark.parametrize(
    ("status", "body", "limit", "requested"),
    [
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "the request exceeds the available context size",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            },
            4096,
            5000,
        ),
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
            200000,
            210000,
        ),
        (
            400,
            [
                {
                    "error": {
                        "code": 400,
                        "status": "INVALID_ARGUMENT",
                        "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                    }
                }
            ],
            1048576,
            1200000,
        ),
    ],
)
def test_context_overflow_shapes(status: int, body: Any, limit: int, requested: int) -> None:
    with Run([ErrorReply(status, body)]) as run, pytest.raises(ContextLengthExceeded) as info:
        run.complete()
    assert (info.value.limit_tokens, info.value.requested_tokens) == (limit, requested)
    assert not info.value.retryable and len(run.server.requests) == 1


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable"),
    [
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "Failed to parse tool call arguments as JSON",
                    "type": "server_error",
                }
            },
            "invalid_request",
            False,
        ),
        (
            400,
            {
                "object": "error",
                "message": '"auto" tool choice requires --enable-auto-tool-choice',
                "type": "BadRequestError",
                "code": 400,
            },
            "invalid_request",
            False,
        ),
        (
            400,
            {
                "error": {
                    "message": "filtered",
                    "code": "content_filter",
                    "innererror": {"code": "ResponsibleAIPolicyViolation"},
                }
            },
            "content_filter",
            False,
        ),
        (
            401,
            {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
            "authentication",
            False,
        ),
        (
            404,
            {"error": {"message": "The model `x` does not exist", "code": "model_not_found"}},
            "not_found",
            False,
        ),
        (
            429,
            {"error": {"message": "Request too large for gpt-4o: Limit 30000, Requested 31538."}},
            "request_too_large",
            False,
        ),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "overloaded",
            True,
        ),
        (408, "Request Timeout", "timeout", True),
        (
            402,
            {"error": {"message": "Insufficient credits", "code": 402}},
            "quota_exhausted",
            False,
        ),
    ],
)
def test_error_classification(status: int, body: Any, kind: str, retryable: bool) -> None:
    with Run([ErrorReply(status, body)], max_retries=0) as run, pytest.raises(LLMError) as info:
        run.complete()
    assert (info.value.kind, info.value.retryable, info.value.status) == (kind, retryable, status)
    assert "\n" not in info.value.one_line()


def test_server_reply_format_wins_over_the_request() -> None:
    sse = RawChunks([chunk({"content": "streamed"}), chunk({}, "stop"), DONE])
    body = RawResponse(whole("stop", content="whole"))
    with Run([sse], stream=False) as run:
        assert run.complete().content == "streamed"
    with Run([body], stream=True) as run:
        assert run.complete().content == "whole"
    assert run.texts == ["whole"]


def test_a_server_never_reached_gets_one_retry_only() -> None:
    import socket

    from agentkit.llm import LLMClient
    from agentkit.settings import Settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = Settings(
        model="m",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="k",
        max_retries=4,
        retry_base_delay=0.01,
    )
    retries: list[str] = []
    with LLMClient(settings) as client, pytest.raises(LLMError) as info:
        client.complete(
            [{"role": "user", "content": "hi"}],
            None,
            on_retry=lambda e, n, d: retries.append(e.kind),
        )
    assert info.value.kind == "connection"
    assert retries == ["connection"]


def test_a_cancel_set_before_the_connection_is_made_still_aborts_it() -> None:
    """The watchdog aborts a cancelled request at every poll until it ends: a socket the
    request connects after its first abort (which found none) is shut down too, so its
    read ends at once rather than after the server's whole delay."""
    import socket

    from agentkit.llm._cancel import WATCHDOG, SocketTracker

    tracker = SocketTracker()
    aborts: list[float] = []

    def abort() -> None:
        aborts.append(time.monotonic())
        tracker.abort()

    cancel = threading.Event()
    cancel.set()
    token = WATCHDOG.watch(cancel, abort)
    mine, server_end = socket.socketpair()
    try:
        deadline = time.monotonic() + 30
        while not aborts and time.monotonic() < deadline:
            time.sleep(0.01)
        assert aborts, "the watchdog never aborted"
        tracker._sockets.add(mine)  # connected after the first abort
        mine.settimeout(30)
        assert mine.recv(1) == b""  # shut down: the blocked read ends
    finally:
        WATCHDOG.unwatch(token)
        mine.close()
        server_end.close()
