"""Everything the main model is told about its sub-agents' ends (docs/specification.md §2, §3).

One job: the text of those messages.

* :func:`render_notifications`: the specification's notification templates for a
  list of ended sub-agents: the system template (after a batch of tool results) or
  the user template (it starts a round while the main agent is idle); agents that end
  together share one message. When each is used is agentkit.chat.rounds' job. After
  an agent's text come, when there are any, its typed result (output_schema), the
  messages it never read, with subagent_control its tokens and cost
  (docs/control-plane.md), and for an isolated agent its changes and what decides
  them (:func:`isolation_line`, docs/isolation.md).
* :func:`render_questions`: a sub-agent's ask_parent question, told the same two ways.
* :func:`recovery_notes`: when a saved conversation is loaded (after a restart, a
  crash, or a switch back to it), every sub-agent its file still lists as running has
  ended without the main agent hearing of it. Their records are swept
  (agentkit.subagent.sweep: a worker that is gone is recorded as terminated and its
  leftover processes killed), and the model is told at the next round: those that
  finished, with the result summary their records hold; those that were killed, with
  the reason.
* :func:`closing_notes`: when a conversation closes, the sub-agents it stops are
  owed the same way, in the file, for its next opening.
* :func:`is_notification`: whether a message of a saved conversation is one of those
  notifications (front ends show them apart from what the user typed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit import prompts
from agentkit.subagent.sweep import repair_ended_rows, sweep_rows

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.settings import Settings
    from agentkit.subagent.isolated import Isolation
    from agentkit.subagent.manager import SubAgentManager
    from agentkit.subagent.state import SubAgent

__all__ = [
    "closing_notes",
    "is_notification",
    "isolation_line",
    "recovery_notes",
    "render_notifications",
    "render_questions",
]

_NOTIFICATION = re.compile(r"^(子智能体\s*\d+\s*\(|Sub-agent \d+ \()")
"""How the notification templates begin (prompts/<lang>/subagent/notify_*.txt)."""


def is_notification(message: dict[str, object]) -> bool:
    """True when ``message`` (an OpenAI-shape message dict) is a sub-agent completion
    announced to the main agent with the specification's templates (docs/
    specification.md §3): a ``system`` or ``user`` message whose text begins like
    ``Sub-agent 1 (`` / ``子智能体1 (``."""
    content = message.get("content")
    return (
        message.get("role") in ("system", "user")
        and isinstance(content, str)
        and _NOTIFICATION.match(content) is not None
    )


def render_notifications(
    language: str,
    agents: list[SubAgent],
    template: str,
    cap: Callable[[SubAgent], str],
    control: bool = False,
) -> str:
    """Render one notification text for ``agents`` with ``subagent/<template>.txt``
    (``notify_system`` or ``notify_user``), blank-line separated; ``control``: add
    tokens and cost."""
    parts = []
    for agent in agents:
        text = prompts.render(
            language,
            f"subagent/{template}.txt",
            agent_id=agent.spec.agent_id,
            summary=agent.spec.summary,
            **agent.stats(),  # runtime_seconds and the four seed counters
            deliverables_dir=agent.spec.deliverables_dir,
            result_summary=cap(agent),
        )
        parts.append(text + "".join("\n" + line for line in _extras(language, agent, control)))
    return "\n\n".join(parts)


def _extras(language: str, agent: SubAgent, control: bool) -> list[str]:
    """Lines after an agent's notification: typed result, unread messages, usage, an
    isolated agent's changes."""
    import json

    lines = []
    if agent.result is not None:
        shown = json.dumps(agent.result, ensure_ascii=False)
        lines.append(prompts.phrase(language, "notify_result", result=shown))
    if agent.unread:
        quoted = " / ".join(f"「{m}」" for m in agent.unread)
        lines.append(
            prompts.phrase(language, "notify_unread", count=len(agent.unread), messages=quoted)
        )
    if control:
        if agent.cost_usd is None:
            lines.append(prompts.phrase(language, "notify_usage_unpriced", tokens=agent.tokens))
        else:
            cost = f"{agent.cost_usd:.6f}"
            lines.append(prompts.phrase(language, "notify_usage", tokens=agent.tokens, cost=cost))
        if agent.usage_estimated:
            lines.append(prompts.phrase(language, "notify_usage_estimated"))
    if agent.isolation is not None and agent.isolation.copy is not None:
        lines.append(isolation_line(language, agent.spec.agent_id, agent.isolation))
    return lines


def isolation_line(language: str, agent_id: int, state: Isolation) -> str:
    """The line an isolated agent's notification ends with: its changes (files, lines
    added and removed) and that merge_sub_agent or discard_sub_agent_changes decides."""
    if state.changes is None:
        reason = state.error or "unknown"
        return prompts.phrase(language, "notify_isolated_unknown", agent_id=agent_id, reason=reason)
    if not state.changes.get("files"):
        return prompts.phrase(language, "notify_isolated_none", agent_id=agent_id)
    return prompts.phrase(language, "notify_isolated", agent_id=agent_id, **state.changes)


def render_questions(language: str, agents: list[SubAgent], role: str) -> str:
    """Render the questions ``agents`` wait on (``role`` "system": after a tool batch,
    ``subagent/question_system.txt``; "user": it starts a round,
    ``subagent/question_user.txt``), blank-line separated."""
    template = "question_system" if role == "system" else "question_user"
    return "\n\n".join(
        prompts.render(
            language,
            f"subagent/{template}.txt",
            agent_id=agent.spec.agent_id,
            summary=agent.spec.summary,
            question=agent.question.text if agent.question is not None else "",
        )
        for agent in agents
    )


def recovery_notes(workspace: Path, conversation: Conversation, settings: Settings) -> list[str]:
    """Sweep the conversation's sub-agents left ``running`` and return the system
    notes for its next round (empty when none was left running). The rows in
    ``conversation.subagents`` are updated to their final status. Rows that ended
    whose records are still saved running get their records made final
    (agentkit.subagent.sweep.repair_ended_rows: a full disk refused the final write)."""
    rows = conversation.subagents
    repair_ended_rows(workspace, rows)
    stale = [r for r in rows if isinstance(r, dict) and r.get("status") == "running"]
    if not stale:
        return []
    sweep_rows(workspace, stale)
    language = settings.language
    notes: list[str] = []
    killed = []
    for row in stale:
        if row.get("status") == "running":  # the worker is gone without a final record
            row["status"] = "terminated"
            killed.append(row)
            continue
        notes.append(
            prompts.phrase(
                language,
                "ended_unseen",
                agent_id=row.get("agent_id"),
                summary=row.get("summary", ""),
                status=row.get("status"),
                result_summary=row.get("result_summary") or "",
                deliverables_dir=row.get("deliverables_dir", ""),
            )
        )
    if killed:
        names = ", ".join(
            f"{r.get('agent_id')} ({r.get('summary', '')})"
            + (f": {r['error']}" if r.get("error") else "")
            for r in killed
        )
        notes.insert(0, prompts.phrase(language, "previous_subagents", agents=names))
    return notes + _copy_notes(language, stale)


def _copy_notes(language: str, rows: list[dict[str, object]]) -> list[str]:
    """For each isolated sub-agent among ``rows`` whose copy waits for a merge or a
    discard: the line its notification would have ended with, its changes counted now
    (a killed worker's are still unsaved in its copy)."""
    from agentkit.isolation.types import Copy, IsolationError
    from agentkit.subagent.isolated import Isolation
    from agentkit.subagent.merging import count_changes

    notes: list[str] = []
    for row in rows:
        data, agent_id = row.get("isolation"), row.get("agent_id")
        if not isinstance(data, dict) or not isinstance(agent_id, int):
            continue
        if row.get("merged") or row.get("discarded"):
            continue
        try:
            changes = count_changes(Copy.from_dict(data))
        except (IsolationError, KeyError, TypeError, ValueError):
            changes = None
        why = None if changes is not None else "its copy could not be read"
        state = Isolation(copy=data, changes=changes, error=why)
        line = isolation_line(language, agent_id, state)
        notes.append(
            prompts.phrase(
                language,
                "ended_copy",
                agent_id=agent_id,
                summary=row.get("summary", ""),
                line=line,
            )
        )
    return notes


def closing_notes(manager: SubAgentManager | None, language: str) -> list[str]:
    """Stop every sub-agent of a closing conversation (docs/specification.md §8.5) and
    return the notes the model is owed about them: those that were running, and
    finished ones not announced yet (empty without a manager)."""
    if manager is None:
        return []
    blocking = [a for a in manager.running() if not a.background]
    manager.shutdown()
    notes = [
        prompts.phrase(
            language,
            "ended_unseen",
            agent_id=a.spec.agent_id,
            summary=a.spec.summary,
            status=a.status,
            result_summary=a.result_summary or "",
            deliverables_dir=a.spec.deliverables_dir,
        )
        for a in manager.take_finished()
    ]
    if blocking:
        names = ", ".join(f"{a.spec.agent_id} ({a.spec.summary})" for a in blocking)
        notes.append(prompts.phrase(language, "left_subagents", agents=names))
    return notes
