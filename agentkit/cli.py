"""The ``agentkit`` command (docs/architecture.md §3 CLI): run, chat, show, transcript, demo.

Exit codes: 0 done; 1 the run failed or was cancelled, or an internal error;
2 usage or configuration error (one line on stderr, no traceback); 130 Ctrl-C,
143 SIGTERM, 129 SIGHUP.
``AGENTKIT_DEBUG=1`` adds tracebacks to internal errors.

Start-up time matters (docs/architecture.md §8: ``agentkit --help`` under 300 ms), so this
module imports only argparse and the standard library at load time; Settings,
Agent, rich and openai are imported inside the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit.agent import Agent, RunResult
    from agentkit.settings import Settings

PROG = "agentkit"
# Model errors that mean "this endpoint/key/model cannot work" when no turn succeeded.
ENDPOINT_KINDS = ("connection", "authentication", "not_found")
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class UsageError(Exception):
    """A usage or configuration problem: one line on stderr, exit 2."""


def _version() -> str:
    from agentkit import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    """Return the argparse parser of the ``agentkit`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Agents that delegate work to parallel, isolated, observable sub-agents "
        "over any OpenAI-compatible endpoint.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run the main agent on a task",
        description="Run the main agent on TASK until it is done and no sub-agent is running. "
        "Endpoint settings fall back to OPENAI_API_KEY, OPENAI_BASE_URL, AGENTKIT_MODEL "
        "and AGENTKIT_* variables.",
    )
    run.add_argument("task", help='the task, in words ("-" reads it from standard input)')
    _workspace_arg(run)
    run.add_argument("--model", help="model name (env AGENTKIT_MODEL)")
    run.add_argument("--base-url", help="OpenAI-compatible base URL (env OPENAI_BASE_URL)")
    run.add_argument("--api-key", help="API key (env OPENAI_API_KEY)")
    run.add_argument("--lang", choices=("zh", "en"), help="prompt language (default zh)")
    run.add_argument("--json", action="store_true", help="print one JSON object at the end")
    run.add_argument("--max-turns", type=int, metavar="N", help="model requests for this run")
    run.add_argument("--no-stream", action="store_true", help="send plain (non-streaming) requests")
    run.add_argument(
        "--local",
        action="store_true",
        help="use a toy local model (Gemma 3 270M on llama.cpp, prompted tool calls; needs the local extra): no key, poor answers",
    )
    run.add_argument(
        "--continue", dest="continue_id", metavar="CONV_ID", help="continue a saved conversation"
    )

    show = sub.add_parser(
        "show",
        help="list a conversation's sub-agents and results",
        description="Show a conversation (default: the latest): state, stats, final text "
        "and its sub-agents with their deliverables.",
    )
    show.add_argument("conversation_id", nargs="?", metavar="CONV_ID")
    _workspace_arg(show)
    show.add_argument("--json", action="store_true", help="print JSON")

    transcript = sub.add_parser(
        "transcript",
        help="print a transcript readably",
        description="Print one transcript. TARGET: a conversation id, a sub-agent id "
        "(of the latest conversation) or a path to a JSON file.",
    )
    transcript.add_argument("target", metavar="TARGET")
    _workspace_arg(transcript)
    transcript.add_argument("--json", action="store_true", help="print the raw JSON document")
    transcript.add_argument("--full", action="store_true", help="do not shorten tool results")

    from agentkit.chat_cli import add_parser as add_chat_parser

    add_chat_parser(sub)
    from agentkit.serve_cli import add_parsers as add_serve_parsers

    add_serve_parsers(sub, _workspace_arg)

    demo = sub.add_parser("demo", help="the whole machinery offline, on a scripted model")
    demo.add_argument("-w", "--workspace", default=None, metavar="DIR", help="workspace folder")
    demo.add_argument("--lang", choices=("zh", "en"), help="prompt language (default en)")
    return parser


def _workspace_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-w", "--workspace", default=".", metavar="DIR", help="workspace folder (default: .)"
    )


def _err(message: str) -> None:
    print(f"{PROG}: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def _workspace(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UsageError(f"workspace {value!r} is not a folder")
    return path.resolve()


# ------------------------------------------------------------------------ run
def _settings(args: argparse.Namespace, base: dict[str, Any] | None = None) -> Settings:
    """Settings from the flags that were given (they override ``base``, which overrides
    the environment)."""
    given: dict[str, Any] = dict(base or {})
    for flag, field in (
        ("model", "model"),
        ("base_url", "base_url"),
        ("api_key", "api_key"),
        ("lang", "language"),
        ("max_turns", "max_turns"),
    ):
        value = getattr(args, flag)
        if value is not None:
            given[field] = value
    if args.no_stream:
        given["stream"] = False
    return make_settings(given)


def make_settings(given: dict[str, Any]) -> Settings:
    """``Settings(**given)`` (the environment fills the rest).

    Raises:
        UsageError: a value is invalid (one line naming each field and its problem).
    """
    from pydantic import ValidationError

    from agentkit.settings import Settings

    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise UsageError(f"invalid settings: {problems}") from None


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
            f"interrupted: sub-agents stopped, conversation saved to {result.transcript_path}",
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
        sys.stdout.write(gap + text.rstrip("\n") + "\n")
        sys.stdout.flush()


# ----------------------------------------------------------- show, transcript
def cmd_show(args: argparse.Namespace) -> int:
    """``agentkit show``: a conversation's state, stats, final text and sub-agents."""
    from agentkit.inspect import InspectError, conversation_overview, render_overview

    workspace = _workspace(args.workspace)
    try:
        data = conversation_overview(workspace, args.conversation_id)
    except InspectError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        _print_json(data)
    else:
        print(render_overview(data))
    return 0


def cmd_transcript(args: argparse.Namespace) -> int:
    """``agentkit transcript``: one transcript, readably (or raw with --json)."""
    from agentkit.inspect import InspectError, load_document, render_transcript, resolve_transcript

    workspace = _workspace(args.workspace)
    try:
        doc = load_document(resolve_transcript(workspace, args.target))
    except InspectError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        _print_json(doc)
    else:
        print(render_transcript(doc, tool_chars=0 if args.full else 800))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``agentkit demo``: delegates to ``agentkit.demo.main(workspace)``."""
    try:
        from agentkit import demo
    except ImportError as exc:
        _err(f"the demo is not available: {exc}")
        return 1
    return int(demo.main(args.workspace, language=args.lang))


def cmd_chat(args: argparse.Namespace) -> int:
    """``agentkit chat``: delegates to ``agentkit.chat_cli.cmd_chat``."""
    from agentkit.chat_cli import cmd_chat as chat

    return chat(args)


def cmd_profiles(args: argparse.Namespace) -> int:
    """``agentkit profiles``: see agentkit.serve_cli."""
    from agentkit.serve_cli import cmd_profiles as profiles

    return profiles(args)


def cmd_serve(args: argparse.Namespace) -> int:
    """``agentkit serve``: see agentkit.serve_cli."""
    from agentkit.serve_cli import cmd_serve as serve

    return serve(args)


COMMANDS = {
    "run": cmd_run,
    "chat": cmd_chat,
    "show": cmd_show,
    "transcript": cmd_transcript,
    "demo": cmd_demo,
    "profiles": cmd_profiles,
    "serve": cmd_serve,
}


def _safe_streams() -> None:
    # A non-UTF-8 terminal must not turn a Chinese answer into a crash.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentkit`` console script.

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).

    Returns the exit code; never raises (except SystemExit from --help/--version,
    which argparse raises with code 0, and usage errors with code 2).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    _safe_streams()
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        _err(str(exc))
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        # `agentkit show | head`: the reader left; say nothing more.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 1
    except Exception as exc:
        _err(f"internal error: {type(exc).__name__}: {exc}")
        if os.environ.get("AGENTKIT_DEBUG") == "1":
            traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
