"""The web chat's JSON API routes (documented in docs/web-api.md).

One job: map HTTP requests onto the session API (agentkit.chat.Workspace and
Session). Handlers that may block (opening or leaving a conversation ends its
sub-agents, reading files) are plain functions, which Starlette runs in its thread
pool; none waits for a round: sending a message answers 202 at once and the answer
comes on the event stream.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentkit.chat import Session, Workspace
from agentkit.chat.store import clean_title
from agentkit.errors import ConfigurationError
from agentkit.web import files
from agentkit.web.stream import event_stream
from agentkit.web.text import SURROGATE, JSONResponse

__all__ = ["api_routes"]

MAX_BODY = 1_000_000
"""Largest JSON body accepted (bytes)."""
_NOTIFICATION = re.compile(r"^(子智能体\s*\d+\s*\(|Sub-agent \d+ \()")


class ApiError(Exception):
    """An error answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _ws(request: Request) -> Workspace:
    workspace: Workspace = request.app.state.agentkit.workspace
    return workspace


def _body(request: Request, raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BODY:
        raise ApiError(413, "the request body is too large")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError:  # UnicodeDecodeError included
        raise ApiError(400, "the body is not valid JSON") from None
    except RecursionError:
        raise ApiError(400, "the body is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    _refuse_surrogates(data)
    return data


def _refuse_surrogates(data: Any) -> None:
    """ApiError 400 when any text in ``data`` (keys included) holds a lone surrogate:
    it cannot be saved as UTF-8, and would break every later read of the conversation.
    Walked without recursion (the body may be deeply nested)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and SURROGATE.search(item):
            raise ApiError(
                400, "the text holds a lone surrogate (e.g. \\ud800), which is not valid Unicode"
            )


async def _json(request: Request) -> dict[str, Any]:
    return _body(request, await request.body())


def _session(request: Request, cid: str | None = None) -> Session:
    """The live session of the path's conversation, opened if needed."""
    cid = cid or request.path_params["cid"]
    try:
        return _ws(request).open(cid)
    except FileNotFoundError:
        raise ApiError(404, f"no conversation {cid}") from None
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None


def _info(session: Session) -> dict[str, Any]:
    rows = session.subagents()
    conv = session.conversation
    return {
        "id": session.id,
        "title": session.title or session.id,
        "state": session.state,
        "created_at": conv.created_at,
        "updated_at": conv.updated_at,
        "subagents": len(rows),
        "subagents_running": sum(1 for r in rows if r.get("status") == "running"),
        "turns": conv.stats.turns,
    }


def _messages(session: Session) -> list[dict[str, Any]]:
    """The conversation's messages, each with ``kind``: system (the prompt and notes),
    user, assistant, tool or notification (a sub-agent's completion announced to the
    model with the spec §3 templates, as a user or a system message)."""
    out = []
    for message in session.conversation.messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        kind = role
        if role in ("system", "user") and _NOTIFICATION.match(text):
            kind = "notification"
        out.append({**message, "kind": kind})
    return out


def _detail(session: Session) -> dict[str, Any]:
    last_seq = session.bus.last_seq  # taken first: the stream resumes after it
    return {
        **_info(session),
        "last_seq": last_seq,
        "messages": _messages(session),
        "subagent_rows": session.subagents(),
        "stats": session.conversation.stats.to_dict(),
    }


# ------------------------------------------------------------------ handlers
def list_conversations(request: Request) -> Response:
    return JSONResponse({"conversations": [dataclasses.asdict(i) for i in _ws(request).list()]})


async def create_conversation(request: Request) -> Response:
    data = await _json(request)
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise ApiError(400, "title must be a string")
    session = await _threaded(lambda: _ws(request).create(title or None))
    return JSONResponse(_detail(session), status_code=201)


def get_conversation(request: Request) -> Response:
    return JSONResponse(_detail(_session(request)))


async def rename_conversation(request: Request) -> Response:
    data = await _json(request)
    title = data.get("title")
    if not isinstance(title, str):
        raise ApiError(400, "give a title (a string)")
    cid = request.path_params["cid"]
    try:
        await _threaded(lambda: _ws(request).rename(cid, title))
    except FileNotFoundError:
        raise ApiError(404, f"no conversation {cid}") from None
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    return JSONResponse({"id": cid, "title": clean_title(title)})


def delete_conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    try:
        _ws(request).delete(cid)
    except FileNotFoundError:
        raise ApiError(404, f"no conversation {cid}") from None
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    return JSONResponse({"deleted": cid})


async def switch(request: Request) -> Response:
    """Leave ``leaving`` (its sub-agents end: spec §8.5) and open ``to`` (None: new)."""
    data = await _json(request)
    leaving, to = data.get("leaving"), data.get("to")
    if not all(v is None or isinstance(v, str) for v in (leaving, to)):
        raise ApiError(400, "leaving and to are conversation ids or null")
    try:
        session = await _threaded(lambda: _ws(request).switch(leaving, to))
    except FileNotFoundError:
        raise ApiError(404, f"no conversation {to}") from None
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    return JSONResponse(_detail(session))


async def post_message(request: Request) -> Response:
    data = await _json(request)
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "the message is empty")
    session = await _threaded(lambda: _session(request))
    try:
        future = session.post(text)
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    except Exception as exc:  # Cancelled: the conversation was closed meanwhile
        raise ApiError(409, f"the conversation is closed: {exc}") from None
    future.add_done_callback(lambda f: f.exception())  # answered on the stream
    return JSONResponse(
        {"accepted": True, "state": session.state, "last_seq": session.bus.last_seq},
        status_code=202,
    )


def cancel(request: Request) -> Response:
    return JSONResponse({"cancelled": _session(request).cancel()})


def list_subagents(request: Request) -> Response:
    return JSONResponse({"subagents": _session(request).subagents()})


def _row(request: Request) -> tuple[Session, dict[str, Any]]:
    session = _session(request)
    raw = request.path_params["aid"]
    for row in session.subagents():
        if str(row.get("agent_id")) == raw:
            return session, row
    raise ApiError(404, f"no sub-agent {raw} in this conversation")


def terminate(request: Request) -> Response:
    session, row = _row(request)
    result = session.terminate_subagent(int(row["agent_id"]))
    return JSONResponse(result, status_code=200 if result.get("success") else 409)


def subagent_transcript(request: Request) -> Response:
    session, row = _row(request)
    return JSONResponse(
        files.transcript(session.workspace, session.settings, row.get("deliverables_dir"))
    )


def subagent_files(request: Request) -> Response:
    session, row = _row(request)
    return JSONResponse(
        files.list_files(session.workspace, session.settings, row.get("deliverables_dir"))
    )


def subagent_file(request: Request) -> Response:
    session, row = _row(request)
    path = request.path_params["path"]
    return JSONResponse(
        files.read_file(session.workspace, session.settings, row.get("deliverables_dir"), path)
    )


async def events(request: Request) -> Response:
    session = await _threaded(lambda: _session(request))
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
        Route(c, rename_conversation, methods=["PATCH"]),
        Route(c, delete_conversation, methods=["DELETE"]),
        Route("/api/switch", switch, methods=["POST"]),
        Route(c + "/messages", post_message, methods=["POST"]),
        Route(c + "/cancel", cancel, methods=["POST"]),
        Route(c + "/events", events, methods=["GET"]),
        Route(c + "/subagents", list_subagents, methods=["GET"]),
        Route(a + "/terminate", terminate, methods=["POST"]),
        Route(a + "/transcript", subagent_transcript, methods=["GET"]),
        Route(a + "/files", subagent_files, methods=["GET"]),
        Route(a + "/files/{path:path}", subagent_file, methods=["GET"]),
    ]


async def api_error(request: Request, exc: Exception) -> Response:
    """Exception handler: ApiError and files.ViewError as ``{"error": ...}``."""
    status = getattr(exc, "status", 500)
    return JSONResponse({"error": str(exc)}, status_code=status)
