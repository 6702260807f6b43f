"""The ripgrep engine of search_workspace (private): run ``rg``, parse, filter.

ripgrep is found on PATH, else next to the running interpreter (the ``ripgrep`` wheel
installs ``rg`` into the environment's scripts folder, which is not on PATH when a venv
is used without activation). Flags keep it in step with the Python walker:
``--no-config`` (no user config), ``--hidden`` (dotfiles searched), ``--no-require-git``
(ignore files honoured outside git repos), ``--no-ignore-parent`` and
``--no-ignore-global`` (only files inside the searched tree count), ``--crlf`` (``$``
matches before ``\\r\\n``), no ``--follow``, ``-g '!.git'``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import sysconfig
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from agentkit.tools.search import _walk
from agentkit.tools.search._childproc import run_streaming
from agentkit.tools.search._walk import Collector, SearchJob

if TYPE_CHECKING:
    from agentkit.tools.base import ToolContext
    from agentkit.tools.search import SearchParams

_WARNING = re.compile(rb"^(.*): WARNING: stopped searching binary file after match \(found .*\)$")
_REGEX_ERROR_HINTS = ("regex parse error", "error parsing regex", "is not allowed in a regex")

Row = Callable[[str, int, bytes, int], None]
"""on_row(path, line, text_bytes, byte_col) for a match; path relative to the search root."""


@functools.lru_cache(maxsize=1)
def find_rg() -> str | None:
    """Return the path of the ``rg`` executable, or None."""
    found = shutil.which("rg")
    if found:
        return found
    for folder in {sysconfig.get_path("scripts"), os.path.dirname(sys.executable)}:
        candidate = os.path.join(folder, "rg")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class RgOutcome:
    """How a ripgrep run ended: ``status`` is ok, timeout, cancelled or rejected."""

    status: str
    stderr: str = ""


def rg_args(
    rg: str,
    pattern: str | None,
    *,
    ignore_case: bool,
    include_ignored: bool,
    globs: list[str],
    max_filesize: int,
) -> list[str]:
    """Build the ripgrep command line (``pattern`` None lists files)."""
    args = [rg, "--no-config", "--hidden", "--no-require-git", "--no-ignore-parent"]
    args.append("--no-ignore-global")
    if include_ignored:
        args.append("--no-ignore")
    for glob in globs:
        args += ["-g", glob]
    args += ["-g", "!.git"]
    if pattern is None:
        args += ["--files", "--null"]
    else:
        args += ["--crlf", "--line-number", "--column", "--with-filename", "--no-heading"]
        args += ["--null", "--color", "never", "--max-filesize", str(max_filesize)]
        if ignore_case:
            args.append("--ignore-case")
        args += ["-e", pattern]
    return [*args, "--", "."]


def _strip_dot(path: bytes) -> str:
    if path.startswith(b"./"):
        path = path[2:]
    return os.fsdecode(path)


def run_rg(
    args: list[str],
    cwd: str,
    deadline: float,
    cancel: threading.Event,
    on_row: Row,
    on_binary: Callable[[str], None],
    on_file: Callable[[str], None],
) -> RgOutcome:
    """Run ripgrep in ``cwd`` and stream its output to the callbacks.

    ``on_file(path)`` receives listed files (``--files``); ``on_binary(path)`` a file
    ripgrep stopped reading at a NUL byte (its rows must be dropped). Kills ripgrep at
    ``deadline`` (monotonic seconds) or when ``cancel`` is set.
    """
    listing = "--files" in args

    def consume(stream: IO[bytes]) -> None:
        if listing:
            _read_listing(stream, on_file)
        else:
            _read_matches(stream, on_row, on_binary)

    outcome = run_streaming(args, cwd, deadline, cancel, consume)
    if outcome.start_error:
        return RgOutcome("rejected", outcome.start_error)
    if outcome.stopped:
        return RgOutcome(outcome.stopped, outcome.stderr)
    if outcome.returncode == 2 and any(h in outcome.stderr for h in _REGEX_ERROR_HINTS):
        return RgOutcome("rejected", outcome.stderr)
    return RgOutcome("ok", outcome.stderr)


def _read_listing(stream: object, on_file: Callable[[str], None]) -> None:
    pending = b""
    read = stream.read1  # type: ignore[attr-defined]
    while True:
        chunk = read(1 << 16)
        if not chunk:
            break
        parts = (pending + chunk).split(b"\0")
        pending = parts.pop()
        for part in parts:
            if part:
                on_file(_strip_dot(part))
    if pending:
        on_file(_strip_dot(pending))


def _read_matches(stream: object, on_row: Row, on_binary: Callable[[str], None]) -> None:
    for raw in stream:  # type: ignore[attr-defined]
        path, sep, rest = raw.partition(b"\0")
        if not sep:
            warn = _WARNING.match(raw.rstrip(b"\r\n"))
            if warn:
                on_binary(_strip_dot(warn.group(1)))
            continue
        line_no, _, rest = rest.partition(b":")
        col, _, text = rest.partition(b":")
        if text.endswith(b"\n"):
            text = text[:-1]
        if text.endswith(b"\r"):
            text = text[:-1]
        try:
            on_row(_strip_dot(path), int(line_no), text, int(col) - 1)
        except ValueError:
            continue


class PostFilter:
    """Applies the Python engine's ignore rules and glob to ripgrep's paths (cached per folder)."""

    def __init__(self, job: SearchJob) -> None:
        self.job = job
        self.dirs: dict[str, tuple[_walk.Chain, bool]] = {}
        self.files: dict[str, bool] = {}
        # ripgrep applied the ignore files inside the tree itself; they need re-checking
        # only when rules above the searched folder exist (--no-ignore-parent) or a
        # positive glob may have whitelisted an ignored file (-g overrides ignore files).
        positive_glob = job.glob is not None and not job.glob.negate
        self.check_ignores = job.chain is not None and (bool(job.chain) or positive_glob)

    def _dir(self, rel: str) -> tuple[_walk.Chain, bool]:
        # (chain for entries inside rel, rel itself excluded)
        hit = self.dirs.get(rel)
        if hit is not None:
            return hit
        job = self.job
        assert job.chain is not None
        if not rel:
            rules = _walk.load_rules(job.root, job.ignore_base)
            result = ((*job.chain, rules) if rules else job.chain, False)
        else:
            parent, _, name = rel.rpartition("/")
            chain, excluded = self._dir(parent)
            full = job.ignore_base + rel
            excluded = excluded or (
                not parent and name in job.skip_top or _walk.is_ignored(chain, full, True)
            )
            rules = None if excluded else _walk.load_rules(os.path.join(job.root, rel), full + "/")
            result = ((*chain, rules) if rules else chain, excluded)
        self.dirs[rel] = result
        return result

    def accepts(self, rel: str) -> bool:
        """Return True when the file ``rel`` (relative to the searched folder) is kept."""
        ok = self.files.get(rel)
        if ok is None:
            ok = self.job.glob is None or self.job.glob.accepts(rel)
            if ok and self.check_ignores:
                chain, excluded = self._dir(rel.rpartition("/")[0])
                ok = not excluded and not _walk.is_ignored(chain, self.job.ignore_base + rel, False)
            self.files[rel] = ok
        return ok


class RgSink:
    """Receives ripgrep's output, filters it like the Python engine and fills a collector.

    ripgrep prints each file's rows as one block and a binary-file warning right after
    them, so a file's rows wait here until the next file starts: a binary file's rows can
    then be dropped (the Python engine skips such files entirely).
    """

    def __init__(self, job: SearchJob, out: Collector) -> None:
        self.job = job
        self.out = out
        self.post = PostFilter(job)
        self.path: str | None = None
        self.rows: list[tuple[int, str]] = []
        self.count = 0

    def commit(self) -> None:
        """Hand the current file's rows to the collector (call once more at the end)."""
        if self.path is not None and self.count:
            self.out.add_file(self.job.prefix + self.path, self.rows, self.count)
        self.path, self.rows, self.count = None, [], 0

    def on_row(self, rel: str, line: int, raw: bytes, byte_col: int) -> None:
        if rel != self.path:
            self.commit()
            if not self.post.accepts(rel) or self._hard_linked(rel):
                return
            self.path = rel
        self.count += 1
        if len(self.rows) < self.out.keep:
            text = raw.decode("utf-8", "replace")
            col = (
                len(raw[:byte_col].decode("utf-8", "replace"))
                if len(raw) > _walk.PREVIEW_CHARS
                else 0
            )
            self.rows.append((line, _walk.preview_line(text, col)))

    def _hard_linked(self, rel: str) -> bool:
        # Rows of a file with several hard links are dropped, like the Python engine skips
        # it (_fileio.check_links). Not counted: only files with matches reach here, and a
        # count would tell whether the pattern matches such a file.
        if self.job.allow_hard_links:
            return False
        try:
            return os.lstat(os.path.join(self.job.root, rel)).st_nlink > 1
        except OSError:
            return True

    def on_binary(self, rel: str) -> None:
        if rel == self.path:
            self.path, self.rows, self.count = None, [], 0

    def on_file(self, rel: str) -> None:
        if self.post.accepts(rel):
            self.out.add(self.job.prefix + rel, 0, "")


def rg_globs(glob: _walk.GlobFilter | None) -> list[str]:
    """Return ``-g`` globs for ripgrep that select at least the files ``glob`` accepts."""
    # A superset of the Python glob: ripgrep's -g does not select files inside a folder
    # the glob names, so "x" also gets "**/x/**"; the post-filter then decides exactly.
    if glob is None:
        return []
    if glob.negate:
        return [f"!{p}" for p in glob.patterns]
    out: list[str] = []
    for pat in glob.patterns:
        body = pat.rstrip("/")
        out += [pat, (body if "/" in body else "**/" + body) + "/**"]
    return out


def rg_engine(
    job: SearchJob, rg: str, params: SearchParams, out: Collector, deadline: float, ctx: ToolContext
) -> str:
    args = rg_args(
        rg,
        None if job.rx is None else params.pattern,
        ignore_case=params.ignore_case,
        include_ignored=job.chain is None,
        globs=rg_globs(job.glob) + [f"!/{n}" for n in sorted(job.skip_top)],
        max_filesize=job.max_bytes,
    )
    """Run the search ``job`` with ripgrep into ``out``.

    Returns the status: ``ok``, ``timeout``, ``cancelled`` or ``rejected`` (ripgrep refused
    the pattern; the caller reruns it with the Python engine).
    """
    sink = RgSink(job, out)
    outcome = run_rg(
        args, job.root, deadline, ctx.cancel, sink.on_row, sink.on_binary, sink.on_file
    )
    sink.commit()
    return outcome.status
