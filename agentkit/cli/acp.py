"""``agentkit acp``: agentkit as an Agent Client Protocol agent, for editors.

One job: the subcommand's parser and entry point. The editor starts ``agentkit acp
[model options]`` and speaks ACP on its stdin and stdout (agentkit.acp); each session
the editor opens has its folder (``cwd``) as the workspace. Logs go to stderr only:
stdout is the protocol channel, and is kept for it (agentkit.acp.stdio.claim_stdio)
before anything else runs.

With no model (or no key, or settings that cannot work) it still serves: the editor
gets its ``initialize`` answered, and ``session/new`` or ``session/load`` refused with a
message it shows, naming ``--model`` and ``--demo`` (an agent that exits at once only
leaves its reason in a log the person never sees).

Exit codes: 0 when the editor closed the connection; 2 for a usage error (one line on
stderr, before any protocol traffic: a bad flag value, the extra missing); 128 + the
signal after SIGTERM, SIGINT or SIGHUP (every conversation is closed first, its
sub-agents ended). Only the standard library is imported at load.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from agentkit.cli.common import (
    MAX_TURNS,
    UsageError,
    agent_args,
    check_endpoint_flags,
    check_settings_first,
    output_failed,
    settings_from_args,
    whole_number,
    workspace,
)
from agentkit.cli.signals import Signals

__all__ = ["add_parser", "cmd_acp"]


def add_parser(sub: Any) -> None:
    """Add the ``acp`` subcommand to the ``agentkit`` subparsers ``sub``."""
    acp = sub.add_parser(
        "acp",
        help="serve an editor over the Agent Client Protocol (stdio; needs the acp extra)",
        description="Run agentkit as an ACP agent for editors such as Zed: JSON-RPC on "
        "standard input and output, logs on standard error. Each session's folder is its "
        "workspace (or -w's). With no model it still answers, and refuses sessions saying "
        "why. Endpoint settings fall back to OPENAI_API_KEY, OPENAI_BASE_URL, "
        "AGENTKIT_MODEL and the other AGENTKIT_* variables.",
    )
    agent_args(acp, "acp")
    acp.add_argument(
        "--max-turns", type=whole_number(1, MAX_TURNS), metavar="N", help="model requests per round"
    )
    acp.add_argument("--no-stream", action="store_true", help="send plain requests")


def cmd_acp(args: argparse.Namespace) -> int:
    """``agentkit acp``: serve until the editor leaves; returns the exit code.

    Raises:
        agentkit.cli.common.UsageError: a bad flag value, a ``-w`` that is no folder,
            the acp extra missing (printed as one line, exit 2).
    """
    from agentkit.acp import require_acp_extra
    from agentkit.errors import ConfigurationError

    check_endpoint_flags(args)
    check_settings_first(args)  # before the demo's banner or the local model's
    root = workspace(args.workspace) if args.workspace else None
    model: Any = None
    try:
        try:
            require_acp_extra()
            base: dict[str, Any] = {}
            if args.demo:
                model = _demo(args.lang, root)
                base = dict(model.overrides)
            elif args.local:
                from agentkit.cli.chat import start_local

                model, base = start_local()
            if args.yes:  # an ask is allowed at once: the editor is not asked
                base["approvals_default"] = "allow"
            settings = settings_from_args(args, base)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        return _serve(settings, args.log_level, refusal(settings), root, ask=not args.yes)
    finally:
        if model is not None:
            model.stop()


def refusal(settings: Any) -> str | None:
    """Why no session can start with ``settings``, in words an editor shows (naming
    ``--model`` and ``--demo``), or None when they can work."""
    from agentkit.chat.setup import check_settings, missing_setting
    from agentkit.errors import ConfigurationError

    missing = missing_setting(settings)
    if missing == "model":
        return (
            "agentkit has no model: start `agentkit acp` with --model NAME (and --base-url "
            "and --api-key, or OPENAI_BASE_URL and OPENAI_API_KEY), or set AGENTKIT_MODEL; "
            "or with --demo to try it with a scripted model and no key"
        )
    if missing == "api_key":
        return (
            f"agentkit has no API key for the model {settings.model}: start `agentkit acp` "
            "with --api-key (or set OPENAI_API_KEY), or point --base-url at a local server; "
            "or pass --demo instead of --model to try it with no key"
        )
    try:
        check_settings(settings)
    except ConfigurationError as exc:
        return f"agentkit's settings cannot work: {exc}"
    return None


def _demo(language: str | None, root: Any) -> Any:
    from pathlib import Path

    from agentkit.cli.demo_chat import start_demo_model

    where = f"workspace: {root}" if root else "workspaces: the folders the editor opens"
    return start_demo_model(language, root or Path.cwd(), where)


def _serve(settings: Any, log_level: str, problem: str | None, root: Any, ask: bool) -> int:
    from agentkit.acp.server import AcpServer
    from agentkit.acp.stdio import claim_stdio

    _log_to_stderr(log_level)
    if problem is not None:  # said in the editor's log too; sessions are refused with it
        print(f"agentkit acp: {problem}", file=sys.stderr, flush=True)
    input_fd, output_fd = claim_stdio()
    server = AcpServer(settings, input_fd, output_fd, refusal=problem, workspace=root, ask=ask)
    with Signals(on_leave=lambda _signum: server.stop()) as signals:
        server.run()
    for fd in (input_fd, output_fd):
        try:
            os.close(fd)
        except OSError:
            pass
    if server.output_error is not None and signals.signum is None:  # the editor stopped reading
        return output_failed(server.output_error, stream=None)
    return signals.exit_code(0)


def _log_to_stderr(level: str) -> None:
    # The acp library logs through the root logger; agentkit's own loggers already
    # have the terminal-safe stderr handler (agentkit.cli.main). Never stdout.
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("agentkit acp: %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(lambda record: not record.name.startswith("agentkit"))
        root.addHandler(handler)
    root.setLevel(level.upper())
