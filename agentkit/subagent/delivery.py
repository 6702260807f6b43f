"""Messages and answers delivered to running sub-agents (docs/control-plane.md §2, §3).

One job: message_sub_agent and answer_sub_agent for a conversation's
:class:`~agentkit.subagent.control.ControlPlane` (whose ``message`` and ``answer``
call these): the running agent looked up, the text queued under the limits of
agentkit.subagent.inputs.steer_limit, the Steer or Answer sent, the worker's Receipt
awaited (``RECEIPT_SECONDS``), and the result or refusal worded; every message
attempt is emitted as SubAgentMessage. A message or answer counts as delivered only
when the worker's Receipt says it took it. Nothing is sent or emitted under the
table's lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.subagent import inputs
from agentkit.subagent.contract import Answer, Receipt, Steer

if TYPE_CHECKING:
    from agentkit.subagent.control import ControlPlane, PendingQuestion
    from agentkit.subagent.state import SubAgent

__all__ = ["RECEIPT_SECONDS", "answer", "message"]

RECEIPT_SECONDS = 10.0
"""How long a message or answer waits for the worker's Receipt (its reader thread
answers at once; only a worker that stopped reading takes this long)."""
_LIMITS = ("too_long", "queue_full")  # a worker's refusals that :func:`_over_limit` words


def message(control: ControlPlane, agent_id: int, text: str, *, by: str = "main") -> dict[str, Any]:
    """message_sub_agent: queue ``text`` for a running sub-agent's next request.
    Returns ``{"success": true, "status": "delivered", ...}`` once its worker took
    it, else a refusal with its status (ended ones: the hint to continue it)."""
    agent, refusal = _running(control, agent_id, "message_not_running")
    if agent is None:
        return refusal
    ref = control.next_ref()

    def queue(agent: SubAgent) -> dict[str, Any] | None:  # the refusal, or None
        if agent.status != "running" or agent.finishing:
            return _not_delivered(control, agent, "finishing")
        refused = _over_limit(control, agent, text)
        if refused is None:
            agent.steers[ref] = text
            agent.receipts[ref] = None
        return refused

    refused = control.table.update(agent, queue)
    if refused is not None:
        return _said(control, agent, text, by, refused)
    control.manager.supervisor.send(agent, Steer(ref, text))
    receipt = _receipt(control, agent, ref)
    if receipt is None or not receipt.accepted:
        control.table.update(agent, lambda a: a.steers.pop(ref, None))
        why = receipt.reason if receipt is not None else agent.status
        limited = (
            control.table.update(agent, lambda a: _over_limit(control, a, text, why))
            if why in _LIMITS
            else None
        )
        refusal = limited if limited is not None else _not_delivered(control, agent, why)
        return _said(control, agent, text, by, refusal)
    done = {
        "success": True,
        "agent_id": agent_id,
        "status": "delivered",
        "message": control.phrase("message_delivered", agent_id=agent_id),
    }
    return _said(control, agent, text, by, done)


def _said(
    control: ControlPlane, agent: SubAgent, text: str, by: str, result: dict[str, Any]
) -> dict[str, Any]:
    delivered = bool(result.get("success"))
    control.manager.emit(
        ev.SubAgentMessage(agent_id=agent.spec.agent_id, text=text, delivered=delivered, by=by)
    )
    return result


def _over_limit(
    control: ControlPlane, agent: SubAgent, text: str, why: str = ""
) -> dict[str, Any] | None:
    """The refusal when ``text`` is too long or ``agent``'s unread queue is full
    (``why``: the worker's reason, when it refused), else None. Runs under the
    table's lock (SubAgentTable.update)."""
    limit = inputs.steer_limit(list(agent.steers.values()), text, why)
    if limit is None:
        return None
    key, values = limit
    error = control.phrase(key, agent_id=agent.spec.agent_id, **values)
    refusal = _not_delivered(control, agent, why)
    return {**refusal, "error": error}


def _not_delivered(control: ControlPlane, agent: SubAgent, why: str) -> dict[str, Any]:
    status = agent.status
    key = "message_refused" if status == "running" else "message_not_running"
    return {
        "success": False,
        "agent_id": agent.spec.agent_id,
        "status": status,
        "delivered": False,
        "error": control.phrase(key, agent_id=agent.spec.agent_id, status=status, reason=why),
    }


def answer(control: ControlPlane, agent_id: int, text: str, *, by: str = "main") -> dict[str, Any]:
    """answer_sub_agent: answer the agent's pending question. Delivered once its
    worker took the answer (its ask_parent returns it); else a refusal saying why
    (no question pending, it stopped waiting, it ended)."""
    agent, refusal = _running(control, agent_id, "no_question")
    if agent is None:
        return refusal
    ref = control.next_ref()

    def pending(agent: SubAgent) -> PendingQuestion | None:
        question: PendingQuestion | None = agent.question
        if agent.status != "running" or question is None:
            return None
        agent.receipts[ref] = None  # awaited
        return question

    question = control.table.update(agent, pending)
    if question is None:
        return _no_question(control, agent)
    control.manager.supervisor.send(agent, Answer(ref, question.request, text))
    receipt = _receipt(control, agent, ref)
    if receipt is None or not receipt.accepted:
        return _no_question(control, agent)
    control.close_question(agent, question.request, "answered", text, by)
    return {
        "success": True,
        "agent_id": agent_id,
        "status": "answered",
        "message": control.phrase("answer_delivered", agent_id=agent_id),
    }


def _no_question(control: ControlPlane, agent: SubAgent) -> dict[str, Any]:
    status = agent.status
    return {
        "success": False,
        "agent_id": agent.spec.agent_id,
        "status": status,
        "error": control.phrase("no_question", agent_id=agent.spec.agent_id, status=status),
    }


def _running(control: ControlPlane, agent_id: int, ended_key: str) -> tuple[Any, dict[str, Any]]:
    """``(agent, {})`` for a sub-agent of this conversation, else ``(None, refusal)``
    (control off, an unknown id, one of an earlier run: its status)."""
    if not control.enabled:
        error = control.phrase("control_off")
        return None, {"success": False, "agent_id": agent_id, "error": error}
    agent, earlier = control.table.find(agent_id)
    if agent is not None:
        return agent, {}
    if earlier is not None:
        error = control.phrase(ended_key, agent_id=agent_id, status=earlier, reason=earlier)
        return None, {"success": False, "agent_id": agent_id, "status": earlier, "error": error}
    error = control.phrase("unknown_agent", agent_id=agent_id)
    return None, {"success": False, "agent_id": agent_id, "status": "not_found", "error": error}


def _receipt(control: ControlPlane, agent: SubAgent, ref: int) -> Receipt | None:
    """Wait for the Receipt ``ref``; None when the agent ended first or none came."""

    def came() -> bool:
        return agent.receipts.get(ref) is not None or agent.status != "running"

    def take(_: bool) -> Receipt | None:
        receipt = agent.receipts.pop(ref, None)
        return receipt if isinstance(receipt, Receipt) else None

    return control.table.wait_then(came, RECEIPT_SECONDS, take)
