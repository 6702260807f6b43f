"""A channel closed by one thread while its sender thread writes (a sub-agent's
monitor closing its worker's handle as terminate sends Terminate): the send returns
False, as after any close, and raises nothing."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit.subagent.channel import Channel


class RaisesOnSend:
    """An endpoint whose write raises TypeError(``message``). With ``closing``, the
    channel is closed first, as another thread's close between the check and the
    write leaves ``multiprocessing.connection.Connection`` (its handle None by the time
    it writes: ``os.write(None, ...)``); without, it is an object that cannot be
    pickled."""

    def __init__(self, message: str, closing: bool = False) -> None:
        self.message = message
        self.closing = closing
        self.channel: Channel[Any, Any] | None = None

    def send(self, obj: Any) -> None:
        if self.closing:
            assert self.channel is not None
            self.channel.close()
        raise TypeError(self.message)

    def recv(self) -> Any:
        raise EOFError

    def poll(self, timeout: float | None = None) -> bool:
        return False

    def close(self) -> None:
        pass


def test_a_close_during_the_write_is_a_send_that_returns_false() -> None:
    endpoint = RaisesOnSend("'NoneType' object cannot be interpreted as an integer", closing=True)
    channel: Channel[Any, Any] = Channel(endpoint)
    endpoint.channel = channel
    assert channel.send("terminate") is False


def test_a_type_error_on_an_open_channel_is_still_raised() -> None:
    channel: Channel[Any, Any] = Channel(RaisesOnSend("cannot pickle '_thread.lock' object"))
    with pytest.raises(TypeError, match="pickle"):
        channel.send("message")
