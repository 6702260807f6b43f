"""search_workspace: regex search over file contents, or a file listing (docs/architecture.md §3, docs/tools.md).

Rows are ``path:line:text`` (workspace-relative path, 1-based line), sorted by path then
line, one row per matching line; a line longer than 200 characters is cut around the
first match with a ``[line is K chars, match at col C]`` marker. With an empty pattern the
files matching ``glob`` are listed, sorted by path (deterministic, unlike mtime order, so
repeated calls and both engines agree). Ignore files (.gitignore at every depth,
.git/info/exclude, .ignore, .rgignore) are honoured, ``.git`` (and ``.agentkit`` at the
workspace root) skipped, binary files (a NUL byte) and files over
``settings.search_max_file_bytes`` skipped, symlinks never followed.

Files with several hard links are not searched unless ``settings.allow_hard_links``
(``agentkit.tools.paths.check_links``); the Python engine counts them in a note, the ripgrep engine
drops their rows silently (it only sees files with matches, so a count would tell
whether the pattern matched such a file).

Engines: ripgrep when available (``settings.use_ripgrep``), else a Python walker; both give
the same rows (``_walk`` mirrors ripgrep's ignore rules, and ripgrep's rows are filtered
through the same rules and glob). Patterns are validated with Python ``re`` first; a
pattern ripgrep's Rust regex rejects (look-around, backreferences, ``\\Z``...) or may read
differently (POSIX/nested classes) is run by the Python engine. The Python engine runs in a
child process killed at ``settings.search_timeout`` (``_pyscan``): Python's ``re`` holds
the GIL while it backtracks, so a thread could never stop ``(a+)+$``.

Public API: :data:`SEARCH_TOOLS`, :class:`SearchParams`, :func:`search_workspace`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

from pydantic import BaseModel, Field

from agentkit.conversation import STATE_DIR
from agentkit.errors import ToolError
from agentkit.tools.base import Tool, ToolContext, ToolResult
from agentkit.tools.paths import display_path, resolve_path, workspace_root
from agentkit.tools.search import _pyscan, _ripgrep, _walk
from agentkit.tools.search._walk import preview_line

__all__ = ["SEARCH_TOOLS", "SearchParams", "search_workspace", "preview_line"]

_SKIP_TOP = frozenset({STATE_DIR})  # agentkit's own logs and records at the workspace root
_NO_PREFILTER = ("\\A", "\\Z", "(?<", "(?=", "(?!")
_DIALECT_RISK = re.compile(r"\[\^?\[|\[[^\]]*(?:--|&&|~~|\|\|)")


class SearchParams(BaseModel):
    """Parameters of search_workspace (docs/architecture.md §3, plus the optional include_ignored)."""

    pattern: str = Field(description="Regular expression over file contents; empty lists files.")
    path: str = Field(default=".", description="Folder or file to search, workspace-relative.")
    glob: str | None = Field(default=None, description="Path filter such as **/*.py.")
    ignore_case: bool = False
    max_results: int = Field(default=100, ge=1)
    include_ignored: bool = Field(default=False, description="Also search ignored paths.")


def _compile(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
    try:
        return re.compile(pattern, flags)
    except (re.error, OverflowError, RecursionError) as exc:
        raise ToolError(
            "invalid_argument", f"invalid regular expression {pattern!r}: {exc}"
        ) from None


def _make_job(params: SearchParams, ctx: ToolContext) -> tuple[_walk.SearchJob, bool]:
    settings = ctx.settings
    target = resolve_path(ctx, params.path or ".")
    if not target.exists():
        raise ToolError("not_found", f"{params.path} does not exist")
    if not (target.is_dir() or target.is_file()):
        raise ToolError(
            "not_a_regular_file", f"{params.path} is neither a folder nor a regular file"
        )
    ws = workspace_root(ctx)
    inside = target == ws or target.is_relative_to(ws)
    ignore_root = ws if inside else target
    parts = list(target.relative_to(ignore_root).parts)
    shown = display_path(ctx, target)
    prefix = "" if shown == "." else shown + "/"
    chain: _walk.Chain | None = None
    excluded = False
    if not params.include_ignored:
        chain, excluded = _walk.prefix_chain(str(ignore_root), parts)
        if excluded and target.is_file():
            excluded = False  # an explicitly named file is searched even if ignored
    rx = _compile(params.pattern, params.ignore_case) if params.pattern else None
    job = _walk.SearchJob(
        root=str(target),
        prefix=prefix,
        ignore_root=str(ignore_root),
        ignore_base="".join(p + "/" for p in parts),
        chain=chain,
        rx=rx,
        prefilter=rx is not None and not any(t in params.pattern for t in _NO_PREFILTER),
        glob=_walk.GlobFilter(params.glob) if params.glob and params.glob.strip() else None,
        max_bytes=settings.search_max_file_bytes,
        skip_top=_SKIP_TOP if target == ws else frozenset(),
        allow_hard_links=settings.allow_hard_links,
    )
    return job, excluded


def search_workspace(params: SearchParams, ctx: ToolContext) -> ToolResult:
    """Search file contents (or list files) and return sorted rows plus a bracketed footer.

    Errors: ``invalid_argument`` (bad regex), ``not_found``, ``outside_workspace``,
    ``not_a_regular_file``. Limits: ``max_results`` capped by
    ``settings.search_max_results``; output by ``settings.search_max_output_chars``; wall
    clock ``settings.search_timeout`` seconds (partial results with a note).
    """
    settings = ctx.settings
    job, excluded = _make_job(params, ctx)
    keep = max(1, min(params.max_results, settings.search_max_results))
    withhold = _read_rules(params, job, ctx)
    out = _walk.Collector(keep, withhold)
    started = time.monotonic()
    deadline = started + settings.search_timeout
    status = "ok"
    engine = "none" if excluded else _choose_engine(job, params, ctx)
    if engine != "none" and time.monotonic() >= deadline:
        status = "timeout"  # no time budget at all (search_timeout <= 0)
    elif engine == "ripgrep":
        status = _ripgrep.rg_engine(job, str(_ripgrep.find_rg()), params, out, deadline, ctx)
        if status == "rejected":  # e.g. look-around: Python's re supports it
            engine, out = "python", _walk.Collector(keep, withhold)
            status = _run_python(job, out, deadline, ctx)
    elif engine == "python":
        status = _run_python(job, out, deadline, ctx)
    rows, total, files = out.snapshot()
    meta = {"engine": engine, "total": total, "files": files, "status": status}
    result = _render(
        params, job, rows, total, files, status, excluded, time.monotonic() - started, ctx, meta
    )
    if withhold is not None and job.rx is not None:  # said whether or not a file was left out
        result.output += (
            "\n[lines of files that read_file approval rules deny or ask about are not shown]"
        )
    return result


def _read_rules(
    params: SearchParams, job: _walk.SearchJob, ctx: ToolContext
) -> Callable[[str], bool] | None:
    """Which files' lines a search leaves out: those a ``read_file:<glob>`` rule denies or
    asks about (a search cannot ask, file by file), judged by the file reached (the rows'
    paths are resolved: links are never followed below the target) and by the path as
    spelled through ``params.path``; None when there are no such rules."""
    policy = ctx.gate.policy if ctx.gate is not None else None
    if policy is None or not policy.has_path_rules("read_file"):
        return None
    spelled = os.path.normpath(params.path.strip() or ".")
    target = job.prefix.rstrip("/") or "."

    def withhold(shown: str) -> bool:
        paths = [shown]
        if spelled != target:
            if shown == target:
                paths.append(spelled)
            elif shown.startswith(job.prefix):
                paths.append(os.path.join(spelled, shown[len(job.prefix) :]))
        verdict = policy.path_verdict("read_file", paths)
        return verdict is not None and verdict.decision != "allow"

    return withhold


def _choose_engine(job: _walk.SearchJob, params: SearchParams, ctx: ToolContext) -> str:
    if not ctx.settings.use_ripgrep or _ripgrep.find_rg() is None:
        return "python"
    if not os.path.isdir(job.root) or "\x00" in params.pattern:
        return "python"  # one file: no walk to speed up; NUL cannot go in argv
    if job.rx is not None and _DIALECT_RISK.search(params.pattern):
        return "python"  # [[:alpha:]] or set operations: Rust and Python read them differently
    return "ripgrep"


def _run_python(
    job: _walk.SearchJob, out: _walk.Collector, deadline: float, ctx: ToolContext
) -> str:
    # In a child process: Python's re holds the GIL while it backtracks, so only a kill
    # stops a catastrophic pattern (see _pyscan).
    return _pyscan.run_in_child(job, out, deadline, ctx.cancel)


def _render(
    params: SearchParams,
    job: _walk.SearchJob,
    rows: list[tuple[str, int, str]],
    total: int,
    files: int,
    status: str,
    excluded: bool,
    elapsed: float,
    ctx: ToolContext,
    meta: dict[str, object],
) -> ToolResult:
    listing = job.rx is None
    cap = ctx.settings.search_max_output_chars
    lines: list[str] = []
    used = 0
    for path, number, text in rows:
        if not path.isascii():  # undecodable file names: no lone surrogates in the output
            path = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        row = path if listing else f"{path}:{number}:{text}"
        if used + len(row) + 1 > cap and lines:
            break
        lines.append(row)
        used += len(row) + 1
    notes: list[str] = []
    what = "files" if listing else "matching lines"
    where = params.path + (f" (glob {params.glob})" if params.glob else "")
    if excluded:
        notes.append(
            f"{params.path} is excluded by ignore rules; set include_ignored=true to search it"
        )
    if status == "timeout":
        notes.append(
            f"search timed out after {ctx.settings.search_timeout:g} s; results are partial "
            f"(scanned {job.stats.files} files); narrow path or glob"
        )
    elif status == "cancelled":
        notes.append("search cancelled; results are partial")
    if job.stats.linked:
        notes.append(
            f"skipped {_count(job.stats.linked, 'file')} with several hard links (their other "
            "names may be outside the workspace); allow_hard_links=true searches them"
        )
    if status.startswith("error: "):
        notes.append(status[len("error: ") :] + "; results are partial")
    if not rows:
        head = "No files match" if listing else f"No matches for /{params.pattern}/"
        notes.insert(0, f"{head} in {where}")
    elif len(lines) < total:
        more = total - len(lines)
        unit = f"in {_count(files, 'file')}; " if not listing else ""
        why = "output limit reached" if len(lines) < len(rows) else "max_results reached"
        notes.append(
            f"showing the first {len(lines)} of {total} {what} {unit}{more} more not shown "
            f"({why}); narrow pattern, path or glob"
            + ("" if len(lines) < len(rows) else ", or raise max_results")
        )
    else:
        what = _count(total, "file" if listing else "matching line")
        notes.append(what + ("" if listing else f" in {_count(files, 'file')}"))
    meta["duration_seconds"] = round(elapsed, 3)
    text = "\n".join([*lines, *(f"[{n}]" for n in notes)])
    return ToolResult(output=text, truncated=len(lines) < total or status != "ok", meta=meta)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


SEARCH_TOOLS: list[Tool] = [
    Tool(name="search_workspace", params=SearchParams, func=search_workspace, counter="searches")
]
