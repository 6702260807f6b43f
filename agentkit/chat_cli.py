"""``agentkit chat``: a living conversation with the main agent, from a terminal or a script.

One job: set the chat up (arguments, settings, the workspace's conversation) and run
one of its two front ends until the user leaves:

* a terminal (agentkit.chat_terminal): an input line that stays usable while the
  agent works, answers rendered as Markdown, sub-agent rows, slash commands;
* JSON lines (not a terminal, or ``--jsonl``; this module): each line of standard
  input is a user message or a slash command, every event is printed as one JSON
  object per line (``event.to_dict()`` plus ``"seq"``), command results as
  ``{"type": "CommandResult", ...}`` and errors as ``{"type": "Error", "message"}``.
  At end of input it waits until no round and no sub-agent works, then exits 0.

Leaving, however it happens (``/quit``, end of input, Ctrl-D, SIGTERM, SIGHUP),
closes every open conversation: sub-agents end, conversations are saved
(docs/specification.md §8.5). Exit codes as ``agentkit run``: 0, 2 for usage or
configuration errors, 128 + the signal for SIGTERM/SIGHUP (and Ctrl-C in JSON-lines
mode when no round runs). Only the standard library is imported at load time.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from agentkit.chat_commands import message_text
from agentkit.terminal_text import json_line

if TYPE_CHECKING:
    from agentkit.chat import Session, Workspace
    from agentkit.chat_commands import ChatCommands
    from agentkit.events import Event
    from agentkit.settings import Settings

__all__ = ["JsonLinesChat", "Signals", "add_parser", "cmd_chat"]

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
    chat.add_argument(
        "-w", "--workspace", default=".", metavar="DIR", help="workspace folder (default: .)"
    )
    chat.add_argument("--model", help="model name (env AGENTKIT_MODEL)")
    chat.add_argument("--base-url", help="OpenAI-compatible base URL (env OPENAI_BASE_URL)")
    chat.add_argument("--api-key", help="API key (env OPENAI_API_KEY)")
    chat.add_argument("--lang", choices=("zh", "en"), help="prompt language (default zh)")
    chat.add_argument(
        "--continue", dest="continue_id", metavar="CONV_ID", help="continue a saved conversation"
    )
    chat.add_argument(
        "--jsonl",
        action="store_true",
        help="JSON lines on standard input/output, even on a terminal",
    )
    chat.add_argument(
        "--local",
        action="store_true",
        help="use a toy local model (Gemma 3 270M on llama.cpp; needs agentkit[local])",
    )


def cmd_chat(args: argparse.Namespace) -> int:
    """``agentkit chat``: returns the exit code.

    Raises:
        agentkit.cli.UsageError: a missing workspace, bad settings, an unknown
            ``--continue`` id (the CLI prints one line and exits 2).
    """
    from agentkit.cli import UsageError, _workspace, make_settings

    workspace = _workspace(args.workspace)
    given: dict[str, Any] = {}
    server = None
    if args.local:
        from agentkit.errors import ConfigurationError
        from agentkit.local import LocalModelServer

        server = LocalModelServer()
        print("agentkit: toy local model: expect poor answers", file=sys.stderr, flush=True)
        try:
            server.start()
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        given.update(server.settings_overrides())
    try:
        for flag, name in (("model", "model"), ("base_url", "base_url"), ("api_key", "api_key")):
            if getattr(args, flag) is not None and not args.local:
                given[name] = getattr(args, flag)
        if args.lang is not None:
            given["language"] = args.lang
        settings = make_settings(given)
        chat_workspace, session = _open(workspace, settings, args.continue_id)
        try:
            if args.jsonl or not (sys.stdin.isatty() and sys.stdout.isatty()):
                return JsonLinesChat(chat_workspace, session).run()
            from agentkit.chat_terminal import TerminalChat

            return TerminalChat(chat_workspace, session).run()
        finally:
            chat_workspace.close()
    finally:
        if server is not None:
            server.stop()


def _open(path: Any, settings: Settings, continue_id: str | None) -> tuple[Workspace, Session]:
    """The Workspace and its first session (new, or ``continue_id``)."""
    from agentkit.chat import Workspace
    from agentkit.chat.session import check_settings
    from agentkit.cli import UsageError
    from agentkit.errors import ConfigurationError

    try:
        check_settings(settings)
        workspace = Workspace(path, settings)
        session = workspace.open(continue_id) if continue_id else workspace.create()
    except (ConfigurationError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return workspace, session


class Signals:
    """SIGINT, SIGTERM and SIGHUP for a chat (installed on the main thread only).

    Args:
        on_interrupt: called for SIGINT from the handler; returns True when it
            cancelled a round (the chat goes on), False to leave (exit 130).
        on_leave: called from the handler with the signal number once the chat must
            end (it must only set flags or schedule work: it runs in a signal handler).
    """

    def __init__(self, on_interrupt: Any, on_leave: Any) -> None:
        self.on_interrupt = on_interrupt
        self.on_leave = on_leave
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and self.signum is None and self.on_interrupt():
            return
        if self.signum is None:
            self.signum = signum
            self.on_leave(signum)


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
        from agentkit.chat_commands import ChatCommands

        self._out_lock = threading.Lock()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._leave = threading.Event()
        self._unsubscribe = self._subscribe(session)
        self.commands: ChatCommands = ChatCommands(workspace, session, self._switched)

    def run(self) -> int:
        """Read and act on standard input until ``/quit`` or its end; returns the exit code."""
        reader = threading.Thread(target=self._read, name="agentkit-chat-stdin", daemon=True)
        reader.start()
        with Signals(lambda: self.commands.session.cancel(), lambda _s: self._leave.set()) as sig:
            while not self._leave.is_set():
                try:
                    line = self._lines.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    continue
                if line is None:  # end of input: let the work finish
                    while not self._leave.is_set():
                        if self.commands.session.wait_idle(POLL_SECONDS):
                            break
                    break
                if not self._handle(line):
                    break
            self.commands.workspace.close()  # sub-agents end, conversations saved
            self._unsubscribe()
        return 0 if sig.signum is None else 128 + sig.signum

    def _handle(self, line: str) -> bool:
        """Act on one input line; False when the chat must end."""
        from agentkit.chat_commands import CommandError
        from agentkit.errors import AgentkitError

        text = message_text(line)
        if text is None:
            try:
                result = self.commands.execute(line)
            except CommandError as exc:
                self.write({"type": "Error", "message": str(exc), "input": line})
                return True
            self.write(result.to_dict())
            return not result.quit
        try:
            self.commands.session.post(text)
        except AgentkitError as exc:
            self.write({"type": "Error", "message": str(exc), "input": line})
        return True

    def write(self, data: dict[str, Any]) -> None:
        """Print one JSON object as a line (thread-safe; a closed stdout ends the chat)."""
        text = json_line(data)  # DEL and C1 controls escaped too
        with self._out_lock:
            try:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
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

    def _read(self) -> None:
        # os.read, not sys.stdin: a daemon thread blocked inside a buffered reader
        # holds its lock, and the interpreter aborts at exit when it finds it taken.
        pending = b""
        try:
            while chunk := os.read(sys.stdin.fileno(), 65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    self._put(raw)
            self._put(pending)
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    def _put(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        if line.strip():
            command = message_text(line.lstrip()) is None  # "//..." is a message: kept
            self._lines.put(line.strip() if command else line)
