"""The ``agentkit serve`` (web chat) and ``agentkit profiles`` subcommands.

One job: their argument parsers and entry points, kept out of agentkit.cli so that
module stays the story of ``run``. Heavy imports happen only when a command runs.
"""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from agentkit.cli.common import (
    MAX_TURNS,
    UsageError,
    agent_args,
    check_cli_settings,
    check_endpoint_flags,
    check_settings_first,
    settings_from_args,
    whole_number,
    workspace,
    workspace_arg,
)
from agentkit.cli.signals import Signals

__all__ = ["add_parsers", "cmd_profiles", "cmd_serve"]


def add_parsers(sub: Any) -> None:
    """Add ``profiles`` and ``serve`` to the ``agentkit`` subparsers ``sub``."""
    profiles = sub.add_parser(
        "profiles",
        help="list the agent profiles and check their files",
        description="List the agent profiles (named kinds of sub-agent: a prompt, a tool "
        "allow-list, a model) from <workspace>/.agentkit/agents/*.md and "
        "~/.config/agentkit/agents/*.md, and check each file; exit 1 when one has a problem.",
    )
    workspace_arg(profiles)
    serve = sub.add_parser(
        "serve",
        help="a web chat with the main agent and its sub-agents",
        description="Serve the web chat (needs the web extra) on HOST:PORT. Loopback by "
        "default; any other address needs a token of at least 16 characters (given, or "
        "generated and printed once) and answers only to its own names and --allowed-host. "
        "The model endpoint is checked at start (the page's header shows the result).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=whole_number(0, 65535),
        default=8765,
        help="port (default 8765; 0: a free one)",
    )
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
    agent_args(serve, "serve")
    serve.add_argument(
        "--max-turns", type=whole_number(1, MAX_TURNS), metavar="N", help="model requests per round"
    )
    serve.add_argument("--no-stream", action="store_true", help="send plain requests")


def cmd_profiles(args: argparse.Namespace) -> int:
    """``agentkit profiles``: list the profiles; exit code 1 when one has a problem."""
    from agentkit.cli.common import make_settings
    from agentkit.profiles import check_profiles

    lines, good = check_profiles(workspace(args.workspace), make_settings({}))
    print("\n".join(lines), flush=True)
    return 0 if good else 1


def cmd_serve(args: argparse.Namespace) -> int:
    """``agentkit serve``: the web chat (agentkit.webchat.serve) until a signal; returns
    128 + the signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP) after a clean shutdown
    (every conversation saved, its sub-agents ended).

    Raises:
        UsageError: a missing workspace, bad settings, the web extra missing, no model.
    """
    from agentkit.cli.chat import start_local
    from agentkit.errors import ConfigurationError

    check_endpoint_flags(args)
    check_settings_first(args)  # before the demo's copy or the local model's banner
    demo: Any = None
    local: Any = None
    listener = None
    try:
        from agentkit.webchat import require_web_extra

        require_web_extra()
        from agentkit.webchat.serve import check_access, listen, serve

        # The address and the token first: a busy port or a short token is one line,
        # before the demo's model starts and says it is scripted.
        token = check_access(args.host, args.token, args.allowed_host)  # generated off loopback
        listener = listen(args.host, args.port)
        if args.demo:
            from agentkit.cli.demo_chat import start_demo

            demo = start_demo(args.workspace, args.lang)
            root, base = demo.workspace, dict(demo.overrides)
        else:
            root = workspace(args.workspace or ".")
            local, base = start_local() if args.local else (None, {})
        if args.yes:  # an ask is allowed at once: the page asks no one
            base = {**base, "approvals_default": "allow"}
        settings = settings_from_args(args, base)
        check_cli_settings(settings)
        # With --yes no one answers: each ask settles by approvals_default (allow).
        answers: dict[str, Any] = {"on_approval": None} if args.yes else {}
        # While it serves, uvicorn's own flag-setting handlers take SIGINT and SIGTERM
        # (a clean shutdown) and raise them again once it stopped: they reach these
        # handlers then and set the exit code. SIGHUP, which uvicorn leaves alone,
        # is turned into that same shutdown.
        with Signals(on_leave=_hang_up_as_term) as signals:
            code = serve(
                root,
                settings,
                host=args.host,
                port=args.port,
                token=token,
                allowed_hosts=args.allowed_host,
                demo=args.demo,
                listener=listener,
                **answers,
            )
    except (ConfigurationError, FileNotFoundError, UsageError) as exc:
        if demo is not None:
            demo.discard()  # it never served: no copy left behind
        raise UsageError(str(exc)) from None
    finally:
        if listener is not None:
            listener.close()  # serving closed it already; a refused start has not
        if demo is not None:
            demo.stop()
        if local is not None:
            local.stop()
    return signals.exit_code(code)


def _hang_up_as_term(signum: int) -> None:
    # Called on the signal watcher thread, not in a handler.
    if signum == signal.SIGHUP:
        os.kill(os.getpid(), signal.SIGTERM)
