"""The Signals class of ``agentkit run`` (agentkit/cli/signals.py) in this process: a
first signal absorbed or leaving, later ones ignored on the way out, the previous
handlers restored. Signals to ``agentkit run`` as a real process are
tests/integration/test_cli_signals_processes.py.
"""

from __future__ import annotations

import errno
import os
import signal
import sys

import pytest
from subagent_helpers import wait_until

pytestmark = pytest.mark.slow


# ------------------------------------------------------------- the Signals class
def test_signals_absorb_then_leave_then_stay_ignored() -> None:
    from agentkit.cli.signals import Signals

    asked: list[int] = []
    left: list[int] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        with Signals(lambda s: asked.append(s) or s == signal.SIGINT, left.append) as signals:
            os.kill(os.getpid(), signal.SIGINT)  # a real signal to this process
            assert wait_until(lambda: asked == [signal.SIGINT], 10)
            assert not signals.leaving.is_set()  # absorbed: the command goes on
            os.kill(os.getpid(), signal.SIGTERM)
            assert signals.leaving.wait(10)
            assert left == [signal.SIGTERM] and signals.signum == signal.SIGTERM
            assert not signals.hurry.is_set()
        assert signals.exit_code(0) == 143
        # On its way out: a late signal must not kill it with the default action.
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_signals_restore_the_previous_handlers_when_none_came() -> None:
    from agentkit.cli.signals import Signals

    before = signal.getsignal(signal.SIGTERM)
    with Signals() as signals:
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before
    assert signals.exit_code(3) == 3


@pytest.mark.parametrize(("error", "code"), [(errno.EPIPE, 141), (errno.ENOSPC, 1)])
def test_an_output_that_failed_leaves_once_as_sigpipe(
    error: int, code: int, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every failed write calls output_failed: only the first may count, or the second
    would read as "leave now" and cut the cleanup short. A reader that left ends
    quietly with 141; a full disk says so once and ends with 1."""
    from agentkit.cli.signals import Signals

    left: list[int] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stdout = sys.stdout
    try:
        with Signals(on_leave=left.append) as signals:
            for _ in range(3):
                signals.output_failed(OSError(error, os.strerror(error)))
            assert signals.leaving.wait(10)
            assert not wait_until(signals.hurry.is_set, 0.5)
            assert left == [signal.SIGPIPE]
            assert sys.stdout is not stdout  # later writes go to /dev/null
        assert signals.exit_code(0) == signals.exit_code(130) == code
    finally:
        sys.stdout = stdout
        for signum, handler in before.items():
            signal.signal(signum, handler)
    said = capfd.readouterr().err
    expected = "" if code == 141 else f"agentkit: cannot write the output: {os.strerror(error)}\n"
    assert said == expected


def test_a_signal_ignored_by_whoever_started_the_command_stays_ignored() -> None:
    """``nohup agentkit run …``: SIGHUP was ignored before the command began, and a
    hang-up must not end the run (it ended it, 129)."""
    from agentkit.cli.signals import Signals

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with Signals() as signals:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            assert not wait_until(signals.leaving.is_set, 0.5)
            os.kill(os.getpid(), signal.SIGTERM)  # the others are still handled
            assert signals.leaving.wait(10) and signals.signum == signal.SIGTERM
        assert signals.received == [signal.SIGTERM]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_terminal_that_hung_up_leaves_as_its_sighup_counted_once() -> None:
    """A write to stdout failed with EIO on a terminal: the window closed. That is the
    hang-up SIGHUP says, and the terminal's own SIGHUP, which follows, is not a second
    signal ("leave now" would cut the cleanup short)."""
    import pty

    from agentkit.cli.signals import Signals

    left: list[int] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stdout, saved = sys.stdout, os.dup(1)
    main_end, terminal_end = pty.openpty()
    try:
        os.dup2(terminal_end, 1)  # standard output is a terminal here
        with Signals(on_leave=left.append) as signals:
            signals.output_failed(OSError(errno.EIO, os.strerror(errno.EIO)))
            assert signals.leaving.wait(10)
            os.kill(os.getpid(), signal.SIGHUP)
            assert wait_until(lambda: len(signals.received) == 2, 10)
            assert not wait_until(signals.hurry.is_set, 0.5)
        assert left == [signal.SIGHUP] and signals.exit_code(0) == 129
    finally:
        os.dup2(saved, 1)
        for fd in (saved, main_end, terminal_end):
            os.close(fd)
        sys.stdout = stdout
        for signum, handler in before.items():
            signal.signal(signum, handler)
