"""A channel closed by one thread while its sender thread writes (a sub-agent's
monitor closing its worker's handle as terminate sends Terminate): the send returns
False, as after any close, and raises nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit.subagent.channel import Channel


class ClosedMidWrite:
    """An endpoint whose write meets a close made by another thread, as
    ``multiprocessing.connection.Connection`` does: its handle is None by the time it
    writes, and ``os.write(None, ...)`` raises TypeError."""

    def __init__(self) -> None:
        self.channel: Channel[Any, Any] | None = None

    def send(self, obj: Any) -> None:
        assert self.channel is not None
        self.channel.close()  # the other thread's close, between the check and the write
        raise TypeError("'NoneType' object cannot be interpreted as an integer")

    def recv(self) -> Any:
        raise EOFError

    def poll(self, timeout: float | None = None) -> bool:
        return False

    def close(self) -> None:
        pass


def test_a_close_during_the_write_is_a_send_that_returns_false() -> None:
    endpoint = ClosedMidWrite()
    channel: Channel[Any, Any] = Channel(endpoint)
    endpoint.channel = channel
    assert channel.send("terminate") is False


class BadPickle:
    def send(self, obj: Any) -> None:
        raise TypeError("cannot pickle '_thread.lock' object")

    def recv(self) -> Any:
        raise EOFError

    def poll(self, timeout: float | None = None) -> bool:
        return False

    def close(self) -> None:
        pass


def test_a_type_error_on_an_open_channel_is_still_raised() -> None:
    channel: Channel[Any, Any] = Channel(BadPickle())
    with pytest.raises(TypeError, match="pickle"):
        channel.send("message")
