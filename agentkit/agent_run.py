"""An Agent's runs under asyncio: one dedicated thread per run, events into the loop.

One job: turn :meth:`agentkit.Agent.run` (synchronous: the conversation's driver
thread does the rounds, the run waits for them) into an :class:`AgentRun`, an
async iterator of the run's events and an awaitable result, for
``agent.stream(task)`` and ``await agent.arun(task)``::

    async with agent.stream("task") as run:
        async for event in run:  # every event of the run, sub-agents' included
            print(event.type)
    result = await run.result()

Each run gets its own ``threading.Thread``, never a thread of the event loop's
default executor: that pool is bounded (``min(32, cpus + 4)`` threads), so runs
borrowing it would wait for one another, and the application's own
``run_in_executor`` calls would wait for the runs. The run's thread hands each
event to the loop with ``call_soon_threadsafe`` into an ``asyncio.Queue``
(subscribed on the conversation's numbered stream under its lock, so the order
is the stream's) and the result into an ``asyncio.Future``.

:func:`in_thread` does the same for the blocking parts of opening and closing an
Agent (``await Agent.open(...)``, ``await agent.aclose()``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentkit import events as ev
from agentkit.errors import ConfigurationError
from agentkit.output import OutputT

if TYPE_CHECKING:
    from agentkit.agent import Agent
    from agentkit.run_result import RunResult

__all__ = ["AgentRun", "in_thread", "run_to_end"]

T = TypeVar("T")

CANCEL_REPEAT = 0.05
"""Seconds between repeated stop requests while a cancelled run has not ended: a
stop that lands between a message being queued and its round starting is cleared
by the round's start, so it is asked again until the run ends."""


class _End:
    """The mark that ends a run's event queue."""


_END = _End()


def in_thread(func: Callable[[], T], name: str = "agentkit-open") -> asyncio.Future[T]:
    """Call ``func()`` in a new thread of its own; returns the loop's future of its
    value (or of its exception). Must be called inside a running event loop.

    Cancelling the returned future (or the task awaiting it) does not stop ``func``;
    its value, nobody's then, is closed in a thread if it has a ``close()`` (an Agent
    being opened: its conversation's claim and threads must not outlive the open).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: T | None, error: BaseException | None) -> None:
        if future.cancelled():
            threading.Thread(target=_close, args=(value,), name="agentkit-close").start()
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]

    def work() -> None:
        try:
            value = func()
        except BaseException as exc:  # handed to the awaiting task, not lost in a thread
            _call_in(loop, settle, None, exc)
        else:
            if not _call_in(loop, settle, value, None):
                _close(value)  # the loop is gone: nobody will take it

    threading.Thread(target=work, name=name).start()
    return future


def _close(value: object) -> None:
    """Close ``value`` if it has a ``close()`` (a value nobody will take)."""
    close = getattr(value, "close", None)
    if callable(close):
        close()


def _call_in(loop: asyncio.AbstractEventLoop, func: Callable[..., object], *args: object) -> bool:
    """``loop.call_soon_threadsafe(func, *args)``; returns False, doing nothing, once
    the loop is closed (nobody is left to hear it)."""
    try:
        loop.call_soon_threadsafe(func, *args)
    except RuntimeError:
        return False
    return True


class AgentRun(Generic[OutputT]):
    """One run of an :class:`~agentkit.Agent` under asyncio (``agent.stream(task)``).

    ``async with agent.stream(task) as run:`` starts it; ``async for event in run``
    yields each :class:`agentkit.events.Event` of the run in the order of the
    conversation's stream, from ``RunStarted`` to ``RunFinished`` (sub-agents'
    events included), then ends; :meth:`result` gives the
    :class:`~agentkit.RunResult`; :meth:`cancel` stops the run. Leaving the
    ``async with`` block before the run ended (a ``break``, an exception, a web
    client gone) cancels it and waits for its end, so the conversation is saved
    and no sub-agent outlives it. The iterator can be used once.

    Args:
        agent: the Agent to run (an Agent runs one task at a time: a second run
            waits for the first).
        task: the user's message (ConfigurationError at once if empty).
        on_event: also called with each event, on the publishing thread (as
            :meth:`Agent.run <agentkit.Agent.run>` calls it).
        collect: keep events for iteration (False for :meth:`Agent.arun
            <agentkit.Agent.arun>`, which only awaits the result).
        output_type, output_retries: the typed result asked of the run, as
            :meth:`Agent.run <agentkit.Agent.run>` takes them (``RunResult.output``).
    """

    def __init__(
        self,
        agent: Agent,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        collect: bool = True,
        output_type: type[Any] | None = None,
        output_retries: int | None = None,
    ) -> None:
        if not task or not task.strip():
            raise ConfigurationError("the task is empty")
        self.agent = agent
        self.task = task
        self._on_event = on_event
        self._collect = collect
        self._output_type = output_type
        self._output_retries = output_retries
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[ev.Event | _End] = asyncio.Queue()
        self._done: asyncio.Future[RunResult[OutputT]] | None = None
        self._in_run = False  # between our RunStarted and RunFinished (run thread)
        self._cancel_asked = False
        self._ended = False

    # ------------------------------------------------------------- starting
    def start(self) -> AgentRun[OutputT]:
        """Start the run in its own thread (once; later calls do nothing); returns
        self. Must be called inside a running event loop."""
        if self._done is not None:
            return self
        self._loop = asyncio.get_running_loop()
        self._done = self._loop.create_future()
        thread = threading.Thread(target=self._work, name="agentkit-run")
        thread.start()
        return self

    def _started(self) -> asyncio.Future[RunResult[OutputT]]:
        self.start()
        assert self._done is not None
        return self._done

    def _work(self) -> None:
        """The run's thread: run the task, then hand the end to the loop."""
        try:
            result: RunResult[Any] = self.agent.run(
                self.task,
                on_event=self._forward,
                output_type=self._output_type,
                output_retries=self._output_retries,
            )
        except BaseException as exc:  # ConfigurationError and the like reach the awaiter
            self._hand(self._settle, None, exc)
        else:
            self._hand(self._settle, result, None)

    def _forward(self, event: ev.Event) -> None:
        """Called for each event on the publishing thread, under the stream's lock."""
        if isinstance(event, ev.RunStarted):
            self._in_run = True
        elif isinstance(event, ev.RunFinished):
            self._in_run = False
        if self._collect:
            self._hand(self._queue.put_nowait, event)
        if self._on_event is not None:
            self._on_event(event)  # an error here is logged by the stream, as in run()

    def _hand(self, func: Callable[..., object], *args: object) -> None:
        assert self._loop is not None
        _call_in(self._loop, func, *args)

    def _settle(self, result: RunResult[OutputT] | None, error: BaseException | None) -> None:
        """In the loop: the run ended; end the iterator after the events queued."""
        assert self._done is not None
        self._queue.put_nowait(_END)
        if self._done.done():
            return
        if error is not None:
            self._done.set_exception(error)
        else:
            assert result is not None
            self._done.set_result(result)

    # ------------------------------------------------------------ consuming
    async def result(self) -> RunResult[OutputT]:
        """Wait for the end of the run and return its RunResult (``status`` ``done``,
        ``failed`` or ``cancelled``). Starts the run if it has not started.
        Cancelling the awaiting task does not cancel the run (see :meth:`cancel`).

        Raises what :meth:`Agent.run <agentkit.Agent.run>` raises: ConfigurationError
        for a task the context window cannot take or a closed Agent.
        """
        return await asyncio.shield(self._started())

    async def cancel(self) -> None:
        """Stop the run and wait for its end: the model request and tools are
        interrupted, sub-agents ended, the conversation saved; :meth:`result` then
        says ``cancelled`` (or what the run had already ended with). Idempotent."""
        done = self._started()
        self._cancel_asked = True
        while not done.done():
            if self._in_run:  # never another run of the same Agent, waiting for its turn
                self.agent.cancel()
            await asyncio.wait([done], timeout=CANCEL_REPEAT)
        if not done.cancelled():
            done.exception()  # seen: the one who awaits result() gets it

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancel_asked

    def __aiter__(self) -> AgentRun[OutputT]:
        self.start()
        return self

    async def __anext__(self) -> ev.Event:
        if self._ended or not self._collect:
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, _End):
            self._ended = True
            done = self._started()
            if not done.cancelled() and done.exception() is not None:
                raise done.exception()  # type: ignore[misc]
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> AgentRun[OutputT]:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        done = self._started()
        if done.done():
            return
        try:
            await self.cancel()  # left early: the run must not outlive the block
        except asyncio.CancelledError:
            if exc_type is None:  # cancelled again while stopping: say so
                raise


async def run_to_end(
    agent: Agent,
    task: str,
    on_event: ev.EventHandler | None = None,
    *,
    output_type: type[Any] | None = None,
    output_retries: int | None = None,
) -> RunResult[Any]:
    """:meth:`Agent.arun <agentkit.Agent.arun>`: run ``task`` in a thread of its own
    and return its RunResult. Cancelling the awaiting task stops the run the way
    :meth:`AgentRun.cancel` does, waits for its end (so ``agent.last_result`` holds
    the ``cancelled`` result), then lets the CancelledError go on."""
    run: AgentRun[Any] = AgentRun(
        agent,
        task,
        on_event,
        collect=False,
        output_type=output_type,
        output_retries=output_retries,
    )
    try:
        return await run.result()
    except asyncio.CancelledError:
        await run.cancel()
        raise
