"""The ``agentkit run`` command: one task, run to the end, from a terminal or a script.

One job: run the main agent on a task as ``agentkit run`` does (agentkit.cli holds
the parser and the dispatch): progress on the terminal or as plain lines, signals
handled on the main thread while the run works on another, then the final answer
(or the result as JSON) and the exit code. Exit codes as docs/architecture.md §3
CLI says: 0 done, 1 failed or cancelled, 2 an unusable endpoint or usage error,
128 + the signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP) interrupted.

Like agentkit.cli, only the standard library is imported at load time; Settings,
Agent, rich and openai are imported inside the functions.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from agentkit.cli import UsageError, _err, _print_json, _settings, _workspace
from agentkit.terminal_text import terminal_safe

if TYPE_CHECKING:
    from agentkit.agent import Agent, RunResult
    from agentkit.settings import Settings

__all__ = ["cmd_run", "run_task"]

# Model errors that mean "this endpoint/key/model cannot work" when no turn succeeded.
ENDPOINT_KINDS = ("connection", "authentication", "not_found")
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class _Interrupts:
    """SIGINT, SIGTERM and SIGHUP handling for a run: the first cancels (exit 128+signal,
    records kept), the second exits at once."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.count = 0
        self.signal: int = signal.SIGINT
        self._previous: Any = None
        self._previous_term: Any = None
        self._previous_hup: Any = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            # SIGTERM (kill, systemd, docker stop) ends the run as cleanly as Ctrl-C.
            self._previous_term = signal.signal(signal.SIGTERM, self._handle)
            # SIGHUP (terminal closed, ssh dropped) too: exit 129, records kept.
            self._previous_hup = signal.signal(signal.SIGHUP, self._handle)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            signal.signal(signal.SIGTERM, self._previous_term)
            signal.signal(signal.SIGHUP, self._previous_hup)
            self._previous = None

    def _handle(self, signum: int, _frame: object) -> None:
        self.count += 1
        self.signal = signum
        if self.count == 1:
            # Agent.cancel is safe from a signal handler: it sets an Event.
            self.agent.cancel()
            return
        try:
            self.agent.close()
        except BaseException:
            pass
        finally:
            os._exit(128 + signum)


def _run_in_thread(agent: Agent, task: str, handler: Any) -> RunResult:
    """Run ``agent.run`` on a worker thread so the main thread stays free for
    signals, whatever the run is blocked in; re-raise its exception here."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = agent.run(task, on_event=handler)
        except BaseException as exc:  # handed to the main thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="agentkit-run", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if "error" in box:
        raise box["error"]
    return box["result"]


def _progress(json_output: bool, agent: Agent) -> Any:
    """Pick the progress view: live on a terminal, plain lines on a pipe, quiet for --json
    unless stderr is a terminal (then live on stderr)."""
    if json_output:
        if not sys.stderr.isatty():
            return None
        stream_is_err = True
    elif sys.stdout.isatty():
        stream_is_err = False
    else:
        from agentkit.display import PlainPrinter

        return PlainPrinter(sys.stdout)
    from rich.console import Console

    from agentkit.display import LiveDisplay

    console = Console(stderr=stream_is_err)
    return LiveDisplay(console, tokens=lambda: agent.conversation.stats.total_tokens)


def cmd_run(args: argparse.Namespace) -> int:
    """``agentkit run``: returns the exit code (0 done, 1 failed/cancelled, 2 usage,
    130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    if args.task == "-":  # long tasks: read from standard input
        args.task = sys.stdin.read()
    task = args.task
    if not task or not task.strip():
        raise UsageError("the task is empty")
    _workspace(args.workspace)  # a missing folder is a usage error before anything starts
    if getattr(args, "local", False):
        return _run_local(args)
    return run_task(
        task, args.workspace, _settings(args), json_output=args.json, continue_id=args.continue_id
    )


def run_task(
    task: str,
    workspace: str,
    settings: Settings,
    *,
    json_output: bool = False,
    continue_id: str | None = None,
) -> int:
    """Run ``task`` as ``agentkit run`` does: progress on the terminal, Ctrl-C handling,
    the final answer (or the result as JSON with ``json_output``) on standard output.

    Args:
        task: the task text (not empty).
        workspace: the workspace folder.
        settings: the run's settings.
        continue_id: a conversation to continue, or None for a new one.

    Returns:
        The exit code: 0 done, 1 failed or cancelled, 2 an unusable endpoint, 130
        (128 + the signal) interrupted.

    Raises:
        UsageError: a missing workspace, bad settings or an unknown ``continue_id``.
    """
    workspace_path = _workspace(workspace)

    from agentkit.agent import Agent, check_settings
    from agentkit.errors import ConfigurationError

    try:
        check_settings(settings)
        agent = Agent(workspace=workspace_path, settings=settings, conversation_id=continue_id)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    except (FileNotFoundError, ValueError) as exc:  # --continue with an unknown/bad id
        raise UsageError(str(exc)) from None

    interrupts = _Interrupts(agent)
    view = None
    try:
        view = _progress(json_output, agent)
        interrupts.install()
        if view is not None:
            view.start()
        try:
            result = _run_in_thread(agent, task, view)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        finally:
            if view is not None:
                view.stop()
    finally:
        interrupts.restore()
        agent.close()
    code = _report(json_output, settings, result, view, interrupted=interrupts.count > 0)
    return 128 + int(interrupts.signal) if code == 130 else code


def _run_local(args: argparse.Namespace) -> int:
    """``agentkit run --local``: start the toy llama.cpp server, run, stop it."""
    from agentkit.errors import ConfigurationError
    from agentkit.local import LocalModelServer

    server = LocalModelServer(_workspace(args.workspace))
    print(
        "agentkit: toy local model (Gemma 3 270M on llama.cpp): it shows the machinery, "
        "expect poor answers",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.start()
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    except RuntimeError as exc:
        _err(str(exc))
        return 1
    try:
        args.local = False
        for flag in ("base_url", "model", "api_key"):
            setattr(args, flag, None)
        settings = _settings(args, server.settings_overrides())
        code = run_task(
            args.task,
            args.workspace,
            settings,
            json_output=args.json,
            continue_id=args.continue_id,
        )
        if code not in (0, 130, 129, 143):
            _err(f"the local model server's log: {server.log_path}")
        return code
    finally:
        server.stop()


def _report(
    json_output: bool, settings: Settings, result: RunResult, view: Any, interrupted: bool
) -> int:
    if json_output:
        _print_json(result.to_dict())
    if result.status == "cancelled" or (interrupted and result.status != "done"):
        print(
            terminal_safe(
                f"interrupted: sub-agents stopped, conversation saved to {result.transcript_path}"
            ),
            file=sys.stderr,
            flush=True,
        )
        return 130
    if result.status != "done":
        turns = int((result.stats or {}).get("turns") or 0)
        if result.error_kind in ENDPOINT_KINDS and turns == 0:
            base_url = settings.base_url or DEFAULT_BASE_URL
            if result.error_kind == "connection":
                _err(f"cannot reach the model endpoint {base_url}: {result.error}")
            else:  # reached, but it refused: a bad key, an unknown model or path
                _err(f"the model endpoint {base_url} refused the request: {result.error}")
            return 2
        _err(
            f"run {result.status}: {result.error} (conversation saved to {result.transcript_path})"
        )
        return 1
    if not json_output:
        _print_final(result.final_text, view)
    return 0


def _print_final(text: str | None, view: Any) -> None:
    from agentkit.display import LiveDisplay

    if not (text or "").strip():
        print("agentkit: the model finished without a final answer", file=sys.stderr, flush=True)
        return

    if isinstance(view, LiveDisplay):
        from agentkit.display import print_final_markdown

        print_final_markdown(view.console, text)
        return
    if text:
        # A blank line parts the progress lines from the answer.
        gap = "\n" if getattr(view, "lines", 0) else ""
        # The answer is model text: terminal-safe on a pipe too (it often ends in one,
        # `| tee`); --json gives the exact text to programs.
        sys.stdout.write(gap + terminal_safe(text.rstrip("\n")) + "\n")
        sys.stdout.flush()
