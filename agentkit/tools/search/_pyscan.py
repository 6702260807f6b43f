"""The pure-Python engine of search_workspace, run in a child process (private).

Python's ``re`` holds the GIL while it backtracks, so a catastrophic pattern such as
``(a+)+$`` on a line of forty ``a`` would freeze every thread of the agent, the deadline
watcher included. The walk and the content scan therefore run in a child interpreter
that the parent kills at ``settings.search_timeout`` (or on cancel); rows stream back as
JSON lines after each file, so the rows found before the kill are kept.

The child starts a plain ``python -c`` that imports only this module, ``_walk`` and
pathspec (not the agentkit package, whose imports cost ~0.1 s); ``benchmarks/search.py``
measures the cost per search. It cannot outlive its owner for long: its CPU time is capped
(RLIMIT_CPU, search_timeout + 5 s) and on Linux it gets SIGKILL when the parent dies.

Wire format (child stdout, one JSON array per line): ``["r", path, [[line, text], ...],
count]`` rows of one file (at most ``keep`` rows, ``count`` matching lines), ``["l",
[path, ...]]`` listed files, ``["s", files_scanned, hard_linked_skipped]`` progress, ``["done", files, linked, "ok" |
"timeout"]`` end.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import sys
import threading
import time
from typing import IO, Any

from agentkit.tools.search import _walk

_FLUSH_SECONDS = 0.05

_BOOT = """
import sys, types
root = sys.argv[1]
sys.path[:0] = [p for p in sys.argv[2:] if p and p not in sys.path]
for name, folder in (
    ("agentkit", root), ("agentkit.tools", root + "/tools"), ("agentkit.tools.search", root + "/tools/search")
):
    module = types.ModuleType(name)
    module.__path__ = [folder]
    sys.modules[name] = module
from agentkit.tools.search._pyscan import child_main
child_main()
"""


def run_in_child(
    job: _walk.SearchJob, out: _walk.Collector, deadline: float, cancel: threading.Event
) -> str:
    """Run ``job`` with the Python engine in a child process, filling ``out``.

    ``deadline`` is ``time.monotonic()`` seconds. Returns the status: ``ok``, ``timeout``,
    ``cancelled``, or ``error: <reason>`` when the child failed (rows so far are kept).
    Updates ``job.stats.files`` from the child's progress reports.
    """
    from agentkit.tools.search._childproc import run_streaming  # not imported by the child

    # .../agentkit: three folders up from agentkit/tools/search/_pyscan.py
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    payload = pickle.dumps(
        {"job": job, "deadline": deadline, "keep": out.keep, "cpu": _cpu_cap(deadline)}
    )
    finished: list[str] = []

    def consume(stream: IO[bytes]) -> None:
        for raw in stream:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            kind = msg[0]
            if kind == "r":
                out.add_file(msg[1], [(int(n), str(t)) for n, t in msg[2]], int(msg[3]))
            elif kind == "l":
                for path in msg[1]:
                    out.add(path, 0, "")
            elif kind in ("s", "done"):
                job.stats.files = int(msg[1])
                job.stats.linked = int(msg[2])
                if kind == "done":
                    finished.append(str(msg[3]))

    args = [sys.executable, "-S", "-E", "-c", _BOOT, root, *(p for p in sys.path if p)]
    cwd = job.root if os.path.isdir(job.root) else os.path.dirname(job.root)
    outcome = run_streaming(args, cwd, deadline, cancel, consume, payload)
    if outcome.stopped:
        return outcome.stopped
    if outcome.start_error:
        return f"error: cannot start the search process: {outcome.start_error}"
    if not finished:
        tail = outcome.stderr.strip().splitlines()[-1:] or [f"exit {outcome.returncode}"]
        return f"error: the search process failed ({tail[0][:300]})"
    return finished[0]


def _cpu_cap(deadline: float) -> int:
    return max(1, math.ceil(deadline - time.monotonic())) + 5


# --- in the child --------------------------------------------------------------------


class _Emitter:
    """Child side: buffers rows and writes them to stdout as JSON lines."""

    def __init__(self, stream: IO[bytes], keep: int, stats: _walk.WalkStats) -> None:
        self.stream = stream
        self.keep = keep
        self.stats = stats
        self.listed: list[str] = []
        self.last = time.monotonic()

    def send(self, msg: list[Any]) -> None:
        self.stream.write(json.dumps(msg).encode("ascii") + b"\n")

    def file_rows(self, path: str, rows: list[tuple[int, str]], count: int) -> None:
        self.send(["r", path, rows[: self.keep], count])
        self.tick(force=True)

    def listed_file(self, path: str) -> None:
        self.listed.append(path)
        if len(self.listed) >= 256:
            self.tick(force=True)

    def tick(self, force: bool = False) -> None:
        """Flush buffered names and progress (at most every 50 ms unless forced)."""
        now = time.monotonic()
        if not force and now - self.last < _FLUSH_SECONDS:
            return
        if self.listed:
            self.send(["l", self.listed])
            self.listed = []
        self.send(["s", self.stats.files, self.stats.linked])
        self.stream.flush()
        self.last = now


def child_main() -> None:
    """Entry point of the child: read the pickled job from stdin, scan, stream rows out."""
    payload = pickle.loads(sys.stdin.buffer.read())
    _limit_self(int(payload["cpu"]))
    job: _walk.SearchJob = payload["job"]
    deadline = float(payload["deadline"])
    emitter = _Emitter(sys.stdout.buffer, int(payload["keep"]), job.stats)
    status = scan(job, emitter, deadline)
    emitter.tick(force=True)
    emitter.send(["done", job.stats.files, job.stats.linked, status])
    emitter.stream.flush()


def _limit_self(cpu_seconds: int) -> None:
    # The parent kills us at the deadline; these bound a child whose parent died first.
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard == resource.RLIM_INFINITY or hard > cpu_seconds:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    except (ImportError, ValueError, OSError):
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def scan(job: _walk.SearchJob, out: _Emitter, deadline: float) -> str:
    """Walk ``job.root`` (or its one file) and emit rows until done or ``deadline``.

    Returns ``ok``, or ``timeout`` when the deadline stopped the walk.
    """
    stop = threading.Event()
    if os.path.isfile(job.root):
        name = os.path.basename(job.root)
        if job.glob is None or job.glob.accepts(name):
            job.stats.files += 1
            _one_file(job, job.root, job.prefix.rstrip("/"), out)
        return "ok"
    files = _walk.walk_files(
        job.root, job.ignore_base, job.chain, job.glob, stop, job.stats, job.skip_top
    )
    for rel, abs_path in files:
        if time.monotonic() >= deadline:
            return "timeout"
        if job.rx is None:
            out.listed_file(job.prefix + rel)
        else:
            _one_file(job, abs_path, job.prefix + rel, out)
        out.tick()
    return "ok"


def _one_file(job: _walk.SearchJob, abs_path: str, shown: str, out: _Emitter) -> None:
    if job.rx is None:
        out.listed_file(shown)
        return
    text = _walk.read_text(abs_path, job.max_bytes, job.allow_hard_links, job.stats)
    if text is None:
        return
    rows: list[tuple[int, str]] = []
    count = _search_text(job, text, rows, out.keep)
    if count:
        out.file_rows(shown, rows, count)


def _search_text(job: _walk.SearchJob, text: str, rows: list[tuple[int, str]], keep: int) -> int:
    """Append ``(line, preview)`` of matching lines to ``rows`` (up to ``keep``); return
    the number of matching lines."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if job.prefilter:
        return _search_whole(job, text, rows, keep)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    search = job.rx.search  # type: ignore[union-attr]
    count = 0
    for number, line in enumerate(lines, 1):
        match = search(line)
        if match is not None:
            count += 1
            if len(rows) < keep:
                rows.append((number, _walk.preview_line(line.removesuffix("\r"), match.start())))
    return count


def _search_whole(job: _walk.SearchJob, text: str, rows: list[tuple[int, str]], keep: int) -> int:
    # Search the whole text (MULTILINE) and confirm each hit on its own line. Without
    # look-around or \A/\Z, a match inside a line is also a match of the whole text at the
    # same place, so scanning from each line start finds every matching line; a match that
    # only exists across lines is dropped by the per-line check. Much faster than testing
    # every line of a file.
    search = job.rx.search  # type: ignore[union-attr]
    end = len(text)
    limit = end - 1 if text.endswith("\n") else end  # no phantom line after the last "\n"
    pos = 0
    number = 1
    counted = 0
    count = 0
    while pos <= limit:
        match = search(text, pos)
        if match is None:
            break
        start = text.rfind("\n", 0, match.start()) + 1
        if start > limit:
            break
        line_end = text.find("\n", match.start())
        line_end = end if line_end < 0 else line_end
        line = text[start:line_end]
        hit = search(line)
        if hit is not None:
            number += text.count("\n", counted, start)
            counted = start
            count += 1
            if len(rows) < keep:
                rows.append((number, _walk.preview_line(line.removesuffix("\r"), hit.start())))
        pos = line_end + 1
    return count
