"""The parent/worker contract: typed messages over a real multiprocessing pipe."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

from agentkit.subagent.contract import (
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
        Result("completed", "done", None, progress, 12),
    ]
    down: list[ParentMessage] = [ClaimAnswer(7, None), WrapUp(30), Terminate("timeout")]
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
