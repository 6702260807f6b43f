"""The web chat's approvals: answering a pending request over HTTP (docs/web-api.md).

One job: ``POST /api/conversations/{cid}/approvals/{request_id}`` with ``{"decision":
"allow" | "allow_always" | "deny", "note": "..."}`` answers one request of the
conversation's broker (agentkit.chat.approvals) and :func:`pending` lists them for the
conversation's ``GET``. The page (``static/approvals.js``) shows each pending request
as a card; the first answer wins, and another tab's later answer gets 409 with the
reason, so no request is answered twice however many tabs are open.

The served workspace's sessions are answerers (:func:`page_answers`): an ask waits for
the page, however long (``approval_timeout_seconds`` bounds it), also while no page is
connected; a reconnecting page finds it in the conversation's ``GET``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from agentkit.chat.approvals import answer_later
from agentkit.errors import ApprovalError
from agentkit.webchat.bodies import ApiError, ApprovalAnswer, parse_body
from agentkit.webchat.text import JSONResponse

if TYPE_CHECKING:
    from agentkit.chat import Session
    from agentkit.conversation import Conversation

__all__ = ["answer", "page_answers", "pending"]

page_answers = answer_later
"""The answerer of the served sessions: the page answers later."""

_STATUS = {"unknown": 404, "answered": 409, "withdrawn": 409, "invalid": 400}


def pending(session: Session | None, conversation: Conversation) -> list[dict[str, Any]]:
    """The requests waiting for an answer: the live session's, or, for a conversation
    not open here, those its file lists (opening it withdraws them: the process that
    asked is gone)."""
    if session is not None:
        return session.pending_approvals()
    rows = conversation.approvals.get("pending")
    return [dict(r) for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def answer(request: Request, session: Session, body: dict[str, Any]) -> Response:
    """Answer the path's request with the body's decision (400: a bad body, an
    ApprovalAnswer naming the field at fault, or decision; 404: no such request; 409:
    answered already, or withdrawn)."""
    try:
        parsed = parse_body(ApprovalAnswer, body)
    except ApiError as exc:
        return _refused(str(exc), "invalid")
    decision, note = parsed.decision, parsed.note
    request_id = request.path_params["rid"]
    try:
        row = session.approve(request_id, decision, note)
    except ApprovalError as exc:
        return _refused(exc.message, exc.code)
    return JSONResponse({"request_id": request_id, "decision": decision, "request": row})


def _refused(message: str, code: str) -> Response:
    return JSONResponse({"error": message, "code": code}, status_code=_STATUS[code])
