"""Run a child process whose stdout is consumed as it streams, killed at a deadline (private).

Shared by both engines of search_workspace (ripgrep, and the pure-Python scan that runs in
a child so a catastrophic regex can be killed: Python's ``re`` holds the GIL while it
backtracks, so no thread of the parent could stop it).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO


@dataclass
class ChildOutcome:
    """How a child ended: ``stopped`` is "timeout", "cancelled" or "" (ran to its end)."""

    stopped: str
    returncode: int | None
    stderr: str
    start_error: str = ""


def run_streaming(
    args: list[str],
    cwd: str,
    deadline: float,
    cancel: threading.Event,
    consume: Callable[[IO[bytes]], None],
    stdin_data: bytes | None = None,
) -> ChildOutcome:
    """Start ``args`` in ``cwd``, hand its stdout to ``consume`` and wait for it to end.

    Args:
        deadline: ``time.monotonic()`` seconds; the child is killed (SIGKILL) then.
        cancel: the child is killed as soon as it is set.
        consume: reads the stdout stream until EOF (runs in the calling thread; EOF comes
            at the latest when the child is killed).
        stdin_data: written to the child's stdin (then closed); None gives /dev/null.

    Returns a :class:`ChildOutcome`; never raises for the child's failures (a child that
    cannot start gives ``start_error``). The child is always reaped before returning.
    """
    try:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except (OSError, ValueError) as exc:
        return ChildOutcome("", None, "", str(exc))
    done = threading.Event()
    why: list[str] = []

    def watch() -> None:
        while not done.wait(0.02):
            if time.monotonic() >= deadline or cancel.is_set():
                why.append("timeout" if time.monotonic() >= deadline else "cancelled")
                with contextlib.suppress(OSError):
                    proc.kill()
                return

    errors: list[bytes] = []

    def read_errors() -> None:
        # Read to the end (the child would block on a full stderr pipe), keep the start.
        stderr = proc.stderr
        assert isinstance(stderr, io.BufferedReader)  # Popen's default buffering
        kept = 0
        for chunk in iter(lambda: stderr.read1(65536), b""):
            if kept < 65536:
                errors.append(chunk)
                kept += len(chunk)

    def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # the child may die before reading it all
            proc.stdin.write(stdin_data or b"")
        with contextlib.suppress(OSError):
            proc.stdin.close()

    helpers = [threading.Thread(target=read_errors, daemon=True)]
    helpers.append(threading.Thread(target=watch, daemon=True))
    if stdin_data is not None:
        helpers.append(threading.Thread(target=feed, daemon=True))
    for helper in helpers:
        helper.start()
    try:
        assert proc.stdout is not None
        consume(proc.stdout)
    finally:
        done.set()
        if proc.stdout:
            proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        helpers[0].join(1)
        if proc.stderr:
            proc.stderr.close()
    stderr = b"".join(errors).decode("utf-8", "replace")
    return ChildOutcome(why[0] if why else "", proc.returncode, stderr)
