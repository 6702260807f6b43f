"""The terminal front end of ``agentkit chat``.

One job: a chat on a terminal. The input line (prompt_toolkit) stays usable while
the main agent works: output printed meanwhile appears above it (``patch_stdout``),
and a bottom toolbar shows the state, the running sub-agents and the tail of the
answer as it streams. Once a round ends its answer is rendered as Markdown (rich).
Sub-agents get a line when they start and finish (and all of them on ``/status``).
Ctrl-C cancels the current round only; Ctrl-D or ``/quit`` leaves (sub-agents end,
the conversation is saved, one line says so and how to come back). Ctrl-D, ``/new``
and ``/switch`` ask first while sub-agents run (a second Ctrl-D confirms); ``✓ all
done`` (and the bell) follows only background work, not every answer; states and
failed rounds are said in words (agentkit.chat.explain).

Events come from the session's threads; printing goes through prompt_toolkit's
stdout proxy, which is thread-safe, and the view's own fields are guarded by a lock.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.cli.approve import Asks
from agentkit.cli.commands import (
    ChatCommands,
    CommandError,
    CommandResult,
    message_text,
    unsent_note,
)
from agentkit.cli.common import way_back
from agentkit.cli.isolation_commands import terminal_text
from agentkit.cli.paste import typed_runs_as_paste
from agentkit.cli.safe_text import terminal_safe
from agentkit.cli.signals import Signals
from agentkit.cli.terminal_view import TerminalView, fit_words, render_markdown, style
from agentkit.errors import AgentkitError
from agentkit.language import shown_language

if TYPE_CHECKING:
    from agentkit.chat import Session, Workspace

__all__ = ["TerminalChat", "render_markdown"]


class _Leave(AgentkitError):
    """Raised out of the prompt when a signal ends the chat."""


class TerminalChat:
    """A chat on a terminal (see the module docstring).

    Args:
        workspace: the chat's Workspace.
        session: the conversation to start in.
        resume: the command that continues a conversation, ``{id}`` for its id
            (printed when the chat ends).
        notices: what the person must hear at the start (agentkit.chat.notices),
            printed with the banner, before the first prompt.
    """

    def __init__(
        self,
        workspace: Workspace,
        session: Session,
        resume: str = "agentkit chat --continue {id}",
        notices: list[str] | None = None,
    ) -> None:
        self._lock = threading.Lock()  # guards the view: events come on several threads
        self.view = TerminalView(lambda: self.commands.session.settings, state=session.state)
        self._resume = resume
        self._notices = list(notices or [])
        self._prompt: Any = None
        self._signals: Signals | None = None
        self._terminal_gone = False
        self._unsent_told = False
        self._asks = Asks(session)  # approval requests waiting for the person
        self._unsubscribe = session.subscribe(self._on_event)
        self.commands = ChatCommands(workspace, session, self._switched)

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        """Read and act on input lines until the user leaves; returns the exit code
        (0, or 128 + the signal; 129 when the terminal went away)."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        self._prompt = PromptSession(
            input=typed_runs_as_paste(), bottom_toolbar=self._toolbar, refresh_interval=0.5
        )
        session = self.commands.session
        on_signal = lambda signum: signum == signal.SIGINT and self._interrupt()  # noqa: E731
        with Signals(on_signal, self._signal_leave) as signals:
            self._signals = signals
            patched = patch_stdout(raw=True)
            patched.__enter__()
            try:
                _say(
                    f"agentkit chat · {session.id} · {self.commands.workspace.path}"
                    f" · {shown_language(session.settings.language)}\n"
                    "/help lists the commands · Ctrl-C cancels a round · Ctrl-D or /quit leaves"
                )
                for text in self._notices:
                    _show(style(f"! {text}", "33"))  # style made it terminal-safe
                self._loop()
            finally:
                try:  # the proxy flushes what it holds: a closed terminal says EIO
                    patched.__exit__(None, None, None)
                except OSError:
                    self._terminal_gone = True
                farewell, _, way_back_line = self._leave().rpartition("\n")
                _say(farewell)  # every open conversation: sub-agents end, saved
                # The way back is a command to copy: one line, the terminal wraps it softly.
                _show(terminal_safe(way_back_line))
        if self._terminal_gone:
            _quiet_standard_streams()
            return signals.exit_code(128 + signal.SIGHUP)
        return signals.exit_code(0)

    def _loop(self) -> None:
        """Prompt for lines and act on them until the user or a signal ends the chat."""
        assert self._signals is not None
        while not self._signals.leaving.is_set():
            try:
                line = self._prompt.prompt(self._asks.prompt, pre_run=self._leave_if_signalled)
            except KeyboardInterrupt:  # Ctrl-C typed at the prompt
                self._interrupt()
                continue
            except _Leave:  # a signal ended the prompt
                self._terminal_gone = not _still_a_terminal()
                return
            except EOFError:  # Ctrl-D, or a hang-up
                self._terminal_gone = not _still_a_terminal()
                if self._terminal_gone or self._may_end_subagents("leaving", "Leave", True):
                    return
                continue
            except OSError:  # EIO: the terminal was closed under the prompt (a hang-up)
                self._terminal_gone = True
                return
            if not self._handle(line.strip()):
                return

    def _handle(self, line: str) -> bool:
        """Act on one input line; False to leave."""
        if not line:
            return True
        answered = self._asks.answer(self.commands.session, line)  # y / a / n reason
        if answered is not None:
            if answered:
                _show(style(answered, "31"))
            return True
        text = message_text(line)
        if text is None:
            word = line[1:].split(maxsplit=1)[0].lower() if line[1:].strip() else ""
            doing = {"new": ("a new conversation", "Start a new one"),
                     "switch": ("switching", "Switch")}.get(word)  # fmt: skip
            if doing and not self._may_end_subagents(*doing):
                return True
            try:
                result = self.commands.execute(line)
            except CommandError as exc:
                _show(style(str(exc), "31"))
                return True
            if result.data.get("confirm"):  # /discard N drops work: ask first
                result = self._confirmed(result)
            if result.ok:
                _show(terminal_text(result))  # a /diff coloured
            else:
                _show(style(result.text, "31"))
            self._unsent_told = result.quit  # /quit counted the unsent messages
            return not result.quit
        with self._lock:  # before posting: its UserMessage may come at once
            self.view.typed.append(text)
        try:
            self.commands.session.post(text)  # not under the lock: it may emit events
        except BaseException:
            with self._lock:
                self.view.typed.remove(text)
            raise
        return True

    def _confirmed(self, result: CommandResult) -> CommandResult:
        """Ask ``[y/N]`` for a command whose result asks first; on yes, the result of
        its ``data["confirm"]`` command, else a result saying nothing was done."""
        _show(style(result.text.rpartition(". Confirm with")[0] or result.text, "33"))
        try:
            answer = self._prompt.prompt("Drop it? [y/N] ", pre_run=self._leave_if_signalled)
        except (EOFError, KeyboardInterrupt, _Leave, OSError):
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            return CommandResult(result.command, True, "kept: nothing was dropped")
        try:
            return self.commands.execute(str(result.data["confirm"]))
        except CommandError as exc:
            return CommandResult(result.command, False, str(exc))

    def _running_ids(self) -> list[int]:
        rows = self.commands.session.subagents()
        return [int(r["agent_id"]) for r in rows if r.get("status") == "running"]

    def _may_end_subagents(self, doing: str, question: str, eof_means: bool = False) -> bool:
        """True when no sub-agent runs, or the user agrees that ``doing`` ends them
        (``question [y/N]``); ``eof_means``: a Ctrl-D at the question says yes."""
        running = self._running_ids()
        if not running:
            return True
        ids = ", ".join(f"#{i}" for i in running)
        _show(style(f"sub-agents {ids} are still running: {doing} ends them "
                     "(their files so far stay; the conversation is saved)", "33"))  # fmt: skip
        again = " (Ctrl-D again: yes)" if eof_means else ""
        try:
            answer = self._prompt.prompt(
                f"{question}? [y/N]{again} ", pre_run=self._leave_if_signalled
            )
        except EOFError:
            return eof_means
        except (KeyboardInterrupt, _Leave, OSError):
            return False
        if answer.strip().lower() in ("y", "yes"):
            return True
        _say("kept: the sub-agents go on")
        return False

    def _leave(self) -> str:
        """Close every open conversation; return the farewell: where it was saved, the
        queued messages left unsent (unless /quit said so already), the running
        sub-agents ended (said first, too), and how to continue it."""
        self.view.leaving = True
        session = self.commands.session
        ended = self._running_ids()
        if ended:
            _say(f"ending sub-agents {', '.join(f'#{i}' for i in ended)}…")
        unsent = len(session.inbox)
        self.commands.workspace.close()  # every open conversation: sub-agents end, saved
        self._unsubscribe()
        parts = [f"left: conversation {session.id} saved to {session.transcript_path}"]
        if unsent and not self._unsent_told:
            parts.append(unsent_note(unsent))
        if ended:
            parts.append(f"sub-agents {', '.join(f'#{i}' for i in ended)} ended")
        workspace = self.commands.workspace
        if session.id in workspace.discarded:
            parts[0] = "left"
        elif not session.transcript_path.is_file():
            parts[0] = f"left: conversation {session.id}"
        return "; ".join(parts) + "\n" + way_back(workspace, session, self._resume)

    def _interrupt(self) -> bool:
        """Ctrl-C: cancel the round, or say how to leave. Never ends the chat."""
        if self.commands.session.cancel():
            _show(
                style("cancelling the round… (background sub-agents go on; /stop N ends one)", "33")
            )
        else:
            _say("no round is running: Ctrl-D or /quit leaves")
        return True

    def _signal_leave(self, signum: int) -> None:
        """SIGTERM/SIGHUP (on the signal watcher thread): end the prompt; the loop
        then leaves cleanly."""
        app = getattr(self._prompt, "app", None)
        loop = getattr(app, "loop", None)
        if app is not None and app.is_running and loop is not None:
            loop.call_soon_threadsafe(self._leave_if_signalled)

    def _leave_if_signalled(self) -> None:
        # On the prompt's event loop: when it starts (a signal may have come just
        # before) and when the watcher asks.
        app = getattr(self._prompt, "app", None)
        signals = self._signals
        if app is not None and signals is not None and signals.leaving.is_set():
            future = getattr(app, "future", None)
            if future is not None and not future.done():
                app.exit(exception=_Leave())

    def _switched(self, old: Session, new: Session) -> None:
        self._asks = Asks(new)
        with self._lock:
            self.view.running.clear()
            self.view.state = new.state
            self.view.streamed = ""
        self._unsubscribe = new.subscribe(self._on_event)

    # ---------------------------------------------------------------- events
    def _toolbar(self) -> str:
        with self._lock:
            return self.view.toolbar()

    def _on_event(self, event: ev.Event) -> None:
        """Print what the event means (called on the session's threads, one at a time)."""
        with self._lock:
            asked = self._asks.lines(event)  # approval requests, their answers
            if asked is not None:
                lines = [style(line, "33") for line in asked]
            else:
                lines = self.view.apply(event)
        for line in lines:
            _show(line)  # built by style and render_markdown, which made the text safe


def _say(text: str) -> None:
    """Print plain text (model, tool or file text allowed) above the input line,
    terminal-safe, its long lines wrapped at word boundaries (fit_words)."""
    _show("\n".join(fit_words(terminal_safe(text))))


def _show(text: str) -> None:
    """Print a line already made for the terminal (by :func:`agentkit.cli.terminal_view.style` or
    :func:`render_markdown`, whose escapes are ours) above the input line, through
    prompt_toolkit's proxy when patched."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed terminal: the chat is ending anyway
        pass


def _still_a_terminal() -> bool:
    """False once the terminal hung up (closed pane or window, dropped ssh): its
    reads then end like Ctrl-D, but it answers no terminal request any more."""
    return os.isatty(0) and os.isatty(1)


def _quiet_standard_streams() -> None:
    """Point stdout and stderr (the Python objects and descriptors 1 and 2) at
    /dev/null: the terminal is gone, and a failed flush at exit would otherwise
    change the exit code (Python's 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    except OSError:
        pass
