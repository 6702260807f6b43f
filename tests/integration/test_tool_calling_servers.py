"""Tool calls on servers whose native tool calling is broken, over real HTTP.

FakeOpenAIServer plays the quirks of llama-cpp-python's server (each call in both
``tool_calls`` and the legacy ``function_call``; phantom names; HTTP 500 on
``"content": null``; tools left out of the prompt) and checks prompted tool calling
(``Settings.tool_calling``): what goes on the wire, what comes back, and that the
transcript keeps the standard shape.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from agentkit.agent import Agent
from agentkit.llm import LLMClient
from agentkit.llm._grammar import tool_call_grammar
from agentkit.llm._prompted import ANSWER_TOOL
from agentkit.settings import Settings
from agentkit.testing import ErrorReply, FakeOpenAIServer, RawChunks, RawResponse
from agentkit.tokens import count_messages

READ_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file. More details here.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"],
        },
    },
}
USER = [{"role": "user", "content": "Read notes.txt"}]


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "m",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "en",
        "max_retries": 2,
        "retry_base_delay": 0.001,
    }
    values.update(overrides)
    return Settings(**values)


def body(message: dict[str, Any], usage: dict[str, int] | None = None) -> RawResponse:
    """A non-streamed reply carrying exactly ``message``."""
    reply: dict[str, Any] = {
        "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", **message}}
        ]
    }
    if usage is not None:
        reply["usage"] = usage
    return RawResponse(reply)


def both_fields(name: str, arguments: str, legacy_name: str | None = None) -> RawResponse:
    """llama-cpp-python's shape: the call in tool_calls and again in function_call."""
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    legacy = {"name": name if legacy_name is None else legacy_name, "arguments": arguments}
    return body({"content": None, "tool_calls": [call], "function_call": legacy})


def run_agent(workspace: Path, server: FakeOpenAIServer, **overrides: Any) -> dict[str, Any]:
    settings = settings_for(server, **overrides)
    with Agent(workspace, settings, subagents=False) as agent:
        result = agent.run("Read notes.txt")
        return json.loads(Path(str(result.transcript_path)).read_text())


# -- S8: a legacy function_call beside tool_calls is the same call ----------------


@pytest.mark.parametrize("legacy_name", ["read_file", "read_file:", ""])
def test_legacy_function_call_beside_tool_calls_is_not_a_second_call(
    workspace: Path, legacy_name: str
) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    script = [both_fields("read_file", '{"path": "notes.txt"}', legacy_name), "done"]
    with FakeOpenAIServer(script) as server:
        saved = run_agent(workspace, server, stream=False)
    calls = [c for m in saved["messages"] for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["read_file"]
    assert saved["stats"]["tool_calls"] == {"read_file": 1}


def test_streamed_legacy_function_call_beside_tool_calls_is_not_a_second_call() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    call = {"index": 0, "id": "c1", "type": "function"}
    stream = RawChunks(
        [
            chunk(
                {
                    "tool_calls": [{**call, "function": {"name": "read_file", "arguments": "{}"}}],
                    "function_call": {"name": "read_file", "arguments": "{}"},
                }
            ),
            chunk({}, "tool_calls"),
            {"__sse__": "done"},
        ]
    )
    with FakeOpenAIServer([stream]) as server, LLMClient(settings_for(server)) as client:
        turn = client.complete(USER, [READ_TOOL])
    assert [c.name for c in turn.tool_calls] == ["read_file"]


def test_legacy_function_call_alone_is_still_read() -> None:
    reply = body({"content": None, "function_call": {"name": "read_file", "arguments": "{}"}})
    with (
        FakeOpenAIServer([reply]) as server,
        LLMClient(settings_for(server, stream=False)) as client,
    ):
        turn = client.complete(USER, [READ_TOOL])
    assert [(c.name, c.error) for c in turn.tool_calls] == [("read_file", None)]


@pytest.mark.parametrize("name", ["", "write_file:", "read file", "x" * 65])
def test_a_call_with_an_empty_or_malformed_name_is_a_tool_error(workspace: Path, name: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    script = [body({"content": None, "tool_calls": [call]}), "done"]
    with FakeOpenAIServer(script) as server:
        saved = run_agent(workspace, server, stream=False)
        answer = server.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and answer["tool_call_id"] == "c1"
    assert answer["content"].startswith("Error: unknown_tool")
    assert list(workspace.iterdir()) == [workspace / ".agentkit"]  # nothing ran
    assert saved["messages"][-1]["content"] == "done"


# -- content null on assistant tool-call messages ------------------------------------


def test_content_null_refused_with_500_is_sent_as_empty_string_for_the_session(
    workspace: Path,
) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    refusals: list[int] = []

    def handler(request: dict[str, Any]) -> Any:
        for m in request["messages"]:
            if m["role"] == "assistant" and m.get("tool_calls") and m.get("content") is None:
                refusals.append(len(request["messages"]))
                return ErrorReply(
                    500,
                    {"error": {"message": "messages.1.content: Input should be a valid string"}},
                )
        if request["messages"][-1]["role"] == "tool" and len(request["messages"]) < 6:
            return {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}
        if request["messages"][-1]["role"] == "tool":
            return "done"
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}

    with FakeOpenAIServer(handler) as server:
        saved = run_agent(workspace, server, retry_total_seconds=0)
    assert refusals == [4]  # refused once, then remembered for the session
    assert saved["messages"][-1]["content"] == "done"
    stored = [m for m in saved["messages"] if m.get("tool_calls")]
    assert len(stored) == 2 and all(m["content"] is None for m in stored)  # standard shape


# -- usage estimates count what was sent ------------------------------------------------


@pytest.mark.parametrize("mode", ["native", "prompted"])
def test_streamed_usage_estimate_is_within_a_quarter_of_the_server_count(mode: str) -> None:
    counted: list[int] = []

    def handler(request: dict[str, Any]) -> Any:
        counted.append(count_messages(request["messages"], request.get("tools")))
        return RawChunks(
            [
                {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
                {"__sse__": "done"},
            ]
        )

    tools = [READ_TOOL] * 1 + [
        {**READ_TOOL, "function": {**READ_TOOL["function"], "name": f"tool_{i}"}} for i in range(8)
    ]
    with (
        FakeOpenAIServer(handler) as server,
        LLMClient(settings_for(server, tool_calling=mode)) as client,
    ):
        turn = client.complete(USER, tools)
    assert turn.usage.estimated
    assert abs(turn.usage.prompt_tokens - counted[0]) <= 0.25 * counted[0]


# -- prompted tool calling ----------------------------------------------------------------


def test_prompted_mode_describes_tools_and_sends_results_as_user_messages(
    workspace: Path,
) -> None:
    (workspace / "notes.txt").write_text("the secret word is pelican\n")
    script = [
        '{"name": "read_file", "arguments": {"path": "notes.txt"}}',
        json.dumps({"name": ANSWER_TOOL, "arguments": {"text": "pelican"}}),
    ]
    with FakeOpenAIServer(script) as server:
        saved = run_agent(workspace, server, tool_calling="prompted", stream=False)
        first, second = server.requests
    assert "tools" not in first and "tool_choice" not in first
    system = first["messages"][0]
    assert system["role"] == "system" and "- read_file(path: string" in system["content"]
    assert "grammar" not in first  # auto: the standard json_schema format first
    assert first["response_format"]["type"] == "json_schema"
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"] == (
        '{"name": "read_file", "arguments": {"path": "notes.txt"}}'
    )
    result = second["messages"][3]["content"]
    assert result.startswith("Result of the tool call read_file (call_") and "pelican" in result
    # The transcript keeps the standard shape.
    kinds = [(m["role"], bool(m.get("tool_calls"))) for m in saved["messages"]]
    assert kinds == [
        ("system", False),
        ("user", False),
        ("assistant", True),
        ("tool", False),
        ("assistant", False),
    ]
    assert saved["messages"][-1]["content"] == "pelican"
    assert "# Tools" not in saved["messages"][0]["content"]


def test_prompted_call_of_an_unknown_tool_is_answered_with_an_error(workspace: Path) -> None:
    script = ['{"name": "write_file:", "arguments": {}}', "giving up"]
    with FakeOpenAIServer(script) as server:
        saved = run_agent(workspace, server, tool_calling="prompted", stream=False)
        answer = server.requests[1]["messages"][-1]["content"]
    assert "there is no tool named 'write_file:'" in answer
    assert saved["messages"][3]["role"] == "tool"


def refused(field: str) -> ErrorReply:
    return ErrorReply(400, {"error": {"message": f"Unrecognized request argument: {field}"}})


def constraint_sent(request: dict[str, Any]) -> str | None:
    if "grammar" in request:
        return "grammar"
    return "json_schema" if "response_format" in request else None


@pytest.mark.parametrize(
    ("setting", "refusals", "expected"),
    [
        # auto: the schema, then the grammar, then nothing; each refusal once per session.
        ("auto", ["response_format"], ["json_schema", "grammar", "grammar"]),
        ("auto", ["json_schema", "grammar"], ["json_schema", "grammar", None, None]),
        ("json_schema", ["response_format"], ["json_schema", None, None]),
        ("grammar", ["grammar"], ["grammar", None, None]),
        ("none", [], [None, None]),
    ],
)
def test_a_refused_constraint_is_dropped_for_the_session(
    setting: str, refusals: list[str], expected: list[str | None]
) -> None:
    script: list[Any] = [*map(refused, refusals), "a", "b"]
    with FakeOpenAIServer(script) as server:
        settings = settings_for(
            server, tool_calling="prompted", stream=False, tool_call_constraint=setting
        )
        with LLMClient(settings) as client:
            client.complete(USER, [READ_TOOL])
            client.complete(USER, [READ_TOOL])
        sent = server.requests
    assert [constraint_sent(r) for r in sent] == expected


def test_the_older_grammar_switch_off_sends_no_constraint() -> None:
    with FakeOpenAIServer(["a"]) as server:
        settings = settings_for(server, tool_calling="prompted", tool_call_grammar=False)
        with LLMClient(settings) as client:
            client.complete(USER, [READ_TOOL])
    assert constraint_sent(server.requests[0]) is None


def test_tool_choice_required_leaves_the_final_answer_out_of_the_grammar() -> None:
    with FakeOpenAIServer(["a"]) as server:
        settings = settings_for(
            server, tool_calling="prompted", tool_choice="required", tool_call_constraint="grammar"
        )
        with LLMClient(settings) as client:
            client.complete(USER, [READ_TOOL])
        grammar = server.requests[0]["grammar"]
    assert '"\\"read_file\\""' in grammar and ANSWER_TOOL not in grammar


WRITE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "record",
        "parameters": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "minLength": 2, "maxLength": 4, "description": "d"},
                "number": {"type": "integer", "minimum": 5, "maximum": 7},
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "note": {"type": "string"},
            },
            "required": ["label", "number", "mode", "tags"],
        },
    },
}


@pytest.mark.parametrize(
    ("choice", "reply", "valid"),
    [
        (None, {"name": "read_file", "arguments": {"path": "a.txt"}}, True),
        (None, {"name": ANSWER_TOOL, "arguments": {"text": "done"}}, True),
        (None, {"name": "record", "arguments": {"label": "ab", "number": 6, "mode": "a", "tags": ["x"]}}, True),
        (None, {"name": "read_file", "arguments": {}}, False),  # a required argument missing
        (None, {"name": "read_file", "arguments": {"path": "a", "limit": 3}}, False),  # optional: left out
        (None, {"name": "read_file", "arguments": {"path": 7}}, False),  # wrong type
        (None, {"name": "write_file", "arguments": {"path": "a"}}, False),  # not offered
        (None, {"name": "read_file", "arguments": {"path": "a"}, "x": 1}, False),
        (None, {"name": "record", "arguments": {"label": "a very long label", "number": 6, "mode": "a", "tags": []}}, False),
        (None, {"name": "record", "arguments": {"label": "ab", "number": 4242, "mode": "a", "tags": []}}, False),
        (None, {"name": "record", "arguments": {"label": "ab", "number": 6, "mode": "c", "tags": []}}, False),
        (None, {"name": "record", "arguments": {"label": "ab", "number": 6, "mode": "a", "tags": [1]}}, False),
        ("required", {"name": ANSWER_TOOL, "arguments": {"text": "done"}}, False),
        ("record", {"name": "read_file", "arguments": {"path": "a.txt"}}, False),  # forced
        ("record", {"name": "record", "arguments": {"label": "ab", "number": 5, "mode": "b", "tags": []}}, True),
    ],
)  # fmt: skip
def test_the_json_schema_constraint_admits_exactly_the_valid_calls(
    choice: str | None, reply: dict[str, Any], valid: bool
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    with FakeOpenAIServer(["a"]) as server:
        settings = settings_for(server, tool_calling="prompted", tool_choice=choice)
        with LLMClient(settings) as client:
            client.complete(USER, [READ_TOOL, WRITE_TOOL])
        fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "tool_call"
    schema = fmt["json_schema"]["schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema.Draft202012Validator(schema).is_valid(reply) is valid


def test_grammar_is_valid_gbnf_for_the_real_tools() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    from agentkit.tools import base_tools
    from agentkit.tools.registry import ToolRegistry

    grammar = tool_call_grammar(ToolRegistry(base_tools()).schemas("en"), ANSWER_TOOL)
    llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)  # raises when invalid


# -- auto --------------------------------------------------------------------------------


def test_auto_switches_to_prompted_when_the_tools_never_reached_the_prompt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def handler(request: dict[str, Any]) -> Any:
        # Count like a server whose template drops the tools.
        prompt = count_messages(request["messages"])
        return body(
            {"content": "hi"}, {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": 1}
        )

    tools = [READ_TOOL] * 4
    with FakeOpenAIServer(handler) as server, caplog.at_level(logging.WARNING, "agentkit.llm"):
        with LLMClient(settings_for(server, tool_calling="auto", stream=False)) as client:
            client.complete(USER, tools)
            client.complete(USER, tools)
        sent = server.requests
    assert ["tools" in r for r in sent] == [True, False, False]
    notes = [r for r in caplog.records if "prompted tool calls" in r.getMessage()]
    assert len(notes) == 1 and "left the tools out" in notes[0].getMessage()


def test_auto_switches_to_prompted_when_a_request_with_tools_fails() -> None:
    failing = ErrorReply(500, {"error": {"message": "tool_choice is not supported"}})
    with FakeOpenAIServer([failing, "fine"]) as server:
        with LLMClient(settings_for(server, tool_calling="auto", stream=False)) as client:
            turn = client.complete(USER, [READ_TOOL])
        sent = server.requests
    assert turn.content == "fine"
    assert ["tools" in r for r in sent] == [True, False]


def test_auto_stays_native_when_the_server_counts_the_tools() -> None:
    with FakeOpenAIServer(["a", "b"]) as server:
        with LLMClient(settings_for(server, tool_calling="auto", stream=False)) as client:
            client.complete(USER, [READ_TOOL] * 4)
            client.complete(USER, [READ_TOOL] * 4)
        sent = server.requests
    assert ["tools" in r for r in sent] == [True, True]


def test_prompted_call_cut_off_by_the_token_limit_is_answered_not_taken_as_the_answer(
    workspace: Path,
) -> None:
    cut = RawResponse(
        {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {
                        "role": "assistant",
                        "content": '{"name": "write_file", "arguments": {"path": "a.txt", "content": "aaa',
                    },
                }
            ]
        }
    )
    with FakeOpenAIServer([cut, "stopped"]) as server:
        saved = run_agent(workspace, server, tool_calling="prompted", stream=False)
        answer = server.requests[1]["messages"][-1]["content"]
    assert "cut off" in answer and "write_file" in answer
    assert not (workspace / "a.txt").exists()
    assert saved["messages"][-1]["content"] == "stopped"
