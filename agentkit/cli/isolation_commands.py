"""``agentkit chat``'s commands for isolated sub-agents: ``/diff N``, ``/merge N``, ``/discard N``.

One job: the three commands (docs/guide/chat.md), offered and listed by ``/help`` only
when ``subagent_isolation`` is not ``off``, each giving a
:class:`agentkit.cli.commands.CommandResult` for the terminal and the JSON-lines mode:

* ``/diff N``: the summary line and the unified diff (at most :data:`DIFF_LINES` lines;
  the last line says how much was left out and how to see it all);
* ``/merge N`` (``--dry-run``: nothing is written): the report in words, one line per
  file, or per conflicted file with its reason and that nothing was written;
* ``/discard N``: drops the sub-agent's work, so it asks first. Without ``--yes`` the
  result asks (``data["confirm"]`` is the command that confirms); the terminal asks
  ``[y/N]`` and runs it on yes, a script sends ``/discard N --yes``.

:func:`terminal_text` colours a diff for the terminal (added lines green, removed red,
hunk heads cyan); the JSON-lines mode prints the plain text. The work is
agentkit.chat.isolation's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.cli.commands import CommandError, CommandResult
from agentkit.isolation.types import IsolationError

if TYPE_CHECKING:
    from agentkit.chat import Session


__all__ = ["COMMANDS", "DIFF_LINES", "HELP", "help_text", "run", "terminal_text"]

COMMANDS = ("diff", "merge", "discard")
"""The commands' names (without the slash)."""

HELP = """\
/diff N         isolated sub-agent N's changes (files, lines, the diff)
/merge N        apply them to the workspace now (--dry-run: only check; conflicts write nothing)
/discard N      drop its copy and branch, unmerged work included (asks first)"""

DIFF_LINES = 400
"""Most lines of a diff ``/diff`` prints."""

_DIFF_CHARS = 60_000


def help_text(session: Session) -> str:
    """:data:`HELP` when isolation is on, else ``""``."""
    from agentkit.chat import isolation

    return HELP if isolation.enabled(session) else ""


def run(session: Session, name: str, args: list[str]) -> CommandResult:
    """Run ``/<name> <args>`` (``name`` one of :data:`COMMANDS`).

    Raises:
        CommandError: isolation is off, or a bad argument (the usage says which).
    """
    from agentkit.chat import isolation

    if not isolation.enabled(session):
        raise CommandError(
            f"/{name} works on isolated sub-agents: start the chat with "
            "--subagent-isolation available (or always)"
        )
    flags = {a for a in args if a.startswith("--")}
    allowed = {"merge": {"--dry-run"}, "discard": {"--yes"}}.get(name, set())
    words = [a for a in args if not a.startswith("--")]
    if flags - allowed or len(words) != 1 or not words[0].lstrip("#").isdigit():
        extra = " " + " ".join(f"[{f}]" for f in sorted(allowed)) if allowed else ""
        raise CommandError(f"usage: /{name} N{extra} (a sub-agent id, e.g. /{name} 1)")
    agent_id = int(words[0].lstrip("#"))
    try:
        if name == "diff":
            return _diff(session, agent_id)
        if name == "merge":
            return _merge(session, agent_id, dry_run="--dry-run" in flags)
        return _discard(session, agent_id, confirmed="--yes" in flags)
    except IsolationError as exc:
        reason = getattr(exc, "reason", "failed")
        text = isolation.refusal_words(exc, agent_id, stop_hint=f"/stop {agent_id}")
        return CommandResult(name, False, text, {"agent_id": agent_id, "reason": reason})


def _diff(session: Session, agent_id: int) -> CommandResult:
    from agentkit.chat import isolation

    found = isolation.review(session, agent_id, max_chars=_DIFF_CHARS)
    lines = found.diff.splitlines()
    shown = lines[:DIFF_LINES]
    more = sum(len(line) + 1 for line in lines[DIFF_LINES:]) + found.cut
    text = [found.summary_line(), *shown]
    if more:
        hidden = len(lines) - len(shown)
        what = f"{hidden} more lines, " if hidden else ""
        text.append(
            f"… {what}{more:,} more characters not shown; the whole diff: "
            f"git diff {found.base[:12]} {found.branch}"
        )
    data = {"agent_id": agent_id, **found.to_dict(), "shown_lines": len(shown)}
    return CommandResult("diff", True, "\n".join(text), data)


def _merge(session: Session, agent_id: int, *, dry_run: bool) -> CommandResult:
    from agentkit.chat import isolation

    report = isolation.merge(session, agent_id, dry_run=dry_run)
    ok = report.status != "conflicts"
    text = "\n".join(isolation.report_lines(agent_id, report))
    return CommandResult("merge", ok, text, {"agent_id": agent_id, "report": report.to_dict()})


def _discard(session: Session, agent_id: int, *, confirmed: bool) -> CommandResult:
    from agentkit.chat import isolation

    if not confirmed:
        found = isolation.review(session, agent_id, max_chars=1)
        state = "merged already" if found.merged else "NOT merged"
        text = (
            f"/discard {agent_id} drops sub-agent #{agent_id}'s copy and its branch "
            f"({len(found.changes.files)} files, +{found.changes.insertions} "
            f"-{found.changes.deletions}, {state}); this cannot be undone. "
            f"Confirm with /discard {agent_id} --yes"
        )
        data = {"agent_id": agent_id, "confirm": f"/discard {agent_id} --yes"}
        return CommandResult("discard", True, text, data)
    isolation.discard(session, agent_id)
    text = f"discarded sub-agent #{agent_id}'s copy and branch; the workspace was not touched"
    return CommandResult("discard", True, text, {"agent_id": agent_id, "discarded": True})


def terminal_text(result: CommandResult) -> str:
    """``result.text`` made safe for the terminal, a ``/diff``'s lines coloured."""
    from agentkit.cli.safe_text import terminal_safe
    from agentkit.cli.terminal_view import style

    if result.command != "diff" or not result.ok:
        return terminal_safe(result.text)
    out = []
    for number, line in enumerate(result.text.splitlines()):
        if number == 0 or line.startswith(("… ", "+++", "---", "diff --git", "index ")):
            out.append(style(line, "1"))
        elif line.startswith("+"):
            out.append(style(line, "32"))
        elif line.startswith("-"):
            out.append(style(line, "31"))
        elif line.startswith("@@"):
            out.append(style(line, "36"))
        else:
            out.append(terminal_safe(line))
    return "\n".join(out)
