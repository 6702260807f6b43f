"""Reading exported spans as a tree, for the tracing tests (a capture receiver's or
Phoenix's span dicts, with ``span_id``, ``parent_span_id``, ``name``, ``trace_id``)."""

from __future__ import annotations

import importlib.util
from typing import Any

from subagent_helpers import Gate, call, calls, finish


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # its parent package is missing too (no opentelemetry at all)
        return False


HAVE_SDK = all(
    _installed(name) for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
)
NO_SDK = "the otel extra is not installed (pip install -e '.[otel]')"


def of_trace(spans: list[dict[str, Any]], trace_id: str) -> list[dict[str, Any]]:
    """The spans of one trace."""
    return [s for s in spans if s["trace_id"] == trace_id]


def root_of(
    spans: list[dict[str, Any]], conversation_id: str, trigger: str = "user"
) -> dict[str, Any] | None:
    """The ``invoke_agent main`` span of a conversation's round opened by ``trigger``
    (``user``: the user's message; ``notification``: sub-agents' completions), or None."""
    for span in spans:
        attributes = span["attributes"]
        if (
            span["name"] == "invoke_agent main"
            and attributes.get("gen_ai.conversation.id") == conversation_id
            and attributes.get("agentkit.round.trigger") == trigger
        ):
            return span
    return None


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans whose parent is ``parent``."""
    return [s for s in spans if s["parent_span_id"] == parent["span_id"]]


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The spans called ``name``."""
    return [s for s in spans if s["name"] == name]


def two_sub_agents_script() -> tuple[list[Any], dict[int, list[Any]]]:
    """A main agent that starts sub-agent 2 in the background and sub-agent 1 blocking;
    each reads or runs something, then calls finish_task. Sub-agent 2 waits for the main
    agent's answer, so its completion opens a second round (a notification)."""
    gate = Gate()
    main = [
        calls(
            call(
                "create_sub_agent",
                agent_id=2,
                summary="background",
                task="list",
                run_in_background=True,
            ),
            call("create_sub_agent", agent_id=1, summary="blocking", task="read a.txt"),
        ),
        gate.release("All done."),
        "Noted: the background agent finished too.",
    ]
    subs = {
        1: [calls(call("read_file", path="a.txt")), finish("read it")],
        2: [gate.hold(calls(call("run_command", command="echo two"))), finish("ran it")],
    }
    return main, subs


def expected_spans(spans: list[dict[str, Any]]) -> bool:
    """True once both sub-agents' runs and the main round are in ``spans``."""
    names = {s["name"] for s in spans}
    return {"invoke_agent main", "invoke_agent sub-agent 1", "invoke_agent sub-agent 2"} <= names


def check_tree(spans: list[dict[str, Any]], root: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Assert the one-trace tree of :func:`two_sub_agents_script`: round →
    ``execute_tool create_sub_agent`` → ``invoke_agent sub-agent N`` → its ``chat`` and
    ``execute_tool`` spans, with usage on every ``chat`` span. Returns the sub-agent
    spans by agent id."""
    trace = of_trace(spans, root["trace_id"])
    assert root["parent_span_id"] is None
    creates = [s for s in children(trace, root) if s["name"] == "execute_tool create_sub_agent"]
    assert len(creates) == 2, [s["name"] for s in children(trace, root)]
    subs: dict[str, dict[str, Any]] = {}
    for create in creates:
        (run,) = children(trace, create)
        assert run["name"].startswith("invoke_agent sub-agent ")
        subs[run["attributes"]["gen_ai.agent.id"]] = run
    assert set(subs) == {"1", "2"}
    for agent_id, run in subs.items():
        assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert run["attributes"]["agentkit.agent.status"] == "completed"
        below = children(trace, run)
        chats = [s for s in below if s["name"] == "chat fake-model"]
        tools = [s["name"] for s in below if s["name"].startswith("execute_tool ")]
        assert len(chats) == 2, [s["name"] for s in below]
        expected_tool = "execute_tool read_file" if agent_id == "1" else "execute_tool run_command"
        assert sorted(tools) == sorted([expected_tool, "execute_tool finish_task"])
        prompt = sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats)
        assert run["attributes"]["gen_ai.usage.input_tokens"] == prompt
    for chat in [s for s in trace if s["name"].startswith("chat ")]:
        attributes = chat["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == "fake-model"
        assert attributes["gen_ai.response.model"] == "fake-model"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert list(attributes["gen_ai.response.finish_reasons"]) in (["stop"], ["tool_calls"])
        assert attributes["server.address"] == "127.0.0.1"
    return subs
