"""One command hook's process: started owned, fed its stdin, its output read with a cap.

One job: :func:`run_command_hook` (agentkit.policy.hooks runs every command hook
through it). stdout and stderr are read as they come, through one selector loop, at
most :data:`OUTPUT_MAX` bytes each: a hook that prints without end (``yes``) costs the
agent about that much memory, not gigabytes, and is killed with everything it started
the moment it passes the cap (the problem says "printed more than 1 MB"). A hook that
outlives its timeout is killed the same way.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agentkit.policy.hook_config import CommandHook

__all__ = ["HOOK_ID_VAR", "OUTPUT_MAX", "Collected", "collect", "run_command_hook"]

OUTPUT_MAX = 1_000_000
"""Bytes of a hook's stdout, and of its stderr, read at most; past it the hook is killed."""

HOOK_ID_VAR = "AGENTKIT_HOOK_ID"
"""Marks every process of one hook run, so a killed hook's whole tree is found."""

_CHUNK = 65_536  # bytes read or written at once: the most a buffer passes the cap by


@dataclass
class Collected:
    """What one hook process gave: ``stdout`` and ``stderr`` (each at most the cap plus
    one read), ``overflow`` the stream that passed the cap (``stdout``/``stderr``) or
    None, ``timed_out`` True when its time ran out first."""

    stdout: bytes
    stderr: bytes
    overflow: str | None = None
    timed_out: bool = False


def collect(
    proc: subprocess.Popen[bytes], stdin: bytes, timeout: float, cap: int = OUTPUT_MAX
) -> Collected:
    """Write ``stdin`` to ``proc`` and read its stdout and stderr until both end, one of
    them passes ``cap`` bytes, or ``timeout`` seconds pass (the caller then kills it).
    Never reads more than ``cap`` plus 64 KiB from either pipe. Closes the pipes."""
    deadline = time.monotonic() + timeout
    buffers: dict[int, bytearray] = {}
    names: dict[int, str] = {}
    result = Collected(b"", b"")
    with selectors.DefaultSelector() as selector:
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            if pipe is not None:
                selector.register(pipe, selectors.EVENT_READ)
                buffers[pipe.fileno()], names[pipe.fileno()] = bytearray(), name
        pending = memoryview(stdin)
        if proc.stdin is not None:
            if pending:
                os.set_blocking(proc.stdin.fileno(), False)
                selector.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while selector.get_map() and result.overflow is None:
            left = deadline - time.monotonic()
            if left <= 0:
                result.timed_out = True
                break
            for key, _ in selector.select(left):
                if proc.stdin is not None and key.fileobj is proc.stdin:
                    pending = _feed(selector, proc.stdin, pending)
                    continue
                fd = key.fd
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffers[fd] += chunk
                if len(buffers[fd]) > cap:
                    result.overflow = names[fd]
        for key in list(selector.get_map().values()):
            selector.unregister(key.fileobj)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            _close(pipe)
    by_name = {names[fd]: bytes(buffer) for fd, buffer in buffers.items()}
    result.stdout, result.stderr = by_name.get("stdout", b""), by_name.get("stderr", b"")
    return result


def _feed(selector: selectors.BaseSelector, pipe: IO[bytes], pending: memoryview) -> memoryview:
    """Write what the pipe takes now; unregister and close it when done (or refused)."""
    try:
        written = os.write(pipe.fileno(), pending[:_CHUNK])
    except BlockingIOError:
        return pending
    except OSError:  # the hook closed its stdin (or ended): it does not want the rest
        written = len(pending)
    pending = pending[written:]
    if not pending:
        selector.unregister(pipe)
        _close(pipe)
    return pending


def _close(pipe: IO[bytes]) -> None:
    try:
        pipe.close()
    except OSError:  # a broken pipe's buffered close: nothing is lost
        pass


def _start(argv: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    from agentkit.process.spawn import start_owned

    return start_owned(argv, **popen)


def run_command_hook(
    hook: CommandHook, stdin: bytes, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int | None, str, str, str | None]:
    """Run one command hook to its end, its ``timeout`` (seconds) or the output cap;
    returns ``(exit code or None, stdout, stderr, problem)``. A hook that times out or
    prints more than :data:`OUTPUT_MAX` bytes on a stream is killed with everything it
    started (exit code None; ``problem`` says which); so is one that cannot start."""
    hook_id = uuid.uuid4().hex
    try:
        proc = _start(
            ["/bin/sh", "-c", hook.command],
            cwd=cwd,
            env={**env, HOOK_ID_VAR: hook_id},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return None, "", "", f"could not start: {exc}"
    started = time.monotonic()
    got = collect(proc, stdin, timeout)
    problem = None
    if got.overflow is not None:
        problem = f"printed more than {OUTPUT_MAX // 1_000_000} MB on {got.overflow} and was killed"
    elif got.timed_out:
        problem = f"timed out after {timeout:g} s and was killed"
    else:
        try:
            proc.wait(max(0.0, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:  # closed its pipes, kept running
            problem = f"timed out after {timeout:g} s and was killed"
    if problem is not None:
        _kill(proc, hook_id)
        return None, "", "", problem
    text = got.stdout.decode("utf-8", "replace"), got.stderr.decode("utf-8", "replace")
    return proc.returncode, text[0], text[1], None


def _kill(proc: subprocess.Popen[bytes], hook_id: str) -> None:
    from agentkit.process.tree import kill_tree

    kill_tree(proc.pid, hook_id, 0.0, var=HOOK_ID_VAR)
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:  # not ended yet: make sure, then reap
        proc.kill()
        proc.wait()
