"""``agentkit chat``: a living conversation with the main agent, from a terminal or a script.

One job: set the chat up (arguments, settings, the workspace's conversation) and run
one of its two front ends until the user leaves:

* a terminal (agentkit.cli.terminal): an input line that stays usable while the
  agent works, answers rendered as Markdown, sub-agent rows, slash commands;
* JSON lines (not a terminal, or ``--jsonl``; this module): each line of standard
  input is a user message or a slash command, every event is printed as one JSON
  object per line (``event.to_dict()`` plus ``"seq"``), command results as
  ``{"type": "CommandResult", ...}`` and errors as ``{"type": "Error", "message"}``.
  Lines that arrive together between rounds (one write: ``printf 'hello\nbg x\n' |
  agentkit chat``, a pasted block) are taken one at a time, each after the round of
  the message before it ended, so each message gets its own answer; lines that come
  while a round works, together or not, are all queued into that round and reach
  the model at its next turn boundary, in order. At end of input it waits until no round
  and no sub-agent works, then exits 0. Leaving prints how to continue the
  conversation (``agentkit chat --continue ID``): on the terminal, or on standard
  error in JSON-lines mode.

``--demo`` needs no key: a scripted model plays every agent (agentkit.cli.demo_chat).
  A tool call waiting for approval is an ``ApprovalRequested`` line; ``/approve ID``,
  ``/approve-always ID`` and ``/deny ID [reason]`` answer it at once (docs/approvals.md §2).
  At end of input it waits until no round and no sub-agent works, then exits 0 (approval
  requests then pending, or asked later, are settled by ``approvals_default``).

Leaving, however it happens (``/quit``, end of input, Ctrl-D, SIGTERM, SIGHUP),
closes every open conversation: sub-agents end, conversations are saved
(docs/specification.md §8.5). Exit codes as ``agentkit run``: 0, 2 for usage or
configuration errors, 128 + the signal for SIGTERM/SIGHUP (and Ctrl-C in JSON-lines
mode when no round runs). Only the standard library is imported at load time.
"""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.cli.commands import message_text
from agentkit.cli.common import (
    MAX_TURNS,
    UsageError,
    agent_args,
    check_cli_settings,
    check_endpoint_flags,
    check_settings_first,
    settings_from_args,
    way_back,
    whole_number,
    workspace,
)
from agentkit.cli.safe_text import echoed, json_line
from agentkit.cli.signals import Signals
from agentkit.cli.stdin_lines import read_batches

if TYPE_CHECKING:
    from agentkit.chat import Session, Workspace
    from agentkit.cli.commands import ChatCommands
    from agentkit.events import Event
    from agentkit.settings import Settings

__all__ = [
    "JsonLinesChat",
    "add_parser",
    "check_endpoint_flags",
    "cmd_chat",
    "say_endpoint",
    "start_local",
]

POLL_SECONDS = 0.2
"""How often the JSON-lines main loop looks at signals while it waits (seconds)."""


def add_parser(sub: Any) -> None:
    """Add the ``chat`` subcommand to the ``agentkit`` subparsers ``sub``."""
    chat = sub.add_parser(
        "chat",
        help="talk with the main agent (a living conversation)",
        description="A conversation with the main agent that stays alive between answers: "
        "background sub-agents keep working and their results start a round by themselves. "
        "On a terminal: an input line, Markdown answers, /help for commands. Otherwise (or "
        "with --jsonl): one message or /command per input line, one JSON event per output line.",
    )
    agent_args(chat, "chat")
    chat.add_argument(
        "--max-turns", type=whole_number(1, MAX_TURNS), metavar="N", help="model requests per round"
    )
    chat.add_argument(
        "--no-stream", action="store_true", help="send plain (non-streaming) requests"
    )
    chat.add_argument(
        "--continue", dest="continue_id", metavar="CONV_ID", help="continue a saved conversation"
    )
    chat.add_argument(
        "--jsonl",
        action="store_true",
        help="JSON lines on standard input/output, even on a terminal",
    )


def cmd_chat(args: argparse.Namespace) -> int:
    """``agentkit chat``: returns the exit code.

    Raises:
        agentkit.cli.common.UsageError: a missing workspace, bad settings, an unknown
            ``--continue`` id (the CLI prints one line and exits 2).
    """
    from agentkit.chat.notices import claim_notices

    check_endpoint_flags(args)
    check_settings_first(args)  # before the demo's copy or the local model's banner
    server: Any = None
    try:
        if args.demo:
            from agentkit.cli.demo_chat import start_demo

            server = start_demo(args.workspace, args.lang)
            root, base = server.workspace, dict(server.overrides)
        else:
            root = workspace(args.workspace or ".")
            server, base = start_local() if args.local else (None, {})
        if args.yes:  # an ask is allowed at once: no one is asked
            base = {**base, "approvals_default": "allow"}
        settings = settings_from_args(args, base)
        notices = claim_notices(settings)  # said here, at the start, not logged later
        chat_workspace, session = _open(root, settings, args.continue_id, ask=not args.yes)
        if not (args.demo or args.local):  # those models are this process's own
            say_endpoint(settings)
        hint = _resume_hint(root, args.demo)
        try:
            if args.jsonl or not (sys.stdin.isatty() and sys.stdout.isatty()):
                for text in notices:  # standard output holds JSON only
                    print(f"agentkit: {text}", file=sys.stderr)
                chat = JsonLinesChat(chat_workspace, session)
                code = chat.run()
                # Standard output holds JSON only: the way back goes with the logs.
                left = chat.commands.session
                print(f"agentkit: {way_back(chat_workspace, left, hint)}", file=sys.stderr)
                return code
            from agentkit.cli.terminal import TerminalChat

            return TerminalChat(chat_workspace, session, resume=hint, notices=notices).run()
        finally:
            chat_workspace.close()
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    except UsageError:
        if args.demo and server is not None:
            server.discard()  # it never chatted: no copy of the sample left behind
        raise
    finally:
        if server is not None:
            _end_demo(server) if args.demo else server.stop()


def _end_demo(server: Any) -> None:
    """Stop the demo's model; a copy of the sample project made for it goes too when
    no conversation was kept in it (nothing was said), else it stays, said where."""
    from agentkit.chat.store import list_conversations

    if server.made and not list_conversations(server.workspace):
        server.discard()
    server.stop()


def say_endpoint(settings: Any) -> None:
    """Check the model endpoint as ``agentkit serve`` does (one ``GET /models``, at most
    a few seconds: agentkit.webchat.endpoint) and, unless it answers and lists the
    model, say so on standard error in serve's words. The chat starts either way."""
    from agentkit.webchat.endpoint import check_endpoint

    result = check_endpoint(settings)
    if result.status != "ok":
        print(f"agentkit: model endpoint: {result.message}", file=sys.stderr, flush=True)


def start_local() -> tuple[Any, dict[str, Any]]:
    """The toy local model's server (started) and its settings."""
    from agentkit.errors import ConfigurationError
    from agentkit.local import LocalModelServer

    server = LocalModelServer()
    print("agentkit: toy local model: expect poor answers", file=sys.stderr, flush=True)
    try:
        server.start()
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    return server, dict(server.settings_overrides())


def _resume_hint(root: Path, demo: bool) -> str:
    """The command that continues a conversation later, with ``{id}`` for its id."""
    import shlex

    words = ["agentkit", "chat", "--continue", "{id}"]
    here = Path(root).resolve() == Path.cwd().resolve()
    if not here:
        words += ["-w", shlex.quote(str(Path(root).resolve()))]
    elif demo:  # without -w, --demo takes a fresh copy of its sample project
        words += ["-w", "."]
    if demo:
        words.append("--demo")
    return " ".join(words)


def _open(
    path: Any, settings: Settings, continue_id: str | None, *, ask: bool = True
) -> tuple[Workspace, Session]:
    """The Workspace and its first session (new, or ``continue_id``); ``ask`` False
    (``--yes``): no one answers approval requests, ``approvals_default`` settles them."""
    from agentkit.chat import Workspace
    from agentkit.chat.approvals import answer_later
    from agentkit.errors import ConfigurationError

    check_cli_settings(settings)
    try:  # each Session checks everything (agentkit.chat.assembly), once
        # The person answers approval requests (the events show them): not "no one".
        # A conversation left before anything was said is not kept (nor listed).
        workspace = Workspace(
            path, settings, on_approval=answer_later if ask else None, discard_untouched=True
        )
        session = workspace.open(continue_id) if continue_id else workspace.create()
    except (ConfigurationError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return workspace, session


def event_dict(seq: int, event: Event) -> dict[str, Any]:
    """The JSON-lines form of an event: ``event.to_dict()`` plus ``"seq"``."""
    return {**event.to_dict(), "seq": seq}


class JsonLinesChat:
    """The JSON-lines front end (see the module docstring for the protocol).

    Args:
        workspace: the chat's Workspace.
        session: the conversation to start in.
    """

    def __init__(self, workspace: Workspace, session: Session) -> None:
        from agentkit.cli.commands import ChatCommands

        self._out_lock = threading.Lock()
        self._lines: queue.Queue[list[str] | None] = queue.Queue()  # lines read together
        self._posted: Future[Any] | None = None
        self._leave = threading.Event()
        self._signals: Signals | None = None  # while run() runs
        self._unsubscribe = self._subscribe(session)
        self.commands: ChatCommands = ChatCommands(workspace, session, self._switched)

    def run(self) -> int:
        """Read and act on standard input until ``/quit`` or its end; returns the exit code."""
        reader = threading.Thread(
            target=read_batches, args=(self._lines,), name="agentkit-chat-stdin", daemon=True
        )
        reader.start()
        with Signals(self._interrupt, lambda _signum: self._leave.set()) as signals:
            self._signals = signals
            while not self._leave.is_set():
                try:
                    batch = self._lines.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    self._check_reader()
                    continue
                if batch is None:  # end of input: let the work finish
                    self._no_one_to_ask()
                    while not self._leave.is_set():
                        if self.commands.session.wait_idle(POLL_SECONDS):
                            break
                        self._check_reader()
                    break
                if not self._handle_batch(batch):
                    break
            self.commands.workspace.close()  # sub-agents end, conversations saved
            self._unsubscribe()
        return signals.exit_code(0)

    def _no_one_to_ask(self) -> None:
        """Input ended: no one will answer approval requests any more, so those pending
        and those to come are settled by ``approvals_default`` (deny: "no one to ask")."""
        for session in self.commands.workspace.sessions():

            def settle(row: dict[str, Any], session: Session = session) -> Any:
                allow = session.settings.approvals_default == "allow"
                return "allow" if allow else ("deny", "no one to ask")

            session.on_approval(settle)

    def _interrupt(self, signum: int) -> bool:
        """SIGINT (on the signal watcher thread): cancel the round; True when one ran
        (the chat goes on), else the chat leaves (130). Other signals leave."""
        return signum == signal.SIGINT and self.commands.session.cancel()

    def _handle_batch(self, lines: list[str]) -> bool:
        """Act on lines read together: between rounds each after the round of the
        message before it (so they are not merged into one request); while a round
        works, at once, so all of them reach its next turn boundary, in order (like
        lines that arrive one by one). False when the chat must end."""
        self._posted = None
        for line in lines:
            if self._posted is not None and not self._answered(self._posted):
                return False
            self._posted = None
            joining = self.commands.session.state == "running"
            if not self._handle(line):
                return False
            if joining:  # queued into the round at work: the next line joins it too
                self._posted = None
        return True

    def _answered(self, future: Future[Any]) -> bool:
        """Wait until ``future`` (a posted message's round) is done; False when the chat
        must end first (a signal, a closed output)."""
        while not self._leave.is_set():
            try:
                future.result(timeout=POLL_SECONDS)
                return True
            except FutureTimeout:
                continue
            except BaseException:  # cancelled or failed: its line was answered anyway
                return True
        return False

    def _handle(self, line: str) -> bool:
        """Act on one input line; False when the chat must end."""
        from agentkit.cli.commands import CommandError
        from agentkit.errors import AgentkitError

        text = message_text(line)
        if text is None:
            try:
                result = self.commands.execute(line)
            except CommandError as exc:
                self.write({"type": "Error", "message": str(exc), "input": echoed(line)})
                return True
            self.write(result.to_dict())
            return not result.quit
        try:
            self._posted = self.commands.session.post(text)
        except AgentkitError as exc:
            self.write({"type": "Error", "message": str(exc), "input": echoed(line)})
        return True

    def _check_reader(self) -> None:
        """Between writes: a reader of stdout that has gone ends the chat (SIGPIPE)."""
        if self._signals is not None:
            self._signals.check_output()

    def write(self, data: dict[str, Any]) -> None:
        """Print one JSON object as a line (thread-safe; a closed stdout ends the chat)."""
        text = json_line(data)  # DEL and C1 controls escaped too
        with self._out_lock:
            try:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            except OSError as exc:  # the reader has gone, a full disk: leave as on SIGPIPE
                if self._signals is not None:
                    self._signals.output_failed(exc)
                self._leave.set()
            except ValueError:  # stdout was closed
                self._leave.set()

    def _subscribe(self, session: Session) -> Any:
        bus = session.bus

        def on_event(event: Event) -> None:
            # Called under the bus lock right after numbering: last_seq is this event's.
            self.write(event_dict(bus.last_seq, event))

        return session.subscribe(on_event)

    def _switched(self, old: Session, new: Session) -> None:
        # The old conversation's subscription stays until it is closed (its last events
        # print), then goes with it; the new one is printed from now on.
        self._unsubscribe = self._subscribe(new)
