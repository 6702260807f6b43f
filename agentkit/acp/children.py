"""Sub-agents as child sessions: ACP's sub-agent sessions extension, for clients that opt in.

One job: when the editor's ``initialize`` announced ``clientCapabilities.subagents``
(the "Subagent Sessions" RFD; an unstable part of protocol version 1: a client must
opt in, and a client that did not would reject the update), each sub-agent becomes a
child session of the conversation's session:

* on the parent session, a ``subagent_update`` announces the child (its id
  ``<conversation id>/sub-agent-<n>``, a title with the summary, the task as its
  description, the workspace as ``cwd``, ``state: running``) and later its end
  (``state: idle`` with ``stopReason`` ``end_turn`` when it completed, ``cancelled``
  when it was terminated, ``error`` with the reason for a failure or a timeout);
* on the child's own id, ordinary ``session/update`` notifications draw its
  conversation as it goes: its task, replies and tool calls, read from its record
  (``<deliverables_dir>/.subagent/conversations.json``: the worker appends each turn
  to the journal beside it and writes the file whole now and then,
  agentkit.subagent.transcript; read_record applies the journal) each time its
  progress changes (agentkit.acp.history.Transcript);
* a child announces ``capabilities.cancel``: ``session/cancel`` with its id
  terminates that sub-agent (agentkit.chat.Session.terminate_subagent).

The Python library has no model for these updates (0.12.1), so they go out as raw
JSON-RPC notifications on the same channel, in order with the rest. Without the
opt-in nothing here runs: the ``create_sub_agent`` card alone shows the sub-agent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit import events as ev
from agentkit.acp.history import Transcript
from agentkit.subagent.record import read_record

log = logging.getLogger("agentkit.acp")

__all__ = ["RECORD_LAG", "ChildSessions", "child_id"]

SendRaw = Callable[[str, dict[str, Any]], Awaitable[None]]
Send = Callable[[str, Any], Awaitable[None]]


def child_id(parent_id: str, agent_id: int) -> str:
    """The child session id of sub-agent ``agent_id`` of session ``parent_id``."""
    return f"{parent_id}/sub-agent-{agent_id}"


RECORD_LAG = 0.5
"""Seconds after a progress event when the record is read once more: the worker sends
the event after a tool batch and saves the turn (a journal line,
agentkit.subagent.transcript) just after it, so the turn a progress event announces
may reach the file just after the event."""


@dataclass
class _Child:
    session_id: str
    deliverables: Path
    transcript: Transcript
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    later: asyncio.Task[None] | None = None


class ChildSessions:
    """The child sessions of one ACP session (see the module docstring).

    Args:
        parent_id: the parent session's id.
        workspace: its workspace.
        language: its language.
        send: ``await send(session_id, update)``: an ordinary ``session/update``.
        send_raw: ``await send_raw(method, params)``: a notification the library
            has no model for.
    """

    def __init__(
        self, parent_id: str, workspace: Path, language: str, send: Send, send_raw: SendRaw
    ) -> None:
        self.parent_id = parent_id
        self.workspace = workspace
        self.language = language
        self._send = send
        self._send_raw = send_raw
        self._children: dict[int, _Child] = {}

    def agent_of(self, session_id: str) -> int | None:
        """The sub-agent whose child session is ``session_id``, or None."""
        for agent_id, child in self._children.items():
            if child.session_id == session_id:
                return agent_id
        return None

    async def on_event(self, event: ev.Event, task: str | None = None) -> None:
        """Follow a SubAgentStarted / SubAgentProgress / SubAgentFinished event
        (``task``: the sub-agent's task, from its create_sub_agent call)."""
        if not isinstance(event, (ev.SubAgentStarted, ev.SubAgentProgress, ev.SubAgentFinished)):
            return
        info = event.info
        agent_id = info.get("agent_id")
        if not isinstance(agent_id, int):
            return
        child = self._children.get(agent_id)
        if child is None:  # its first event (a finished one too: announced, then ended)
            child = self._children[agent_id] = _Child(
                child_id(self.parent_id, agent_id),
                self.workspace / str(info.get("deliverables_dir") or ""),
                Transcript(self.workspace, self.language, prefix=f"sub{agent_id}"),
            )
            await self._announce(child, info, task)
        if not isinstance(event, ev.SubAgentFinished):
            await self._refresh(child)
            if child.later is None or child.later.done():
                child.later = asyncio.create_task(self._refresh_later(child))
            return
        if child.later is not None:
            child.later.cancel()
            await asyncio.gather(child.later, return_exceptions=True)
        await self._refresh(child)  # the final record is on disk before the event
        for update in child.transcript.close():
            await self._send(child.session_id, update)
        await self._update(child.session_id, state=_ended(info))
        del self._children[agent_id]

    async def _announce(self, child: _Child, info: dict[str, Any], task: str | None) -> None:
        await self._update(
            child.session_id,
            title=f"Sub-agent {info.get('agent_id')}: {info.get('summary', '')}",
            description=task,
            capabilities={"cancel": {}},
            cwd=str(self.workspace),
            state={"state": "running"},
        )

    async def _refresh_later(self, child: _Child) -> None:
        await asyncio.sleep(RECORD_LAG)
        try:
            await self._refresh(child)
        except ConnectionError:
            pass  # the editor has gone
        except Exception:
            log.exception("acp: the record of %s could not be followed", child.session_id)

    async def _refresh(self, child: _Child) -> None:
        """Send what the record holds beyond what was sent."""
        async with child.lock:  # one reader per child: its updates stay in order
            record = await asyncio.to_thread(read_record, child.deliverables)
            messages = record.get("messages") if record else None
            if not isinstance(messages, list):
                return
            for update in child.transcript.feed([m for m in messages if isinstance(m, dict)]):
                await self._send(child.session_id, update)

    async def _update(self, session_id: str, **fields: Any) -> None:
        update = {"sessionUpdate": "subagent_update", "sessionId": session_id}
        update.update({k: v for k, v in fields.items() if v is not None})
        await self._send_raw("session/update", {"sessionId": self.parent_id, "update": update})


def _ended(info: dict[str, Any]) -> dict[str, Any]:
    status = info.get("status")
    if status == "completed":
        return {"state": "idle", "stopReason": "end_turn"}
    if status == "terminated":
        return {"state": "idle", "stopReason": "cancelled"}
    reason = f"sub-agent {info.get('agent_id')} ended with status {status}"
    return {"state": "idle", "stopReason": "error", "error": {"code": -32603, "message": reason}}
