"""A worker's SIGTERM waits for the parent's Terminate already in the pipe.

The parent ends a sub-agent (timeout, terminate) by sending Terminate with its reason
and then SIGTERM. The worker's signal thread and its reader thread then race: the
signal ended the worker as ``parent_gone`` when it won, while the parent recorded
``timeout`` (a fresh-clone CI saw the trace say so). ``ParentLink.settle`` is what the
signal thread calls first.
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

from agentkit.subagent.contract import Channel, Steer, Terminate
from agentkit.subagent.worker.parent_link import ParentLink


def _link() -> tuple[ParentLink, Channel[Any, Any], list[bool]]:
    parent_end, worker_end = multiprocessing.Pipe()
    gone: list[bool] = []
    return ParentLink(worker_end, gone.append), Channel(parent_end), gone


def test_a_terminate_unread_when_the_signal_comes_is_acted_on_first() -> None:
    link, parent, gone = _link()
    assert parent.send(Terminate(reason="timeout"))
    # The reader is slow to start (a loaded machine): the message waits in the pipe.
    threading.Timer(0.2, link.start_reader).start()
    link.settle(30)
    assert link.end_reason == "timeout"
    assert gone == [True]
    parent.close()


def test_settle_returns_at_once_when_nothing_is_unread() -> None:
    link, parent, gone = _link()
    link.start_reader()
    link.settle(3600)  # an outside SIGTERM: no message, no wait (else this hangs)
    assert link.end_reason is None and gone == []
    parent.close()


def test_settle_waits_out_other_messages_but_not_for_a_terminate_that_never_comes() -> None:
    link, parent, gone = _link()
    got: list[Any] = []
    link.set_control(got.append)
    assert parent.send(Steer(1, "first"))
    threading.Timer(0.2, link.start_reader).start()
    link.settle(30)  # returns once the steer is acted on
    assert got == [Steer(1, "first")]
    assert link.end_reason is None and gone == []
    parent.close()
