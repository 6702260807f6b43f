"""The web chat's routes for isolated sub-agents (docs/isolation.md, docs/web-api.md).

One job: an isolated sub-agent's changes and diff, its merge (or dry run) and its
discard, for the page's Changes tab (static/isolation.js). The work and the words are
agentkit.chat.isolation's; the routes run it in the thread pool (git, milliseconds
to seconds).

* ``GET .../subagents/{aid}/changes``: 200 :meth:`Review.to_dict` (files with their
  +/- counts and diff text, the capped ``cut``, ``merged``);
* ``POST .../subagents/{aid}/merge`` ``{"dry_run": false}``: 200 ``{"ok", "status",
  "report", "lines"}`` (``ok`` false with ``status: "conflicts"``: nothing was
  written; ``lines``: the report in words, one per file);
* ``POST .../subagents/{aid}/discard`` ``{"confirm": true}``: 200 ``{"discarded":
  true, "text"}``; a body without ``confirm: true`` is refused (400): it drops work.

A refusal (a shared sub-agent, one still running, dropped or merged already) is 409
``{"error", "reason"}`` in words; an unknown sub-agent 404; git failing 409 with
``reason: "failed"`` (nothing was written).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentkit.configfile import StrictModel
from agentkit.isolation.types import IsolationError
from agentkit.webchat.api import _find_row, _parsed, _session, _threaded
from agentkit.webchat.bodies import ApiError
from agentkit.webchat.text import JSONResponse

__all__ = ["DiscardBody", "MergeBody", "isolation_routes"]


class MergeBody(StrictModel):
    """``POST .../subagents/{aid}/merge``: ``dry_run`` true checks without writing."""

    dry_run: StrictBool = Field(default=False, description="true or false")


class DiscardBody(StrictModel):
    """``POST .../subagents/{aid}/discard``: ``confirm`` must be true (it drops work);
    missing, it is false and the discard is refused in one sentence."""

    confirm: StrictBool = Field(default=False, description="true or false")


UNCONFIRMED = 'To discard, send {"confirm": true}: discarding drops the sub-agent\'s work.'


async def _run(request: Request, act: Any) -> Response:
    """``act(session, agent_id)`` in the thread pool for the path's sub-agent; its dict
    as 200, a refusal as 409 in words."""
    from agentkit.chat import isolation

    session = await _threaded(lambda: _session(request))
    row = _find_row(session.subagents(), request.path_params["aid"])
    agent_id = int(row["agent_id"])
    try:
        data: dict[str, Any] = await _threaded(lambda: act(session, agent_id))
    except IsolationError as exc:
        reason = getattr(exc, "reason", "failed")
        text = isolation.refusal_words(exc, agent_id, stop_hint="stop it")
        return JSONResponse({"error": text, "reason": reason}, status_code=409)
    return JSONResponse(data)


async def changes(request: Request) -> Response:
    from agentkit.chat import isolation

    return await _run(request, lambda s, i: isolation.review(s, i).to_dict())


async def merge(request: Request) -> Response:
    from agentkit.chat import isolation

    dry_run = (await _parsed(request, MergeBody)).dry_run

    def act(session: Any, agent_id: int) -> dict[str, Any]:
        report = isolation.merge(session, agent_id, dry_run=dry_run)
        return {
            "ok": report.status != "conflicts",
            "status": report.status,
            "report": report.to_dict(),
            "lines": isolation.report_lines(agent_id, report),
        }

    return await _run(request, act)


async def discard(request: Request) -> Response:
    from agentkit.chat import isolation

    if not (await _parsed(request, DiscardBody)).confirm:
        raise ApiError(400, UNCONFIRMED)

    def act(session: Any, agent_id: int) -> dict[str, Any]:
        isolation.discard(session, agent_id)
        text = f"Discarded sub-agent {agent_id}'s copy and branch; the workspace was not touched."
        return {"discarded": True, "text": text}

    return await _run(request, act)


def isolation_routes() -> list[BaseRoute]:
    """The routes, under ``/api/conversations/{cid}/subagents/{aid}``."""
    subagent = "/api/conversations/{cid}/subagents/{aid}"
    return [
        Route(subagent + "/changes", changes, methods=["GET"]),
        Route(subagent + "/merge", merge, methods=["POST"]),
        Route(subagent + "/discard", discard, methods=["POST"]),
    ]
