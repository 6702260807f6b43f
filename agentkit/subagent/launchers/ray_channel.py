"""The parent/worker channel over Ray: a mailbox in the worker's host actor.

One job: carry the contract's messages (agentkit.subagent.contract) between the
main process (the Ray driver) and a worker's host actor on whichever node Ray
placed it, with the pipe's guarantees: each message delivered once, in the order
sent, and the end of the link seen as EOF.

Design. The host actor (agentkit.subagent.launchers.ray_host) holds a
:class:`Mailbox` per job (one sub-agent's run on that actor); the driver holds a
:class:`RayEndpoint` for the job, the contract's Endpoint, so Channel and the
supervisor are unchanged. Every call names its job, so a reused actor never mixes
one sub-agent's messages with the next one's.

- Worker → parent: the host numbers every message (1, 2, ...) into an outbox;
  the driver long-polls ``take(after, timeout)``, which first drops what the
  driver already has (``seq <= after``: the call doubles as the acknowledgement)
  and returns the rest in order. A lost or repeated poll therefore neither loses
  nor repeats a message.
- Parent → worker: each ``send`` is one actor call ``deliver(seq, message)``.
  The host actor is threaded (calls may run out of order, even before the job's
  ``start``), so it forwards strictly by sequence number, holding early ones until
  the worker is there, and ignores repeats.
- The end: once the worker process ended and the outbox is drained, ``take``
  says ``closed`` with the exit code; the endpoint then raises EOFError (the
  Channel's ChannelClosed), as a pipe does. When the actor itself is gone (its
  node died, it was killed by Ray) before any Result came, the endpoint hands the
  supervisor a ``failed`` Result naming the reason, so the sub-agent fails with
  it and the conversation goes on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from agentkit.conversation import SEED_COUNTERS
from agentkit.subagent.contract import Progress, Result

# One long-poll waits at most this long on the host (seconds); the supervisor polls
# with shorter timeouts, so this only bounds blocking recv() calls.
LONG_POLL = 1.0
# Extra seconds the driver waits for a poll's answer beyond its timeout (Ray's own
# latency, a busy node) before treating the poll as empty.
CALL_SLACK = 30.0


def empty_progress() -> Progress:
    """Progress with the four seed counters at zero (a worker that never ran)."""
    counters = dict.fromkeys(SEED_COUNTERS, 0)
    return Progress(counters=counters, last_action="", turns=0, token_usage={})


def failed_result(why: str, progress: Progress | None = None) -> Result:
    """A ``failed`` Result with ``why`` as error and summary (for a worker that could
    not start or whose node died); ``progress``: the last counters seen."""
    return Result(
        status="failed",
        result_summary=why,
        error=why,
        progress=progress or empty_progress(),
        runtime_seconds=0,
    )


class Mailbox:
    """The host actor's side: outbox (worker → parent) and in-order inbox.

    Args:
        forward: sends one parent message to the worker (its pipe); returns False
            when the worker is gone (the message is then dropped, as a pipe would).
            None until the worker runs (:meth:`attach`): parent messages wait.
    """

    def __init__(self, forward: Callable[[Any], bool] | None = None) -> None:
        self.forward = forward
        self._cond = threading.Condition()
        self._outbox: list[tuple[int, Any]] = []
        self._last_put = 0
        self._closed = False
        self._exit_code: int | None = None
        self._inbox: dict[int, Any] = {}
        self._next_in = 1
        self._in_lock = threading.Lock()

    def put(self, message: Any) -> None:
        """Queue one worker message for the driver (numbered in arrival order)."""
        with self._cond:
            self._last_put += 1
            self._outbox.append((self._last_put, message))
            self._cond.notify_all()

    def close(self, exit_code: int | None) -> None:
        """The worker ended (``exit_code``, None when unknown): nothing more comes."""
        with self._cond:
            self._closed = True
            self._exit_code = exit_code
            self._cond.notify_all()

    def take(self, after: int, timeout: float) -> tuple[list[tuple[int, Any]], bool, int | None]:
        """Drop messages numbered ``<= after`` (the driver has them); wait up to
        ``timeout`` seconds for more. Returns ``(messages, closed, exit_code)``:
        numbered messages in order; ``closed`` only once every message was taken."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            self._outbox = [item for item in self._outbox if item[0] > after]
            while not self._outbox and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            messages = list(self._outbox)
            return messages, self._closed and not messages, self._exit_code

    def deliver(self, seq: int, message: Any) -> None:
        """Forward parent message ``seq`` to the worker in sequence order; early ones
        wait for their predecessors (and for the worker), repeats are ignored."""
        with self._in_lock:
            if seq >= self._next_in:
                self._inbox[seq] = message
            self._flush()

    def attach(self, forward: Callable[[Any], bool]) -> None:
        """The worker runs: forward the messages held for it, and the next ones."""
        with self._in_lock:
            self.forward = forward
            self._flush()

    def _flush(self) -> None:
        while self.forward is not None and self._next_in in self._inbox:
            pending = self._inbox.pop(self._next_in)
            self._next_in += 1
            self.forward(pending)


class RayEndpoint:
    """The driver's Endpoint over a host actor's job (``deliver`` and ``take`` methods,
    each given ``job`` first).

    ``actor`` may come later (:meth:`attach`: the sub-agent waits for a host): until
    then sends are held, in order, and polls find nothing; :meth:`fail` ends a link
    that never got one. ``send`` raises OSError after :meth:`close`; ``recv`` raises
    EOFError at the end of the link. Thread-safety: sends are serialised by the
    Channel; one reader. ``on_end``: called once when the worker's Result arrives or
    the link ends (the pool then knows the actor is about to be free). ``on_result``:
    called with the worker's Result before the reader gets it, and may replace it (an
    isolated sub-agent's work is brought back there).
    """

    def __init__(
        self,
        actor: Any = None,
        job: int = 0,
        on_end: Callable[[], None] | None = None,
        on_result: Callable[[Result], Result] | None = None,
    ) -> None:
        import ray

        self._ray = ray
        self.actor = actor
        self.job = job
        self._held: list[tuple[int, Any]] = []  # sends before the actor came
        self._send_lock = threading.Lock()
        self._wake = threading.Event()  # the actor came, or the link ended without one
        self._buffer: deque[Any] = deque()
        self._last = 0
        self._sent = 0
        self._eof = False
        self._stopped = False
        self._result_seen = False
        self._progress: Progress | None = None
        self.exit_code: int | None = None
        self._on_end = on_end  # called once, at the Result or the end of the link
        # Called with the worker's Result before the reader gets it (it may replace it).
        self._on_result = on_result

    def stop(self) -> None:
        """The parent ends the actor on purpose: its death is no failure to report."""
        self._stopped = True
        if self.actor is None:  # it never had one: nothing more comes
            self._eof = True
            self._wake.set()

    def attach(self, actor: Any, job: int) -> None:
        """The sub-agent got its host: job ``job`` on ``actor``; the held sends go."""
        with self._send_lock:
            self.actor, self.job = actor, job
            for seq, obj in self._held:
                actor.deliver.remote(job, seq, obj)
            self._held.clear()
        self._wake.set()

    def note(self, message: Any) -> None:
        """Queue a message of the driver's own for the reader (a Progress saying
        what the sub-agent waits for)."""
        self._buffer.append(message)

    def fail(self, why: str) -> None:
        """The link ends before any actor came: the sub-agent fails with ``why``
        (unless the parent ended it)."""
        self._eof = True
        if not self._stopped and not self._result_seen:
            self._result_seen = True
            self._buffer.append(failed_result(why, self._progress))
        self._ended()
        self._wake.set()

    def send(self, obj: Any) -> None:
        """Deliver ``obj`` to the worker (asynchronously, in order)."""
        if self._stopped or self._eof:
            raise OSError("the Ray worker link is closed")
        with self._send_lock:
            self._sent += 1
            if self.actor is None:
                self._held.append((self._sent, obj))
            else:
                self.actor.deliver.remote(self.job, self._sent, obj)

    def poll(self, timeout: float | None = None) -> bool:
        """True when recv() will not block (a message or the end is there); waits up to
        ``timeout`` seconds (None: until then)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._buffer and not self._eof:
            left = LONG_POLL if deadline is None else min(LONG_POLL, deadline - time.monotonic())
            if left <= 0:
                break
            if self.actor is None:  # no host yet: wait for it (or the end)
                self._wake.wait(left)
                continue
            self._fetch(left)
        return bool(self._buffer) or self._eof

    def recv(self) -> Any:
        """Return the next message; raises EOFError at the end of the link."""
        self.poll(None)
        if self._buffer:
            return self._buffer.popleft()
        raise EOFError("the Ray worker ended")

    def close(self) -> None:
        """Stop using the link (idempotent); the actor is ended by its handle."""
        self._stopped = True

    def _fetch(self, timeout: float) -> None:
        ray = self._ray
        try:
            ref = self.actor.take.remote(self.job, self._last, timeout)
            messages, closed, exit_code = ray.get(ref, timeout=timeout + CALL_SLACK)
        except ray.exceptions.GetTimeoutError:
            return  # a slow answer: poll again (the acknowledgement makes it safe)
        except ray.exceptions.ActorUnavailableError:
            time.sleep(min(timeout, 0.2))  # transient (a network blip): try again
            return
        except ray.exceptions.RayError as exc:
            self._gone(exc)
            return
        for seq, message in messages:
            if seq > self._last:
                self._last = seq
                if isinstance(message, Result) and self._on_result is not None:
                    message = self._on_result(message)
                self._note(message)
                self._buffer.append(message)
        if closed:
            self.exit_code = exit_code
            self._eof = True
            self._ended()

    def _note(self, message: Any) -> None:
        if isinstance(message, Progress):
            self._progress = message
        elif isinstance(message, Result):
            self._result_seen = True
            self._ended()

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    def _gone(self, exc: BaseException) -> None:
        """The actor is gone: unless the parent ended it or a Result came, the
        sub-agent fails naming why (its node died, Ray killed it)."""
        self._eof = True
        self._ended()
        if self._stopped or self._result_seen:
            return
        self._result_seen = True
        self._buffer.append(failed_result(describe_actor_death(exc), self._progress))


def describe_actor_death(exc: BaseException) -> str:
    """One readable sentence from a Ray actor error (its node died, it crashed)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    useful = [line for line in lines if "died" in line.lower() or "node" in line.lower()]
    detail = " ".join(useful or lines[:1])[:400] or type(exc).__name__
    return f"the Ray actor running this sub-agent's worker is gone: {detail}"
