"""SIGINT, SIGTERM and SIGHUP for the ``agentkit`` commands that must end cleanly.

One job: :class:`Signals`, signals as flags. Its handler only writes the signal's
number to a self-pipe; an ordinary watcher thread reads it, calls the owner's
callbacks and, from the second signal on, bounds the time left to leave
(``LEAVE_SECONDS``). Only the standard library is imported (``agentkit --help`` stays
fast).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from agentkit.cli.common import PROG, err, output_failed
from agentkit.process.pipes import output_gone

__all__ = ["HANDLED", "LEAVE_SECONDS", "Signals"]

LEAVE_SECONDS = 5.0
"""Seconds a command has to leave after a second signal asked it to leave now; past
them the process exits at once (128 + the first signal)."""

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Signals:
    """SIGINT, SIGTERM and SIGHUP for a command that must end cleanly (a context
    manager; installed on the main thread only, elsewhere it does nothing).

    The handler does nothing but write the signal's number to a self-pipe: it may
    interrupt the main thread anywhere, even inside a lock the real work needs (a
    pipe send, an ``Event``), so it takes none. An ordinary watcher thread reads the
    pipe and, in order, for each signal:

    * asks ``on_signal(signum)`` while no signal asked to leave; True absorbs it
      (``agentkit chat``: SIGINT cancelled the round, the chat goes on);
    * otherwise the first one asks to leave: :attr:`signum` is set, :attr:`leaving`
      is set and ``on_leave(signum)`` is called; the owner's threads then cancel and
      close (records and the conversation end final);
    * a later one means "leave now": :attr:`hurry` is set and the process has
      ``leave_seconds`` to leave, else it exits at once with 128 + :attr:`signum`
      (``os._exit``: a cleanup stuck past the bound must not keep it alive).

    A signal already ignored when the context is entered stays ignored: ``nohup
    agentkit run …`` must outlive a hang-up, and a job started with ``&`` a Ctrl-C.

    Callbacks run on the watcher thread, one at a time; they may block briefly.
    Once a signal asked to leave, ``__exit__`` leaves these signals ignored: the
    process is on its way out and must still exit 128 + the signal, not die of a
    late one (the interpreter resets Python handlers to the default as it ends, so
    only SIG_IGN holds that long). Otherwise the previous handlers come back.

    Args:
        on_signal: ``signum -> bool``, True to absorb the signal; None absorbs none.
        on_leave: ``signum -> None``, called once when leaving begins.
        leave_seconds: the bound after a second signal (seconds).
        signums: the signals handled.
    """

    def __init__(
        self,
        on_signal: Callable[[int], bool] | None = None,
        on_leave: Callable[[int], None] | None = None,
        *,
        leave_seconds: float = LEAVE_SECONDS,
        signums: Iterable[int] = HANDLED,
    ) -> None:
        self.on_signal = on_signal
        self.on_leave = on_leave
        self.leave_seconds = leave_seconds
        self.signums = tuple(int(s) for s in signums)
        self.signum: int | None = None
        self.leaving = threading.Event()
        self.hurry = threading.Event()
        self.received: list[int] = []  # every signal the watcher read, in order
        self._previous: dict[int, Any] = {}
        self._read_fd = self._write_fd = -1
        self._watcher: threading.Thread | None = None
        self.output_code: int | None = None  # set when stdout could not be written
        self._output_failed = False
        self._own: int | None = None  # a signal output_failed stood in for
        self._output_lock = threading.Lock()

    def output_failed(self, exc: OSError) -> None:
        """Standard output could not be written: the command leaves as the matching
        signal would make it, once; later calls do nothing, so failed writes never
        count as a second signal, nor does a failure once leaving has begun.

        A reader that has gone (``agentkit run … | head``) or a full disk acts as
        SIGPIPE: the exit code becomes :func:`agentkit.cli.common.output_failed`'s
        (141, or 1 after one line on stderr). A terminal that hung up (EIO on a
        terminal) acts as SIGHUP (129), which the terminal usually sends too: that
        one is then not a second signal. Either way stdout is pointed at
        ``/dev/null``. Thread-safe."""
        with self._output_lock:
            if self._output_failed:
                return
            self._output_failed = True
            code = output_failed(exc, "stdout")
            if code == 128 + signal.SIGHUP:  # the terminal hung up
                signum = self._own = signal.SIGHUP
            else:
                self.output_code, signum = code, signal.SIGPIPE
        if self.signum is not None:  # already leaving: nothing to add
            return
        if self._watcher is None:  # not installed (not the main thread)
            self._dispatch(signum)
        else:
            self._handle(signum, None)

    def check_output(self) -> None:
        """Between writes: act on a standard output whose reader has gone or whose
        terminal hung up (agentkit.process.pipes.output_gone) as :meth:`output_failed`
        does, so a long quiet stretch (a command that prints nothing) does not run on
        for no one."""
        gone = output_gone(1)
        if gone is not None:
            self.output_failed(gone)

    def exit_code(self, code: int) -> int:
        """``code``; once a signal asked to leave, 128 + the signal; once the output
        failed, its code (:meth:`output_failed`)."""
        if self.output_code is not None and self.signum in (None, signal.SIGPIPE):
            return self.output_code
        return code if self.signum is None else 128 + self.signum

    def __enter__(self) -> Signals:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)  # a flood of signals must not block
        self._watcher = threading.Thread(target=self._watch, name="agentkit-signals", daemon=True)
        self._watcher.start()
        for signum in self.signums:
            if signal.getsignal(signum) == signal.SIG_IGN:
                continue  # ignored by whoever started us (nohup, a background job): stays so
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._watcher is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"\0")  # 0 is no signal: the watcher stops there
        self._watcher.join(self.leave_seconds)
        self._watcher = None
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self.signum is not None else previous)
        # A signal that came while the watcher stopped (uvicorn raises the ones it
        # took again as it returns) still counts.
        with contextlib.suppress(OSError):
            os.set_blocking(self._read_fd, False)
            for signum in os.read(self._read_fd, 256):
                if signum:
                    self._dispatch(signum)
        if self.signum is not None:
            for signum in self._previous:
                signal.signal(signum, signal.SIG_IGN)
        self._previous.clear()
        write_fd, self._write_fd = self._write_fd, -1
        for fd in (write_fd, self._read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _handle(self, signum: int, _frame: object) -> None:
        # A signal handler: no locks, no calls into the library, one write.
        with contextlib.suppress(OSError):  # full (a flood) or closed: nothing to add
            os.write(self._write_fd, bytes((signum,)))

    def _watch(self) -> None:
        deadline: float | None = None
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select([self._read_fd], [], [], timeout)
                data = os.read(self._read_fd, 64) if ready else b""
            except (OSError, ValueError):
                return
            if not ready:  # the bound after "leave now" has passed
                _leave_at_once(self.signum or signal.SIGTERM, self.leave_seconds)
            for signum in data:
                if not signum:  # __exit__: the owner has left in time
                    return
                if self._dispatch(signum) and deadline is None:
                    deadline = time.monotonic() + self.leave_seconds

    def _dispatch(self, signum: int) -> bool:
        """Act on one signal; True when it means "leave now"."""
        self.received.append(signum)
        if self.signum is None and self.on_signal is not None and _call(self.on_signal, signum):
            return False
        if self.signum is not None:
            if signum == self._own:  # the terminal's own SIGHUP after the hang-up seen
                self._own = None
                return False
            self.hurry.set()
            return True
        self.signum = signum
        self.leaving.set()
        if self.on_leave is not None:
            _call(self.on_leave, signum)
        return False


def _call(callback: Callable[[int], Any], signum: int) -> bool:
    # A failing callback must not end the watcher: the bound still has to hold.
    try:
        return bool(callback(signum))
    except Exception as exc:
        err(f"internal error while handling signal {signum}: {type(exc).__name__}: {exc}")
        return False


def _leave_at_once(signum: int, seconds: float) -> None:
    with contextlib.suppress(OSError):
        os.write(
            2,
            f"{PROG}: still not finished {seconds:g} s after a second signal; leaving now\n".encode(),
        )
    os._exit(128 + signum)
