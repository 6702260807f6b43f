"""The control plane (docs/control-plane.md) over real workers and FakeOpenAIServer:
message_sub_agent, ask_parent and answer_sub_agent, wait_for_sub_agents,
continue_sub_agent, each refusal, the races, and control off changing no request."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from control_off_scenario import record_requests
from subagent_helpers import (
    Recorder,
    Router,
    call,
    calls,
    finish,
    scripted_settings,
    wait_until,
    who,
)
from switch_fixtures import (
    handled_model_fixture,  # noqa: F401  (the model fixture)
    handled_server_fixture,  # noqa: F401  (the server fixture)
)

from agentkit import events as ev
from agentkit import prompts
from agentkit.chat import Session
from agentkit.subagent.inputs import CONTROL_TEXT_MAX
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[1] / "data"
MAIN_EXTRA = ["message_sub_agent", "continue_sub_agent", "wait_for_sub_agents", "answer_sub_agent"]


def control_session(workspace: Path, model: FakeOpenAIServer, **overrides: Any) -> Session:
    settings = scripted_settings(model, "zh", subagent_control=True, **overrides)
    return Session(workspace, settings)


def main_requests(model: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in model.requests if who(r) is None]


def sub_requests(model: FakeOpenAIServer, agent_id: int) -> list[dict[str, Any]]:
    return [r for r in model.requests if who(r) == agent_id]


def tool_results(request: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The JSON results of the calls of ``name`` in a request's messages."""
    ids = {
        c["id"]
        for m in request["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == name
    }
    return [
        json.loads(m["content"])
        for m in request["messages"]
        if m["role"] == "tool" and m["tool_call_id"] in ids
    ]


def background(agent_id: int, summary: str = "后台任务") -> dict[str, Any]:
    return call(
        "create_sub_agent",
        agent_id=agent_id,
        summary=summary,
        task=f"任务{agent_id}",
        run_in_background=True,
    )


def held_sub_agent(
    main_text: str,
) -> tuple[Callable[[dict[str, Any]], Any], Callable[[dict[str, Any]], Any]]:
    """A sub-agent reply that finishes only once the main agent's next reply is asked for
    (so the sub-agent still runs meanwhile; 30 s at most), and that main reply, which
    releases it and says ``main_text``."""
    release = threading.Event()

    def held(request: dict[str, Any]) -> Any:
        release.wait(30)
        return finish()

    def releasing(request: dict[str, Any]) -> Any:
        release.set()
        return main_text

    return held, releasing


def steer_text(message: str) -> str:
    return prompts.render("zh", "subagent/steer.txt", message=message)


# ------------------------------------------------------------------ control off
def test_control_off_sends_every_request_as_before() -> None:
    """Off (the default), every request body of a run (main agent, a blocking and a
    background sub-agent, the notification round) is byte for byte what agentkit sent
    before the control plane existed (recorded then: tests/control_off_scenario.py)."""
    golden = json.loads((DATA / "control_off_requests.json").read_text(encoding="utf-8"))
    recorded = record_requests()
    assert len(recorded) == len(golden)
    for number, (now, before) in enumerate(zip(recorded, golden, strict=True)):
        assert now == before, f"request {number} changed with the control plane off"


def test_control_on_offers_the_tools_and_says_so(workspace: Path, model: FakeOpenAIServer) -> None:
    model.handler = Router(main=[calls(background(1)), "好。", "收到。"], subs={1: [finish()]})
    with control_session(workspace, model) as session:
        session.send("开始")
        assert session.wait_idle(30)
    main = main_requests(model)[0]
    names = [t["function"]["name"] for t in main["tools"]]
    assert names[-4:] == MAIN_EXTRA
    assert main["messages"][0]["content"].endswith(prompts.render("zh", "control_main.txt"))
    sub = sub_requests(model, 1)[0]
    assert [t["function"]["name"] for t in sub["tools"]][-2:] == ["ask_parent", "finish_task"]
    assert prompts.render("zh", "subagent/control_system.txt") in sub["messages"][0]["content"]


# ------------------------------------------------------------ message_sub_agent
def test_a_message_reaches_the_sub_agent_before_its_next_request_once(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    asked, release = threading.Event(), threading.Event()

    def held_read(request: dict[str, Any]) -> Any:
        asked.set()
        release.wait(30)
        return calls(call("read_file", path="a.txt"))

    def send_message(request: dict[str, Any]) -> Any:
        asked.wait(30)
        return calls(call("message_sub_agent", agent_id=1, message="请改用英文写报告"))

    def go_on(request: dict[str, Any]) -> Any:
        release.set()
        return "已通知它。"

    (workspace / "a.txt").write_text("x\n")
    model.handler = Router(
        main=[calls(background(1)), send_message, go_on, "收到结果。"],
        subs={1: [held_read, finish("用英文写好了。")]},
    )
    seen = Recorder()
    with control_session(workspace, model) as session:
        session.subscribe(seen)
        session.send("开始")
        assert session.wait_idle(30)
        record = json.loads(
            (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
        )
    result = tool_results(main_requests(model)[2], "message_sub_agent")[0]
    assert result["success"] is True and result["status"] == "delivered"
    assert list(result)[0] == "success"
    second = sub_requests(model, 1)[1]["messages"]
    steer = {"role": "user", "content": steer_text("请改用英文写报告")}
    assert second[-1] == steer  # after the tool result: before this request
    assert second.count(steer) == 1
    assert [m for m in record["messages"] if m == steer] == [steer]  # once in the record
    said = seen.of(ev.SubAgentMessage)
    assert [(e.agent_id, e.delivered, e.by) for e in said] == [(1, True, "main")]


def test_refusals_are_seed_shaped_json(workspace: Path, model: FakeOpenAIServer) -> None:
    bad = [
        call("message_sub_agent", agent_id=7, message="hi"),  # unknown id
        call("message_sub_agent", agent_id=1, message="hi"),  # ended
        call("message_sub_agent", agent_id="x", message="hi"),  # bad type
        call("message_sub_agent", agent_id=1, message="   "),  # empty
        call("message_sub_agent", agent_id=1, message="长" * (CONTROL_TEXT_MAX + 1)),
        call("answer_sub_agent", agent_id=1, answer="是的"),  # no question
        call("continue_sub_agent", agent_id=9, task="再做一次"),  # unknown
        call("wait_for_sub_agents", agent_ids=[1], mode="some"),  # bad mode
        call("wait_for_sub_agents", agent_ids=[1], timeout_seconds=0),  # bad timeout
        call("wait_for_sub_agents", agent_ids=[], mode="all"),  # empty list
        call("answer_sub_agent", agent_id=1, answer=""),  # empty
        call("answer_sub_agent", agent_id=1, answer="答" * (CONTROL_TEXT_MAX + 1)),
        call("answer_sub_agent", agent_id=8, answer="是"),  # unknown
        call("continue_sub_agent", agent_id=[1], task="再做"),  # bad type
        call("continue_sub_agent", agent_id=1, task="务" * (CONTROL_TEXT_MAX + 1)),
        call("continue_sub_agent", agent_id=1, task="再做", run_in_background="maybe"),
    ]
    model.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="快任务", task="t")),
            calls(*bad),
            "好。",
        ],
        subs={1: [finish()]},
    )
    with control_session(workspace, model) as session:
        session.send("开始")
    last = main_requests(model)[-1]["messages"]
    results = [json.loads(m["content"]) for m in last[-len(bad) :]]
    assert all(r["success"] is False and list(r)[0] == "success" for r in results)
    assert all(isinstance(r["error"], str) and r["error"] for r in results)
    unknown, ended, bad_id, empty, long, no_question, cont, mode, timeout, ids = results[:10]
    answer_empty, answer_long, answer_unknown, cont_id, cont_long, cont_flag = results[10:]
    assert unknown["status"] == "not_found"
    assert ended["status"] == "completed" and "continue_sub_agent" in ended["error"]
    assert "agent_id" in bad_id["error"] and "agent_id" not in bad_id
    assert "message" in empty["error"]
    assert str(CONTROL_TEXT_MAX) in long["error"]
    assert no_question["status"] == "completed"
    assert cont["error"] == prompts.phrase("zh", "unknown_agent", agent_id=9)
    assert "mode" in mode["error"] and "3600" in timeout["error"]
    assert "agent_ids" in ids["error"] and ids["agents"] == []
    assert "answer" in answer_empty["error"] and str(CONTROL_TEXT_MAX) in answer_long["error"]
    assert answer_unknown["status"] == "not_found"
    assert "agent_id" in cont_id["error"] and str(CONTROL_TEXT_MAX) in cont_long["error"]
    assert "run_in_background" in cont_flag["error"]
    assert len(sub_requests(model, 1)) == 1  # nothing refused ran it again


def test_ask_parent_refuses_empty_oversize_and_bad_questions(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """The sub-agent's ask_parent refuses in the seed's JSON; no question reaches the
    parent and the sub-agent goes on."""
    bad = [
        call("ask_parent", question="  "),
        call("ask_parent", question="问" * (CONTROL_TEXT_MAX + 1)),
        call("ask_parent", question=["a list"]),
        call("ask_parent"),
    ]
    model.handler = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="问题", task="t")), "好。"],
        subs={1: [calls(*bad), finish()]},
    )
    seen = Recorder()
    with control_session(workspace, model) as session:
        session.subscribe(seen)
        session.send("开始")
    last = sub_requests(model, 1)[-1]["messages"]
    results = [json.loads(m["content"]) for m in last[-len(bad) :]]
    assert all(r["success"] is False and list(r)[0] == "success" for r in results), results
    empty, long, wrong, missing = results
    assert all("question" in r["error"] for r in (empty, wrong, missing))
    assert str(CONTROL_TEXT_MAX) in long["error"] and "ask_parent" in long["error"]
    assert seen.of(ev.SubAgentQuestion) == []
    assert session.manager.agents[1].status == "completed"


def test_a_message_taken_but_never_read_is_reported_not_lost(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """The race: the worker took the message, then its model's reply (already on the
    way) called finish_task. The message never reaches it, and the main agent is told
    so in the completion: not lost silently, never delivered."""
    asked, release = threading.Event(), threading.Event()

    def finishing(request: dict[str, Any]) -> Any:
        asked.set()
        release.wait(30)
        return finish("做完了。")

    def send_message(request: dict[str, Any]) -> Any:
        asked.wait(30)
        return calls(call("message_sub_agent", agent_id=1, message="再补一节"))

    def go_on(request: dict[str, Any]) -> Any:
        release.set()
        return "好。"

    model.handler = Router(
        main=[calls(background(1)), send_message, go_on, "收到。"], subs={1: [finishing]}
    )
    with control_session(workspace, model) as session:
        session.send("开始")
        assert session.wait_idle(30)
        record = (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    delivered = tool_results(main_requests(model)[2], "message_sub_agent")[0]
    assert delivered["status"] == "delivered"  # the worker took it
    notice = main_requests(model)[3]["messages"][-1]["content"]
    unread = prompts.phrase("zh", "notify_unread", count=1, messages="「再补一节」")
    assert unread in notice
    assert all(steer_text("再补一节") not in json.dumps(r) for r in sub_requests(model, 1))
    assert "再补一节" not in record


def test_a_message_to_a_worker_that_dies_first_is_not_delivered(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """The race the other way: the worker cannot read (stopped), then dies; the
    message is reported as not delivered, with the agent's status."""
    asked, end = threading.Event(), threading.Event()

    def hang(request: dict[str, Any]) -> Any:
        asked.set()
        end.wait(60)
        return finish()

    model.handler = Router(main=[calls(background(1)), "好。", "收到。"], subs={1: [hang]})
    with control_session(workspace, model) as session:
        session.subscribe(lambda e: end.set() if isinstance(e, ev.SubAgentFinished) else None)
        session.send("开始")
        assert asked.wait(30)
        agent = session.manager.agents[1]
        pid = agent.handle.pid
        os.kill(pid, signal.SIGSTOP)  # it cannot take the message now
        answer: dict[str, Any] = {}
        sender = threading.Thread(
            target=lambda: answer.update(session.message_subagent(1, "停一下"))
        )
        sender.start()
        assert wait_until(lambda: bool(agent.receipts), 10)  # the message is on its way
        os.kill(pid, signal.SIGKILL)
        sender.join(30)
        assert session.wait_idle(30)
    assert answer["success"] is False and answer["status"] == "failed"
    assert answer["delivered"] is False


# ------------------------------------------------------- ask_parent and answers
class MovedClock:
    """``time.monotonic()`` plus the seconds a test moved it on (a sub-agent's timeout
    clock); ``read_after_move`` is set once its supervisor's monitor has read it after
    a move, i.e. it has checked the timeout against the moved time."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.moved = threading.Event()
        self.read_after_move = threading.Event()

    def __call__(self) -> float:
        if self.moved.is_set() and threading.current_thread().name.startswith("agentkit-monitor"):
            self.read_after_move.set()
        return time.monotonic() + self.offset

    def move_on(self, seconds: float) -> None:
        self.offset += seconds
        self.moved.set()


def test_ask_parent_when_idle_starts_a_round_and_the_answer_comes_back(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """The question starts a round (the user template) while the main agent is idle;
    its answer is ask_parent's result; the sub-agent's timeout clock is paused
    meanwhile (a 120 s timeout; its clock moves on 121 s while the main agent answers,
    and the monitor checks it: it still completes). The timeout is not shorter: its
    clock runs for real until the sub-agent's first request, and a worker's start on a
    loaded machine once took 5 s."""
    clock = MovedClock()
    opened: list[Session] = []

    def ask(request: dict[str, Any]) -> Any:
        opened[0].manager.agents[1].clock = clock  # before it asks: the pause is on it
        return calls(call("ask_parent", question="用哪个数据库？"))

    def slow_answer(request: dict[str, Any]) -> Any:
        clock.move_on(121)  # longer than the sub-agent's whole timeout
        assert clock.read_after_move.wait(30)  # a timeout would be seen by now
        return calls(call("answer_sub_agent", agent_id=1, answer="用 PostgreSQL"))

    model.handler = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="建表",
                    task="建表",
                    run_in_background=True,
                    timeout_seconds=120,
                )
            ),
            "已启动。",
            slow_answer,
            "已回答。",
            "完成了。",
        ],  # fmt: skip
        subs={1: [ask, finish("表已建好。")]},
    )
    seen = Recorder()
    with control_session(workspace, model) as session:
        opened.append(session)
        session.subscribe(seen)
        session.send("建表")
        assert session.wait_idle(40)
        agent = session.manager.agents[1]
    question_round = main_requests(model)[2]["messages"][-1]
    assert question_round == {
        "role": "user",
        "content": prompts.render(
            "zh",
            "subagent/question_user.txt",
            agent_id=1,
            summary="建表",
            question="用哪个数据库？",
        ),
    }
    asked = tool_results(sub_requests(model, 1)[1], "ask_parent")[0]
    assert asked == {"success": True, "answer": "用 PostgreSQL"}
    assert agent.status == "completed"
    assert agent.paused_seconds > 120  # the wait did not count against its 120 s
    assert [(e.agent_id, e.question) for e in seen.of(ev.SubAgentQuestion)] == [
        (1, "用哪个数据库？")
    ]
    answered = seen.of(ev.SubAgentAnswered)
    assert [(e.outcome, e.answer, e.by) for e in answered] == [
        ("answered", "用 PostgreSQL", "main")
    ]


def test_ask_parent_gives_up_after_the_wait_and_a_late_answer_is_refused(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    gone = threading.Event()

    def late(request: dict[str, Any]) -> Any:
        gone.wait(30)
        return calls(call("answer_sub_agent", agent_id=1, answer="太晚了"))

    model.handler = Router(
        main=[calls(background(1)), "好。", late, "好吧。", "收到。"],
        subs={1: [calls(call("ask_parent", question="继续吗？")), finish("自行决定继续。")]},
    )
    seen = Recorder()
    with control_session(workspace, model, ask_parent_max_wait_seconds=0.5) as session:
        session.subscribe(lambda e: gone.set() if isinstance(e, ev.SubAgentAnswered) else None)
        session.subscribe(seen)
        session.send("开始")
        assert session.wait_idle(30)
    asked = tool_results(sub_requests(model, 1)[1], "ask_parent")[0]
    assert asked["success"] is False and asked["timed_out"] is True
    assert asked["error"] == prompts.phrase("zh", "ask_timed_out", seconds="0.5")
    refused = tool_results(main_requests(model)[3], "answer_sub_agent")[0]
    assert refused["success"] is False
    assert [e.outcome for e in seen.of(ev.SubAgentAnswered)] == ["timed_out"]


def test_a_worker_killed_while_it_asks_fails_and_its_question_is_withdrawn(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(
        main=[calls(background(1)), "好。", "我来回答。", "收到失败。"],
        subs={1: [calls(call("ask_parent", question="要删除旧数据吗？"))]},
    )
    seen = Recorder()
    with control_session(workspace, model) as session:
        session.subscribe(seen)
        session.send("开始")
        assert wait_until(lambda: bool(seen.of(ev.SubAgentQuestion)), 30)
        agent = session.manager.agents[1]
        assert session.subagents()[0]["question"] == "要删除旧数据吗？"
        os.kill(agent.handle.pid, signal.SIGKILL)
        assert session.wait_idle(30)
        late = session.answer_subagent(1, "不要")
        rows = session.subagents()
    assert agent.status == "failed" and "exit code -9" in (agent.error or "")
    assert [e.outcome for e in seen.of(ev.SubAgentAnswered)] == ["agent_ended"]
    assert "question" not in rows[0]
    assert late["success"] is False and late["status"] == "failed"


def test_a_blocking_call_returns_when_its_sub_agent_asks(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    round_over = threading.Event()

    def answered(request: dict[str, Any]) -> Any:
        round_over.set()
        return "已回答，等它完成。"

    def after_the_round(request: dict[str, Any]) -> Any:
        round_over.wait(30)
        return finish("查到了。")

    model.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="查资料", task="查")),
            calls(call("answer_sub_agent", agent_id=1, answer="查 2024 年的")),
            answered,
            "它完成了。",
        ],
        subs={1: [calls(call("ask_parent", question="查哪一年？")), after_the_round]},
    )
    with control_session(workspace, model) as session:
        session.send("查资料")
        assert session.wait_idle(30)
    returned = tool_results(main_requests(model)[1], "create_sub_agent")[0]
    assert returned["status"] == "running" and returned["background"] is True
    assert returned["question"] == "查哪一年？"
    notice = main_requests(model)[3]["messages"][-1]["content"]
    assert notice.startswith("子智能体1 (查资料) 已完成任务。")  # announced once it ended


# ----------------------------------------------------- wait and continue
def test_wait_for_sub_agents_returns_their_rows_and_they_are_not_announced_again(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    model.handler = Router(
        main=[
            calls(background(1, "甲"), background(2, "乙")),
            calls(call("wait_for_sub_agents", agent_ids=[1, 2], mode="all", timeout_seconds=60)),
            "两个都好了。",
        ],
        subs={1: [finish("甲完成。")], 2: [finish("乙完成。")]},
    )
    with control_session(workspace, model) as session:
        result = session.send("并行")
        assert session.wait_idle(30)
    waited = tool_results(main_requests(model)[2], "wait_for_sub_agents")[0]
    assert waited["success"] is True and waited["timed_out"] is False
    assert [(r["agent_id"], r["status"]) for r in waited["agents"]] == [
        (1, "completed"),
        (2, "completed"),
    ]
    assert {"tokens", "cost_usd"} <= set(waited["agents"][0])
    assert (
        len(main_requests(model)) == 3 and result.final_text == "两个都好了。"
    )  # no notification round


def test_wait_any_times_out_while_they_run(workspace: Path, model: FakeOpenAIServer) -> None:
    held, done_waiting = held_sub_agent("不等了。")

    model.handler = Router(
        main=[
            calls(background(1)),
            calls(call("wait_for_sub_agents", agent_ids=1, mode="ANY", timeout_seconds=1)),
            done_waiting,
            "收到。",
        ],
        subs={1: [held]},
    )
    with control_session(workspace, model) as session:
        session.send("开始")
        assert session.wait_idle(30)
    waited = tool_results(main_requests(model)[2], "wait_for_sub_agents")[0]
    assert waited["timed_out"] is True and waited["agents"][0]["status"] == "running"


def test_continue_runs_an_ended_sub_agent_with_its_history(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    (workspace / "a.txt").write_text("x\n")
    model.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="写报告", task="写初稿")),
            calls(call("continue_sub_agent", agent_id=1, task="再加一节结论", timeout_seconds=120)),
            calls(
                call("continue_sub_agent", agent_id=1, task="这次在后台", run_in_background=True)
            ),
            "它在后台继续。",
            "都完成了。",
        ],
        subs={
            1: [
                calls(call("read_file", path="a.txt")),
                finish("初稿完成。"),
                finish("结论已加上。"),
                finish("后台这次也完成了。"),
            ]
        },
    )
    with control_session(workspace, model) as session:
        session.send("写报告")
        assert session.wait_idle(30)
        record = json.loads(
            (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
        )
    first, second = (tool_results(main_requests(model)[i], n)[0] for i, n in
                     ((1, "create_sub_agent"), (2, "continue_sub_agent")))  # fmt: skip
    assert list(second) == list(first)  # exactly create_sub_agent's blocking shape
    assert second["status"] == "completed" and second["result_summary"] == "结论已加上。"
    assert second["sub_conversation_id"] == first["sub_conversation_id"]
    assert second["stats"]["files_read"] == 1  # stats add up over the runs
    run2 = sub_requests(model, 1)[2]["messages"]
    assert (
        run2[: len(sub_requests(model, 1)[1]["messages"])] == sub_requests(model, 1)[1]["messages"]
    )
    assert run2[-1]["content"].startswith("你是子智能体 1，请在上面的工作基础上继续")
    assert "再加一节结论" in run2[-1]["content"]
    background_result = tool_results(main_requests(model)[3], "continue_sub_agent")[1]
    assert background_result["status"] == "running" and background_result["background"] is True
    notice = main_requests(model)[4]["messages"][-1]["content"]
    assert notice.startswith("子智能体1 (写报告) 已完成任务。") and "后台这次也完成了。" in notice
    assert record["runs"] == 3 and record["status"] == "completed"
    assert record["stats"]["turns"] == 4 and record["stats"]["files_read"] == 1
    users = [m["content"] for m in record["messages"] if m["role"] == "user"]
    assert len(users) == 3  # every run's task is in the one record


def test_continue_refuses_a_running_sub_agent(workspace: Path, model: FakeOpenAIServer) -> None:
    held, go_on = held_sub_agent("好。")

    model.handler = Router(
        main=[
            calls(background(1)),
            calls(call("continue_sub_agent", agent_id=1, task="再做")),
            go_on,
            "收到。",
        ],
        subs={1: [held]},
    )
    with control_session(workspace, model) as session:
        session.send("开始")
        assert session.wait_idle(30)
    refused = tool_results(main_requests(model)[2], "continue_sub_agent")[0]
    assert refused["success"] is False
    assert refused["error"] == prompts.phrase("zh", "continue_running", agent_id=1)


def test_wait_idle_waits_for_a_sub_agent_the_user_continued(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """Regression (a new user's trial): after Session.continue_subagent, wait_idle()
    returned at once while the continued run worked, and leaving the `with` then
    ended it."""
    release = threading.Event()

    def held(request: dict[str, Any]) -> Any:
        release.wait(30)
        return finish("又做完了。")

    model.handler = Router(
        main=[calls(background(1)), "已启动。", "收到。", "收到第二次。"],
        subs={1: [finish("做完了。"), held]},
    )
    with control_session(workspace, model) as session:
        session.send("开始")
        assert session.wait_idle(30) and session.subagents()[0]["status"] == "completed"
        again = session.continue_subagent(1, "再做一次")
        assert again["success"] is True
        assert not session.wait_idle(0.5)  # the continued run works
        assert session.state == "waiting_for_subagents"
        assert session.conversation.state == "waiting_for_subagents"  # said, and saved
        release.set()
        assert session.wait_idle(30)
        (row,) = session.subagents()
        assert row["status"] == "completed"
    last = main_requests(model)[-1]["messages"][-1]["content"]
    assert "又做完了" in last  # its end was announced before the session went idle
    refused = Session.continue_subagent  # a refused continue leaves the session idle
    with control_session(workspace, model) as session:
        assert refused(session, 7, "x")["success"] is False
        assert session.wait_idle(5) and session.state == "idle"


def test_the_session_api_refuses_with_control_off(workspace: Path, model: FakeOpenAIServer) -> None:
    model.handler = Router(main=["好。"])
    with Session(workspace, scripted_settings(model, "zh")) as session:
        for result in (
            session.message_subagent(1, "hi"),
            session.answer_subagent(1, "hi"),
            session.continue_subagent(1, "hi"),
        ):
            assert result["success"] is False
            assert result["error"] == prompts.phrase("zh", "control_off")


def test_a_question_while_busy_follows_the_tool_batch_and_a_message_answers_nothing(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    """The main agent is busy when the question comes: it hears it as a system message
    after its next tool batch. A message sent meanwhile is queued (delivered), does not
    answer the question, and reaches the sub-agent after the real answer."""
    seen = Recorder()

    def once_asked(request: dict[str, Any]) -> Any:
        assert wait_until(lambda: bool(seen.of(ev.SubAgentQuestion)), 30)
        return calls(call("message_sub_agent", agent_id=1, message="先别急"))

    model.handler = Router(
        main=[
            calls(background(1, "查询")),
            once_asked,
            calls(call("answer_sub_agent", agent_id=1, answer="用 users 表")),
            "已回答。",
            "收到。",
        ],
        subs={1: [calls(call("ask_parent", question="查哪个表？")), finish("查完了。")]},
    )
    with control_session(workspace, model) as session:
        session.subscribe(seen)
        session.send("查")
        assert session.wait_idle(30)
    mains = main_requests(model)
    sent = tool_results(mains[2], "message_sub_agent")[0]
    assert sent["success"] is True and sent["status"] == "delivered"
    question = prompts.render(
        "zh", "subagent/question_system.txt", agent_id=1, summary="查询", question="查哪个表？"
    )
    assert mains[2]["messages"][-1] == {"role": "system", "content": question}
    assert mains[2]["messages"][-2]["role"] == "tool"  # right after the batch
    assert all(question not in json.dumps(r["messages"]) for r in mains[:2])
    second = sub_requests(model, 1)[1]["messages"]
    assert tool_results(sub_requests(model, 1)[1], "ask_parent") == [
        {"success": True, "answer": "用 users 表"}
    ]
    assert second[-1] == {"role": "user", "content": steer_text("先别急")}
    assert second[-2]["role"] == "tool" and second[-2]["name"] == "ask_parent"
    assert [e.outcome for e in seen.of(ev.SubAgentAnswered)] == ["answered"]


def test_a_sub_agent_terminated_while_it_asks_ends_and_its_question_is_withdrawn(
    workspace: Path, model: FakeOpenAIServer
) -> None:
    seen = Recorder()

    def once_asked(request: dict[str, Any]) -> Any:
        assert wait_until(lambda: bool(seen.of(ev.SubAgentQuestion)), 30)
        return calls(call("terminate_sub_agent", agent_id=1))

    model.handler = Router(
        main=[calls(background(1)), once_asked, "已终止。"],
        subs={1: [calls(call("ask_parent", question="要继续吗？")), finish()]},
    )
    with control_session(workspace, model) as session:
        session.subscribe(seen)
        session.send("开始")
        assert session.wait_idle(30)
        rows = session.subagents()
        late = session.answer_subagent(1, "继续")
    assert rows[0]["status"] == "terminated" and "question" not in rows[0]
    assert [e.outcome for e in seen.of(ev.SubAgentAnswered)] == ["agent_ended"]
    assert late["success"] is False and late["status"] == "terminated"
    assert len(sub_requests(model, 1)) == 1  # it never got an answer to go on with


def test_continue_is_held_to_the_running_limit(workspace: Path, model: FakeOpenAIServer) -> None:
    """continue_sub_agent obeys create_sub_agent's limits: with one sub-agent allowed
    at a time and another running, continuing an ended one is refused (too_many)."""
    held, go_on = held_sub_agent("好。")

    model.handler = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="快任务", task="t")),
            calls(background(2, "慢任务")),
            calls(call("continue_sub_agent", agent_id=1, task="再做")),
            go_on,
            "收到。",
        ],
        subs={1: [finish()], 2: [held]},
    )
    with control_session(workspace, model, max_concurrent_subagents=1) as session:
        session.send("开始")
        assert session.wait_idle(30)
    refused = tool_results(main_requests(model)[3], "continue_sub_agent")[0]
    assert refused["success"] is False
    assert refused["error"] == prompts.phrase(
        "zh", "too_many", count=1, running="2 (慢任务)", max=1
    )
    assert len(sub_requests(model, 1)) == 1  # never run again
