"""The ``agentkit serve`` (web chat) and ``agentkit profiles`` subcommands.

One job: their argument parsers and entry points, kept out of agentkit.cli so that
module stays the story of ``run``. Heavy imports happen only when a command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_parsers", "cmd_profiles", "cmd_serve"]


def add_parsers(sub: Any, workspace_arg: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``profiles`` and ``serve`` to the ``agentkit`` subparsers ``sub``."""
    profiles = sub.add_parser("profiles", help="list the agent profiles and check their files")
    workspace_arg(profiles)
    serve = sub.add_parser(
        "serve",
        help="a web chat with the main agent and its sub-agents",
        description="Serve the web chat (needs agentkit[web]) on HOST:PORT. Loopback by "
        "default; any other address needs a token of at least 16 characters (given, or "
        "generated and printed once) and answers only to its own names and --allowed-host.",
    )
    workspace_arg(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    serve.add_argument(
        "--token",
        help="access token, at least 16 characters (default: none on loopback, else generated)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name the Host header may carry (repeatable; e.g. the machine's DNS name)",
    )
    serve.add_argument("--model", help="model name (env AGENTKIT_MODEL)")
    serve.add_argument("--base-url", help="OpenAI-compatible base URL (env OPENAI_BASE_URL)")
    serve.add_argument("--api-key", help="API key (env OPENAI_API_KEY)")
    serve.add_argument("--lang", choices=("zh", "en"), help="prompt language (default zh)")
    serve.add_argument("--max-turns", type=int, metavar="N", help="model requests per round")
    serve.add_argument("--no-stream", action="store_true", help="send plain requests")


def workspace_path(value: str) -> Path:
    """The workspace folder, or UsageError (agentkit.cli's rule)."""
    from agentkit.cli import _workspace

    return _workspace(value)


def settings_from(args: argparse.Namespace) -> Any:
    """Settings from the command line and the environment (agentkit.cli's rule)."""
    from agentkit.cli import _settings

    return _settings(args)


def cmd_profiles(args: argparse.Namespace) -> int:
    """``agentkit profiles``: list the profiles; exit code 1 when one has a problem."""
    from agentkit.profiles import check_profiles
    from agentkit.settings import Settings

    lines, good = check_profiles(workspace_path(args.workspace), Settings())
    print("\n".join(lines), flush=True)
    return 0 if good else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """``agentkit serve``: the web chat (agentkit.web.serve), until Ctrl-C."""
    from agentkit.errors import ConfigurationError

    workspace = workspace_path(args.workspace)
    settings = settings_from(args)
    try:
        from agentkit.web import require_web_extra

        require_web_extra()
        from agentkit.web.serve import serve

        return serve(
            workspace,
            settings,
            host=args.host,
            port=args.port,
            token=args.token,
            allowed_hosts=args.allowed_host,
        )
    except ConfigurationError as exc:
        from agentkit.cli import UsageError

        raise UsageError(str(exc)) from None
