"""The session API over real workers and FakeOpenAIServer: rounds end at the answer,
background sub-agents go on, completions start rounds by themselves, messages queue
(docs/architecture.md §9; docs/specification.md §2, §3, §8.5)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import (
    Gate,
    Recorder,
    Router,
    call,
    calls,
    finish,
    scripted_settings,
    wait_until,
    who,
)

from agentkit import events as ev
from agentkit.chat import Session, Workspace
from agentkit.errors import ConfigurationError
from agentkit.process.tree import processes_with_mark
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

USER_TEMPLATE = "子智能体{id} ({summary}) 已完成任务。\n\n{result}\n\n交付目录：{dir}"


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    """Settings for a model played by ``server`` (see subagent_helpers.scripted_settings)."""
    return scripted_settings(server, "zh", **overrides)


def background(agent_id: int, summary: str, **extra: Any) -> dict[str, Any]:
    return call(
        "create_sub_agent",
        agent_id=agent_id,
        summary=summary,
        task=f"任务{agent_id}",
        run_in_background=True,
        **extra,
    )


def main_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if who(r) is None]


def test_send_returns_at_the_answer_while_a_background_sub_agent_works(workspace: Path) -> None:
    gate = Gate()
    router = Router(
        main=[
            calls(background(1, "后台长任务")),
            "已在后台启动。",
            "第二个问题的回答。",
            "收到通知。",
        ],
        subs={1: [gate.hold(finish("后台任务做完了。"))]},
    )
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        seen = Recorder()
        session.subscribe(seen)
        first = session.send("开始后台任务")
        assert first.status == "done" and first.final_text == "已在后台启动。"
        assert first.background == [1]
        assert session.state == "waiting_for_subagents"
        second = session.send("另一个问题")  # answered while the sub-agent still works
        assert second.final_text == "第二个问题的回答。"
        assert session.manager.agents[1].status == "running"
        gate.event.set()
        assert session.wait_idle(30)
        rounds = seen.of(ev.RoundFinished)
        assert [r.background for r in rounds] == [[1], [1], []]
        assert len(seen.of(ev.AllWorkDone)) == 1  # only once all work is done
        kinds = [type(e).__name__ for e in seen.events]
        assert kinds.index("AllWorkDone") > len(kinds) - 1 - kinds[::-1].index("RoundFinished")
        assert all(e.conversation_id == session.id for e in seen.events)


def test_a_completion_between_rounds_starts_a_round_with_the_seed_user_template(
    workspace: Path,
) -> None:
    gate = Gate()
    router = Router(
        main=[calls(background(1, "写报告")), "我会等它。", "报告已收到。"],
        subs={1: [gate.hold(finish("报告写完了，在 report.md。"))]},
    )
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        seen = Recorder()
        session.subscribe(seen)
        session.send("写一份报告")
        gate.event.set()
        started = seen.wait_for(ev.RoundStarted, 2)
        assert started[1].trigger == "notification"
        assert session.wait_idle(30)
        notice = main_requests(server)[2]["messages"][-1]
    assert notice == {
        "role": "user",
        "content": USER_TEMPLATE.format(
            id=1,
            summary="写报告",
            result="报告写完了，在 report.md。",
            dir="sub_agent_results/agent_1",
        ),
    }
    assert session.last_result is not None and session.last_result.final_text == "报告已收到。"


def test_a_completion_during_a_round_comes_as_the_system_template(workspace: Path) -> None:
    gate = Gate()

    def read_then(request: dict[str, Any]) -> Any:
        gate.event.set()
        wait_until(lambda: agent_done.is_set(), 20)
        return calls(call("read_file", path="a.txt"))

    agent_done = threading.Event()
    (workspace / "a.txt").write_text("x\n")
    router = Router(
        main=[calls(background(1, "快任务")), read_then, "都好了。"],
        subs={1: [gate.hold(finish("快任务完成。"))]},
    )
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        session.subscribe(
            lambda e: agent_done.set() if isinstance(e, ev.SubAgentFinished) else None
        )
        result = session.send("开始")
        assert session.wait_idle(30)
        last = main_requests(server)[2]["messages"]
    assert result.final_text == "都好了。"
    system = [m for m in last if m["role"] == "system"][-1]["content"]
    assert system.startswith("子智能体1 (快任务) 已完成。\n\n运行时间：")
    assert "结果摘要：快任务完成。" in system
    # Announced once: no round was started for it afterwards.
    assert len(main_requests(server)) == 3


def test_agents_ending_together_share_one_notification(workspace: Path) -> None:
    gate = Gate()
    router = Router(
        main=[calls(background(1, "甲"), background(2, "乙")), "等待。", "两个都完成了。"],
        subs={1: [gate.hold(finish("甲完成。"))], 2: [gate.hold(finish("乙完成。"))]},
    )
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        session.send("并行")
        original = session.manager.take_finished

        def take_both() -> Any:  # hold the first completion until both ended
            agents = list(session.manager.agents.values())
            if any(a.status != "running" for a in agents):
                for a in agents:
                    a.done.wait(20)
            return original()

        session.manager.take_finished = take_both  # type: ignore[method-assign]
        gate.event.set()
        assert session.wait_idle(30)
        requests = main_requests(server)
    assert len(requests) == 3
    notice = requests[2]["messages"][-1]["content"]
    assert notice.count("已完成任务。") == 2 and notice.index("子智能体1") < notice.index(
        "子智能体2"
    )


def test_a_message_sent_during_a_round_joins_after_the_tool_results(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    held = threading.Event()
    go_on = threading.Event()

    def slow_read(request: dict[str, Any]) -> Any:
        held.set()
        go_on.wait(20)
        return calls(call("read_file", path="a.txt"))

    router = Router(main=[slow_read, "读完了，也看到了你的补充。", "第三条的回答"])
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        seen = Recorder()
        session.subscribe(seen)
        first = session.post("读 a.txt")
        assert held.wait(20)
        second = session.post("补充：只要第一行")  # returns at once: queued
        third = session.post("第三条")
        queued = seen.wait_for(ev.MessageQueued, 2)
        assert [q.position for q in queued] == [1, 2]
        go_on.set()
        assert first.result(30).final_text == "读完了，也看到了你的补充。"
        assert second.result(30) is first.result()  # answered in the same round
        assert third.result(30).round == 1
        messages = main_requests(server)[1]["messages"]
    roles = [m["role"] for m in messages[-4:]]
    assert roles == ["assistant", "tool", "user", "user"]
    assert [m["content"] for m in messages[-2:]] == ["补充：只要第一行", "第三条"]


def test_cancel_stops_the_round_only(workspace: Path) -> None:
    gate = Gate()
    started = threading.Event()

    def slow(request: dict[str, Any]) -> Any:
        from agentkit.testing import Reply

        if started.is_set():  # asked again after the cancel (no answer was added)
            return "还在。"
        started.set()
        return Reply(content="太晚了", latency=20)

    router = Router(
        main=[calls(background(1, "后台")), "启动了。", slow, "好的。"],
        subs={1: [gate.hold(finish("后台完成。"))]},
    )
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        session.send("启动")
        future = session.post("慢问题")
        assert started.wait(20)
        assert session.cancel()
        assert future.result(15).status == "cancelled"
        assert session.manager.agents[1].status == "running"  # background work goes on
        assert session.send("还在吗").final_text == "还在。"
        gate.event.set()
        assert session.wait_idle(30)
    assert session.manager.agents[1].status == "completed"


def test_switching_conversation_ends_its_sub_agents(workspace: Path) -> None:
    def main(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["content"] == "你好":
            return "新对话的回答。"
        return (
            calls(background(1, "长任务"))
            if request["messages"][-1]["role"] == "user"
            else "已启动。"
        )

    router = Router(main=[main], subs={1: [calls(call("run_command", command="sleep 600"))]})
    with FakeOpenAIServer(router) as server, Workspace(workspace, settings_for(server)) as ws:
        first = ws.create()
        first.send("开始长任务")
        mark = first.manager.agents[1].spec.process_mark
        assert wait_until(lambda: len(processes_with_mark(mark)) >= 2)  # worker and command
        second = ws.switch(first.id)  # to a new conversation (§8.5)
        assert first.closed and first.manager.agents[1].status == "terminated"
        assert wait_until(lambda: not processes_with_mark(mark), 20)
        assert second.send("你好").final_text == "新对话的回答。"
        listed = {i.id: i for i in ws.list()}
    assert listed[first.id].subagents_running == 0 and listed[first.id].title == "开始长任务"


def test_two_conversations_run_at_once_each_with_its_own_sub_agents(workspace: Path) -> None:
    gates = {"甲": Gate(), "乙": Gate()}

    def main(request: dict[str, Any]) -> Any:
        text = request["messages"][1]["content"]
        name = "甲" if "甲" in text else "乙"
        count = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if count == 0:
            return calls(background(1, f"{name}的任务", deliverables_dir=f"out/{name}"))
        return f"{name}:第{count}轮"

    def sub(request: dict[str, Any]) -> Any:
        name = "甲" if "甲的任务" in request["messages"][1]["content"] else "乙"
        gates[name].event.wait(20)
        return finish(f"{name}完成。")

    router = Router(main=[main], subs={1: [sub]})
    with FakeOpenAIServer(router) as server, Workspace(workspace, settings_for(server)) as ws:
        a, b = ws.create(), ws.create()
        fa, fb = a.post("对话甲"), b.post("对话乙")
        assert fa.result(30).final_text == "甲:第1轮" and fb.result(30).final_text == "乙:第1轮"
        assert a.manager.agents[1] is not b.manager.agents[1]  # each has its own agent 1
        gates["乙"].event.set()
        assert b.wait_idle(30) and not a.wait_idle(0.5)
        assert b.last_result is not None and b.last_result.final_text == "乙:第2轮"
        gates["甲"].event.set()
        assert a.wait_idle(30)


def test_a_restarted_conversation_hears_of_sub_agents_that_ended_unseen(workspace: Path) -> None:
    gate = Gate()
    router = Router(
        main=[calls(background(1, "离线完成")), "先这样。", "知道了。"],
        subs={1: [gate.hold(finish("离线时完成了。"))]},
    )
    with FakeOpenAIServer(router) as server:
        session = Session(workspace, settings_for(server))
        session.send("开始")
        conversation_id = session.id
        # The process "stops listening": the record finishes while the conversation
        # file still lists the sub-agent as running (as after a crash).
        saved = session.conversation.subagents
        # Simulate a crash (no clean close): the driver stops and nothing is saved any
        # more, before the sub-agent ends (else its notification round could still run).
        session._closed = True  # noqa: SLF001
        with session._driver.wake:  # noqa: SLF001
            session._driver.wake.notify_all()  # noqa: SLF001
        session._driver.join(10)  # noqa: SLF001
        session._flush()  # noqa: SLF001 - its last save lands before the file is edited
        gate.event.set()
        assert session.manager.agents[1].done.wait(20)
        for row in saved:
            row["status"] = "running"
        path = session.transcript_path
        data = json.loads(path.read_text())
        data["subagents"] = [dict(r, status="running") for r in data["subagents"]]
        path.write_text(json.dumps(data))
        again = Session(workspace, settings_for(server), conversation_id=conversation_id)
        try:
            answer = again.send("继续")
            sent = main_requests(server)[-1]["messages"]
        finally:
            again.close()
    assert answer.final_text == "知道了。"
    notes = [m["content"] for m in sent if m["role"] == "system"][1:]
    assert any("子智能体1 (离线完成)" in n and "离线时完成了。" in n for n in notes), notes


def test_events_stream_to_asyncio_in_order(workspace: Path) -> None:
    with FakeOpenAIServer(["一", "二"]) as server, Session(workspace, settings_for(server)) as s:

        async def consume() -> list[tuple[int, str]]:
            got: list[tuple[int, str]] = []
            stream = s.events()
            first = await s.asend("第一")
            second = await s.asend("第二")
            assert (first.final_text, second.final_text) == ("一", "二")
            async for item in stream:
                got.append((item.seq, item.event.type))
                if item.event.type == "RoundFinished" and item.event.round == 2:
                    break
            return got

        got = asyncio.run(consume())
    seqs = [seq for seq, _ in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    kinds = [kind for _, kind in got]
    assert kinds.count("RoundStarted") == 2 and kinds.count("UserMessage") == 2
    assert (
        kinds.index("RoundStarted") < kinds.index("AssistantMessage") < kinds.index("RoundFinished")
    )


def test_a_conversation_left_and_reopened_tells_the_model_what_was_stopped(
    workspace: Path,
) -> None:
    """Regression (trial): /new, /switch and Workspace.switch ended the sub-agents, but
    the reopened conversation said nothing, so the model still thought #1 ran."""

    def main(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"] == "开始":
            return calls(background(1, "长时间任务"))
        return "好的。"

    router = Router(main=[main], subs={1: [calls(call("run_command", command="sleep 600"))]})
    with FakeOpenAIServer(router) as server, Workspace(workspace, settings_for(server)) as ws:
        first = ws.create()
        first.send("开始")
        assert wait_until(lambda: first.manager.agents[1].last_action != "")
        ws.switch(first.id)  # leave it: #1 is stopped
        saved = json.loads(first.transcript_path.read_text())
        again = ws.open(first.id)
        again.send("还在跑吗？")
        sent = main_requests(server)[-1]["messages"]
    assert saved["state"] == "idle" and first.state == "idle"
    assert saved["subagents"][0]["status"] == "terminated"
    notes = [m["content"] for m in sent if m["role"] == "system"][1:]
    assert any("子智能体1 (长时间任务)" in n and "terminated" in n for n in notes), notes
    assert "因对话被关闭、切换或结束而停止" in saved["subagents"][0]["result_summary"]


def test_one_conversation_cannot_be_open_twice(workspace: Path) -> None:
    """Regression (trial): two live sessions on one conversation lost messages (the
    last writer won). The second opening is refused; a closed one frees it."""
    with FakeOpenAIServer(["一", "二", "三"]) as server:
        first = Session(workspace, settings_for(server))
        first.send("你好")
        with pytest.raises(ConfigurationError, match="already open in this process"):
            Session(workspace, settings_for(server), conversation_id=first.id)
        first.close()
        second = Session(workspace, settings_for(server), conversation_id=first.id)
        assert second.send("再来").final_text == "二"
        second.close()
        # A claim left by a process that is gone (killed) is taken over.
        lock = first.transcript_path.with_suffix(".lock")
        lock.write_text(json.dumps({"pid": 999_999_999, "started": 1.0}))
        third = Session(workspace, settings_for(server), conversation_id=first.id)
        third.close()
    assert not lock.exists()


def test_a_started_sub_agent_is_in_the_conversation_file_at_once(workspace: Path) -> None:
    """Regression (trial): a background sub-agent created in the same tool batch as a
    long blocking one was missing from the file until the batch ended, so a killed
    process group lost it."""
    gate = Gate()
    router = Router(
        main=[
            calls(
                background(1, "后台一"),
                call("create_sub_agent", agent_id=2, summary="阻塞二", task="t"),
            ),
            "完成。",
        ],
        subs={1: [gate.hold(finish("一完成。"))], 2: [gate.hold(finish("二完成。"))]},
    )
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        future = session.post("开始")
        path = session.transcript_path

        def listed() -> set[int]:
            try:
                rows = json.loads(path.read_text()).get("subagents") or []
            except (OSError, ValueError):
                return set()
            return {r["agent_id"] for r in rows}

        assert wait_until(lambda: listed() == {1, 2})  # while #2 still blocks the batch
        gate.event.set()
        assert future.result(30).final_text == "完成。"
        assert session.wait_idle(30)


def test_a_file_as_deliverables_folder_is_refused_and_frees_the_id(workspace: Path) -> None:
    """Regression (trial): an existing file as deliverables_dir used up the id and
    answered with a raw 'File exists' error."""
    (workspace / "a.txt").write_text("x")
    router = Router(main=["unused"])
    with FakeOpenAIServer(router) as server, Session(workspace, settings_for(server)) as session:
        refused = session.manager.create(
            agent_id=1, summary="写文件夹", task="t", deliverables_dir="a.txt/sub"
        )
        again = session.manager.create(
            agent_id=1, summary="写文件夹", task="t", deliverables_dir="a.txt"
        )
    assert refused["success"] is False and "a.txt exists and is a file" in refused["error"]
    assert again["success"] is False and "a.txt exists and is a file" in again["error"]
    assert 1 not in session.manager.agents


def test_a_message_larger_than_the_context_window_is_refused_before_anything_is_sent(
    workspace: Path,
) -> None:
    with FakeOpenAIServer(["short one answered"]) as server:
        settings = settings_for(server, context_window=4000, max_output_tokens=1000)
        with Session(workspace, settings) as session:
            huge = "pelican " * 5000  # ~5,000 tokens: more than the window leaves
            with pytest.raises(ConfigurationError, match="tokens, more than the") as refused:
                session.post(huge)
            assert "save the text in a file" in str(refused.value)
            # Not queued, not saved, nothing sent; the conversation goes on.
            assert session.state == "idle" and not session.conversation.messages
            assert session.send("pelican " * 100).final_text == "short one answered"
    assert len(server.requests) == 1


def test_the_message_limit_leaves_room_for_the_system_prompt_and_tools(workspace: Path) -> None:
    with FakeOpenAIServer(["unused"]) as server:
        settings = settings_for(server, context_window=8000, max_output_tokens=1000)
        with Session(workspace, settings) as session:
            overhead = session.request_overhead()
            room = int(8000 * settings.context_budget) - 1000
            assert 1000 < overhead < room  # the system prompt and the tool schemas
            # Fits the window alone, not beside the system prompt and tools.
            from agentkit.tokens import count_text

            per_word = count_text("pelican " * 1000) / 1000
            text = "pelican " * int((room - overhead // 2) / per_word)
            assert room - overhead < count_text(text) < room
            with pytest.raises(ConfigurationError, match="the system prompt and the tools"):
                session.post(text)
    assert server.requests == []


def test_a_window_too_small_for_the_prompt_still_takes_short_messages(workspace: Path) -> None:
    # The engine always leaves 256 tokens for the messages: the limit says the same.
    with FakeOpenAIServer(["short answered"]) as server:
        settings = settings_for(server, context_window=4000, max_output_tokens=4000)
        with Session(workspace, settings) as session:
            with pytest.raises(ConfigurationError, match="more than the 256 the model"):
                session.post("pelican " * 1000)
            assert session.send("pelican " * 50).final_text == "short answered"


def test_a_round_ended_by_close_names_no_sub_agent_as_working_on(workspace: Path) -> None:
    """Closing a session (leaving the chat, switching conversations on the page) cancels
    its round and ends its sub-agents (§8.5): the round's end must not say they "keep
    working in the background" (a new user saw exactly that, then the row 'stopped')."""
    gate, held = Gate(), Gate()
    router = Router(
        main=[calls(background(1, "后台长任务")), held.hold("太晚了")],
        subs={1: [gate.hold(finish("做完了。"))]},
    )
    with FakeOpenAIServer(router) as server:
        session = Session(workspace, settings_for(server))
        seen = Recorder()
        session.subscribe(seen)
        sender = threading.Thread(target=lambda: session.send("开始"), daemon=True)
        sender.start()
        try:
            seen.wait_for(ev.SubAgentStarted)
            assert wait_until(
                lambda: len(main_requests(server)) == 2
            )  # the round waits on the model
            session.close()
            (finished,) = seen.wait_for(ev.RoundFinished)
        finally:
            gate.event.set()
            held.event.set()
            session.close()
            sender.join(30)
    assert finished.status == "cancelled"
    assert finished.background == []
    assert session.conversation.round_ends[-1]["background"] == []


def test_a_session_taking_its_messages_reads_running_and_still_lists_them(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (CI, tests/integration/test_web_limits.py): between the driver taking the queued
    messages and the round starting, the session read ``idle`` with the messages
    neither queued nor in the conversation; a page polling for "idle and nothing
    queued" then saw a conversation without them. Every moment of the take is
    checked here: the planning step itself reports what a reader would see."""
    import agentkit.chat.driver as driver_module

    seen: list[tuple[str, list[str]]] = []
    holder: dict[str, Session] = {}
    real_plan_round = driver_module.plan_round

    def watching_plan_round(manager: Any, inbox: Any, messages: list[Any], **kw: Any) -> Any:
        session = holder.get("session")
        if session is not None and messages:
            waiting = session.inbox.unsaved(list(session.conversation.messages))
            seen.append((session.state, waiting))
        return real_plan_round(manager, inbox, messages, **kw)

    monkeypatch.setattr(driver_module, "plan_round", watching_plan_round)
    with (
        FakeOpenAIServer(["第一条的回答"]) as server,
        Session(workspace, settings_for(server)) as session,
    ):
        holder["session"] = session
        assert session.send("第一条").final_text == "第一条的回答"
    assert seen == [("running", ["第一条"])]


def test_a_reopened_conversation_numbers_its_rounds_on(workspace: Path) -> None:
    """Regression (a new user's trial): after ``agentkit chat --continue`` the rounds
    were numbered from 1 again, so a page or a log showed two "round 1"s."""
    with FakeOpenAIServer(["一", "二", "三"]) as server:
        with Session(workspace, settings_for(server)) as first:
            assert [first.send(t).round for t in ("a", "b")] == [1, 2]
            cid = first.id
        with Session(workspace, settings_for(server), conversation_id=cid) as again:
            assert again.send("c").round == 3
    saved = json.loads((workspace / ".agentkit" / "conversations" / f"{cid}.json").read_text())
    assert saved["rounds"] == 3


def test_wait_idle_waits_for_a_message_posted_as_the_last_round_settles(workspace: Path) -> None:
    """Regression (CI: a piped second line went unanswered): a message posted while the
    driver settled the last round (after it found nothing queued, before it set
    ``idle``) left ``idle`` set with the message queued, so ``wait_idle`` returned and
    the JSON chat closed before answering it. Posted here from the ``idle`` state's
    event, inside that window, every time."""
    with FakeOpenAIServer(["one", "two"]) as server, Session(workspace, settings_for(server)) as s:
        posted: list[Any] = []

        def on_event(event: ev.Event) -> None:
            if isinstance(event, ev.StateChanged) and event.state == "idle" and not posted:
                posted.append(s.post("second"))

        s.subscribe(on_event)
        s.post("first")
        assert s.wait_idle(30)
        assert posted and posted[0].done()
        assert posted[0].result().final_text == "two"
