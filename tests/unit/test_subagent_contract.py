"""The parent/worker contract: typed messages over a real multiprocessing pipe."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
from typing import Any

import pytest
from subagent_helpers import wait_until

from agentkit.subagent.contract import (
    ApprovalAnswer,
    ApprovalRequest,
    Channel,
    ChannelClosed,
    ClaimAnswer,
    ClaimRequest,
    ParentMessage,
    Progress,
    Result,
    Terminate,
    WorkerMessage,
    WorkerSpec,
    WrapUp,
)
from agentkit.subagent.state import SubAgent


def test_every_message_kind_crosses_a_pipe_unchanged() -> None:
    parent_end, worker_end = multiprocessing.Pipe(duplex=True)
    parent: Channel[ParentMessage, WorkerMessage] = Channel(parent_end)
    worker: Channel[WorkerMessage, ParentMessage] = Channel(worker_end)
    progress = Progress(
        counters={"files_read": 2, "searches": 1, "web_pages": 0, "commands": 3},
        last_action="正在运行: ls",
        turns=4,
        token_usage={"prompt": 10, "completion": 5, "total": 15},
    )
    up: list[WorkerMessage] = [
        progress,
        ClaimRequest(request=7, path="/w/a.md"),
        ApprovalRequest(8, "run_command", {"command": "git push"}, "asks", "run_command", "c1"),
        Result("completed", "done", None, progress, 12),
    ]
    down: list[ParentMessage] = [
        ClaimAnswer(7, None),
        ApprovalAnswer(8, "deny", "not today", "user"),
        WrapUp(30),
        Terminate("timeout"),
    ]
    for message in up:
        assert worker.send(message)
        assert parent.receive(5) == message
    for message in down:
        assert parent.send(message)
        assert worker.receive(5) == message
    assert parent.receive(0.05) is None  # nothing waiting: None after the timeout
    parent.close()
    parent.close()  # idempotent
    with pytest.raises(ChannelClosed):
        worker.receive(1)
    worker.send(WrapUp(1))  # to a closed peer: buffered or False, never an exception


def test_a_closed_end_reports_a_failed_send() -> None:
    parent_end, worker_end = multiprocessing.Pipe(duplex=True)
    channel: Channel[WorkerMessage, ParentMessage] = Channel(worker_end)
    channel.close()
    assert channel.send(ClaimRequest(1, "/x")) is False
    parent_end.close()


def test_messages_and_spec_are_frozen_and_picklable() -> None:
    spec = WorkerSpec(
        1, "s", "t", 60, "d", "/w/d", "/w", "conv_1", {}, "mark", "2026-01-01T00:00:00Z"
    )
    assert pickle.loads(pickle.dumps(spec)) == spec
    with pytest.raises(AttributeError):
        spec.agent_id = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        WrapUp(3).seconds_left = 4  # type: ignore[misc]


def _agent(started: float) -> SubAgent:
    spec = WorkerSpec(
        agent_id=1,
        summary="s",
        task="t",
        timeout_seconds=60,
        deliverables_dir="out",
        deliverables_path="/tmp/out",
        workspace="/tmp",
        sub_conversation_id="conv_x",
        settings={},
        process_mark="m",
        created_at="2026-01-01T00:00:00Z",
    )
    return SubAgent(spec=spec, background=True, started=started)


def test_the_timeout_clock_stops_while_paused_and_pauses_nest() -> None:
    agent = _agent(started=100.0)
    assert agent.timeout_elapsed(now=110.0) == 10.0
    agent.pause_clock(now=110.0)
    agent.pause_clock(now=115.0)  # a second wait while the first is open
    assert agent.clock_paused()
    assert agent.timeout_elapsed(now=130.0) == 10.0  # an open pause counts up to now
    agent.resume_clock(now=140.0)
    assert agent.clock_paused()  # one pause is still open
    agent.resume_clock(now=150.0)
    assert not agent.clock_paused()
    assert agent.timeout_elapsed(now=160.0) == 20.0  # 60 s run, 40 s paused
    agent.resume_clock(now=170.0)  # unmatched: nothing changes
    assert agent.timeout_elapsed(now=170.0) == 30.0


def _send_in_thread(
    channel: Channel[Any, Any], message: Any
) -> tuple[threading.Thread, list[bool]]:
    box: list[bool] = []
    thread = threading.Thread(target=lambda: box.append(channel.send(message)), daemon=True)
    thread.start()
    return thread, box


def test_a_send_to_a_reader_that_stopped_reading_returns_false() -> None:
    # A trial's SIGTERM handler blocked for minutes writing Terminate into a pipe the
    # worker no longer read. The pipe is real; the reader here simply never reads.
    parent_end, worker_end = multiprocessing.Pipe(duplex=True)
    parent: Channel[ParentMessage, WorkerMessage] = Channel(parent_end, send_timeout=0.3)
    huge = Terminate("x" * (8 << 20))  # far more than any pipe buffer holds
    thread, box = _send_in_thread(parent, huge)
    thread.join(30)
    assert not thread.is_alive(), "the send blocked its caller"
    assert box == [False]
    # While that write is still stuck, another send fails at once instead of queueing
    # behind it (a kill of several workers must not wait once per message).
    thread, box = _send_in_thread(parent, WrapUp(5))
    thread.join(30)
    assert not thread.is_alive() and box == [False]
    # The reader comes back: the stuck message arrives whole, and sending works again.
    assert worker_end.recv() == huge
    # The sender thread marks the stall over a moment after the reader has the last
    # byte (CI saw a send in that moment refused at once); a refused send queues
    # nothing, so trying again sends exactly one.
    assert wait_until(lambda: parent.send(WrapUp(7)), 10)
    assert worker_end.recv() == WrapUp(7)
    parent.close()
    worker_end.close()


def test_concurrent_sends_keep_each_senders_order_and_errors_reach_the_caller() -> None:
    parent_end, worker_end = multiprocessing.Pipe(duplex=True)
    channel: Channel[Any, Any] = Channel(worker_end)
    threads = [
        threading.Thread(
            target=lambda n=n: [channel.send(ClaimRequest(n * 1000 + i, "/p")) for i in range(50)]
        )
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    got = [parent_end.recv() for _ in range(200)]
    for thread in threads:
        thread.join(30)
    for n in range(4):
        mine = [m.request for m in got if m.request // 1000 == n]
        assert mine == [n * 1000 + i for i in range(50)]
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        channel.send(ClaimRequest(1, lambda: None))  # type: ignore[arg-type]
    assert channel.send(ClaimRequest(2, "/q"))  # the channel still works after it
    assert parent_end.recv() == ClaimRequest(2, "/q")
    channel.close()
    parent_end.close()
