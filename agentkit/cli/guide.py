"""The commands that help a person find their way: ``agentkit help [COMMAND]``, the
parser class (:class:`Parser`: the top level's grouped help, "did you mean" for a
mistyped option), "did you mean" for a mistyped command, ``agentkit conversations``
(a workspace's conversations, to continue one) and the ``demo`` command's parser.

One job: their parsers and entry points, kept out of agentkit.cli (the dispatch).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from agentkit.cli.common import PROG, UsageError, print_json, workspace, workspace_arg

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

__all__ = [
    "GROUPS",
    "NEW_HERE",
    "Parser",
    "add_parsers",
    "cmd_conversations",
    "cmd_help",
    "command_listing",
    "option_hint",
    "unknown_command",
]

NEW_HERE = f"New here? {PROG} chat --demo"
"""The first line of ``agentkit --help``."""
GROUPS = (
    ("Start", ("chat", "serve", "acp", "run", "demo")),
    ("Inspect", ("conversations", "show", "transcript")),
    ("Configure", ("profiles", "skills", "doctor", "help")),
)
"""The commands as ``agentkit --help`` lists them, by what a person wants to do."""


class Parser(argparse.ArgumentParser):
    """The parser of ``agentkit`` and its commands: "did you mean" for a mistyped
    option (argparse itself suggests none before Python 3.14), and the top level's
    help with :data:`NEW_HERE` first and the commands in :data:`GROUPS`."""

    listing: str = ""
    commands: Mapping[str, argparse.ArgumentParser] | None = None

    def format_help(self) -> str:
        """The help text; the top level's starts with :data:`NEW_HERE`."""
        text = super().format_help()
        return f"{NEW_HERE}\n\n{text}{self.listing}" if self.listing else text

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        """Write the help to ``file`` (default stdout). A failed write raises, so the
        process reports it (agentkit.cli.entry); argparse's own print ignores it."""
        stream = sys.stdout if file is None else file
        stream.write(self.format_help())

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` (with the closest option for an unknown
        one) on stderr and exit 2."""
        words = message.partition("unrecognized arguments: ")[2].split()
        known = [o for action in self._actions for o in action.option_strings]
        super().error(message + option_hint(words, known))


def command_listing(sub: Any) -> str:
    """The grouped command list of the top level's help."""
    # argparse keeps each command's help on its pseudo-actions (no public accessor).
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    lines = []
    for title, names in GROUPS:
        lines.append(f"\n{title}:")
        lines += [f"  {name:<14}{helps.get(name, '')}" for name in names if name in helps]
    lines.append(f"\n`{PROG} COMMAND --help` shows a command's options.")
    return "\n".join(lines) + "\n"


def add_parsers(sub: Any) -> None:
    """Add ``conversations``, ``demo`` and ``help`` to the ``agentkit`` subparsers ``sub``."""
    listing = sub.add_parser(
        "conversations",
        help="list a workspace's conversations",
        description="List the conversations saved in the workspace, newest first: id, "
        "last change, state, turns, sub-agents and title. Continue one with "
        "`agentkit chat --continue ID`.",
    )
    workspace_arg(listing)
    listing.add_argument("--json", action="store_true", help="print JSON")

    demo = sub.add_parser(
        "demo",
        help="the whole machinery offline, on a scripted model",
        description="Run a scripted review of a small sample project with no key and no "
        "network: a built-in script answers as the model, everything else is real (two "
        "background sub-agents and a blocking one, their files, the final report). For "
        "a conversation of your own: `agentkit chat --demo` or `agentkit serve --demo`.",
    )
    demo.add_argument(
        "-w",
        "--workspace",
        default=None,
        metavar="DIR",
        help="workspace folder (default: a fresh copy of the sample project)",
    )
    demo.add_argument("--lang", choices=("auto", "zh", "en"), help="prompt language (default en)")

    help_ = sub.add_parser(
        "help", help="show the help of agentkit or of one command", description="Show help."
    )
    help_.add_argument("topic", nargs="?", metavar="COMMAND", help="a command, e.g. chat")


def unknown_command(word: str, known: list[str]) -> str:
    """The line for a command ``word`` that is not one of ``known``, with the closest
    one when there is one: ``unknown command 'caht'; did you mean 'chat'?``."""
    import difflib

    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown command {word!r}{hint} (`{PROG} help` lists the commands)"


def option_hint(words: list[str], known: list[str]) -> str:
    """``"; did you mean --model?"`` for the mistyped options among ``words`` (the
    arguments a parser did not recognise; ``--modle=x`` counts as ``--modle``) that
    are close to one of ``known`` (the parser's option strings), else ``""``."""
    import difflib

    close = []
    for word in words:
        name = word.split("=", 1)[0]
        if name.startswith("--") or (name.startswith("-") and len(name) > 2):
            match = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            if match and match[0] not in close:
                close.append(match[0])
    return f"; did you mean {' or '.join(close)}?" if close else ""


def cmd_conversations(args: argparse.Namespace) -> int:
    """``agentkit conversations``: the workspace's conversations, newest first (``--json``:
    ``{"conversations": [ConversationInfo.to_dict()]}``)."""
    from agentkit.chat.store import list_conversations
    from agentkit.cli.safe_text import terminal_safe
    from agentkit.cli.show import render_conversations

    infos = list_conversations(workspace(args.workspace))
    if args.json:
        print_json({"conversations": [i.to_dict() for i in infos]})
    else:
        print(terminal_safe(render_conversations(infos)))
    return 0


def cmd_help(args: argparse.Namespace, parser: argparse.ArgumentParser, known: list[str]) -> int:
    """``agentkit help [COMMAND]``: print ``parser``'s help, or that of the command
    ``args.topic`` (one of ``known``); UsageError (with "did you mean") for another."""
    if args.topic is None:
        parser.print_help()
        return 0
    if args.topic not in known:
        raise UsageError(unknown_command(args.topic, known))
    parser.parse_args([args.topic, "--help"])  # prints it and exits 0
    return 0
