"""``agentkit acp``: agentkit as an Agent Client Protocol agent, for editors.

One job: the subcommand's parser and entry point. The editor starts ``agentkit acp
[model options]`` and speaks ACP on its stdin and stdout (agentkit.acp); each session
the editor opens has its folder (``cwd``) as the workspace. Logs go to stderr only:
stdout is the protocol channel, and is kept for it (agentkit.acp.stdio.claim_stdio)
before anything else runs.

Exit codes: 0 when the editor closed the connection; 2 for a usage or configuration
error (one line on stderr, before any protocol traffic: no model, no key, the extra
missing); 128 + the signal after SIGTERM, SIGINT or SIGHUP (every conversation is
closed first, its sub-agents ended). Only the standard library is imported at load.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from agentkit.cli.common import Signals, UsageError, endpoint_args, settings_from_args

__all__ = ["add_parser", "cmd_acp"]


def add_parser(sub: Any) -> None:
    """Add the ``acp`` subcommand to the ``agentkit`` subparsers ``sub``."""
    acp = sub.add_parser(
        "acp",
        help="serve an editor over the Agent Client Protocol (stdio; needs the acp extra)",
        description="Run agentkit as an ACP agent for editors such as Zed: JSON-RPC on "
        "standard input and output, logs on standard error. Each session's folder is its "
        "workspace. Endpoint settings fall back to OPENAI_API_KEY, OPENAI_BASE_URL, "
        "AGENTKIT_MODEL and the other AGENTKIT_* variables.",
    )
    endpoint_args(acp, demo=True)
    acp.add_argument(
        "--demo",
        action="store_true",
        help="no key: a built-in scripted model plays every agent (as chat --demo)",
    )
    acp.add_argument("--max-turns", type=int, metavar="N", help="model requests per round")
    acp.add_argument("--no-stream", action="store_true", help="send plain requests")
    acp.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="what goes to standard error (default warning)",
    )


def cmd_acp(args: argparse.Namespace) -> int:
    """``agentkit acp``: serve until the editor leaves; returns the exit code.

    Raises:
        agentkit.cli.common.UsageError: bad settings, no model or key, the acp extra
            missing (printed as one line, exit 2).
    """
    from agentkit.acp import require_acp_extra
    from agentkit.chat.setup import check_settings
    from agentkit.cli.chat import check_endpoint_flags
    from agentkit.errors import ConfigurationError

    check_endpoint_flags(args)
    demo: Any = None
    try:
        try:
            require_acp_extra()
            demo = _demo(args.lang) if args.demo else None
            settings = settings_from_args(args, demo.overrides if demo else None)
            check_settings(settings)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        return _serve(settings, args.log_level)
    finally:
        if demo is not None:
            demo.stop()


def _demo(language: str | None) -> Any:
    from pathlib import Path

    from agentkit.cli.demo_chat import start_demo_model

    return start_demo_model(language, Path.cwd(), "workspaces: the folders the editor opens")


def _serve(settings: Any, log_level: str) -> int:
    from agentkit.acp.server import AcpServer
    from agentkit.acp.stdio import claim_stdio

    _log_to_stderr(log_level)
    input_fd, output_fd = claim_stdio()
    server = AcpServer(settings, input_fd, output_fd)
    with Signals(on_leave=lambda _signum: server.stop()) as signals:
        server.run()
    for fd in (input_fd, output_fd):
        try:
            os.close(fd)
        except OSError:
            pass
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
