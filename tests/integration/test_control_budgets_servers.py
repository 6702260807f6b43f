"""Cost, budgets and typed results (docs/control-plane.md §3-4) over real workers and
FakeOpenAIServer: a priced and an unpriced model, model_prices, usage counted once
under retries and streaming, a sub-agent's wrap-up then budget_exhausted, the
conversation's budget, and a profile's output_schema refused then accepted."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, scripted_settings, who
from switch_fixtures import (
    handled_model_fixture,  # noqa: F401  (the model fixture)
    handled_server_fixture,  # noqa: F401  (the server fixture)
)

from agentkit import Agent, prompts
from agentkit import events as ev
from agentkit.chat import Session
from agentkit.testing import ErrorReply, FakeOpenAIServer, RawResponse, Reply

pytestmark = pytest.mark.slow

RECORD = "sub_agent_results/agent_{}/.subagent/conversations.json"
# gpt-4o-mini: $0.15 per million input tokens, $0.075 cached, $0.60 output (genai-prices).
PRICED = {
    "prompt_tokens": 10_000,
    "completion_tokens": 500,
    "total_tokens": 10_500,
    "prompt_tokens_details": {"cached_tokens": 8_000},
}
PRICED_COST = 0.0012  # 2000 x 0.15e-6 + 8000 x 0.075e-6 + 500 x 0.6e-6


def used(usage: dict[str, Any], reply: Any) -> Reply:
    """``reply`` (text or a dict of tool calls) sent with exactly ``usage``."""
    if isinstance(reply, str):
        return Reply(content=reply, usage=usage)
    return Reply(tool_calls=reply["tool_calls"], usage=usage)


def tokens(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def record(workspace: Path, agent_id: int) -> dict[str, Any]:
    return json.loads((workspace / RECORD.format(agent_id)).read_text())


# -------------------------------------------------------------------- cost
def test_a_priced_model_costs_per_agent_and_summed(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(
        main=[
            used(PRICED, calls(call("create_sub_agent", agent_id=1, summary="查价", task="t"))),
            used(PRICED, "完成。"),
        ],
        subs={1: [used(PRICED, finish("做完了。"))]},
    )
    settings = scripted_settings(model, "zh", model="gpt-4o-mini")
    with Agent(workspace=workspace, settings=settings) as agent:
        result = agent.run("查价")
        saved = json.loads(agent.transcript_path.read_text())
    assert result.stats["cost_usd"] == pytest.approx(2 * PRICED_COST)  # the main agent's
    assert result.stats["cached_tokens"] == 16_000
    summed = {"tokens": 3 * 10_500, "cost_usd": pytest.approx(3 * PRICED_COST)}
    assert result.stats["usage_total"] == summed  # with the sub-agent's
    assert saved["usage_total"] == summed
    assert saved["stats"]["cost_usd"] == pytest.approx(2 * PRICED_COST)
    assert saved["subagents"][0]["cost_usd"] == pytest.approx(PRICED_COST)
    assert record(workspace, 1)["stats"]["cost_usd"] == pytest.approx(PRICED_COST)
    assert record(workspace, 1)["stats"]["cached_tokens"] == 8_000


def test_an_unknown_model_costs_null_never_zero(workspace: Path, model: FakeOpenAIServer) -> None:
    model.handler = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="本地", task="t")), "好。"],
        subs={1: [finish()]},
    )
    with Agent(workspace=workspace, settings=scripted_settings(model, "zh")) as agent:
        result = agent.run("开始")
        rows = agent.session.subagents()
    assert result.stats["cost_usd"] is None and result.stats["unpriced_responses"] == 2
    assert result.stats["usage_total"]["cost_usd"] is None
    assert result.stats["usage_total"]["tokens"] > rows[0]["tokens"] > 0
    assert rows[0]["cost_usd"] is None and rows[0]["tokens"] > 0
    assert record(workspace, 1)["stats"]["cost_usd"] is None


def test_model_prices_price_an_unknown_model_and_win(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    usage = {**tokens(1000, 100), "prompt_cache_hit_tokens": 200}  # DeepSeek's spelling
    model.handler = Router(main=[used(usage, "好。")])
    prices = {"fake-model": {"input": 1.0, "cached_input": 0.5, "output": 2.0}}
    with Agent(
        workspace=workspace, settings=scripted_settings(model, "zh", model_prices=prices)
    ) as agent:
        result = agent.run("开始")
    # (800 x 1 + 200 x 0.5 + 100 x 2) / 1e6
    assert result.stats["cost_usd"] == pytest.approx(0.0011)
    assert result.stats["cached_tokens"] == 200


@pytest.mark.parametrize("stream", [True, False])
def test_usage_is_counted_once_through_retries(
    workspace: Path, model: FakeOpenAIServer, stream: bool
) -> None:
    """A 500 and a dropped stream are retried: only the answer that came counts."""
    attempts: list[int] = []

    def flaky(request: dict[str, Any]) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            return ErrorReply(500)
        if len(attempts) == 2 and stream:
            return Reply(content="partial", usage=tokens(999, 999), disconnect_after=2)
        return used(tokens(300, 20), "好。")

    model.handler = flaky
    settings = scripted_settings(
        model, "zh", stream=stream, max_retries=3, retry_total_seconds=30, session_max_tokens=10_000
    )
    with Session(workspace, settings) as session:
        result = session.send("开始")
        spent = session.budget.tokens if session.budget is not None else None
    assert result.status == "done" and len(attempts) == (3 if stream else 2)
    assert (result.stats["prompt_tokens"], result.stats["completion_tokens"]) == (300, 20)
    assert spent == 320  # the budget counted the one answer


# ------------------------------------------------------------------ budgets
def test_a_sub_agent_wraps_up_then_ends_budget_exhausted(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """500 tokens a response against 1100: the second passes 85 % (one wrap-up message
    before the third request), the third passes 100 % (it ends before a fourth)."""
    write = calls(call("write_file", path="sub_agent_results/agent_1/part.md", content="部分"))
    read = calls(call("read_file", path="sub_agent_results/agent_1/part.md"))
    model.handler = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="长任务", task="t")), "收到。"],
        subs={1: [used(tokens(400, 100), write), used(tokens(400, 100), read), used(tokens(400, 100), read),
                  finish()]},
    )  # fmt: skip
    seen: list[ev.Event] = []
    settings = scripted_settings(model, "zh", subagent_max_tokens=1100)
    with Agent(workspace=workspace, settings=settings) as agent:
        agent.run("开始", on_event=seen.append)
    requests = [r for r in model.requests if who(r) == 1]
    wrapup = {
        "role": "user",
        "content": prompts.phrase(
            "zh", "budget_wrapup", deliverables_dir="sub_agent_results/agent_1"
        ),
    }
    assert len(requests) == 3
    assert requests[2]["messages"][-1] == wrapup
    assert all(wrapup not in r["messages"] for r in requests[:2])
    blocking = json.loads(
        [m for m in model.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    )
    assert blocking["status"] == "budget_exhausted" and blocking["success"] is False
    assert blocking["message"] == prompts.phrase("zh", "budget_ended", agent_id=1)
    assert blocking["result_summary"].startswith("【状态：budget_exhausted】")
    assert (workspace / "sub_agent_results/agent_1/part.md").read_text() == "部分"  # files kept
    assert record(workspace, 1)["status"] == "budget_exhausted"
    warnings = [e for e in seen if isinstance(e, ev.BudgetWarning)]
    assert [(w.scope, w.agent_id, w.exhausted, w.tokens) for w in warnings] == [
        ("subagent", 1, False, 1000),
        ("subagent", 1, True, 1500),
    ]


def test_a_profile_max_tokens_wins_and_a_continued_run_gets_its_own(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    profile = {"name": "cheap", "max_tokens": 600}
    model.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="便宜", task="t", profile="cheap")),
            calls(call("continue_sub_agent", agent_id=1, task="再来")),
            "好。",
        ],
        subs={1: [used(tokens(500, 100), calls(call("read_file", path="x"))), finish(),
                  used(tokens(100, 10), finish("第二次完成。"))]},
    )  # fmt: skip
    settings = scripted_settings(
        model, "zh", subagent_max_tokens=100_000, agent_profiles=[profile], subagent_control=True
    )
    with Session(workspace, settings) as session:
        session.send("开始")
        assert session.wait_idle(30)
        spec = session.manager.agents[1].spec
    results = [
        json.loads(m["content"]) for m in model.requests[-1]["messages"] if m["role"] == "tool"
    ]
    assert results[0]["status"] == "budget_exhausted"  # 600 of 600 after one response
    assert results[1]["status"] == "completed"  # the continued run: a new 600
    assert spec.extra["budget"] == {"max_tokens": 600, "max_cost_usd": None}


def test_the_conversations_budget_ends_the_round_and_bounds_sub_agents(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """session_max_tokens 2000: the main agent's first answer (1000) leaves 1000, all a
    new sub-agent may get; after its second (2000) the round ends with a clear error
    before a third request, and the running sub-agent is told to wrap up."""
    release = threading.Event()

    def held(request: dict[str, Any]) -> Any:
        release.wait(30)
        return used(tokens(5, 5), calls(call("read_file", path="x")))

    def spend(request: dict[str, Any]) -> Any:
        return used(tokens(900, 100), calls(call("read_file", path="x")))

    model.handler = Router(
        main=[used(tokens(900, 100), calls(call("create_sub_agent", agent_id=1, summary="后台", task="t",
                                                 run_in_background=True))), spend, "不会被请求。"],
        subs={1: [held, finish()]},
    )  # fmt: skip
    seen: list[ev.Event] = []
    with Session(workspace, scripted_settings(model, "zh", session_max_tokens=2000)) as session:
        session.subscribe(seen.append)
        result = session.send("开始")
        spec = session.manager.agents[1].spec
        release.set()
        assert session.wait_idle(30)
        refused = session.manager.create(agent_id=2, summary="再来一个", task="t")
    assert spec.extra["budget"]["max_tokens"] == 1000
    assert result.status == "failed" and result.error_kind == "budget_exhausted"
    assert result.error == prompts.phrase(
        "zh",
        "session_budget_spent",
        tokens=2000,
        max_tokens=2000,
        cost=prompts.phrase("zh", "budget_cost_unknown"),  # the fake model has no price
    )
    assert "$" not in result.error  # a trial read "$0.000000 of $-" for an unknown cost
    assert len([r for r in model.requests if who(r) is None]) == 2
    second = [r for r in model.requests if who(r) == 1][1]["messages"]
    wrapup = prompts.phrase(
        "zh", "session_budget_wrapup", deliverables_dir="sub_agent_results/agent_1"
    )
    assert {"role": "user", "content": wrapup} in second
    assert refused["success"] is False and "session_max_tokens" in refused["error"]
    assert any(
        isinstance(e, ev.BudgetWarning) and e.scope == "session" and e.exhausted for e in seen
    )


# -------------------------------------------------------------- typed results
SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["count"],
}


def typed(result: Any) -> dict[str, Any]:
    return calls(call("finish_task", success=True, summary="数好了。", result=result))


def test_output_schema_refuses_a_wrong_result_then_takes_a_right_one(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="计数", task="t", profile="counter"),
                  call("create_sub_agent", agent_id=2, summary="后台计数", task="t", profile="counter",
                       run_in_background=True)),
            "好。",
            "收到。",
        ],
        subs={
            1: [typed({"count": "many", "items": ["a"]}), typed({"count": 3, "items": ["a", "b", "c"]})],
            2: [typed('{"count": 1}')],  # JSON text is read as JSON
        },
    )  # fmt: skip
    profile = {"name": "counter", "output_schema": SCHEMA}
    with Session(workspace, scripted_settings(model, "zh", agent_profiles=[profile])) as session:
        session.send("数一数")
        assert session.wait_idle(30)
    subs = [r for r in model.requests if who(r) == 1]
    finish_schema = next(t for t in subs[0]["tools"] if t["function"]["name"] == "finish_task")
    result_schema = finish_schema["function"]["parameters"]["properties"]["result"]
    assert {k: v for k, v in result_schema.items() if k != "description"} == SCHEMA
    refused = json.loads(subs[1]["messages"][-1]["content"])
    assert refused["success"] is False and refused["will_terminate"] is False
    assert "$.count: 'many' is not of type 'integer'" in refused["error"]
    main = [r for r in model.requests if who(r) is None]
    blocking = json.loads([m for m in main[1]["messages"] if m["role"] == "tool"][0]["content"])
    assert blocking["status"] == "completed" and blocking["result"] == {
        "count": 3,
        "items": ["a", "b", "c"],
    }
    assert record(workspace, 1)["result"] == {"count": 3, "items": ["a", "b", "c"]}
    notices = [
        m["content"]
        for r in main
        for m in r["messages"]
        if "子智能体2 (后台计数)" in str(m["content"])
    ]
    assert any(prompts.phrase("zh", "notify_result", result='{"count": 1}') in n for n in notices)


def test_a_result_wrong_past_the_nudges_fails_with_the_validation_error(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(
        main=[
            calls(
                call("create_sub_agent", agent_id=1, summary="计数", task="t", profile="counter")
            ),
            "好。",
        ],
        subs={1: [typed({"items": []}), typed({"count": 1.5})]},
    )
    profile = {"name": "counter", "output_schema": SCHEMA}
    settings = scripted_settings(model, "zh", agent_profiles=[profile], subagent_max_nudges=1)
    with Agent(workspace=workspace, settings=settings) as agent:
        agent.run("数")
    stored = record(workspace, 1)
    assert stored["status"] == "failed"
    assert "$.count: 1.5 is not of type 'integer'" in stored["error"]
    assert "result" not in stored


def test_after_a_refused_result_the_sub_agent_still_takes_messages(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """Regression: a finish_task refused for its result left the sub-agent marked as
    finishing, and messages to it were refused although it went on working."""
    retrying, delivered = threading.Event(), threading.Event()

    def retry(request: dict[str, Any]) -> Any:
        retrying.set()
        delivered.wait(30)
        return typed({"count": 2})

    def send(request: dict[str, Any]) -> Any:
        retrying.wait(30)
        return calls(call("message_sub_agent", agent_id=1, message="count twice"))

    def go_on(request: dict[str, Any]) -> Any:
        delivered.set()
        return "ok"

    model.handler = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="计数", task="t", profile="counter",
                         run_in_background=True)), send, go_on, "收到。"],
        subs={1: [typed({"count": "x"}), retry]},
    )  # fmt: skip
    profile = {"name": "counter", "output_schema": SCHEMA}
    settings = scripted_settings(model, "zh", agent_profiles=[profile], subagent_control=True)
    with Session(workspace, settings) as session:
        session.send("数")
        assert session.wait_idle(30)
    main = [r for r in model.requests if who(r) is None]
    sent = [
        json.loads(m["content"])
        for m in main[2]["messages"]
        if m.get("name") == "message_sub_agent"
    ]
    assert sent[0]["status"] == "delivered", sent


def unreported(tool_call: dict[str, Any]) -> RawResponse:
    """A non-streamed reply calling ``tool_call`` with no ``usage`` object at all."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_no_usage",
                "type": "function",
                "function": {
                    "name": tool_call["name"],
                    "arguments": json.dumps(tool_call["arguments"], ensure_ascii=False),
                },
            }
        ],
    }
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return RawResponse(
        {
            "id": "chatcmpl-no-usage",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [choice],
        }
    )


def test_a_server_reporting_no_usage_gets_estimates_marked_and_budgets_hold(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """No usage in the response: the tokens are estimated from the text, the estimate
    counts against the budget (50 tokens: spent by the first response, so the run
    ends before a second request) and is marked in the record, the status row and
    the notification."""
    model.handler = Router(
        main=[
            calls(
                call(
                    "create_sub_agent", agent_id=1, summary="估算", task="t", run_in_background=True
                )
            ),
            "好。",
            "收到。",
        ],  # fmt: skip
        subs={1: [unreported(call("read_file", path="x")), finish()]},
    )
    settings = scripted_settings(
        model, "zh", stream=False, subagent_max_tokens=50, subagent_control=True
    )
    with Session(workspace, settings) as session:
        session.send("开始")
        assert session.wait_idle(30)
        row = session.subagents()[0]
    subs = [r for r in model.requests if who(r) == 1]
    assert len(subs) == 1
    stats = record(workspace, 1)["stats"]
    assert record(workspace, 1)["status"] == "budget_exhausted"
    assert stats["usage_estimated"] is True and stats["token_usage"]["total"] > 50
    assert row["usage_estimated"] is True and row["tokens"] == stats["token_usage"]["total"]
    notice = [r for r in model.requests if who(r) is None][-1]["messages"][-1]["content"]
    assert prompts.phrase("zh", "notify_usage_estimated") in notice
