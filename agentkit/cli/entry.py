"""The ``agentkit`` process's entry point: run the command, then end the process at once.

One job: the process's end. :func:`agentkit.cli.main` returns an exit code and is
also called in-process (tests, benchmarks); this module is what the console script
and ``python -m agentkit`` run. After the command, the interpreter would tear down
every module it imported (openai's types above all): about 0.2 s of CPU that changes
nothing outside the process. So, as mypy does, the process ends with ``os._exit``
once everything a normal exit does that matters has been done: the atexit handlers
(logging's flush, multiprocessing's joins, trace exports, ``weakref.finalize``
clean-ups) and the standard streams' flush. A thread that a normal exit would wait
for (not a daemon) makes it a normal exit instead.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def main() -> NoReturn:
    """Run ``agentkit`` with ``sys.argv`` and exit with its status (see
    :func:`agentkit.cli.main` for the codes). Never returns."""
    from agentkit.cli import main as command

    exit_now(command())


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` after its atexit handlers ran and the standard
    streams were flushed, without tearing down its modules. Falls back to
    ``sys.exit(code)`` while a non-daemon thread runs, where a stream cannot be
    flushed (the interpreter's own exit reports it), or where this Python lacks
    ``atexit._run_exitfuncs``."""
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.daemon and t.is_alive()
    ]
    if run_handlers is None or others or not _flushed():
        sys.exit(code)
    run_handlers()
    _flushed()  # what the handlers wrote
    os._exit(code)


def _flushed() -> bool:
    """Flush stdout and stderr; False when one cannot be (a closed pipe, a closed file)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            return False
    return True
