"""The editor as the answerer of a conversation's approval requests (docs/acp.md §8).

One job: for each ``ask`` of the approvals policy in an ACP session (the main agent's
tool calls and its sub-agents', docs/approvals.md), send the editor one
``session/request_permission`` (agentkit.acp.permissions builds it) and give its
choice to ``Session.approve``.

* The request leaves after every update published before it (the pump of
  agentkit.acp.session hands it here in order), so the main agent's call card is
  already on the editor's screen when the buttons for it arrive. Each request is
  asked in a task of its own: the editor may take its time, and the pump goes on.
* The editor's ``cancelled`` (ACP: its answer to every pending request when the prompt
  is cancelled) decides nothing: the round's cancel has withdrawn the request already.
* A request settled otherwise first (withdrawn: its sub-agent ended, the round was
  cancelled; answered: ``approval_timeout_seconds``) stops its wait (:meth:`settled`),
  and an answer that still arrives is refused by the broker and only logged.
* The editor gone, or an error from it, leaves the request pending: it is withdrawn
  when the conversation closes, as every request is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentkit.acp.permissions import decision_of, permission_request
from agentkit.errors import ApprovalError

if TYPE_CHECKING:
    from acp.schema import PermissionOption, ToolCallUpdate

    from agentkit.chat import Session

log = logging.getLogger("agentkit.acp")

__all__ = ["AskEditor", "EditorApprovals"]

AskEditor = Callable[[str, "ToolCallUpdate", "list[PermissionOption]"], Awaitable[Any]]
"""``await ask(session_id, tool_call, options)``: one ``session/request_permission``;
returns the editor's RequestPermissionResponse (raises when it fails or is gone)."""


class EditorApprovals:
    """The approval requests of one ACP session on their way to the editor.

    Args:
        session_id: the ACP session (the conversation id) the requests are asked in.
        ask: sends one request to the editor (see :data:`AskEditor`).
        session: returns the current agentkit Session (it changes when a dormant one
            is opened again).

    Use it on the event loop only.
    """

    def __init__(self, session_id: str, ask: AskEditor, session: Callable[[], Session]) -> None:
        self._id = session_id
        self._ask = ask
        self._session = session
        self._waiting: dict[str, asyncio.Task[None]] = {}

    def ask(self, row: dict[str, Any]) -> None:
        """Ask the editor about request ``row`` (ApprovalRequested's fields), once."""
        request_id = str(row.get("request_id") or "")
        if not request_id or request_id in self._waiting:
            return
        self._waiting[request_id] = asyncio.create_task(
            self._ask_and_answer(request_id, row), name=f"acp-permission-{request_id}"
        )

    async def _ask_and_answer(self, request_id: str, row: dict[str, Any]) -> None:
        session = self._session()
        try:
            card, options = permission_request(row, session.workspace, session.settings.language)
            response = await self._ask(self._id, card, options)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the editor gone, or its error: the request stays pending
            log.warning("acp: the editor did not answer approval %s: %s", request_id, exc)
            return
        finally:
            if self._waiting.get(request_id) is asyncio.current_task():
                del self._waiting[request_id]
        decided = decision_of(response)
        if decided is None:  # cancelled (the round's cancel withdrew it), or not our option
            log.info("acp: approval %s: the editor decided nothing (%s)", request_id, response)
            return
        decision, note = decided
        try:
            await asyncio.to_thread(session.approve, request_id, decision, note)
        except ApprovalError as exc:  # withdrawn or answered meanwhile: the first answer won
            log.info("acp: the editor's answer to approval %s was refused: %s", request_id, exc)

    def settled(self, request_id: str) -> None:
        """Request ``request_id`` was answered or withdrawn: stop waiting for the editor
        (its answer, if it still comes, would be refused anyway)."""
        task = self._waiting.pop(request_id, None)
        if task is not None:
            task.cancel()

    def close(self) -> None:
        """Stop every wait (the session is detached; its requests are withdrawn by
        the conversation's close)."""
        for request_id in list(self._waiting):
            self.settled(request_id)
