"""The ``agentkit`` command (docs/architecture.md §3 CLI): run, chat, show, transcript, demo.

One job: the argument parser, the helpers every subcommand shares (workspace,
settings, errors) and the dispatch. ``run`` lives in agentkit.run_cli, ``chat`` in
agentkit.chat_cli, ``serve`` and ``profiles`` in agentkit.serve_cli.

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
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.terminal_text import json_line, terminal_safe

if TYPE_CHECKING:
    from agentkit.settings import Settings

PROG = "agentkit"


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
    # Errors quote input (paths, model text): terminal-safe, like all shown text.
    print(terminal_safe(f"{PROG}: {' '.join(str(message).split())}"), file=sys.stderr, flush=True)


def _print_json(data: Any) -> None:
    sys.stdout.write(json_line(data) + "\n")
    sys.stdout.flush()


def _workspace(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UsageError(f"workspace {value!r} is not a folder")
    return path.resolve()


# ------------------------------------------------------------------- settings
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


# --------------------------------------------------------------------- commands
def cmd_run(args: argparse.Namespace) -> int:
    """``agentkit run``: delegates to ``agentkit.run_cli.cmd_run``."""
    from agentkit.run_cli import cmd_run as run

    return run(args)


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
        print(terminal_safe(render_overview(data)))
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
        print(terminal_safe(render_transcript(doc, tool_chars=0 if args.full else 800)))
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


def _safe_log_lines() -> None:
    # The library's warnings (they quote endpoint errors) would reach stderr through
    # logging's last-resort handler as they are: the same lines, made terminal-safe.
    import logging

    from agentkit.terminal_text import SafeStderrHandler

    logger = logging.getLogger("agentkit")
    if not any(isinstance(h, SafeStderrHandler) for h in logger.handlers):
        logger.addHandler(SafeStderrHandler())  # once, if main() runs again in-process


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
    _safe_log_lines()
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
