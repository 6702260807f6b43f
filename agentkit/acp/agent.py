"""The ACP agent: the methods an editor calls, each answered from agentkit's session API.

One job: the protocol's agent side (``initialize``, ``session/new``, ``session/load``,
``session/list``, ``session/set_mode``, ``session/prompt``, ``session/cancel``),
mapped onto :class:`agentkit.chat.Workspace` (one per folder the editor opens: the
session's ``cwd`` is the workspace) and :class:`agentkit.acp.session.AcpSession`
(one per conversation). It owns no agent logic (docs/architecture.md §10).

:class:`AcpAgent` is a plain class, not a subclass of the library's ``acp.Agent``
Protocol: a method it lacks is then answered ``-32601 Method not found`` by the
library, where the Protocol's stubs would answer ``null`` (``authenticate``,
``session/set_config_option``, the unstable ``session/close`` and ``fork``).
Blocking work (opening a conversation, closing workspaces) runs in worker threads so
the event loop keeps reading the editor.

Errors (JSON-RPC): an unknown session id is ``-32002`` naming it; a cwd that is not
an absolute folder, a ``sessionId`` to load that is no conversation id (a path), a
bad mode or MCP server, an image prompt, text with a lone surrogate are ``-32602``; a
conversation open in another process, a full workspace are ``-32603`` with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import update_current_mode
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionModeResponse,
)

from agentkit.acp.children import SendRaw
from agentkit.acp.options import mode_state, session_settings, with_mode
from agentkit.acp.session import AcpSession
from agentkit.errors import ConfigurationError, WorkspaceFull
from agentkit.language import language_meta
from agentkit.settings import Settings

log = logging.getLogger("agentkit.acp")

__all__ = ["PAGE_SIZE", "AcpAgent"]

PAGE_SIZE = 100
"""Sessions per ``session/list`` page."""


class AcpAgent:
    """agentkit as an ACP agent (see the module docstring).

    Args:
        settings: the agent's Settings (from ``agentkit acp``'s flags and the
            environment); each session starts from them.
        client_capabilities: returns the ``clientCapabilities`` object of the
            editor's ``initialize`` as sent (the library's models drop fields they
            do not know, such as ``subagents``), or None before it.
        send_raw: ``await send_raw(method, params)`` sends a notification the library
            has no model for (the sub-agent sessions extension: agentkit.acp.children).
        refusal: why no session can start (no model, no key), in words the editor
            shows: ``initialize`` is answered, ``session/new`` and ``session/load``
            are refused with it (``-32603``); None: sessions start.
        workspace: the workspace of every session, whatever its ``cwd`` (``agentkit
            acp -w``); None: each session's ``cwd``.
        ask: False (``--yes``): the editor is not asked about tool calls;
            ``approvals_default`` settles them.
    """

    def __init__(
        self,
        settings: Settings,
        client_capabilities: Callable[[], Any] | None = None,
        send_raw: SendRaw | None = None,
        *,
        refusal: str | None = None,
        workspace: Path | None = None,
        ask: bool = True,
    ) -> None:
        self.settings = settings
        self.refusal = refusal
        self.workspace = workspace
        self.ask_editor = ask
        self._raw_capabilities = client_capabilities or (lambda: None)
        self._send_raw = send_raw
        self._conn: Any = None
        self._workspaces: dict[Path, Any] = {}
        self.sessions: dict[str, AcpSession] = {}
        self._opening = asyncio.Lock()
        self._initialized = False  # the editor's capabilities are known only after it
        self._closing = False  # shutdown has begun: no session opens any more

    def on_connect(self, conn: Any) -> None:
        """Called by the library with the connection (the client's methods)."""
        self._conn = conn

    async def _send(self, session_id: str, update: Any) -> None:
        await self._conn.session_update(session_id, update)

    async def _ask(self, session_id: str, tool_call: Any, options: list[Any]) -> Any:
        """One ``session/request_permission`` (docs/acp.md §8); the editor's response."""
        return await self._conn.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )

    # ------------------------------------------------------------ initialize
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """``initialize``: protocol version 1 and what agentkit really supports:
        loading sessions, listing them, text with resource links and embedded
        text resources, MCP over stdio and streamable HTTP (not SSE). No
        authentication: the endpoint and key come from agentkit's settings."""
        from agentkit import __version__

        log.info("acp: initialize from %s (protocol %s)", client_info, protocol_version)
        self._initialized = True
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="agentkit", title="agentkit", version=__version__),
            auth_methods=[],
        )

    # -------------------------------------------------------------- sessions
    def _check_initialized(self) -> None:
        """Refuse a session request before ``initialize``: what the editor can do
        (read files, run terminals) is not known yet."""
        if not self._initialized:
            raise RequestError(
                -32600, "initialize first: send initialize before any session/ request"
            )

    def _workspace(self, cwd: str) -> Any:
        from agentkit.chat import Workspace

        self._check_initialized()
        if self.refusal is not None:
            raise RequestError(-32603, self.refusal)
        path = self.workspace or Path(cwd)
        if not path.is_absolute() or not path.is_dir():
            raise RequestError(-32602, f"cwd must be an absolute path to a folder, got {cwd!r}")
        key = path.resolve()
        if key not in self._workspaces:
            self._workspaces[key] = Workspace(key, self.settings)
        return self._workspaces[key]

    def _settings(self, mcp_servers: list[Any] | None) -> Settings:
        try:
            return session_settings(self.settings, mcp_servers)
        except ValueError as exc:
            raise RequestError(-32602, str(exc)) from None

    async def _open(self, workspace: Any, settings: Settings, conversation_id: str | None) -> Any:
        """A live session of ``workspace``: new, or ``conversation_id``; when the
        workspace is full, the least recently used idle ACP session is put to sleep
        once to make room. Refused once shutdown has begun (the editor has left)."""
        if self._closing:
            raise RequestError(-32603, "agentkit acp is closing: the editor's input ended")
        for attempt in range(2):
            try:
                if conversation_id is None:
                    return await asyncio.to_thread(workspace.create, settings=settings)
                return await asyncio.to_thread(workspace.open, conversation_id, settings=settings)
            except WorkspaceFull as exc:
                if attempt or not await self._make_room(workspace):
                    raise RequestError(-32603, str(exc)) from None
            except FileNotFoundError:
                raise RequestError(
                    -32002,
                    f"no conversation {conversation_id!r} in {workspace.path}",
                    {"sessionId": conversation_id},
                ) from None
            except (ConfigurationError, OSError) as exc:
                raise RequestError(-32603, str(exc)) from None
        raise AssertionError("unreachable")

    async def _make_room(self, workspace: Any) -> bool:
        idle = [
            s
            for s in self.sessions.values()
            if s.workspace is workspace and not s.prompting and not s.dormant
        ]
        for candidate in sorted(idle, key=lambda s: s.last_used):
            if candidate.session.state == "idle":
                await candidate.detach()
                await asyncio.to_thread(workspace.close_session, candidate.id)
                return True
        return False

    def _children_wanted(self) -> bool:
        caps = self._raw_capabilities()
        return isinstance(caps, dict) and isinstance(caps.get("subagents"), dict)

    def _track(self, session: Any, workspace: Any, settings: Settings) -> AcpSession:
        send_raw = self._send_raw if self._children_wanted() else None
        tracked = self.sessions[session.id] = AcpSession(
            session, workspace, settings, self._send, send_raw,
            ask=self._ask if self.ask_editor else None,
        )  # fmt: skip
        tracked.start()
        return tracked

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        """``session/new``: a new conversation in the workspace ``cwd``, with the
        editor's MCP servers joined to agentkit's own."""
        workspace = self._workspace(cwd)
        settings = self._settings(mcp_servers)
        async with self._opening:
            session = await self._open(workspace, settings, None)
            self._track(session, workspace, settings)
        return NewSessionResponse(
            session_id=session.id,
            modes=mode_state(session.settings),
            field_meta=language_meta(session.settings.language),
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        """``session/load``: open conversation ``session_id`` of the workspace
        ``cwd`` and replay its history as updates before answering."""
        workspace = self._workspace(cwd)
        settings = self._settings(mcp_servers)
        from agentkit.chat.store import conversation_path

        try:
            conversation_path(workspace.path, session_id)  # a plain name, nothing more
        except ConfigurationError as exc:
            raise RequestError(-32602, f"sessionId: {exc}") from None
        async with self._opening:
            known = self.sessions.get(session_id)
            if known is not None and known.workspace is workspace:
                await known.wake()
                acp_session = known
            else:
                session = await self._open(workspace, settings, session_id)
                acp_session = self._track(session, workspace, settings)
        await acp_session.replay()
        return LoadSessionResponse(
            modes=mode_state(acp_session.session.settings),
            field_meta=language_meta(acp_session.session.settings.language),
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """``session/list``: the conversations of ``cwd`` (without one: of the workspace
        ``-w`` names, or of every workspace this agent has opened), most recently
        updated first, :data:`PAGE_SIZE` a page."""
        self._check_initialized()
        if cwd is None and self.workspace is not None:
            cwd = str(self.workspace)  # every session's workspace: its list is the list
        chosen = [self._workspace(cwd)] if cwd is not None else None
        workspaces = chosen or list(self._workspaces.values())
        try:
            start = int(cursor) if cursor else 0
        except ValueError:
            raise RequestError(-32602, f"cursor {cursor!r} is not one this agent gave") from None
        rows: list[SessionInfo] = []
        for workspace in workspaces:
            infos = await asyncio.to_thread(workspace.list)
            rows += [
                SessionInfo(
                    session_id=info.id,
                    cwd=str(workspace.path),
                    title=info.title if info.title and info.title != info.id else None,
                    updated_at=info.updated_at or None,
                )
                for info in infos
                if info.state != "damaged"
            ]
        rows.sort(key=lambda r: r.updated_at or "", reverse=True)
        page = rows[start : start + PAGE_SIZE]
        more = start + PAGE_SIZE < len(rows)
        return ListSessionsResponse(
            sessions=page, next_cursor=str(start + PAGE_SIZE) if more else None
        )

    def _get(self, session_id: str) -> AcpSession:
        found = self.sessions.get(session_id)
        if found is None:
            raise RequestError(
                -32002,
                f"unknown session {session_id!r}: create one with session/new or open a "
                "saved one with session/load",
                {"sessionId": session_id},
            )
        return found

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        """``session/set_mode``: the command sandbox mode (agentkit.acp.options)."""
        acp_session = self._get(session_id)
        try:
            acp_session.settings = with_mode(acp_session.settings, mode_id)
        except ValueError as exc:
            raise RequestError(-32602, str(exc)) from None
        await acp_session.wake()
        session = acp_session.session
        session.settings = with_mode(session.settings, mode_id)
        manager = session.current_manager()
        if manager is not None:  # sub-agents created from now on
            manager.settings = session.settings
        await self._send(session_id, update_current_mode(mode_id))
        return SetSessionModeResponse()

    # --------------------------------------------------------------- prompts
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        """``session/prompt``: see agentkit.acp.session.AcpSession.prompt."""
        tracked = self._get(session_id)
        stop = await tracked.prompt(prompt)  # the first prompt settles an auto language
        return PromptResponse(
            stop_reason=stop, field_meta=language_meta(tracked.session.settings.language)
        )

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """``session/cancel`` (a notification: an unknown id is only logged). The id of
        a sub-agent's child session terminates that sub-agent (agentkit.acp.children)."""
        found = self.sessions.get(session_id)
        if found is not None:
            await found.cancel()
            return
        for parent in list(self.sessions.values()):  # a sub-agent's child session
            agent_id = parent.children.agent_of(session_id) if parent.children else None
            if agent_id is not None:
                await asyncio.to_thread(parent.session.terminate_subagent, agent_id)
                return
        log.info("acp: cancel for unknown session %r", session_id)

    # ----------------------------------------------------------------- close
    async def shutdown(self) -> None:
        """Close every conversation (their sub-agents end, they are saved). A session
        being opened is let finish first (its request answered, then closed with the
        rest); one asked for from now on is refused."""
        self._closing = True
        async with self._opening:
            pass
        for acp_session in list(self.sessions.values()):
            await acp_session.detach()
        workspaces, self._workspaces = list(self._workspaces.values()), {}
        await asyncio.gather(*(asyncio.to_thread(w.close) for w in workspaces))
