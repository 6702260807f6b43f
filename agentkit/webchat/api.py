"""The web chat's JSON API routes (documented in docs/web-api.md).

One job: map HTTP requests onto the session API (agentkit.chat.Workspace and
Session). Handlers that may block (opening or leaving a conversation ends its
sub-agents, reading files) are plain functions, which Starlette runs in its thread
pool; none waits for a round: sending a message answers 202 at once and the answer
comes on the event stream.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentkit.chat import Session, Workspace
from agentkit.chat.store import clean_title, default_title, load_conversation
from agentkit.configfile import StrictModel
from agentkit.conversation import Conversation, ConversationState
from agentkit.errors import Cancelled, ConfigurationError, WorkspaceFull
from agentkit.jsonfile import has_lone_surrogate, loads_strict
from agentkit.settings import Settings
from agentkit.subagent.sweep import conversation_held, live_rows
from agentkit.tools.registry import ToolRegistry
from agentkit.webchat import approvals, files
from agentkit.webchat.bodies import (
    ApiError,
    MessageBody,
    NewConversation,
    RenameBody,
    SwitchBody,
    parse_body,
)
from agentkit.webchat.stream import event_stream
from agentkit.webchat.text import JSONResponse
from agentkit.webchat.views import messages_view, round_ends_view, transcript_view, usage_view

__all__ = ["api_routes"]

MAX_BODY = 1_000_000
"""Largest JSON body accepted (bytes): a larger ``Content-Length`` is refused before
anything is read, and a body without one is refused as soon as it grows past it."""


BodyT = TypeVar("BodyT", bound=StrictModel)


@contextmanager
def _conversation_errors(cid: str | None) -> Iterator[None]:
    """Answer a missing conversation ``cid`` with 404, a bad id or file (a
    ConfigurationError) with 400 and its message."""
    try:
        yield
    except FileNotFoundError:
        raise ApiError(404, f"no conversation {cid}") from None
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None


def _ws(request: Request) -> Workspace:
    workspace: Workspace = request.app.state.agentkit.workspace
    return workspace


def _body(request: Request, raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        data = loads_strict(raw)
    except ValueError:  # UnicodeDecodeError and NaN included
        raise ApiError(400, "the body is not valid JSON") from None
    except RecursionError:
        raise ApiError(400, "the body is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    _refuse_surrogates(data)
    return data


def _refuse_surrogates(data: Any) -> None:
    """ApiError 400 when any text in ``data`` (keys included) holds a lone surrogate:
    it cannot be saved as UTF-8, and would break every later read of the conversation."""
    if has_lone_surrogate(data):
        raise ApiError(
            400, "the text holds a lone surrogate (e.g. \\ud800), which is not valid Unicode"
        )


async def _json(request: Request) -> dict[str, Any]:
    return _body(request, await _read_body(request))


async def _parsed(request: Request, model: type[BodyT]) -> BodyT:
    """The request's body as a ``model`` (ApiError 400 naming the field at fault)."""
    return parse_body(model, await _json(request))


async def _read_body(request: Request) -> bytes:
    """The body, at most MAX_BODY bytes (ApiError 413 past it: by ``Content-Length``
    before reading, else as soon as the bytes read pass it)."""
    too_large = ApiError(413, f"the request body is too large (over {MAX_BODY} bytes)")
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "the client left before its request was read") from None
    return b"".join(chunks)


def _session(request: Request, cid: str | None = None) -> Session:
    """The live session of the path's conversation, opened if needed."""
    cid = cid or request.path_params["cid"]
    with _conversation_errors(cid):
        return _ws(request).open(cid)


@dataclasses.dataclass
class _View:
    """What the read-only (GET) routes show: the live session when the conversation
    is open, else its saved file, read without opening it (opening claims the
    conversation and may note what was stopped: a GET must change nothing)."""

    last_seq: int
    id: str
    title: str
    state: ConversationState
    conversation: Conversation
    rows: list[dict[str, Any]]
    workspace: Path
    settings: Settings
    queued: list[str]
    registry: ToolRegistry | None = None
    session: Session | None = None


def _view(request: Request) -> _View:
    cid = request.path_params["cid"]
    workspace = _ws(request)
    session = workspace.get(cid)
    if session is not None:
        return _live(session)
    with _conversation_errors(cid):
        conv = load_conversation(workspace.path, cid)
    title = conv.title or default_title(conv.messages) or conv.id
    # As their records say now (a killed process's sub-agents: "ended (process gone)").
    held = conversation_held(workspace.path, conv.id)
    rows = live_rows(workspace.path, conv.subagents, owner_alive=held)
    # Its next opening numbers events on from the saved last one (0 when unknown).
    seq = conv.last_event_seq or 0
    settings = workspace.settings
    if settings.language == "auto" and conv.language:  # shown in the language it settled
        settings = settings.model_copy(update={"language": conv.language})
    return _View(seq, conv.id, title, "idle", conv, rows, workspace.path, settings, conv.queued)


def _info(view: _View) -> dict[str, Any]:
    conv = view.conversation
    return {
        "id": view.id,
        "title": view.title or view.id,
        "state": view.state,
        "created_at": conv.created_at,
        "updated_at": conv.updated_at,
        "subagents": len(view.rows),
        "subagents_running": sum(1 for r in view.rows if r.get("status") == "running"),
        "turns": conv.stats.turns,
    }


def _summary(view: _View) -> dict[str, Any]:
    return {
        **_info(view),
        "stats": view.conversation.stats.to_dict(),
        "usage": usage_view(view.conversation, view.rows),
    }


def _detail(view: _View) -> dict[str, Any]:
    return {
        **_summary(view),
        "last_seq": view.last_seq,
        "messages": messages_view(view.conversation, view.settings, view.registry),
        "queued": view.queued,
        "round_ends": round_ends_view(view.conversation, view.settings),
        "subagent_rows": view.rows,
        "approvals": approvals.pending(view.session, view.conversation),
        # zh or en once its first text settled it (agentkit.language); auto before
        "language": view.conversation.language or view.settings.language,
    }


def _live(session: Session) -> _View:
    """The view of an open session (last_seq taken first: the stream resumes after it)."""
    return _View(
        session.bus.last_seq, session.id, session.title, session.state,
        session.conversation, session.subagents(), session.workspace, session.settings,
        session.inbox.unsaved(list(session.conversation.messages)),
        session.registry,
        session,
    )  # fmt: skip


# ------------------------------------------------------------------ handlers
def list_conversations(request: Request) -> Response:
    return JSONResponse({"conversations": [dataclasses.asdict(i) for i in _ws(request).list()]})


async def create_conversation(request: Request) -> Response:
    title = (await _parsed(request, NewConversation)).title
    session = await _threaded(lambda: _ws(request).create(title or None))
    return JSONResponse(_detail(_live(session)), status_code=201)


def get_conversation(request: Request) -> Response:
    return JSONResponse(_detail(_view(request)))


def conversation_summary(request: Request) -> Response:
    """The conversation without its messages: title, state, stats and usage."""
    return JSONResponse(_summary(_view(request)))


async def rename_conversation(request: Request) -> Response:
    title = (await _parsed(request, RenameBody)).title
    cid = request.path_params["cid"]
    with _conversation_errors(cid):
        await _threaded(lambda: _ws(request).rename(cid, title))
    return JSONResponse({"id": cid, "title": clean_title(title)})


async def switch(request: Request) -> Response:
    """Leave ``leaving`` (its sub-agents end: spec §8.5) and open ``to`` (None: new)."""
    body = await _parsed(request, SwitchBody)
    leaving, to = body.leaving, body.to
    with _conversation_errors(to):
        session = await _threaded(lambda: _ws(request).switch(leaving, to))
    return JSONResponse(_detail(_live(session)))


async def post_message(request: Request) -> Response:
    text = (await _parsed(request, MessageBody)).text
    session = await _threaded(lambda: _session(request))
    try:
        # In the thread pool: post returns once the message is saved (a disk write).
        session, future = await _threaded(lambda: _post(request, session, text))
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    except Cancelled as exc:  # closed again meanwhile
        raise ApiError(409, f"the conversation is closed: {exc}") from None
    future.add_done_callback(lambda f: f.exception())  # answered on the stream
    return JSONResponse(
        {
            "accepted": True,
            "state": session.state,
            "last_seq": session.bus.last_seq,
            "language": session.settings.language,  # settled by a first message
        },
        status_code=202,
    )


def _post(request: Request, session: Session, text: str) -> tuple[Session, Any]:
    """``session.post(text)``; when the session was closed meanwhile (e.g. to make
    room: agentkit.chat.workspace), the conversation is opened again and the message
    posted there. Returns the session used and the future."""
    try:
        return session, session.post(text)
    except Cancelled:
        session = _session(request)
        return session, session.post(text)


async def answer_approval(request: Request) -> Response:
    data = await _json(request)
    session = await _threaded(lambda: _session(request))
    return await _threaded(lambda: approvals.answer(request, session, data))


def cancel(request: Request) -> Response:
    return JSONResponse({"cancelled": _session(request).cancel()})


def list_subagents(request: Request) -> Response:
    return JSONResponse({"subagents": _view(request).rows})


def _find_row(rows: list[dict[str, Any]], raw: str) -> dict[str, Any]:
    for row in rows:
        if str(row.get("agent_id")) == raw:
            return row
    raise ApiError(404, f"no sub-agent {raw} in this conversation")


def _row(request: Request) -> tuple[_View, dict[str, Any]]:
    view = _view(request)
    return view, _find_row(view.rows, request.path_params["aid"])


def terminate(request: Request) -> Response:
    session = _session(request)
    row = _find_row(session.subagents(), request.path_params["aid"])
    result = session.terminate_subagent(int(row["agent_id"]))
    return JSONResponse(result, status_code=200 if result.get("success") else 409)


def subagent_transcript(request: Request) -> Response:
    view, row = _row(request)
    folder, sub_id = row.get("deliverables_dir"), row.get("sub_conversation_id")
    record = files.transcript(view.workspace, view.settings, folder, sub_id)
    language = view.conversation.language or view.settings.language
    return JSONResponse(transcript_view(record, language, view.registry))


def subagent_files(request: Request) -> Response:
    view, row = _row(request)
    return JSONResponse(
        files.list_files(view.workspace, view.settings, row.get("deliverables_dir"))
    )


def subagent_file(request: Request) -> Response:
    view, row = _row(request)
    path = request.path_params["path"]
    return JSONResponse(
        files.read_file(view.workspace, view.settings, row.get("deliverables_dir"), path)
    )


async def events(request: Request) -> Response:
    """The event stream of an open conversation (a GET opens nothing: the page opens
    it with POST /api/switch); 409 when it is not open, 404 when there is none.
    Runs on the event loop (the stream's fan-out lives there)."""
    session = _ws(request).get(request.path_params["cid"])
    if session is None:
        await _threaded(lambda: _view(request))  # 404 / 400 for a missing or bad one
        raise ApiError(409, "the conversation is not open: open it with POST /api/switch")
    return event_stream(session, request)


async def _threaded(fn: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn)


def api_routes() -> list[BaseRoute]:
    """The API's routes, under ``/api``."""
    c = "/api/conversations/{cid}"
    a = c + "/subagents/{aid}"
    return [
        Route("/api/conversations", list_conversations, methods=["GET"]),
        Route("/api/conversations", create_conversation, methods=["POST"]),
        Route(c, get_conversation, methods=["GET"]),
        Route(c + "/summary", conversation_summary, methods=["GET"]),
        Route(c, rename_conversation, methods=["PATCH"]),
        Route("/api/switch", switch, methods=["POST"]),
        Route(c + "/messages", post_message, methods=["POST"]),
        Route(c + "/cancel", cancel, methods=["POST"]),
        Route(c + "/approvals/{rid}", answer_approval, methods=["POST"]),
        Route(c + "/events", events, methods=["GET"]),
        Route(c + "/subagents", list_subagents, methods=["GET"]),
        Route(a + "/terminate", terminate, methods=["POST"]),
        Route(a + "/transcript", subagent_transcript, methods=["GET"]),
        Route(a + "/files", subagent_files, methods=["GET"]),
        Route(a + "/files/{path:path}", subagent_file, methods=["GET"]),
    ]


async def api_error(request: Request, exc: Exception) -> Response:
    """Exception handler: ApiError, files.ViewError and WorkspaceFull (503, with
    ``Retry-After``) as ``{"error": ...}``, with
    the workspace's absolute path shown relative (``.agentkit/...``, ``.``): the
    server's folders are none of a client's business."""
    status = 503 if isinstance(exc, WorkspaceFull) else getattr(exc, "status", 500)
    root = str(_ws(request).path)
    message = str(exc).replace(root + os.sep, "").replace(root, ".")
    headers = {"Retry-After": "5"} if status == 503 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)
