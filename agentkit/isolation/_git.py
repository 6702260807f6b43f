"""Running git for the isolation engine: one way in, safe for the user's repository.

One job: start a git process with a scrubbed environment (the caller's ``GIT_*``
variables removed, the repository, work tree and index set explicitly), hooks, signing
and line-ending conversion off, a fixed identity, capped output, a time limit, and
errors raised as :class:`~agentkit.isolation.types.IsolationError` with git's own first
lines. Git's lock files (``index.lock``, a ref's ``.lock``) are retried briefly, so two
sub-agents' copies can be made at once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agentkit.isolation.types import IsolationError

__all__ = ["GitResult", "git", "git_available"]

IDENTITY = ("agentkit", "agentkit@localhost")
CONFIG = (
    "core.hooksPath=/dev/null",  # never run the repository's hooks (post-checkout etc.)
    "commit.gpgsign=false",
    "core.autocrlf=false",
    "core.fsmonitor=false",
    "core.quotepath=false",
    "gc.auto=0",  # no background gc: no process outlives its owner
    "maintenance.auto=false",
    "advice.detachedHead=false",
    # Writing a copy's files is bound by the disk's latency: four writers measured 3-10x
    # faster than one on this project's machine, and 0.26 s against 0.36 s on tmpfs.
    "checkout.workers=4",
)
MAX_OUTPUT = 64 * 1024 * 1024
"""Bytes of stdout kept by default (ls-files of a large tree fits); more is cut."""
MAX_STDERR = 16 * 1024
TIMEOUT = 300.0
LOCK_RETRIES = 40
LOCK_PAUSE = 0.05
_LOCKED = re.compile(
    r"\.lock'?: File exists|Unable to create '.*\.lock'|cannot lock ref .*(?:File exists|"
    r"unable to create lock)|could not lock config file|is locked|another git process|"
    r"failed to read .*/worktrees/.*/(?:commondir|gitdir)",  # a worktree being made meanwhile
    re.IGNORECASE,
)


@dataclass(frozen=True)
class GitResult:
    """A finished git process: ``returncode``, ``stdout`` (bytes, at most the cap),
    ``stderr`` (text, capped) and ``truncated`` (stdout was cut at the cap)."""

    returncode: int
    stdout: bytes
    stderr: str
    truncated: bool = False

    @property
    def text(self) -> str:
        """stdout as text (UTF-8, undecodable bytes replaced), trailing newline kept."""
        return self.stdout.decode("utf-8", "replace")


def git_available() -> bool:
    """True when a ``git`` executable is on PATH."""
    return shutil.which("git") is not None


def _env(git_dir: Path | None, work_tree: Path | None, index_file: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_AUTHOR_NAME=IDENTITY[0],
        GIT_AUTHOR_EMAIL=IDENTITY[1],
        GIT_COMMITTER_NAME=IDENTITY[0],
        GIT_COMMITTER_EMAIL=IDENTITY[1],
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",  # reads never take the user's index lock
        LC_ALL="C",  # git's messages are parsed (conflict types, lock errors)
        LANGUAGE="C",
    )
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    return env


def _drain(stream: IO[bytes], limit: int, out: list[bytes], cut: list[bool]) -> None:
    """Read ``stream`` to its end, keeping at most ``limit`` bytes (the rest is read and
    dropped so the process never blocks on a full pipe)."""
    kept = 0
    while chunk := stream.read(65536):
        room = limit - kept
        if room > 0:
            out.append(chunk[:room])
            kept += min(len(chunk), room)
        if len(chunk) > room:
            cut.append(True)


def _run_once(
    argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None, limit: int, timeout: float
) -> GitResult:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise IsolationError(f"git is not installed or {cwd} is missing: {exc}") from None
    except OSError as exc:
        raise IsolationError(f"could not start git in {cwd}: {exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    err: list[bytes] = []
    cut: list[bool] = []
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, limit, out, cut), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, MAX_STDERR, err, []), daemon=True),
    ]
    for reader in readers:
        reader.start()
    # A timer kills a hung git; waiting without a timeout avoids Popen.wait's polling
    # sleeps (up to 50 ms per call: most of a short git command's time).
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        if stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        proc.wait()
    finally:
        timer.cancel()
        for reader in readers:
            reader.join()
        proc.stdout.close()
        proc.stderr.close()
    if expired.is_set():
        raise IsolationError(f"git {argv[len(CONFIG) * 2 + 1]} took over {timeout:.0f} s")
    return GitResult(proc.returncode, b"".join(out), b"".join(err).decode("utf-8", "replace"),
                     bool(cut))  # fmt: skip


def git(
    args: Sequence[str],
    *,
    cwd: Path,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    index_file: Path | None = None,
    stdin: bytes | None = None,
    check: bool = True,
    limit: int = MAX_OUTPUT,
    timeout: float = TIMEOUT,
) -> GitResult:
    """Run ``git <args>`` in ``cwd`` and return its result.

    Args:
        args: git's arguments after the global options (``["write-tree"]``).
        cwd: the folder git runs in.
        git_dir / work_tree / index_file: set as ``GIT_DIR`` / ``GIT_WORK_TREE`` /
            ``GIT_INDEX_FILE`` when given (otherwise git finds the repository from cwd).
        stdin: bytes written to git's standard input.
        check: raise when git exits non-zero.
        limit: bytes of stdout kept (``GitResult.truncated`` says it was cut).
        timeout: seconds before the process is killed and IsolationError raised.

    Raises:
        IsolationError: git is missing, timed out, or (``check``) failed; the message
        has the subcommand and git's first lines of stderr. A failure on one of git's
        lock files is retried for about two seconds first.
    """
    argv = ["git"]
    for item in CONFIG:
        argv += ["-c", item]
    argv += list(args)
    env = _env(git_dir, work_tree, index_file)
    for attempt in range(LOCK_RETRIES + 1):
        result = _run_once(argv, cwd, env, stdin, limit, timeout)
        if result.returncode == 0 or not _LOCKED.search(result.stderr) or attempt == LOCK_RETRIES:
            break
        time.sleep(LOCK_PAUSE)  # another git process holds the lock: it is brief
    if check and result.returncode != 0:
        raise IsolationError(f"git {args[0] if args else ''} failed: {first_lines(result.stderr)}")
    return result


def first_lines(text: str, lines: int = 3, chars: int = 600) -> str:
    """The first ``lines`` non-empty lines of ``text``, joined, at most ``chars``."""
    kept = [line.strip() for line in text.splitlines() if line.strip()][:lines]
    joined = " / ".join(kept) or "(no message)"
    return joined if len(joined) <= chars else joined[: chars - 1] + "…"
