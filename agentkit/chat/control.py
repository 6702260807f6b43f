"""The control plane for applications and people: a Session's message, answer and
continue calls (docs/control-plane.md §5).

One job: what ``Session.message_subagent``, ``answer_subagent``,
``continue_subagent`` (and ``terminate_subagent``, the one that needs no control plane) do, for applications that drive sub-agents themselves and for
the front ends (``agentkit chat``'s /msg, /answer, /continue; ``agentkit serve``'s
answer box). They go through the same manager calls as the main agent's tools, with
the same rules (an id, non-empty text, at most ``CONTROL_TEXT_MAX`` characters), are
refused with ``subagent_control`` off, and the main agent is told of each at its next
round (a system note): nothing happens behind its back. Also the conversation's
budget meter (:func:`conversation_budget`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentkit import prompts
from agentkit.subagent.inputs import CONTROL_TEXT_MAX

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.settings import Settings
    from agentkit.subagent.budget import Meter
    from agentkit.subagent.manager import SubAgentManager


class Session(Protocol):
    """What these calls use of an agentkit.chat.Session."""

    @property
    def settings(self) -> Settings: ...

    @property
    def manager(self) -> SubAgentManager: ...

    def note(self, text: str) -> None: ...

    def publish(self, event: Any) -> None: ...

    def current_manager(self) -> SubAgentManager | None: ...


__all__ = [
    "answer_subagent",
    "continue_subagent",
    "conversation_budget",
    "message_subagent",
    "terminate_subagent",
]


def terminate_subagent(session: Session, agent_id: int) -> dict[str, Any]:
    """Terminate sub-agent ``agent_id`` at the user's request (with or without the
    control plane); returns the seed's terminate_sub_agent JSON."""
    manager = session.current_manager()
    if manager is None:
        return {"success": False, "agent_id": agent_id, "error": "no sub-agent runs"}
    result = manager.terminate(agent_id, by_user=True)
    agent = manager.table.get(agent_id) if result.get("success") else None
    if agent is not None:
        _announce_stop(session, manager, agent)
    return result


def _announce_stop(session: Session, manager: SubAgentManager, agent: Any) -> None:
    """Tell of a sub-agent the user stopped as of any ended one: the seed's notification
    (status terminated, its summary "Stopped by the user...") reaches the model at its
    next request (a system note: no round starts for it), and the conversation shows
    it now (a Notification event, as the page and the chat show any)."""
    from agentkit import events as ev
    from agentkit.subagent.notify import render_notifications

    text = render_notifications(
        manager.language,
        [agent],
        "notify_system",
        manager.capped_summary,
        control=manager.settings.subagent_control,
    )
    session.note(text)
    session.publish(ev.Notification(agent_ids=[agent.spec.agent_id], role="system", text=text))


def message_subagent(session: Session, agent_id: int, text: str) -> dict[str, Any]:
    """Send running sub-agent ``agent_id`` the user's message; returns message_sub_agent's
    JSON (``success``, ``status`` "delivered", or why it was not delivered)."""
    refused = _refusal(session, agent_id, text)
    if refused is not None:
        return refused
    result = session.manager.control.message(agent_id, text.strip(), by="user")
    if result.get("success"):
        _note(session, "user_messaged", agent_id=agent_id, message=text.strip())
    return result


def answer_subagent(session: Session, agent_id: int, text: str) -> dict[str, Any]:
    """Answer sub-agent ``agent_id``'s pending question as the user; returns
    answer_sub_agent's JSON."""
    refused = _refusal(session, agent_id, text)
    if refused is not None:
        return refused
    result = session.manager.control.answer(agent_id, text.strip(), by="user")
    if result.get("success"):
        _note(session, "user_answered", agent_id=agent_id, answer=text.strip())
    return result


def continue_subagent(
    session: Session, agent_id: int, task: str, timeout_seconds: int | None = None
) -> dict[str, Any]:
    """Run ended sub-agent ``agent_id`` again on ``task``, in the background; returns
    continue_sub_agent's JSON (its end is announced to the main agent)."""
    from agentkit.subagent.continuation import continue_subagent as run_again

    refused = _refusal(session, agent_id, task)
    if refused is not None:
        return refused
    runs = getattr(session, "runs", None)  # an agentkit.chat.Session's RunTasks
    if runs is not None:
        runs.expect(agent_id, task)  # its start event then carries the new task
    result = run_again(
        session.manager,
        agent_id,
        task.strip(),
        run_in_background=True,
        timeout_seconds=timeout_seconds,
    )
    if result.get("success"):
        _note(session, "user_continued", agent_id=agent_id, task=task.strip())
    return result


def _note(session: Session, key: str, **values: Any) -> None:
    session.note(prompts.phrase(session.settings.language, key, **values))


def _refusal(session: Session, agent_id: Any, text: Any) -> dict[str, Any] | None:
    """The refusal for a bad call (control off, not an id, empty or oversize text), or None."""
    language = session.settings.language

    def refuse(key: str, **values: Any) -> dict[str, Any]:
        error = prompts.phrase(language, key, **values)
        return {"success": False, "agent_id": agent_id, "error": error}

    if not session.settings.subagent_control:
        return refuse("control_off")
    if isinstance(agent_id, bool) or not isinstance(agent_id, int):
        return refuse("arg_not_whole", field="agent_id", value=repr(agent_id))
    if not isinstance(text, str) or not text.strip():
        return refuse("control_text_empty", field="text")
    if len(text.strip()) > CONTROL_TEXT_MAX:
        return refuse("control_text_too_long", length=len(text.strip()), max=CONTROL_TEXT_MAX)
    return None


def conversation_budget(conversation: Conversation, settings: Settings) -> Meter | None:
    """The conversation's budget meter (``session_max_tokens``, ``session_max_cost_usd``;
    None without either), counting what it spent before: the main agent's stats and its
    sub-agents' saved rows."""
    from agentkit.subagent.control import session_meter

    stats = conversation.stats
    tokens = stats.prompt_tokens + stats.completion_tokens
    cost = stats.cost_usd
    for row in conversation.subagents:
        if isinstance(row.get("tokens"), int):
            tokens += row["tokens"]
        if isinstance(row.get("cost_usd"), (int, float)):
            cost += float(row["cost_usd"])
    return session_meter(settings, tokens, cost)
