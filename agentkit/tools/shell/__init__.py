"""run_command: run a shell command in the workspace (docs/architecture.md §3, §6; docs/tools.md §7 run_command).

``bash -c COMMAND`` (``/bin/sh`` when bash is missing) in its own session, stdin closed,
stdout and stderr merged into one pipe, a cleaned environment, a wall-clock limit and a
process-tree kill. Completion is "the shell exited, then at most 1 s of draining", so a
background grandchild holding the pipe cannot stall the call; any process of the command
still running afterwards is killed and listed. POSIX only (select on the pipe). Commands run
in the sandbox of :mod:`agentkit.process.sandbox` when the settings and the system allow it;
a note says when its output shows the sandbox refusing a write or a network call.

Public API: :data:`SHELL_TOOLS`, :class:`RunCommandParams`, :func:`run_command`,
:func:`command_env`, :func:`is_secret_var` (from :mod:`agentkit.process.secrets`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from agentkit import tracing
from agentkit.conversation import state_path
from agentkit.errors import ToolError
from agentkit.process import limits, sandbox
from agentkit.process import spawn as launch
from agentkit.process import tree as proctree
from agentkit.process.secrets import is_secret_var, scrub_env
from agentkit.tools.base import Tool, ToolContext, ToolResult
from agentkit.tools.os_errors import os_error_kind
from agentkit.tools.paths import display_path, resolve_path, shared_root, workspace_root
from agentkit.tools.shell._output import OutputCapture
from agentkit.tools.shell._policy import check_interactive, check_policy
from agentkit.tools.shell._run import (
    COMMAND_ID_VAR,
    LAUNCHER_WAIT,
    CommandRun,
    describe,
    kill,
    leftovers,
    list_procs,
)

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["SHELL_TOOLS", "RunCommandParams", "run_command", "command_env", "is_secret_var"]

DRAIN_SECONDS = 1.0  # after the shell exits, wait this long at most for the pipe's EOF
SPILL_MAX_BYTES = 50 * 1024 * 1024  # docs/tools.md: full log spilled, <= 50 MiB
_CAPTURE_EVERY = 0.25  # seconds between snapshots of the shell's descendants

_FIXED_ENV = {
    "CI": "1",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "PYTHONUNBUFFERED": "1",
    "DEBIAN_FRONTEND": "noninteractive",
}


class RunCommandParams(BaseModel):
    """Parameters of run_command (docs/architecture.md §3)."""

    command: str = Field(description="Shell command line, run with bash -c.")
    timeout_seconds: float = Field(default=120, gt=0, description="Wall-clock limit, seconds.")
    cwd: str = Field(default=".", description="Working folder, relative to the workspace.")


def command_env(mark: str, command_id: str, settings: Settings | None = None) -> dict[str, str]:
    """Return the environment of a command: ``os.environ`` minus secrets, plus fixed values.

    Secrets are dropped by :func:`agentkit.process.secrets.scrub_env` (names and values that
    look secret, the endpoint's key), honouring ``settings.command_env_passthrough``
    and ``settings.command_env_drop`` when ``settings`` is given. Adds CI=1, PAGER=cat,
    GIT_PAGER=cat, GIT_TERMINAL_PROMPT=0, GIT_EDITOR=true, NO_COLOR=1, TERM=dumb,
    PYTHONUNBUFFERED=1, DEBIAN_FRONTEND=noninteractive, ``AGENTKIT_PROCESS_MARK=mark``
    and ``AGENTKIT_COMMAND_ID=command_id``; while tracing, ``TRACEPARENT`` (and
    ``TRACESTATE``) of the ``execute_tool run_command`` span (agentkit.tracing).
    """
    env = scrub_env(
        os.environ,
        passthrough=settings.command_env_passthrough if settings else (),
        drop=settings.command_env_drop if settings else (),
        hidden_values=(settings.api_key,) if settings else (),
    )
    env.update(_FIXED_ENV)
    env.update(proctree.mark_env(mark))
    env[COMMAND_ID_VAR] = command_id
    env.update(tracing.command_env())  # {} while not tracing
    return env


def _resolve_cwd(ctx: ToolContext, cwd: str) -> Path:
    path = resolve_path(ctx, cwd or ".")
    root = workspace_root(ctx)
    # A shared root (an isolated sub-agent's deliverables folder) is as good as inside.
    if path != root and not path.is_relative_to(root) and shared_root(ctx, path) is None:
        raise ToolError("outside_workspace", f"cwd {cwd} is outside the workspace {root}")
    if not path.exists():
        raise ToolError("not_found", f"cwd {cwd} does not exist")
    if not path.is_dir():
        raise ToolError("invalid_argument", f"cwd {cwd} is not a folder")
    return path


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


def run_command(params: RunCommandParams, ctx: ToolContext) -> ToolResult:
    """Run ``params.command`` and return its cleaned output with an ``[exit N · T s]`` trailer.

    A non-zero exit status is a normal result (ok). Errors: ``invalid_argument`` (empty
    command, bad cwd), ``outside_workspace``, ``not_found`` (cwd), ``blocked_command``
    (allow/deny lists, interactive programs), ``sandbox_unavailable`` (a sandbox is
    required and cannot run), ``timeout`` (killed after the limit, output so
    far included), ``killed`` (run cancelled). Units: seconds, characters.
    """
    settings = ctx.settings
    command = params.command
    if not command.strip():
        raise ToolError("invalid_argument", "command is empty")
    if "\x00" in command:
        raise ToolError("invalid_argument", "command contains a NUL byte")
    check_policy(command, settings.command_allow, settings.command_deny)
    check_interactive(command)
    cwd = _resolve_cwd(ctx, params.cwd)
    confinement = sandbox.confine(settings, ctx.workspace, cwd, ctx.write_scope)
    relay = confinement.relay if confinement is not None else None
    bounds: limits.Bounds | None = None
    kept = False
    try:
        bounds = _bounds(settings, confinement)
        result, kept = _launch_and_finish(command, cwd, params, ctx, confinement, bounds)
    finally:
        if relay is not None and not kept:  # nothing of the command's outlives it
            relay.close()
        if bounds is not None:  # its cgroup goes once empty (kept services: when they end)
            bounds.close()
    return result


def _bounds(settings: Settings, confinement: sandbox.Confinement | None) -> limits.Bounds | None:
    """The command's limits (agentkit.process.limits); ToolError when its cgroup cannot
    be created."""
    if confinement is not None:
        user_namespace = confinement.user_namespace
    else:
        user_namespace = launch.user_namespace()
    try:
        return limits.prepare(settings, user_namespace)
    except OSError as exc:
        raise ToolError(
            os_error_kind(exc),
            f"the command's cgroup (its resource limits) cannot be created: {exc}; "
            "the command was not run",
        ) from None


def _launch_and_finish(
    command: str,
    cwd: Path,
    params: RunCommandParams,
    ctx: ToolContext,
    confinement: sandbox.Confinement | None,
    bounds: limits.Bounds | None = None,
) -> tuple[ToolResult, bool]:
    """Launch the command and return its result, and whether its namespace was kept
    (``command_background_services``): its relay must then live on."""
    settings = ctx.settings
    timeout = min(float(params.timeout_seconds), settings.command_timeout_max)
    command_id = uuid.uuid4().hex
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workspace = workspace_root(ctx)
    spill = state_path(workspace, "outputs", f"cmd-{stamp}-{command_id[:8]}.log")
    capture = OutputCapture(settings.command_max_output_chars, spill, SPILL_MAX_BYTES, workspace)
    if ctx.cancel.is_set():
        raise ToolError("killed", "the run was cancelled; the command was not started")
    shell = shutil.which("bash") or "/bin/sh"
    started = time.monotonic()
    try:
        env = command_env(ctx.process_mark or command_id, command_id, settings)
        box = confinement.argv if confinement is not None else None
        launched = launch.spawn(shell, command, cwd, env, box, bounds)
    except OSError as exc:
        if exc.errno == errno.E2BIG:
            raise ToolError(
                "too_large",
                f"the command is too long to start ({len(command):,} characters; the system "
                "takes about 128 KB per argument): write it to a script file with write_file "
                "and run the script",
            ) from None
        raise ToolError(os_error_kind(exc), f"could not start {shell}: {exc}") from None
    proc = launched.proc
    run = CommandRun(launched, capture, command_id, started, confinement, bounds)
    if confinement is not None and confinement.relay is not None:
        confinement.relay.watch(proc.pid)  # a kept namespace: the relay ends with it
    done = False
    try:
        outcome = _pump(run, started + timeout, ctx)
        result = _finish(run, outcome, timeout, ctx)
        done = True
        return result, run.kept
    finally:
        if not done:  # an exception escaped: never leave the tree behind
            root = proc.pid if proc.poll() is None else None
            proctree.kill_tree(
                root, command_id, 0.0, var=COMMAND_ID_VAR, extra=run.captured.values()
            )
            launched.release()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        launched.release()
        if proc.stdout is not None:
            proc.stdout.close()


def _pump(run: CommandRun, deadline: float, ctx: ToolContext) -> str:
    """Read output until the shell exits ("exited"), the deadline ("timeout") or cancel."""
    next_snapshot = run.started + 0.05
    while True:
        now = time.monotonic()
        if run.exited():
            return "exited"
        if now >= deadline:
            return "timeout"
        if ctx.cancel.is_set():
            return "cancelled"
        if now >= next_snapshot and not run.launched.namespaced:  # a namespace needs none
            run.snapshot_children()
            # Often at first (short-lived helpers), then every second for long builds.
            next_snapshot = now + (_CAPTURE_EVERY if now - run.started < 5 else 1.0)
        run.read_some(min(0.1, deadline - now))


def _finish(run: CommandRun, outcome: str, timeout: float, ctx: ToolContext) -> ToolResult:
    grace = ctx.settings.command_kill_grace
    proc = run.proc
    notes: list[str] = []
    meta: dict[str, object] = {}
    namespaced = run.launched.namespaced
    if outcome == "exited":
        # In a namespace, `unshare` holds the pipe until the namespace ends, so EOF cannot
        # mean "every writer is done": take what the shell wrote, then what the leftovers
        # wrote before they die (final drain below). Elsewhere wait for EOF a while.
        run.drain_ready() if namespaced else run.drain(DRAIN_SECONDS)
        elapsed = time.monotonic() - run.started
        killed: list[int] = []
        if ctx.settings.command_background_services:
            kept = leftovers(run)
            if kept:
                notes.append(
                    f"{_plural(len(kept), 'background process')} left running "
                    "(command_background_services): "
                    f"{list_procs([p.pid for p in kept], describe(kept), proc.pid)}; "
                    "they end when this conversation closes"
                )
            launch.keep_alive(run.launched, ctx.owner)
            run.kept = True
        else:
            killed, names = kill(run, grace, include_shell=False)
        run.launched.release()
        # Kept services (and their `unshare`) still hold the pipe: do not wait on them.
        if namespaced and ctx.settings.command_background_services:
            run.drain_ready()
        else:
            run.drain(0.5)
            if namespaced:  # the launcher ends with the namespace: collect it now
                run.launched.reap(LAUNCHER_WAIT)
        code = run.code if run.code is not None else proc.returncode
        head = f"[{_status(code, run.launched.namespaced)} · {elapsed:.1f} s"
        if killed:
            notes.append(
                f"killed {_plural(len(killed), 'leftover background process')}: "
                f"{list_procs(killed, names, proc.pid)}; processes started in the "
                "background do not outlive the command"
            )
        meta["exit_code"] = code
    else:
        elapsed = time.monotonic() - run.started
        killed, names = kill(run, grace, include_shell=True)
        run.launched.release()
        run.drain(0.5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        why = "timeout" if outcome == "timeout" else "cancelled"
        head = f"[killed after {elapsed:.1f} s ({why}) · {_plural(len(killed), 'process')} killed"
        meta["exit_code"] = None
    run.capture.finish()
    meta.update(
        duration_seconds=round(elapsed, 3),
        killed_pids=killed,
        omitted_chars=run.capture.omitted,
        total_chars=run.capture.total_chars,
    )
    body = run.capture.text()
    notes.extend(sandbox.refusal_notes(body, run.confinement))
    notes.extend(limits.limit_notes(run.bounds, body))
    if run.capture.omitted:
        note = f"output truncated: {run.capture.omitted:,} characters omitted (first 25 % and last 75 % shown)"
        if run.capture.spill_written is not None:
            log = display_path(ctx, run.capture.spill_written)
            cut = " (cut at 50 MiB)" if run.capture.spill_cut else ""
            note += f" · full log{cut}: {log}"
            meta["log_path"] = log
        notes.append(note)
    trailer = " · ".join([head, *notes]) + "]"
    text = (body.rstrip("\n") if body.strip() else "(no output)") + "\n" + trailer
    truncated = bool(run.capture.omitted)
    if outcome == "exited":
        return ToolResult(output=text, truncated=truncated, meta=meta)
    if outcome == "timeout":
        lead = (
            f"Error: timeout: the command did not finish within {timeout:g} s and was killed "
            "with its child processes; output so far:"
        )
        code = "timeout"
    else:
        lead = "Error: killed: the run was cancelled; the command was killed. Output so far:"
        code = "killed"
    return ToolResult(
        output=f"{lead}\n{text}", ok=False, error_code=code, truncated=truncated, meta=meta
    )


def _status(code: int, namespaced: bool) -> str:
    """``exit N``, or ``killed by SIGX`` (a negative returncode). In a namespace the
    status is the shell's ``$?``, so a signal death reads 128+N: name the signal."""
    if code < 0:
        return f"killed by {proctree.signal_name(-code)}"
    if namespaced and 128 < code < 160:
        return f"exit {code} (128+{proctree.signal_name(code - 128)})"
    return f"exit {code}"


SHELL_TOOLS: list[Tool] = [
    Tool(
        name="run_command",
        params=RunCommandParams,
        func=run_command,
        counter="commands",
    )
]
