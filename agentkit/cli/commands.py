"""The slash commands of ``agentkit chat``, shared by its terminal and JSON-lines modes.

One job: hold the chat's current conversation (a :class:`agentkit.chat.Session` of a
:class:`agentkit.chat.Workspace`) and carry out ``/new``, ``/list``, ``/switch``,
``/status``, ``/stop``, ``/show``, ``/rename``, ``/approve``, ``/approve-always``,
``/deny``, ``/help`` and ``/quit``, and with the control plane (docs/control-plane.md)
``/msg``, ``/answer`` and ``/continue``, each giving a
:class:`CommandResult` (plain data, so the terminal prints its text and the JSON-lines
mode prints it as one object). Leaving a conversation (``/new``, ``/switch``, ``/quit``)
ends its sub-agents (docs/specification.md §8.5, via Workspace.close_session).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkit.errors import AgentkitError

if TYPE_CHECKING:
    from agentkit.chat import Session, Workspace

__all__ = [
    "HELP",
    "ChatCommands",
    "CommandError",
    "CommandResult",
    "message_text",
    "status_rows_text",
]

HELP = """\
/new            start a new conversation (the current one's sub-agents end)
/list           the workspace's conversations (the current one marked *)
/switch ID      continue conversation ID (or its number in /list); the current one's sub-agents end
/status         the conversation's state and its sub-agents
/stop N         terminate sub-agent N
/show N         sub-agent N's task, status, result and transcript (--system: its system prompt too)
/rename TITLE   rename the conversation
/msg N TEXT     send running sub-agent N a message (--subagent-control)
/answer N TEXT  answer sub-agent N's question (--subagent-control)
/continue N TASK  run ended sub-agent N again on TASK, in the background (--subagent-control)
/approve ID     allow the call waiting for approval ID (/approve-always ID: and its kind,
                for the rest of the conversation); /deny ID [REASON] refuses it
/help           this list
/quit           leave (sub-agents end, the conversation is saved); Ctrl-D too
//TEXT          send the message /TEXT (a message that starts with a slash)
Anything else is a message to the main agent; typed while it works, it is queued
and reaches the model after the current tool results."""


def message_text(line: str) -> str | None:
    """The message an input line sends, or None when it is a command: a line that
    starts with ``/`` is a command, except ``//`` which sends the rest with one
    slash (``//etc/hosts?`` sends ``/etc/hosts?``)."""
    if line.startswith("//"):
        return line[1:]
    return None if line.startswith("/") else line


class CommandError(AgentkitError):
    """A command that cannot run: unknown, a missing or bad argument, an unknown id
    (one line; the chat goes on)."""


@dataclass
class CommandResult:
    """What a command did.

    Attributes:
        command: the command name without the slash (``"list"``).
        ok: False when the command ran but its action failed (``/stop`` of an ended
            sub-agent: the seed's terminate JSON says why).
        text: readable text for the terminal (one or more lines).
        data: JSON-able details (keys depend on the command).
        quit: True for ``/quit``.
    """

    command: str
    ok: bool
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    quit: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "CommandResult", "command", "ok", "text", **data}``."""
        return {
            "type": "CommandResult",
            "command": self.command,
            "ok": self.ok,
            "text": self.text,
            **self.data,
        }


def status_rows_text(rows: list[dict[str, Any]]) -> list[str]:
    """One line per sub-agent status row: ``#1 running 12s  summary · counters ·
    tokens and cost · last action``, and its pending question."""
    from agentkit.cli.progress import (
        counters_text,
        runtime_words,
        shorten,
        status_text,
        task_words,
        usage_text,
    )

    lines = []
    for row in rows:
        line = (
            f"#{row.get('agent_id')} {status_text(row.get('status'))}"
            f" {runtime_words(row)}"
            f"  {shorten(task_words(row), 40)} · {counters_text(row)}"
        )
        if "tokens" in row:
            line += f" · {usage_text(row)}"
        if row.get("last_action"):
            line += f" · {shorten(row['last_action'], 50)}"
        if row.get("question"):
            line += f"\n    asks: {shorten(row['question'], 100)} (answer with /answer {row.get('agent_id')} TEXT)"
        lines.append(line)
    return lines


class ChatCommands:
    """The current conversation of a chat and the commands on it.

    Args:
        workspace: the Workspace whose conversations the chat moves between.
        session: the conversation the chat starts in (open in ``workspace``).
        on_switch: called as ``on_switch(old, new)`` after the chat moved to another
            conversation (before ``old`` is closed, so its last events still reach the
            front end's subscription), to move event subscriptions.
    """

    def __init__(
        self,
        workspace: Workspace,
        session: Session,
        on_switch: Callable[[Session, Session], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.session = session
        self._on_switch = on_switch

    def execute(self, line: str) -> CommandResult:
        """Run the slash command ``line`` (``"/stop 2"``).

        Raises:
            CommandError: unknown command, missing or bad argument, unknown id.
        """
        try:
            words = shlex.split(line.strip()[1:])
        except ValueError:  # an unclosed quote: take the words as they are
            words = line.strip()[1:].split()
        if not words:
            raise CommandError("an empty command: /help lists the commands")
        name, args = words[0].lower(), words[1:]
        from agentkit.cli import isolation_commands as iso

        if name in iso.COMMANDS:  # isolated sub-agents' /diff, /merge, /discard
            return iso.run(self.session, name, args)
        handler = getattr(self, f"_cmd_{name.replace('-', '_')}", None)
        if handler is None:
            raise CommandError(f"unknown command /{name}: /help lists the commands")
        result: CommandResult = handler(args, line.strip()[1 + len(words[0]) :].strip())
        return result

    # -------------------------------------------------------------- commands
    def _cmd_help(self, args: list[str], rest: str) -> CommandResult:
        from agentkit.cli.isolation_commands import help_text

        extra = help_text(self.session)  # only when isolation is on
        text = HELP.replace("\n/help ", f"\n{extra}\n/help ", 1) if extra else HELP
        return CommandResult("help", True, text)

    def _cmd_quit(self, args: list[str], rest: str) -> CommandResult:
        # Leaving is at once: say what is left unsent rather than leave it unsaid. The
        # conversation file keeps them; the next opening sends them (chat/store.py).
        waiting = len(self.session.inbox)
        text = "leaving" if not waiting else f"leaving; {unsent_note(waiting)}"
        return CommandResult("quit", True, text, quit=True, data={"unsent": waiting})

    _cmd_exit = _cmd_quit

    def _cmd_new(self, args: list[str], rest: str) -> CommandResult:
        old = self.session
        new = self.workspace.create()
        ended = self._move(old, new)
        return CommandResult(
            "new",
            True,
            f"new conversation {new.id}" + _ended_text(old.id, ended),
            {"conversation_id": new.id, "left": old.id, "subagents_ended": ended},
        )

    def _cmd_switch(self, args: list[str], rest: str) -> CommandResult:
        if len(args) != 1:
            raise CommandError("usage: /switch ID (a conversation id, or its number in /list)")
        target = self._conversation_id(args[0])
        old = self.session
        if target == old.id:
            return CommandResult(
                "switch", True, f"already in {target}", {"conversation_id": target}
            )
        try:  # open the target before leaving, so a bad one leaves the chat where it was
            new = self.workspace.open(target)
        except FileNotFoundError:
            raise CommandError(f"no conversation {target!r}: /list shows them") from None
        except Exception as exc:  # ConfigurationError: a bad id or a damaged file
            raise CommandError(f"cannot open {target}: {exc}") from None
        ended = self._move(old, new)
        waiting = new.pending_approvals()  # requests of its sub-agents still at work
        text = f"switched to {new.id} ({new.title or 'untitled'})" + _ended_text(old.id, ended)
        return CommandResult(
            "switch",
            True,
            "\n".join([text, *_approvals_text(waiting)]),
            {
                "conversation_id": new.id,
                "title": new.title,
                "left": old.id,
                "subagents_ended": ended,
                "approvals": waiting,
            },
        )

    def _cmd_list(self, args: list[str], rest: str) -> CommandResult:
        from agentkit.chat.explain import state_words

        infos = self.workspace.list()
        lines = []
        for number, info in enumerate(infos, 1):
            mark = "*" if info.id == self.session.id else " "
            state = state_words(info.state, info.subagents_running)
            lines.append(
                f"{mark}{number:>3}  {info.id}  {state:<26} turns {info.turns:<4}"
                f" sub-agents {info.subagents_running}/{info.subagents}  {info.title}"
            )
        return CommandResult(
            "list",
            True,
            "\n".join(lines) or "no conversations yet",
            {"current": self.session.id, "conversations": [i.to_dict() for i in infos]},
        )

    def _cmd_status(self, args: list[str], rest: str) -> CommandResult:
        from agentkit.chat.explain import state_words

        session = self.session
        rows = session.subagents()
        running = sum(1 for r in rows if r.get("status") == "running")
        head = f"{session.id} [{state_words(session.state, running)}] {session.title or 'untitled'}"
        lines = [head, *status_rows_text(rows)] if rows else [head, "no sub-agents"]
        waiting = session.pending_approvals()
        lines += _approvals_text(waiting)
        return CommandResult(
            "status",
            True,
            "\n".join(lines),
            {
                "conversation_id": session.id,
                "state": session.state,
                "title": session.title,
                "subagents": rows,
                "approvals": waiting,
            },
        )

    def _cmd_stop(self, args: list[str], rest: str) -> CommandResult:
        agent_id = _agent_id("stop", args)
        result = self.session.terminate_subagent(agent_id)
        ok = bool(result.get("success"))
        text = f"sub-agent #{agent_id} terminated" if ok else str(result.get("error") or result)
        return CommandResult("stop", ok, text, {"agent_id": agent_id, "result": result})

    def _cmd_msg(self, args: list[str], rest: str) -> CommandResult:
        agent_id, text = _id_and_text("msg", rest, "TEXT")
        done = _control_result("msg", agent_id, self.session.message_subagent(agent_id, text))
        if not done.ok:  # the refusal names the model's tool; a person types the command
            done.text = done.text.replace("continue_sub_agent", f"/continue {agent_id} TASK")
        return done

    def _cmd_answer(self, args: list[str], rest: str) -> CommandResult:
        agent_id, text = _id_and_text("answer", rest, "TEXT")
        return _control_result("answer", agent_id, self.session.answer_subagent(agent_id, text))

    def _cmd_continue(self, args: list[str], rest: str) -> CommandResult:
        agent_id, task = _id_and_text("continue", rest, "TASK")
        done = _control_result("continue", agent_id, self.session.continue_subagent(agent_id, task))
        if done.ok:  # the new task, not the summary it was created with
            done.text = f"sub-agent #{agent_id} runs again, in the background, on: {task}"
        return done

    def _cmd_show(self, args: list[str], rest: str) -> CommandResult:
        from agentkit.cli.show import (
            InspectError,
            load_document,
            render_transcript,
            subagent_transcript,
        )

        whole = "--system" in args  # the system prompt whole; else one line saying this
        agent_id = _agent_id("show", [a for a in args if a != "--system"])
        row = next((r for r in self.session.subagents() if r.get("agent_id") == agent_id), None)
        if row is None:
            raise CommandError(f"no sub-agent #{agent_id} in this conversation")
        try:
            path = subagent_transcript(self.workspace.path, row)
            hint = f"/show {agent_id} --system"
            text = render_transcript(load_document(path), system=whole, system_hint=hint)
        except InspectError as exc:
            raise CommandError(str(exc)) from None
        return CommandResult("show", True, text, {"agent_id": agent_id, "path": str(path)})

    def _cmd_rename(self, args: list[str], rest: str) -> CommandResult:
        from agentkit.errors import ConfigurationError

        try:
            self.session.rename(rest)
        except ConfigurationError as exc:
            raise CommandError(f"usage: /rename TITLE ({exc})") from None
        title = self.session.title
        return CommandResult(
            "rename",
            True,
            f"renamed to {title}",
            {"conversation_id": self.session.id, "title": title},
        )

    def _cmd_approve(self, args: list[str], rest: str, command: str = "approve") -> CommandResult:
        from agentkit.cli.approve import answer_command

        try:
            done = answer_command(self.session, command, args, rest)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        text = done.pop("text")
        return CommandResult(command, True, text, done)

    def _cmd_approve_always(self, args: list[str], rest: str) -> CommandResult:
        return self._cmd_approve(args, rest, "approve-always")

    def _cmd_deny(self, args: list[str], rest: str) -> CommandResult:
        return self._cmd_approve(args, rest, "deny")

    # ---------------------------------------------------------------- helpers
    def _move(self, old: Session, new: Session) -> list[int]:
        """Make ``new`` current and leave ``old``; returns the ids of old's sub-agents
        that were running (now ended)."""
        running = [int(r["agent_id"]) for r in old.subagents() if r.get("status") == "running"]
        self.session = new
        if self._on_switch is not None:
            self._on_switch(old, new)
        self.workspace.close_session(old.id)
        return running

    def _conversation_id(self, word: str) -> str:
        if word.isdigit():  # a number from /list
            infos = self.workspace.list()
            index = int(word)
            if not 1 <= index <= len(infos):
                raise CommandError(f"no conversation number {index}: /list shows {len(infos)}")
            return infos[index - 1].id
        return word


def _agent_id(command: str, args: list[str]) -> int:
    if len(args) != 1 or not args[0].lstrip("#").isdigit():
        raise CommandError(f"usage: /{command} N (a sub-agent id, e.g. /{command} 1)")
    return int(args[0].lstrip("#"))


def _approvals_text(rows: list[dict[str, Any]]) -> list[str]:
    from agentkit.cli.approve import approval_text

    return [approval_text(row) for row in rows]


def _id_and_text(command: str, rest: str, what: str) -> tuple[int, str]:
    """``N TEXT`` of /msg, /answer, /continue (the text as typed); CommandError otherwise."""
    word, _, text = rest.strip().partition(" ")
    if not word.lstrip("#").isdigit() or not text.strip():
        raise CommandError(f"usage: /{command} N {what} (a sub-agent id, then the text)")
    return int(word.lstrip("#")), text.strip()


def _control_result(command: str, agent_id: int, result: dict[str, Any]) -> CommandResult:
    """A control call's result: its message or error as the text, the JSON as data."""
    ok = bool(result.get("success"))
    text = str(result.get("message") or result.get("error") or result)
    return CommandResult(command, ok, text, {"agent_id": agent_id, "result": result})


def _ended_text(left: str, ended: list[int]) -> str:
    if not ended:
        return f" ({left} saved)"
    agents = ", ".join(f"#{i}" for i in ended)
    return f" ({left} saved; its sub-agents {agents} were ended)"


def unsent_note(count: int) -> str:
    """The words for ``count`` queued messages left unanswered when a chat is left: the
    conversation file keeps them and they are sent when it is continued."""
    plural = "s" if count != 1 else ""
    return (
        f"{count} queued message{plural} not sent yet: kept, and sent when you continue "
        "this conversation"
    )
