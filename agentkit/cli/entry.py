"""The ``agentkit`` process's entry point: run the command, then end the process at once.

One job: the process's start and end. :func:`agentkit.cli.main` returns an exit code
and is also called in-process (tests, benchmarks); this module is what the console
script and ``python -m agentkit`` run.

At the start, a standard stream the process was given closed (``agentkit run x >&-``)
becomes ``/dev/null``: its output is dropped, as on a pipe nobody reads, and no file
the command opens takes its number (a line meant for stderr would land in that file;
``print(file=None)`` would send it to stdout).

At the end, the interpreter would tear down
every module it imported (openai's types above all): about 0.2 s of CPU that changes
nothing outside the process. So, as mypy does, the process ends with ``os._exit``
once everything a normal exit does that matters has been done: the atexit handlers
(logging's flush, multiprocessing's joins, trace exports, ``weakref.finalize``
clean-ups) and the standard streams' flush. A thread that a normal exit would wait
for (not a daemon) makes it a normal exit instead.

Output that cannot be written (``agentkit --version >/dev/full``, ``agentkit --help |
true``) ends the process with one line and code 1, or quietly with 141 when the
reader has gone, never with a traceback. A diagnostic that cannot be written to
stderr is dropped (:class:`QuietStderr`): the command goes on.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Iterable
from typing import Any, NoReturn, TextIO


def main() -> NoReturn:
    """Run ``agentkit`` with ``sys.argv`` and exit with its status (see
    :func:`agentkit.cli.main` for the codes). Never returns."""
    from agentkit.cli import main as command
    from agentkit.cli.common import output_failed

    open_closed_streams()
    if sys.stderr is not None:
        sys.stderr = QuietStderr(sys.stderr)
    try:
        code = command()
    except OSError as exc:  # writing --version (the commands report their own)
        code = output_failed(exc)
    except SystemExit as exc:  # argparse after --help or a usage error: it wrote already
        if exc.code is not None and not isinstance(exc.code, int):
            raise
        code = exc.code or 0
    exit_now(code)


def open_closed_streams() -> None:
    """Make each standard stream that Python found closed at its start (``None``) a
    ``/dev/null`` of the same number where that number is still free."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            free = False  # something else took the number since: leave it alone
        except OSError:
            free = True
        null = os.open(os.devnull, os.O_RDWR)
        if free and null != fd:
            os.dup2(null, fd)
            os.close(null)
            null = fd
        mode = "r" if fd == 0 else "w"
        setattr(sys, name, open(null, mode, encoding="utf-8", errors="backslashreplace"))  # noqa: SIM115


class QuietStderr:
    """Standard error whose failed writes are dropped (``2>/dev/full``, a reader that
    left): a diagnostic that cannot be shown must not stop the command, which goes on
    as with stderr closed. Everything else is the stream's own.

    Args:
        stream: the real standard error.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        """Write ``text``; returns its length even when the write failed."""
        try:
            return self.stream.write(text)
        except OSError:
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each of ``lines`` (see :meth:`write`)."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush, dropping what cannot be written."""
        with contextlib.suppress(OSError):
            self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` after its atexit handlers ran and the standard
    streams were flushed, without tearing down its modules. A stream that cannot be
    flushed (``>/dev/full``, a reader that has gone) makes the code
    :func:`agentkit.cli.common.output_failed`'s unless it already says a failure.
    Falls back to ``sys.exit(code)`` while a non-daemon thread runs or where this
    Python lacks ``atexit._run_exitfuncs``."""
    code = _flushed(code)
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.daemon and t.is_alive()
    ]
    if run_handlers is None or others:
        sys.exit(code)
    run_handlers()
    code = _flushed(code)  # what the handlers wrote
    os._exit(code)


def _flushed(code: int) -> int:
    """Flush stdout and stderr; returns ``code``, or the output's failure code in its
    place when a flush fails and ``code`` was 0."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            continue
        try:
            stream.flush()
        except ValueError:  # closed by the command: nothing left in it
            continue
        except OSError as exc:
            from agentkit.cli.common import output_failed

            failed = output_failed(exc, name)
            return code or failed
    return code
