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
import sys
import threading
from typing import TYPE_CHECKING, Any

from agentkit.cli.common import (
    UsageError,
    check_cli_settings,
    check_endpoint_flags,
    check_settings_first,
    err,
    print_json,
    settings_from_args,
)
from agentkit.cli.common import (
    workspace as workspace_dir,
)
from agentkit.cli.safe_text import terminal_safe
from agentkit.cli.signals import Signals

if TYPE_CHECKING:
    from pathlib import Path

    from agentkit.agent import Agent
    from agentkit.run_result import RunResult
    from agentkit.settings import Settings

__all__ = ["cmd_run", "run_task"]

# Model errors that mean "this endpoint/key/model cannot work" when no turn succeeded.
ENDPOINT_KINDS = ("connection", "authentication", "not_found")
DEFAULT_BASE_URL = "https://api.openai.com/v1"
WAIT_SECONDS = 0.1
"""How often the main thread, waiting for the run, looks at the signals (seconds)."""


def _run_in_thread(agent: Agent, task: str, handler: Any, signals: Signals) -> RunResult | None:
    """Run ``agent.run`` on a worker thread so the main thread stays free for
    signals, whatever the run is blocked in; re-raise its exception here.

    A reader of stdout that has gone counts as a signal (SIGPIPE), seen here between
    writes too. The first signal cancels the run from this (the main) thread: sub-agents are
    terminated, the conversation saved, and the run returns ``cancelled``. A second
    one stops the wait: None is returned and the caller closes the agent at once
    (Signals bounds the time that may take).
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["result"] = agent.run(task, on_event=handler)
        except BaseException as exc:  # handed to the main thread
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=target, name="agentkit-run", daemon=True)
    worker.start()
    cancelled = False
    while not done.wait(WAIT_SECONDS):
        signals.check_output()  # `| head` ended, or the terminal closed, while all is quiet
        if signals.hurry.is_set():
            return None
        if signals.leaving.is_set() and not cancelled:
            cancelled = True
            agent.cancel()  # sends are bounded: this returns
    if "error" in box:
        raise box["error"]
    result: RunResult = box["result"]
    return result


def _progress(json_output: bool, agent: Agent, signals: Signals) -> Any:
    """Pick the progress view: live on a terminal, plain lines on a pipe, quiet for --json
    unless stderr is a terminal (then live on stderr). On a pipe whose reader goes
    (``| head``), the run ends as on SIGPIPE."""
    if json_output:
        if not sys.stderr.isatty():
            return None
        stream_is_err = True
    elif sys.stdout.isatty():
        stream_is_err = False
    else:
        from agentkit.cli.progress import PlainPrinter

        return PlainPrinter(sys.stdout, on_failed=signals.output_failed)
    from rich.console import Console

    from agentkit.cli.progress import LiveDisplay

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
    check_endpoint_flags(args)
    check_settings_first(args)  # before the demo's copy or the local model's banner
    if getattr(args, "demo", False):
        return _run_demo(args)
    args.workspace = args.workspace or "."
    workspace_dir(args.workspace)  # a missing folder is a usage error before anything starts
    if getattr(args, "local", False):
        return _run_local(args)
    return run_task(
        task,
        args.workspace,
        settings_from_args(args, _yes(args)),
        json_output=args.json,
        continue_id=args.continue_id,
        ask=not args.yes,
    )


def _yes(args: argparse.Namespace) -> dict[str, Any]:
    """``--yes``: an ask is allowed (docs/approvals.md §2)."""
    return {"approvals_default": "allow"} if getattr(args, "yes", False) else {}


def run_task(
    task: str,
    workspace: str,
    settings: Settings,
    *,
    json_output: bool = False,
    continue_id: str | None = None,
    ask: bool = True,
) -> int:
    """Run ``task`` as ``agentkit run`` does: progress on the terminal, Ctrl-C handling,
    the final answer (or the result as JSON with ``json_output``) on standard output.

    Args:
        task: the task text (not empty).
        workspace: the workspace folder.
        settings: the run's settings.
        continue_id: a conversation to continue, or None for a new one.
        ask: on a terminal, ask the person about calls waiting for approval
            (agentkit.cli.approve.TerminalApprover); elsewhere, or False, no one is
            asked and ``approvals_default`` settles them.

    Returns:
        The exit code: 0 done, 1 failed or cancelled, 2 an unusable endpoint, 130
        (128 + the signal) interrupted.

    Raises:
        UsageError: a missing workspace, bad settings or an unknown ``continue_id``.
    """
    from agentkit.errors import ConfigurationError

    check_cli_settings(settings)
    asker = _asker() if ask else None
    agent = _open_agent(workspace_dir(workspace), settings, continue_id, asker)
    view = None
    result: RunResult | None = None
    with Signals() as signals:
        try:
            view = _progress(json_output, agent, signals)
            if asker is not None:
                asker.bind(lambda: agent.session, getattr(view, "pause", None))
            if view is not None:
                view.start()
            try:
                result = _run_in_thread(agent, task, view, signals)
            except ConfigurationError as exc:
                raise UsageError(str(exc)) from None
            finally:
                if view is not None:
                    view.stop()
        finally:
            agent.close()  # sub-agents end, the conversation is saved (final)
    if result is None:  # a second signal: the run was not waited for
        _say_interrupted(agent.transcript_path)
        return signals.exit_code(130)
    code = _report(json_output, settings, result, view, interrupted=signals.signum is not None)
    return signals.exit_code(code) if code == 130 or signals.output_code is not None else code


def _open_agent(root: Path, settings: Settings, continue_id: str | None, asker: Any) -> Agent:
    """The run's Agent (``asker``: its approval answerer, or None); UsageError for bad
    settings or an unknown or bad ``continue_id``."""
    from agentkit.agent import Agent
    from agentkit.errors import ConfigurationError

    try:  # the Agent checks everything (agentkit.chat.assembly), once
        return Agent(root, settings, conversation_id=continue_id, on_approval=asker)
    except (ConfigurationError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _asker() -> Any:
    """The terminal's answerer when standard input and error are a terminal, else None
    (no one to ask)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    from agentkit.cli.approve import TerminalApprover

    return TerminalApprover()


def _run_demo(args: argparse.Namespace) -> int:
    """``agentkit run --demo``: the scripted model of ``chat --demo`` on the task, in
    ``-w`` or a fresh copy of the sample project (removed when the run never starts)."""
    from agentkit.cli.demo_chat import start_demo

    try:
        demo = start_demo(args.workspace, args.lang)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    try:
        settings = settings_from_args(args, {**demo.overrides, **_yes(args)})
        return run_task(
            args.task,
            str(demo.workspace),
            settings,
            json_output=args.json,
            continue_id=args.continue_id,
            ask=not args.yes,
        )
    except UsageError:
        demo.discard()  # it never ran: no copy of the sample left behind
        raise
    finally:
        demo.stop()


def _run_local(args: argparse.Namespace) -> int:
    """``agentkit run --local``: start the toy llama.cpp server, run, stop it."""
    from agentkit.errors import ConfigurationError
    from agentkit.local import LocalModelServer

    server = LocalModelServer(workspace_dir(args.workspace))
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
        err(str(exc))
        return 1
    try:
        args.local = False
        for flag in ("base_url", "model", "api_key"):
            setattr(args, flag, None)
        settings = settings_from_args(args, {**server.settings_overrides(), **_yes(args)})
        code = run_task(
            args.task,
            args.workspace,
            settings,
            json_output=args.json,
            continue_id=args.continue_id,
            ask=not getattr(args, "yes", False),
        )
        if code not in (0, 130, 129, 143):
            err(f"the local model server's log: {server.log_path}")
        return code
    finally:
        server.stop()


def _report(
    json_output: bool, settings: Settings, result: RunResult, view: Any, interrupted: bool
) -> int:
    if json_output:
        print_json(result.to_dict())
    if result.status == "cancelled" or (interrupted and result.status != "done"):
        _say_interrupted(result.transcript_path)
        return 130
    if result.status != "done":
        turns = int((result.stats or {}).get("turns") or 0)
        if result.error_kind in ENDPOINT_KINDS and turns == 0:
            base_url = settings.base_url or DEFAULT_BASE_URL
            if result.error_kind == "connection":
                err(f"cannot reach the model endpoint {base_url}: {result.error}")
            else:  # reached, but it refused: a bad key, an unknown model or path
                err(f"the model endpoint {base_url} refused the request: {result.error}")
            return 2
        err(f"run {result.status}: {result.error} (conversation saved to {result.transcript_path})")
        return 1
    if not json_output:
        _print_final(result.final_text, view)
    return 0


def _say_interrupted(path: Any) -> None:
    print(
        terminal_safe(f"interrupted: sub-agents stopped, conversation saved to {path}"),
        file=sys.stderr,
        flush=True,
    )


def _print_final(text: str | None, view: Any) -> None:
    from agentkit.cli.progress import LiveDisplay

    if not (text or "").strip():
        print("agentkit: the model finished without a final answer", file=sys.stderr, flush=True)
        return

    if isinstance(view, LiveDisplay):
        from agentkit.cli.progress import print_final_markdown

        print_final_markdown(view.console, text)
        return
    if text:
        # A blank line parts the progress lines from the answer.
        gap = "\n" if getattr(view, "lines", 0) else ""
        # The answer is model text: terminal-safe on a pipe too (it often ends in one,
        # `| tee`); --json gives the exact text to programs.
        sys.stdout.write(gap + terminal_safe(text.rstrip("\n")) + "\n")
        sys.stdout.flush()
