"""What a reopened conversation owes its model: sub-agents that ended unseen.

One job: when a saved conversation is loaded (after a restart, a crash, or a
switch back to it), every sub-agent its file still lists as running has ended
without the main agent hearing of it. Their records are swept
(agentkit.subagent.sweep: a worker that is gone is recorded as terminated and
its leftover processes killed), and the model is told at the next round: those
that finished, with the result summary their records hold; those that were
killed, with the reason. When a conversation closes (:func:`closing_notes`), the
sub-agents it stops are owed the same way, in the file, for its next opening.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agentkit import prompts
from agentkit.conversation import Conversation
from agentkit.settings import Settings
from agentkit.subagent.sweep import sweep_rows

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

__all__ = ["closing_notes", "owed_notes", "recovery_notes"]


def recovery_notes(workspace: Path, conversation: Conversation, settings: Settings) -> list[str]:
    """Sweep the conversation's sub-agents left ``running`` and return the system
    notes for its next round (empty when none was left running). The rows in
    ``conversation.subagents`` are updated to their final status."""
    rows = conversation.subagents
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
    return notes


def owed_notes(conversation: Conversation, language: str) -> list[str]:
    """Return the notes the next round owes its model about the conversation itself:
    that the last user message was never answered (its round was cancelled or
    interrupted)."""
    last = conversation.messages[-1:]
    if conversation.error in ("cancelled", "interrupted") and last and last[0]["role"] == "user":
        return [prompts.phrase(language, "interrupted_request")]
    return []


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
