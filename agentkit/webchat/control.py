"""The web chat's control-plane routes (docs/control-plane.md §5, docs/web-api.md).

One job: answer a sub-agent's question, message a running one, continue an ended one
(the Session's calls, agentkit.chat.control: refused with the control plane off), and
the conversation's tokens and cost. The POST handlers run the session calls in the
thread pool (a call waits for the worker's receipt, milliseconds).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentkit.conversation import known_cost, usage_total
from agentkit.webchat.api import _find_row, _parsed, _session, _threaded, _view
from agentkit.webchat.bodies import ContinueBody, ControlText
from agentkit.webchat.text import JSONResponse

__all__ = ["control_routes"]


async def _control(request: Request, key: str, act: Any) -> Response:
    """A control-plane POST (docs/control-plane.md): ``{key: text}`` (a ControlText or
    a ContinueBody) for the path's sub-agent; 200 with the tool's JSON when it worked,
    409 with it when refused; 400 naming the field for a bad body."""
    if key == "task":
        text = (await _parsed(request, ContinueBody)).task
    else:
        text = (await _parsed(request, ControlText)).text
    session = await _threaded(lambda: _session(request))
    row = _find_row(session.subagents(), request.path_params["aid"])
    result = await _threaded(lambda: act(session, int(row["agent_id"]), text))
    return JSONResponse(result, status_code=200 if result.get("success") else 409)


async def answer_subagent(request: Request) -> Response:
    return await _control(request, "text", lambda s, i, t: s.answer_subagent(i, t))


async def message_subagent(request: Request) -> Response:
    return await _control(request, "text", lambda s, i, t: s.message_subagent(i, t))


async def continue_subagent(request: Request) -> Response:
    return await _control(request, "task", lambda s, i, t: s.continue_subagent(i, t))


def usage(request: Request) -> Response:
    """Tokens and US dollars: the main agent's, each sub-agent's, and the conversation's
    (``cost_usd`` None when a model had no known price)."""
    view = _view(request)
    stats = view.conversation.stats
    main = usage_total(stats, [])
    rows: list[dict[str, Any]] = []
    for row in view.rows:
        raw, cost = row.get("tokens"), row.get("cost_usd")
        used = raw if isinstance(raw, int) else 0
        priced = known_cost(cost)  # a NaN an older version saved: unknown
        rows.append({"agent_id": row.get("agent_id"), "tokens": used, "cost_usd": priced})
    total = usage_total(stats, view.rows)
    return JSONResponse({"main": main, "subagents": rows, "total": total})


def control_routes() -> list[BaseRoute]:
    """The routes, under the paths of agentkit.webchat.api (``/api/conversations/{cid}``
    and its ``/subagents/{aid}``)."""
    conversation = "/api/conversations/{cid}"
    subagent = conversation + "/subagents/{aid}"
    return [
        Route(subagent + "/answer", answer_subagent, methods=["POST"]),
        Route(subagent + "/message", message_subagent, methods=["POST"]),
        Route(subagent + "/continue", continue_subagent, methods=["POST"]),
        Route(conversation + "/usage", usage, methods=["GET"]),
    ]
