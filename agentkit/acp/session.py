"""One ACP session: an agentkit conversation seen from an editor.

One job: tie an ACP session id (the conversation id, ``conv_...``) to its live
:class:`agentkit.chat.Session`, carry the conversation's events to the editor as
``session/update`` notifications, and run the editor's prompts on it.

* **Events.** The session's events are captured on the thread that publishes them
  (agentkit.acp.updates.UpdateMapper.capture: a file edit's text is read right then)
  and handed to the event loop; one pump task per session turns them into updates
  and sends them, in order. The pump runs for the session's whole life, so what
  happens outside a prompt turn (a background sub-agent's progress and end, the
  round its completion starts by itself) reaches the editor too, as it happens.
* **Prompts.** The first prompt's answer opens with the session's start notices
  (agentkit.chat.notices: the sandbox is off, a cost cap that cannot trip), once.
  ``session/prompt`` posts the message (agentkit.chat.Session.post) and
  answers when the round that took it ends, after every update of that round is
  out: ``end_turn``; ``cancelled``; ``max_turn_requests`` (max_turns), ``refusal`` (a
  content filter), ``max_tokens`` (a reply cut off); any other failure is a JSON-RPC
  error carrying the round's one-line reason. One prompt at a time: a second one
  while the first runs is refused, unless the first was cancelled (the editor's Stop
  then a new message), in which case it waits for the first to end.
* **Cancel.** ``session/cancel`` stops the round (agentkit.chat.Session.cancel:
  the model request and tools are interrupted, a blocking sub-agent is terminated;
  within 2 s), and keeps asking until the prompt has ended, since the message may
  not have reached a round yet.
* **Approvals.** The editor answers the conversation's approval requests
  (agentkit.acp.approvals, docs/acp.md §8): each ``ask`` goes out as
  ``session/request_permission`` in the order of the updates, and the choice comes
  back through ``Session.approve``.
* **Dormant sessions.** When the workspace has to make room (Workspace.max_open), an
  idle session may be closed and its events detached; the ACP session stays known
  and is opened again on its next prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import SessionInfoUpdate, StopReason

from agentkit import events as ev
from agentkit.acp.approvals import AskEditor, EditorApprovals
from agentkit.acp.children import ChildSessions, SendRaw
from agentkit.acp.content import PromptError, prompt_text
from agentkit.acp.history import replay
from agentkit.acp.updates import Captured, UpdateMapper, message_chunk
from agentkit.errors import Cancelled, ConfigurationError

if TYPE_CHECKING:
    from agentkit.chat import RoundResult, Session, Workspace
    from agentkit.settings import Settings

log = logging.getLogger("agentkit.acp")

__all__ = ["CANCEL_SECONDS", "AcpSession", "stop_reason"]

CANCEL_SECONDS = 5.0
"""How long a cancel keeps asking the conversation to stop the prompt's round, and how
long a prompt waits for a cancelled one before it (seconds)."""

Send = Callable[[str, Any], Awaitable[None]]
_SUBAGENT_EVENTS = (ev.SubAgentStarted, ev.SubAgentProgress, ev.SubAgentFinished)
_SETTLED_EVENTS = (ev.ApprovalAnswered, ev.ApprovalWithdrawn)


@dataclass(frozen=True)
class _Ask:
    """A queued approval request, asked once the updates before it are out."""

    row: dict[str, Any]


def stop_reason(result: RoundResult) -> StopReason:
    """The ACP stop reason of a round that ended.

    Raises:
        RequestError: the round failed for another reason (-32603, its reason as the
            message, ``data`` with ``kind`` and the conversation id).
    """
    if result.status == "done":
        return "end_turn"
    if result.status == "cancelled":
        return "cancelled"
    error = result.error or "the round failed"
    if result.error_kind is None and error.startswith("max_turns ("):  # agentkit.engine
        return "max_turn_requests"
    if result.error_kind == "content_filter":
        return "refusal"
    if result.error_kind == "truncated_tool_call":
        return "max_tokens"
    raise RequestError(
        -32603,
        f"the round failed: {error}",
        {"kind": result.error_kind, "conversation_id": result.conversation_id},
    )


class AcpSession:
    """One ACP session over an agentkit conversation (see the module docstring).

    Args:
        session: the live agentkit session.
        workspace: the Workspace it belongs to (to open it again when dormant).
        settings: the settings it was opened with (the editor's MCP servers, the mode).
        send: ``await send(session_id, update)`` sends one ``session/update``.
        send_raw: ``await send_raw(method, params)``, given when the editor opted in to
            sub-agent sessions (agentkit.acp.children); None: no child sessions.
        ask: sends one ``session/request_permission`` (agentkit.acp.approvals.AskEditor);
            None: no one is asked, and ``approvals_default`` settles an ``ask``.

    Create it inside the running event loop; :meth:`start` subscribes.
    """

    def __init__(
        self,
        session: Session,
        workspace: Workspace,
        settings: Settings,
        send: Send,
        send_raw: SendRaw | None = None,
        ask: AskEditor | None = None,
    ) -> None:
        self.id = session.id
        self.session = session
        self.workspace = workspace
        self.settings = settings
        self._send = send
        self._loop = asyncio.get_running_loop()
        self.mapper = UpdateMapper(
            session.workspace, lambda: self.session.settings, changed_files=self._changed_files
        )
        self.children = (
            ChildSessions(self.id, session.workspace, session.settings.language, send, send_raw)
            if send_raw is not None
            else None
        )
        self.approvals = EditorApprovals(self.id, ask, lambda: self.session) if ask else None
        self._queue: asyncio.Queue[Captured | _Ask | asyncio.Future[None] | None] = asyncio.Queue()
        self._unsubscribe: Callable[[], None] | None = None
        self._unanswer: Callable[[], None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._title = ""
        self.prompting = False
        self._cancelled = False
        self._turn = 0
        self._done = asyncio.Event()
        self._done.set()
        self.last_used = self._loop.time()
        # Said once, before the first answer (agentkit.chat.notices).
        self._notices: list[str] = list(getattr(session, "notices", []))

    # ------------------------------------------------------------- lifetime
    def _changed_files(self, agent_id: int) -> list[str]:
        """The paths isolated sub-agent ``agent_id`` changed (for a merge's diffs)."""
        from agentkit.chat.isolation import changes_of

        return [f.path for f in changes_of(self.session, agent_id)]

    def start(self) -> None:
        """Follow the conversation's events and start sending them."""
        self._title = self.session.title
        self._unsubscribe = self.session.subscribe(self._on_event)
        if self.approvals is not None:  # the editor is someone to ask
            self._unanswer = self.session.on_approval(self._on_approval)
        self._pump = asyncio.create_task(self._run(), name=f"acp-pump-{self.id}")

    async def replay(self) -> None:
        """Send the conversation's history (``session/load``)."""
        session = self.session
        rows = await asyncio.to_thread(session.subagents)
        updates = replay(
            list(session.conversation.messages),
            workspace=session.workspace,
            language=session.settings.language,
            subagents=rows,
        )
        for update in updates:
            await self._send(self.id, update)

    async def detach(self) -> None:
        """Stop following the events (the pump sends what it has first)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._unanswer is not None:
            self._unanswer()
            self._unanswer = None
        if self._pump is not None:
            self._queue.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._pump, 5)
            self._pump = None
        if self.approvals is not None:
            self.approvals.close()

    @property
    def dormant(self) -> bool:
        """True when its agentkit session was closed (it opens again when used)."""
        return self.session.closed

    async def wake(self) -> None:
        """Open the conversation again if it was closed to make room.

        Raises RequestError when it cannot be opened (gone, taken, no room)."""
        if not self.session.closed:
            return
        await self.detach()
        try:
            self.session = await asyncio.to_thread(
                self.workspace.open, self.id, settings=self.settings
            )
        except (FileNotFoundError, ConfigurationError, OSError) as exc:
            raise RequestError(
                -32603, f"conversation {self.id} cannot be opened again: {exc}"
            ) from None
        self.start()

    # --------------------------------------------------------------- events
    def _on_event(self, event: Any) -> None:
        # The publishing thread, under the conversation's event lock: read, hand on.
        captured = self.mapper.capture(event)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
            self._loop.call_soon_threadsafe(self._queue.put_nowait, captured)

    def _on_approval(self, row: dict[str, Any]) -> None:
        # The asking thread: queue it behind the updates published before it; the
        # editor answers later (Session.approve), so nothing is decided here.
        with contextlib.suppress(RuntimeError):  # the loop is gone: it stays pending
            self._loop.call_soon_threadsafe(self._queue.put_nowait, _Ask(row))

    async def _run(self) -> None:
        while (item := await self._queue.get()) is not None:
            if isinstance(item, asyncio.Future):  # a flush mark: everything before is out
                if not item.done():
                    item.set_result(None)
                continue
            if isinstance(item, _Ask):
                if self.approvals is not None:
                    self.approvals.ask(item.row)  # a task of its own: the pump goes on
                continue
            if self.approvals is not None and isinstance(item.event, _SETTLED_EVENTS):
                self.approvals.settled(item.event.request_id)
            try:
                for update in self.mapper.updates(item, prompting=self.prompting):
                    await self._send(self.id, update)
                if isinstance(item.event, ev.RoundFinished):
                    await self._send_title()
                elif self.children is not None and isinstance(item.event, _SUBAGENT_EVENTS):
                    task = self.mapper.task_of(item.event.info.get("agent_id"))
                    await self.children.on_event(item.event, task)
            except ConnectionError:
                return  # the editor has gone; the connection ends everything
            except Exception:
                log.exception("acp: an update for %s could not be sent", self.id)

    async def _send_title(self) -> None:
        title = self.session.title
        if title and title != self._title:
            self._title = title
            await self._send(
                self.id,
                SessionInfoUpdate(
                    session_update="session_info_update",
                    title=title,
                    updated_at=self.session.conversation.updated_at or None,
                ),
            )

    async def flush(self) -> None:
        """Return once every event published before the call has been sent."""
        mark: asyncio.Future[None] = self._loop.create_future()
        self._queue.put_nowait(mark)
        if self._pump is not None and not self._pump.done():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(mark), 10)

    # -------------------------------------------------------------- prompts
    async def prompt(self, blocks: list[Any]) -> StopReason:
        """Run one editor prompt; returns the stop reason (see :func:`stop_reason`).

        Raises:
            RequestError: a prompt already runs (-32600), the prompt cannot be taken
                (-32602: an image, an empty or oversized message), the round failed.
        """
        self.last_used = self._loop.time()
        if self.prompting:
            if not self._cancelled:
                raise RequestError(
                    -32600,
                    f"session {self.id} is already answering a prompt: wait for its answer, "
                    "or send session/cancel first",
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), CANCEL_SECONDS)
            if self.prompting:
                raise RequestError(
                    -32600, f"session {self.id} is still ending its cancelled prompt"
                )
        try:
            text = prompt_text(blocks, self.session.workspace)
        except PromptError as exc:
            raise RequestError(-32602, str(exc)) from None
        await self.wake()
        self.prompting, self._cancelled = True, False
        self._turn += 1
        self._done.clear()
        try:
            if self._notices:
                told, self._notices = "\n\n".join(f"⚠ {t}" for t in self._notices), []
                await self._send(self.id, message_chunk(told + "\n\n"))
            future = self._post(text)
            if self.children is not None:  # the first message settled the language
                self.children.language = self.session.settings.language
            try:
                result = await asyncio.wrap_future(future)
            except Cancelled:
                return "cancelled"  # the conversation closed under the prompt
            await self.flush()
            return stop_reason(result)
        finally:
            self.prompting = False
            self._done.set()
            self.last_used = self._loop.time()

    def _post(self, text: str) -> Future[Any]:
        self.mapper.expect_echo(text)
        try:
            return self.session.post(text)
        except (ConfigurationError, Cancelled) as exc:
            raise RequestError(-32602, str(exc)) from None

    async def cancel(self) -> None:
        """``session/cancel``: stop the round answering the prompt (see the module
        docstring); without a prompt, stop whatever round runs."""
        if not self.prompting:
            self.session.cancel()
            return
        self._cancelled = True
        turn = self._turn  # a prompt sent after this one must not be cancelled too
        deadline = self._loop.time() + CANCEL_SECONDS
        while self.prompting and self._turn == turn and self._loop.time() < deadline:
            self.session.cancel()  # no round yet: asked again until one takes the message
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), 0.02)
