"""What every ``agentkit`` subcommand shares: flags, settings, errors, output.

One job: the helpers ``run``, ``chat``, ``serve`` and the rest use, so that no module
of agentkit.cli imports a private name of another and a flag is declared once:

* :class:`UsageError` (one line on stderr, exit 2), :func:`err`, :func:`print_json`;
* :func:`agent_args`: the one set of options of every command that runs an agent
  (``run``, ``chat``, ``serve``, ``acp``), built from :func:`workspace_arg`,
  :func:`endpoint_args` (``--model --base-url --api-key --lang``) and
  :func:`control_arg` (``--subagent-control``) and :func:`isolation_arg`
  (``--subagent-isolation``); :func:`check_endpoint_flags`;
  :func:`workspace`;
* :func:`settings_from_args` and :func:`make_settings` (flags over the environment),
  :func:`check_settings_first` (before any banner, copy or model server);
* :func:`way_back` (the line that ends a chat). Signals are agentkit.cli.signals'.

Only the standard library is imported at load time (``agentkit --help`` stays fast).
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from agentkit.cli.safe_text import json_line, terminal_safe
from agentkit.errors import AgentkitError
from agentkit.process.pipes import terminal

if TYPE_CHECKING:
    from agentkit.chat import Session, Workspace
    from agentkit.settings import Settings

__all__ = [
    "PROG",
    "READER_GONE_EXIT",
    "UsageError",
    "agent_args",
    "check_cli_settings",
    "check_settings_first",
    "check_endpoint_flags",
    "control_arg",
    "endpoint_args",
    "err",
    "is_output_error",
    "isolation_arg",
    "make_settings",
    "output_failed",
    "print_json",
    "settings_from_args",
    "whole_number",
    "workspace",
    "workspace_arg",
]

PROG = "agentkit"

AGENT_COMMANDS = ("run", "chat", "serve", "acp")
"""The commands that run an agent: each has every option of :func:`agent_args`."""
LOG_LEVELS = ("debug", "info", "warning", "error")


class UsageError(AgentkitError):
    """A usage or configuration problem: one line on stderr, exit 2."""


def err(message: str) -> None:
    """Print ``agentkit: MESSAGE`` on stderr as one terminal-safe line (whitespace runs
    folded: errors quote input such as paths and model text)."""
    print(terminal_safe(f"{PROG}: {' '.join(str(message).split())}"), file=sys.stderr, flush=True)


READER_GONE_EXIT = 128 + signal.SIGPIPE
"""The exit code once the reader of standard output has gone (``agentkit show | head``):
141, as for a writer the pipe's signal ends."""


WRITE_ERRORS = frozenset(
    {errno.EPIPE, errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EBADF}
)
"""The errnos of a standard stream that cannot be written (with no file name: a file
the command opens by name fails with its name)."""


def is_output_error(exc: BaseException) -> TypeGuard[OSError]:
    """Whether ``exc`` is a failed write of a standard stream rather than of a file."""
    return isinstance(exc, OSError) and exc.filename is None and exc.errno in WRITE_ERRORS


def output_failed(exc: OSError, stream: Literal["stdout", "stderr"] | None = "stdout") -> int:
    """``stream`` could not be written: returns the exit code.

    That stream is pointed at ``/dev/null`` first (None: neither, for a protocol on a
    descriptor of its own), so later writes and the exit's flush go nowhere instead
    of failing again. A reader that has gone (EPIPE) gives :data:`READER_GONE_EXIT`
    quietly, and a terminal that hung up (EIO) 129 quietly, as their signals would;
    any other failure (a full disk: ``>/dev/full``) gives 1 after one line on
    descriptor 2, when that still takes it.
    """
    if stream is not None:
        _quiet_stream(stream)
    if exc.errno == errno.EPIPE:
        return READER_GONE_EXIT
    if exc.errno == errno.EIO and stream is not None and terminal(1 if stream == "stdout" else 2):
        return 128 + signal.SIGHUP  # the terminal hung up: as its SIGHUP would
    line = terminal_safe(f"{PROG}: cannot write the output: {exc.strerror or exc}") + "\n"
    try:
        os.write(2, line.encode("utf-8", "backslashreplace"))
    except OSError:
        pass  # standard error is what failed: the exit code says it
    return 1


def _quiet_stream(name: Literal["stdout", "stderr"]) -> None:
    """Point ``sys.stdout`` or ``sys.stderr`` at ``/dev/null``: what is written to it
    later, and the exit's flush, go nowhere instead of failing again."""
    try:
        setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115
    except OSError:
        pass


def print_json(data: Any) -> None:
    """Print ``data`` as one JSON line on stdout (controls escaped, see safe_text)."""
    sys.stdout.write(json_line(data) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------- flags
MAX_TURNS = 1_000_000
"""The largest ``--max-turns``: Settings.max_turns' bound (agentkit.settings._types.MAX_COUNT,
not imported here: pydantic is slow to load)."""


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number from ``low`` to ``high`` (both included):
    anything else is a usage error naming the flag (``argument --port: must be from 0
    to 65535 (got 99999)``), exit 2, as a word is (``invalid int value: 'abc'``)."""

    def parse(text: str) -> int:
        value = int(text)  # ValueError: argparse's "invalid int value" (named by __name__)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high} (got {value})")
        return value

    parse.__name__ = "int"
    return parse


def workspace_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``-w/--workspace DIR`` (default ``.``) to ``parser``."""
    parser.add_argument(
        "-w", "--workspace", default=".", metavar="DIR", help="workspace folder (default: .)"
    )


def endpoint_args(parser: argparse.ArgumentParser, *, demo: bool = False) -> None:
    """Add the endpoint flags ``--model --base-url --api-key --lang`` to ``parser``
    (read by :func:`settings_from_args`; the environment fills what is not given).
    ``demo``: the command has ``--demo``, whose language defaults to English."""
    parser.add_argument("--model", help="model name (env AGENTKIT_MODEL)")
    parser.add_argument("--base-url", help="OpenAI-compatible base URL (env OPENAI_BASE_URL)")
    parser.add_argument("--api-key", help="API key (env OPENAI_API_KEY)")
    parser.add_argument(
        "--lang",
        choices=("auto", "zh", "en"),
        help="prompt language (env AGENTKIT_LANGUAGE; default auto: the first message's,"
        " Chinese zh, otherwise en" + (", with --demo en)" if demo else ")"),
    )


def control_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--subagent-control`` (Settings.subagent_control: the two-way control plane,
    docs/control-plane.md) to ``parser`` (part of :func:`agent_args`)."""
    parser.add_argument(
        "--subagent-control",
        action="store_true",
        default=None,
        help="the two-way control plane: message, ask, continue and wait for sub-agents "
        "(env AGENTKIT_SUBAGENT_CONTROL)",
    )


def isolation_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--subagent-isolation`` (Settings.subagent_isolation: off, available or
    always; docs/isolation.md) to ``parser`` (part of :func:`agent_args`)."""
    parser.add_argument(
        "--subagent-isolation",
        choices=("off", "available", "always"),
        default=None,
        help="sub-agents on their own copy of the workspace, merged back by the main "
        "agent: off, available (create_sub_agent chooses) or always "
        "(env AGENTKIT_SUBAGENT_ISOLATION)",
    )


def agent_args(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the options every command that runs an agent shares to ``parser``:
    ``-w/--workspace``, ``--model --base-url --api-key --lang``, ``--demo``,
    ``--local``, ``--log-level``, ``--subagent-control``, ``--subagent-isolation``
    and, where someone is asked about tool calls (``run``, ``chat``, ``serve``, ``acp``), ``--yes``.

    Args:
        parser: the subcommand's parser.
        command: its name, one of :data:`AGENT_COMMANDS` (it words ``-w``'s help).
    """
    where = (
        "the workspace of every session (default: the folder the editor opens each on)"
        if command == "acp"
        else "workspace folder (default: .; with --demo a copy of the sample project)"
    )
    parser.add_argument("-w", "--workspace", default=None, metavar="DIR", help=where)
    endpoint_args(parser, demo=True)
    own = parser.add_mutually_exclusive_group()
    own.add_argument(
        "--demo",
        action="store_true",
        help="no key: a scripted model plays every agent (work requests start a sub-agent)",
    )
    own.add_argument(
        "--local",
        action="store_true",
        help="no key: a toy local model (Gemma 3 270M on llama.cpp; needs the local "
        "extra), poor answers",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="warning",
        help="what agentkit logs on standard error (default warning)",
    )
    control_arg(parser)
    isolation_arg(parser)
    if command in ("run", "chat", "serve", "acp"):
        parser.add_argument(
            "--yes",
            action="store_true",
            help="allow the tool calls the approval rules would ask about (deny rules "
            "still refuse); without it they are asked where someone can answer, and "
            "denied elsewhere",
        )


def check_endpoint_flags(args: argparse.Namespace) -> None:
    """UsageError when ``--demo`` or ``--local`` is combined with endpoint flags (or
    with each other): each brings its own model."""
    own = [name for name in ("demo", "local") if getattr(args, name, False)]
    flags = [
        f"--{f.replace('_', '-')}"
        for f in ("model", "base_url", "api_key")
        if getattr(args, f, None)
    ]
    if len(own) > 1 or (own and flags):
        raise UsageError(
            f"--{own[0]} brings its own model: drop {', '.join(flags or ['--' + own[1]])}"
        )


def workspace(value: str) -> Path:
    """The workspace folder ``value`` as an absolute path.

    Raises:
        UsageError: ``value`` is not a folder.
    """
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UsageError(f"workspace {value!r} is not a folder")
    return path.resolve()


# ------------------------------------------------------------------- settings
_FLAGS = (
    ("model", "model"),
    ("base_url", "base_url"),
    ("api_key", "api_key"),
    ("lang", "language"),
    ("max_turns", "max_turns"),
)


def check_cli_settings(settings: Settings) -> None:
    """UsageError naming the command line's flags when the endpoint settings cannot
    work (the rule of agentkit.chat.setup.check_settings, whose message names
    ``Settings(...)`` for the Python API)."""
    from agentkit.chat.setup import missing_setting

    missing = missing_setting(settings)
    if missing == "model":
        raise UsageError("no model given: pass --model or set AGENTKIT_MODEL (or try --demo)")
    if missing == "api_key":
        raise UsageError(
            "no API key: set OPENAI_API_KEY (or pass --api-key), or point --base-url / "
            "OPENAI_BASE_URL at a local server (or try --demo: no key)"
        )


def settings_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> Settings:
    """Settings from the flags that were given: they override ``base`` (field name →
    value), which overrides the environment. Reads ``--model --base-url --api-key
    --lang`` and, where the subcommand has them, ``--max-turns``, ``--no-stream``,
    ``--subagent-control`` and ``--subagent-isolation``.

    Raises:
        UsageError: a value is invalid (see :func:`make_settings`).
    """
    given: dict[str, Any] = dict(base or {})
    for flag, name in _FLAGS:
        value = getattr(args, flag, None)
        if value is not None:
            given[name] = value
    if getattr(args, "no_stream", False):
        given["stream"] = False
    if getattr(args, "subagent_control", None):
        given["subagent_control"] = True
    if getattr(args, "subagent_isolation", None):
        given["subagent_isolation"] = args.subagent_isolation
    return make_settings(given)


ENDPOINT_PLACEHOLDER = {
    "model": "placeholder",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key": "placeholder",
}
"""Stands in for the endpoint that ``--demo`` and ``--local`` bring, before their model
server runs (:func:`check_settings_first`)."""


def check_settings_first(args: argparse.Namespace) -> None:
    """Check the settings a command will use (its flags over the environment) before it
    prints a banner, copies the demo's sample project or starts a model server, so
    that a bad value is the only thing said (``AGENTKIT_TEMPERATURE=nan``). For
    ``--demo`` and ``--local``, whose endpoint is not there yet,
    :data:`ENDPOINT_PLACEHOLDER` stands in for it.

    Raises:
        UsageError: a value is invalid (see :func:`make_settings`).
    """
    own = getattr(args, "demo", False) or getattr(args, "local", False)
    settings_from_args(args, dict(ENDPOINT_PLACEHOLDER) if own else None)


def make_settings(given: dict[str, Any]) -> Settings:
    """``Settings(**given)`` (field name → value; the environment fills the rest).

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


# ------------------------------------------------------------------ chat's end
def way_back(workspace: Workspace, session: Session, hint: str) -> str:
    """The line that ends a chat in ``session`` of ``workspace`` (both closed): ``continue
    it with: <hint>`` (``hint`` with ``{id}``) when its conversation file exists, else
    why there is nothing to continue (a trial on a read-only workspace was told a
    command that then found no saved conversation). When nothing was said in it, so it
    was not kept (``workspace.discarded``), the way back to the conversation the chat
    kept before it (left by /new or /switch: ``workspace.last_kept``), if any."""
    saved = session.transcript_path
    if session.id in workspace.discarded:
        words = "nothing was said in this conversation, so it was not kept"
        earlier = workspace.last_kept
        if earlier and earlier != session.id:
            return f"{words}; continue the one before it with: {hint.format(id=earlier)}"
        return words
    if saved.is_file():
        return f"continue it with: {hint.format(id=session.id)}"
    return f"nothing to continue: the conversation could not be saved to {saved}"
