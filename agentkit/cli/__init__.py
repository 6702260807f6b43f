"""The ``agentkit`` command (docs/architecture.md §3 CLI): run, chat, serve, acp, show,
conversations, transcript, demo, profiles, skills, doctor, help.

One job: the argument parser and the dispatch. The package is a client of the
library; its map:

* ``common``: what the subcommands share (the agent options of run, chat, serve and
  acp, settings from arguments, errors, JSON output, the one signal-handling class);
* ``run``: ``agentkit run``; ``chat`` (set-up and JSON lines) and ``terminal``:
  ``agentkit chat``; ``commands``: the chat's slash commands; ``paste``: the
  terminal input that reads a paste as one;
* ``serve``: ``agentkit serve`` and ``profiles``; ``acp``: ``agentkit acp`` (an editor's
  agent over the Agent Client Protocol); ``skills``: ``agentkit skills``;
  ``show``: ``show`` and ``transcript``; ``demo``: the scripted demo; ``demo_chat``:
  the scripted model of ``--demo``; ``guide``: ``help``, the parser class (grouped
  help, "did you mean" for a mistyped option or command), ``conversations``;
  ``doctor``: what this machine gives agentkit;
* ``progress`` (live view, plain lines) and ``safe_text`` (terminal-safe text);
* ``entry``: the process's entry point (the console script, ``python -m agentkit``),
  which ends the process once the command is done.

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
from typing import Any

from agentkit.cli.common import (
    MAX_TURNS,
    PROG,
    UsageError,
    agent_args,
    err,
    is_output_error,
    output_failed,
    print_json,
    whole_number,
    workspace,
    workspace_arg,
)
from agentkit.cli.guide import Parser, command_listing
from agentkit.cli.safe_text import terminal_safe
from agentkit.cli.skills import add_parser as add_skills_parser
from agentkit.errors import ConfigFileError

__all__ = ["COMMANDS", "build_parser", "main"]


def _version() -> str:
    from agentkit import __version__

    return __version__


class _VersionAction(argparse.Action):
    """``--version``: one line. Nothing else is worked out here: the token counting
    (``agentkit doctor`` says it) would load tiktoken, which downloads its tables."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{PROG} {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Return the argparse parser of the ``agentkit`` command."""
    parser = Parser(
        prog=PROG,
        usage=f"{PROG} [-h] [--version] COMMAND ...",
        description="Agents that delegate work to parallel, isolated, observable sub-agents "
        "over any OpenAI-compatible endpoint.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog=PROG
    )
    _add_run_parser(sub)
    _add_show_parsers(sub)

    from agentkit.cli.chat import add_parser as add_chat_parser

    add_chat_parser(sub)
    from agentkit.cli.serve import add_parsers as add_serve_parsers

    add_serve_parsers(sub)
    from agentkit.cli.acp import add_parser as add_acp_parser

    add_acp_parser(sub)
    add_skills_parser(sub)
    from agentkit.cli.guide import add_parsers as add_guide_parsers

    add_guide_parsers(sub)
    from agentkit.cli.doctor import add_parser as add_doctor_parser

    add_doctor_parser(sub)
    parser.listing = command_listing(sub)
    parser.commands = sub.choices
    return parser


def _add_run_parser(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run the main agent on a task",
        description="Run the main agent on TASK until it is done and no sub-agent is running. "
        "Endpoint settings fall back to OPENAI_API_KEY, OPENAI_BASE_URL, AGENTKIT_MODEL "
        "and AGENTKIT_* variables.",
    )
    run.add_argument("task", help='the task, in words ("-" reads it from standard input)')
    agent_args(run, "run")
    run.add_argument("--json", action="store_true", help="print one JSON object at the end")
    run.add_argument(
        "--max-turns",
        type=whole_number(1, MAX_TURNS),
        metavar="N",
        help="model requests for this run",
    )
    run.add_argument("--no-stream", action="store_true", help="send plain (non-streaming) requests")
    run.add_argument(
        "--continue", dest="continue_id", metavar="CONV_ID", help="continue a saved conversation"
    )


def _add_show_parsers(sub: Any) -> None:
    show = sub.add_parser(
        "show",
        help="list a conversation's sub-agents and results",
        description="Show a conversation (default: the latest): state, stats, final text "
        "and its sub-agents with their deliverables.",
    )
    show.add_argument(
        "conversation_id",
        nargs="?",
        metavar="CONV_ID",
        help="the conversation (default: the latest; `agentkit conversations` lists them)",
    )
    workspace_arg(show)
    show.add_argument("--json", action="store_true", help="print JSON")

    transcript = sub.add_parser(
        "transcript",
        help="print a transcript readably",
        description="Print one transcript. TARGET: a conversation id, a sub-agent id "
        "(of the latest conversation) or a path to a JSON file.",
    )
    transcript.add_argument(
        "target",
        metavar="TARGET",
        help="a conversation id, a sub-agent id (of the latest conversation) or a JSON file",
    )
    workspace_arg(transcript)
    transcript.add_argument("--json", action="store_true", help="print the raw JSON document")
    transcript.add_argument("--full", action="store_true", help="do not shorten tool results")
    transcript.add_argument(
        "--system", action="store_true", help="print the system prompt (else one line)"
    )


# --------------------------------------------------------------------- commands
def cmd_run(args: argparse.Namespace) -> int:
    """``agentkit run``: delegates to ``agentkit.cli.run.cmd_run``."""
    from agentkit.cli.run import cmd_run as run

    return run(args)


def cmd_show(args: argparse.Namespace) -> int:
    """``agentkit show``: a conversation's state, stats, final text and sub-agents."""
    from agentkit.cli.show import InspectError, conversation_overview, render_overview

    root = workspace(args.workspace)
    try:
        data = conversation_overview(root, args.conversation_id)
    except InspectError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(data)
    else:
        print(terminal_safe(render_overview(data)))
    return 0


def cmd_transcript(args: argparse.Namespace) -> int:
    """``agentkit transcript``: one transcript, readably (or raw with --json)."""
    from agentkit.cli.show import InspectError, load_document, render_transcript, resolve_transcript

    root = workspace(args.workspace)
    try:
        doc = load_document(resolve_transcript(root, args.target))
    except InspectError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_json(doc)
    else:
        hint = f"agentkit transcript {args.target} --system"
        text = render_transcript(
            doc, tool_chars=0 if args.full else 800, system=args.system, system_hint=hint
        )
        print(terminal_safe(text))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``agentkit demo``: delegates to ``agentkit.cli.demo.main(workspace)``."""
    try:
        from agentkit.cli import demo
    except ImportError as exc:
        err(f"the demo is not available: {exc}")
        return 1
    return int(demo.main(args.workspace, language=args.lang))


def cmd_chat(args: argparse.Namespace) -> int:
    """``agentkit chat``: delegates to ``agentkit.cli.chat.cmd_chat``."""
    from agentkit.cli.chat import cmd_chat as chat

    return chat(args)


def cmd_profiles(args: argparse.Namespace) -> int:
    """``agentkit profiles``: see agentkit.cli.serve."""
    from agentkit.cli.serve import cmd_profiles as profiles

    return profiles(args)


def cmd_acp(args: argparse.Namespace) -> int:
    """``agentkit acp``: see agentkit.cli.acp."""
    from agentkit.cli.acp import cmd_acp as acp

    return acp(args)


def cmd_skills(args: argparse.Namespace) -> int:
    """``agentkit skills``: see agentkit.cli.skills."""
    from agentkit.cli.skills import cmd_skills as skills

    return skills(args)


def cmd_serve(args: argparse.Namespace) -> int:
    """``agentkit serve``: see agentkit.cli.serve."""
    from agentkit.cli.serve import cmd_serve as serve

    return serve(args)


def cmd_conversations(args: argparse.Namespace) -> int:
    """``agentkit conversations``: see agentkit.cli.guide."""
    from agentkit.cli.guide import cmd_conversations as conversations

    return conversations(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    """``agentkit doctor``: see agentkit.cli.doctor."""
    from agentkit.cli.doctor import cmd_doctor as doctor

    return doctor(args)


def cmd_help(args: argparse.Namespace) -> int:
    """``agentkit help [COMMAND]``: see agentkit.cli.guide."""
    from agentkit.cli.guide import cmd_help as show_help

    return show_help(args, build_parser(), list(COMMANDS))


COMMANDS = {
    "run": cmd_run,
    "chat": cmd_chat,
    "show": cmd_show,
    "transcript": cmd_transcript,
    "demo": cmd_demo,
    "profiles": cmd_profiles,
    "skills": cmd_skills,
    "serve": cmd_serve,
    "acp": cmd_acp,
    "conversations": cmd_conversations,
    "doctor": cmd_doctor,
    "help": cmd_help,
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

    from agentkit.cli.safe_text import SafeStderrHandler

    logger = logging.getLogger("agentkit")
    if not any(isinstance(h, SafeStderrHandler) for h in logger.handlers):
        logger.addHandler(SafeStderrHandler())  # once, if main() runs again in-process


def _log_level(level: str) -> None:
    """``--log-level``: what agentkit's loggers write on stderr (the safe handler too)."""
    import logging

    from agentkit.cli.safe_text import SafeStderrHandler

    logger = logging.getLogger("agentkit")
    logger.setLevel(level.upper())
    for handler in logger.handlers:
        if isinstance(handler, SafeStderrHandler):
            handler.setLevel(level.upper())


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentkit`` console script.

    Args:
        argv: arguments without the program name (default ``sys.argv[1:]``).

    Returns the exit code; never raises (except SystemExit from --help/--version,
    which argparse raises with code 0, and usage errors with code 2).
    """
    parser = build_parser()
    words = sys.argv[1:] if argv is None else argv
    if words and not words[0].startswith("-") and words[0] not in COMMANDS:
        from agentkit.cli.guide import unknown_command

        err(unknown_command(words[0], list(COMMANDS)))
        return 2
    args, extras = parser.parse_known_args(argv)
    if extras:  # the command's own usage and options, not the top level's
        chosen = (getattr(parser, "commands", None) or {}).get(args.command, parser)
        chosen.error(f"unrecognized arguments: {' '.join(extras)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    _safe_streams()
    _safe_log_lines()
    if args.command != "acp" and getattr(args, "log_level", None):  # acp sets up its own
        _log_level(args.log_level)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        err(str(exc))
        return 2
    except ConfigFileError as exc:  # names the file and the field
        err(str(exc))
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:
        if is_output_error(exc):  # `agentkit show | head`, `>/dev/full`
            return output_failed(exc)
        err(f"internal error: {type(exc).__name__}: {exc}")
        if os.environ.get("AGENTKIT_DEBUG") == "1":
            traceback.print_exc()
        return 1
    finally:
        _end_worker_server()


def _end_worker_server() -> None:
    """The sub-agent worker process server ends with the command (it would otherwise
    outlive it while it finishes preloading, seconds after a one-turn ``run``)."""
    local = sys.modules.get("agentkit.subagent.launchers.local")
    if local is not None:
        try:
            local.stop_forkserver()
        except Exception as exc:  # exiting anyway
            err(f"could not stop the worker process server: {exc}")


if __name__ == "__main__":
    sys.exit(main())
