"""FakeOpenAIServer itself: shapes the typed openai client accepts, streaming details,
recording, exact errors, latency, disconnects, other processes, clean shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from agentkit.testing import (
    ErrorReply,
    FakeOpenAIServer,
    RawChunks,
    RawResponse,
    Reply,
    ScriptedModel,
)

MESSAGES = [{"role": "user", "content": "Hello"}]
CALL = {"name": "read_file", "arguments": {"path": "notes/today.md", "limit": 20}, "id": "call_1"}


def sse_events(response: httpx.Response) -> list[str]:
    """The data payloads of an SSE body, in order."""
    return [line[6:] for line in response.text.split("\n") if line.startswith("data: ")]


def test_non_stream_reply_parses_with_the_typed_client() -> None:
    with FakeOpenAIServer([{"content": "Hi!", "tool_calls": [CALL]}]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        completion = client.chat.completions.create(model="fake-model", messages=MESSAGES)  # type: ignore[arg-type]
        client.close()
    choice = completion.choices[0]
    assert choice.message.content == "Hi!" and choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert call.id == "call_1" and call.function.name == "read_file"
    assert json.loads(call.function.arguments) == CALL["arguments"]
    assert completion.model == "fake-model" and completion.id.startswith("chatcmpl-")
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert (
        completion.usage.total_tokens
        == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


def test_stream_splits_text_and_arguments_and_ends_with_usage() -> None:
    reply = Reply(content="The answer is forty-two.", tool_calls=[CALL])
    with FakeOpenAIServer([reply]) as server:
        body = {
            "model": "m",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        response = httpx.post(server.base_url + "/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    texts = [d["content"] for d in deltas if d.get("content")]
    assert len(texts) > 1 and "".join(texts) == "The answer is forty-two."
    arg_parts = [d["tool_calls"][0]["function"]["arguments"] for d in deltas if "tool_calls" in d]
    assert len([p for p in arg_parts if p]) > 1  # split over several chunks, like OpenAI
    assert json.loads("".join(arg_parts)) == CALL["arguments"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_with_the_typed_client_and_no_usage_unless_asked() -> None:
    with FakeOpenAIServer(["streamed words here"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
        chunks = list(stream)
        client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed words here"
    assert all(c.usage is None for c in chunks)


def test_requests_and_headers_are_recorded() -> None:
    with FakeOpenAIServer(
        lambda request: f"you said {request['messages'][-1]['content']}"
    ) as server:
        with httpx.Client() as http:
            http.post(
                server.base_url + "/chat/completions",
                json={"model": "m", "messages": MESSAGES},
                headers={"x-test": "1", "authorization": "Bearer abc"},
            )
            http.get(server.base_url + "/models")
        assert server.requests == [{"model": "m", "messages": MESSAGES}]
        assert [(r.method, r.path) for r in server.records] == [
            ("POST", "/v1/chat/completions"),
            ("GET", "/v1/models"),
        ]
        assert server.records[0].headers["x-test"] == "1"
        assert server.records[0].headers["authorization"] == "Bearer abc"
        server.clear()
        assert server.requests == [] and server.records == []


def test_models_listing() -> None:
    with FakeOpenAIServer(["x"], models=["alpha", "beta"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        ids = [m.id for m in client.models.list()]
        client.close()
    assert ids == ["alpha", "beta"]


def test_error_reply_with_exact_body_and_headers() -> None:
    body = {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}
    replies = [
        ErrorReply(429, body, {"retry-after": "7", "x-request-id": "req_1"}),
        ErrorReply(502, {"__raw_body__": "<html><title>Bad Gateway</title></html>"}),
        RawResponse([{"error": {"code": 400}}], status=400),
    ]
    with FakeOpenAIServer(replies) as server, httpx.Client() as http:
        url = server.base_url + "/chat/completions"
        first = http.post(url, json={"messages": []})
        second = http.post(url, json={"messages": []})
        third = http.post(url, json={"messages": []})
    assert first.status_code == 429 and first.json() == body
    assert first.headers["retry-after"] == "7" and first.headers["x-request-id"] == "req_1"
    assert second.status_code == 502 and second.text == "<html><title>Bad Gateway</title></html>"
    assert second.headers["content-type"] == "text/html"
    assert third.json() == [{"error": {"code": 400}}]


def test_raw_chunks_and_pseudo_events_are_sent_verbatim() -> None:
    chunks: list[Any] = [
        {"__sse__": "comment", "text": ": OPENROUTER PROCESSING"},
        {"id": "x", "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
        {"__sse__": "raw", "line": 'error: {"code":400}'},
        {"__sse__": "done"},
    ]
    with FakeOpenAIServer([RawChunks(chunks, headers={"x-generation-id": "gen-1"})]) as server:
        response = httpx.post(server.base_url + "/chat/completions", json={"stream": True})
    assert response.headers["x-generation-id"] == "gen-1"
    assert response.text == (
        ": OPENROUTER PROCESSING\n\n"
        'data: {"id":"x","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
        'error: {"code":400}\n\n'
        "data: [DONE]\n\n"
    )


@pytest.mark.parametrize(
    "reply",
    [
        Reply(content="one two three four five six", disconnect_after=2),
        RawChunks(
            [{"choices": [{"index": 0, "delta": {"content": "a"}}]}, {"__sse__": "disconnect"}]
        ),
    ],
)
def test_disconnect_mid_stream(reply: Any) -> None:
    received: list[bytes] = []
    with FakeOpenAIServer([reply, "after"]) as server, httpx.Client() as http:
        url = server.base_url + "/chat/completions"
        with (
            pytest.raises(httpx.RemoteProtocolError),
            http.stream("POST", url, json={"stream": True}) as response,
        ):
            for data in response.iter_bytes():
                received.append(data)
        # The next request gets a fresh connection and a normal reply.
        assert http.post(url, json={}).json()["choices"][0]["message"]["content"] == "after"
    body = b"".join(received)
    assert body.startswith(b"data: {") and b"[DONE]" not in body


def test_latency_delays_the_reply() -> None:
    with (
        FakeOpenAIServer([Reply(content="late", latency=2.0), "prompt"]) as server,
        httpx.Client() as http,
    ):
        url = server.base_url + "/chat/completions"
        with pytest.raises(httpx.ReadTimeout):
            http.post(url, json={}, timeout=0.2)
        assert http.post(url, json={}).json()["choices"][0]["message"]["content"] == "prompt"


def test_handler_errors_and_exhausted_script_answer_500() -> None:
    script = ScriptedModel(["only one"])
    with FakeOpenAIServer(script) as server, httpx.Client() as http:
        url = server.base_url + "/chat/completions"
        assert http.post(url, json={}).status_code == 200
        response = http.post(url, json={})
        bad = http.post(url + "x", json={})
        not_json = http.post(url, content=b"[1, 2]")
    assert response.status_code == 500 and response.headers["retry-after"] == "3600"
    assert "all 1 scripted replies were used" in response.json()["error"]["message"]
    assert [type(e).__name__ for e in server.errors] == ["ScriptExhausted"]
    assert script.remaining == 0
    assert bad.status_code == 404 and not_json.status_code == 400


def test_reply_dict_with_unknown_keys_is_a_handler_error() -> None:
    with FakeOpenAIServer([{"contnet": "typo"}]) as server:
        response = httpx.post(server.base_url + "/chat/completions", json={})
    assert response.status_code == 500 and "contnet" in response.json()["error"]["message"]
    assert isinstance(server.errors[0], TypeError)


def test_scripted_items_may_be_callables() -> None:
    script = ScriptedModel([lambda request: f"{len(request['messages'])} messages", "fixed"])
    with FakeOpenAIServer(script) as server, httpx.Client() as http:
        url = server.base_url + "/chat/completions"
        first = http.post(url, json={"messages": MESSAGES * 3}).json()
        second = http.post(url, json={"messages": []}).json()
    assert first["choices"][0]["message"]["content"] == "3 messages"
    assert second["choices"][0]["message"]["content"] == "fixed"


def test_concurrent_clients_and_keep_alive() -> None:
    with FakeOpenAIServer(lambda request: request["messages"][0]["content"].upper()) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)

        def ask(i: int) -> str:
            completion = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"q{i}"}]
            )
            return str(completion.choices[0].message.content)

        with ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(ask, range(20)))
        client.close()
    assert answers == [f"Q{i}" for i in range(20)]
    assert len(server.requests) == 20


def test_used_from_another_process() -> None:
    code = (
        "import sys, openai\n"
        "c = openai.OpenAI(base_url=sys.argv[1], api_key='child-key', max_retries=0)\n"
        "r = c.chat.completions.create(model='m', messages=[{'role': 'user', 'content': 'from child'}])\n"
        "print(r.choices[0].message.content)\n"
    )
    seen: list[str] = []

    def handler(request: dict[str, Any]) -> str:
        seen.append(request["messages"][0]["content"])  # runs here, in the server's process
        return "hello child"

    with FakeOpenAIServer(handler) as server:
        result = subprocess.run(
            [sys.executable, "-c", code, server.base_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert server.records[0].headers["authorization"] == "Bearer child-key"
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello child" and seen == ["from child"]


def test_stop_closes_kept_alive_connections_and_threads() -> None:
    before = set(threading.enumerate())
    server = FakeOpenAIServer(["a", "b"]).start()
    url = server.base_url + "/chat/completions"
    http = httpx.Client()
    assert http.post(url, json={}).status_code == 200  # the connection stays open (keep-alive)
    server.stop()
    server.stop()  # idempotent
    assert set(threading.enumerate()) - before == set()
    with pytest.raises(httpx.TransportError):
        http.post(url, json={})
    http.close()
    with pytest.raises(RuntimeError):
        _ = server.base_url
