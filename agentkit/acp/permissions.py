"""An approval request as ACP's ``session/request_permission``, and the editor's answer back.

One job: the two pure halves of the mapping of docs/acp.md §8 (agentkit.acp.approvals
does the asking):

* :func:`permission_request`: an approval request's row (the fields of the
  ``ApprovalRequested`` event: ``request_id``, ``agent_id``, ``tool``, ``arguments``,
  ``reason``, ``key``, ``call_id``) → the ``toolCall`` and ``options`` of the request.
  The main agent's call names its own card (``call_id``: the editor shows the buttons
  on it); a sub-agent's call gets a card id of its own (``approval-<request_id>``),
  titled with the sub-agent. The options are :data:`OPTIONS`: allow once, allow
  always (its name says what it allows: the row's ``always``), reject;
* :func:`decision_of`: the editor's ``RequestPermissionResponse`` → ``(decision,
  note)`` for ``Session.approve`` (``allow``, ``allow_always``, ``deny``), or None when
  the editor answered ``cancelled`` (ACP: it must, for every pending request, when
  the prompt is cancelled; the round's cancel withdraws the request on agentkit's
  side, so nothing is answered) or chose an option that is not one of ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from agentkit import prompts
from agentkit.acp import toolcalls as tc

__all__ = ["OPTIONS", "decision_of", "permission_request"]

OPTIONS = (
    PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="deny", name="Reject", kind="reject_once"),
)
"""The choices offered; each ``option_id`` is the decision it gives (Session.approve)."""

_DECISIONS = {option.option_id for option in OPTIONS}


def permission_request(
    row: dict[str, Any], workspace: Path, language: str
) -> tuple[ToolCallUpdate, list[PermissionOption]]:
    """The ``toolCall`` and ``options`` of the ``session/request_permission`` for the
    approval request ``row`` (see the module docstring).

    Args:
        row: the request (ApprovalRequested's fields); unknown or missing fields are
            tolerated (an ``other`` card titled with the tool's name).
        workspace: the conversation's workspace (paths are shown absolute).
        language: the conversation's language (the title is the call's progress phrase).
    """
    name = str(row.get("tool") or "tool")
    raw = row.get("arguments")
    arguments: dict[str, Any] | None = raw if isinstance(raw, dict) else None
    view = tc.describe(name, arguments, prompts.last_action(language, name, arguments), workspace)
    agent_id = row.get("agent_id")
    call_id = row.get("call_id")
    if isinstance(agent_id, int) and not isinstance(agent_id, bool):
        card, title = f"approval-{row.get('request_id')}", f"Sub-agent {agent_id}: {view.title}"
    else:
        card, title = str(call_id or f"approval-{row.get('request_id')}"), view.title
    reason = str(row.get("reason") or "")
    content: list[Any] | None = [tc.text_content(f"Asks because: {reason}")] if reason else None
    update = ToolCallUpdate(
        tool_call_id=card,
        title=title,
        kind=view.kind,
        status="pending",
        locations=view.locations or None,
        raw_input=arguments,
        content=content,
    )
    covers = str(row.get("always") or "")
    if not covers:
        return update, list(OPTIONS)
    always = OPTIONS[1].model_copy(update={"name": f"Always allow {covers}"})
    return update, [OPTIONS[0], always, OPTIONS[2]]


def decision_of(response: Any) -> tuple[str, str | None] | None:
    """``(decision, note)`` for the editor's answer (a RequestPermissionResponse), or
    None: cancelled, or an option agentkit did not offer."""
    outcome = getattr(response, "outcome", None)
    if not isinstance(outcome, AllowedOutcome) or outcome.option_id not in _DECISIONS:
        return None
    note = "rejected in the editor" if outcome.option_id == "deny" else None
    return outcome.option_id, note
