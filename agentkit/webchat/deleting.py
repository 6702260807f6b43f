"""Deleting a conversation from the web API, its isolated sub-agents' copies decided first
(docs/web-api.md "Deleting a conversation", docs/isolation.md).

One job: ``DELETE /api/conversations/{cid}``. A conversation whose isolated sub-agents
left copies that are neither merged nor discarded is not deleted without a decision:
once its file is gone agentkit no longer finds their worktrees and branches.

* no such copies: the conversation is deleted (200 ``{"deleted"}``);
* only copies of ended sub-agents that changed no file (counted again once the
  conversation is closed): they hold no work, so they are dropped as with
  ``?copies=discard`` and the conversation deleted (200 ``{"deleted", "copies",
  "discarded": true}``);
* copies and no decision: 409 ``{"error", "reason": "unmerged_copies", "copies":
  [{"agent_id", "branch", "changes", "running"}]}``, nothing changed;
* ``?copies=keep``: the conversation is closed (its sub-agents end, their copies are
  saved) and deleted, the branches kept: 200 ``{"deleted", "copies": [... "remove":
  the git commands that drop one], "kept"}`` (in words);
* ``?copies=discard``: closed, each copy dropped (agentkit.isolation.discard) and its
  record marked ``discarded: true``, then deleted: 200 ``{"deleted", "copies",
  "discarded": true}``. A copy git cannot drop stops it there: 409 ``reason:
  "failed"``, the conversation not deleted.

The copies are read from the conversation's rows (the open session's, else its saved
file's) and their records, as ``agentkit show`` reads them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentkit.chat import Workspace
from agentkit.chat.store import load_conversation
from agentkit.errors import ConfigurationError
from agentkit.isolation.copies import check_names
from agentkit.isolation.types import Copy, IsolationError
from agentkit.subagent.isolated import Isolation, from_record, mark_record, row_record
from agentkit.subagent.merging import count_changes
from agentkit.subagent.sweep import conversation_held
from agentkit.webchat.api import _conversation_errors, _ws
from agentkit.webchat.bodies import ApiError
from agentkit.webchat.text import JSONResponse

__all__ = ["CopiesChoice", "Waiting", "deleting_routes", "waiting_copies"]

CopiesChoice = Literal["keep", "discard"]


@dataclass
class Waiting:
    """An isolated sub-agent's copy neither merged nor discarded.

    Attributes:
        agent_id: the sub-agent's id.
        state: its copy and marks (agentkit.subagent.isolated.Isolation).
        record_dir: the folder holding its record (None: no record found).
        sub_conversation_id: its run, whose record gets the ``discarded`` mark.
        running: it still works (the conversation is open here).
    """

    agent_id: int
    state: Isolation
    record_dir: Path | None
    sub_conversation_id: str
    running: bool

    @property
    def copy(self) -> dict[str, Any]:
        return self.state.copy or {}

    def to_dict(self) -> dict[str, Any]:
        """``{"agent_id", "branch", "changes", "running"}`` (``changes``: ``{"files",
        "insertions", "deletions"}``, None when not counted yet)."""
        branch = self.copy.get("branch")
        return {
            "agent_id": self.agent_id,
            "branch": branch if isinstance(branch, str) else "",
            "changes": self.state.changes,
            "running": self.running,
        }

    def remove_commands(self) -> list[str]:
        """The git commands that drop this copy by hand: its worktree, branch and base.
        Empty for a damaged record (names that are not a sub-agent copy's, see
        agentkit.isolation.copies.check_names): never a command that deletes the
        user's own branch."""
        try:
            copy = Copy.from_dict(self.copy)
            check_names(copy)
        except IsolationError:
            return []
        git = f"git --git-dir={shlex.quote(copy.git_dir)}"
        return [
            f"{git} worktree remove --force {shlex.quote(copy.worktree)}",
            f"{git} branch -D {shlex.quote(copy.branch)}",
            f"{git} update-ref -d {shlex.quote(copy.base_ref)}",
        ]


def waiting_copies(workspace: Path, rows: list[dict[str, Any]], *, live: bool) -> list[Waiting]:
    """The copies of a conversation's sub-agent ``rows`` that wait for a merge or a
    discard, by agent id. A mark in either the record or the row counts (either may be
    the later one). ``live``: the rows are an open session's (a running row runs)."""
    found: list[Waiting] = []
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("agent_id"), int):
            continue
        place, record = row_record(workspace, row)
        state, marks = from_record(record), from_record(row)
        if state is None:
            state = marks
        elif marks is not None:
            state.merged = state.merged or marks.merged
            state.discarded = state.discarded or marks.discarded
            state.changes = state.changes or marks.changes
        if state is None or not state.copy or state.merged or state.discarded:
            continue
        running = live and row.get("status") == "running"
        sub_id = str(row.get("sub_conversation_id") or "")
        found.append(Waiting(int(row["agent_id"]), state, place, sub_id, running))
    return sorted(found, key=lambda w: w.agent_id)


def _rows(ws: Workspace, cid: str) -> tuple[list[dict[str, Any]], bool]:
    """The conversation's sub-agent rows and whether they are an open session's. Raises
    FileNotFoundError when it is neither open nor saved; a damaged file has none."""
    session = ws.get(cid)
    if session is not None:
        return session.subagents(), True
    try:
        return [dict(r) for r in load_conversation(ws.path, cid).subagents], False
    except ConfigurationError:  # damaged (or a bad id): deleted as before, or refused there
        return [], False


def _unchanged(w: Waiting, *, recount: bool = False) -> bool:
    """True when ``w``'s sub-agent has ended and its copy changes no file: as its
    record counted at its end, or (``recount``) as git counts now."""
    if w.running:
        return False
    changes = w.state.changes
    if recount:
        try:
            changes = count_changes(Copy.from_dict(w.copy))
        except IsolationError:
            return False
    return isinstance(changes, dict) and changes.get("files") == 0


def _words(waiting: list[Waiting]) -> str:
    parts = []
    for w in waiting:
        data, changes = w.to_dict(), w.state.changes
        counted = (
            f"{changes.get('files', 0)} files +{changes.get('insertions', 0)}"
            f" -{changes.get('deletions', 0)}"
            if isinstance(changes, dict)
            else "changes not counted yet"
        )
        still = ", still working" if w.running else ""
        parts.append(f"sub-agent #{w.agent_id} on branch {data['branch']} ({counted}{still})")
    return "; ".join(parts)


def _refusal(waiting: list[Waiting]) -> Response:
    n = len(waiting)
    whose = "1 sub-agent's copy is" if n == 1 else f"{n} sub-agents' copies are"
    text = (
        f"{whose} not merged: {_words(waiting)}. Deleting the conversation would leave"
        " the work where agentkit no longer finds it. Merge or discard first, or say what"
        " to do: copies=keep deletes the conversation and keeps the branches,"
        " copies=discard drops the work and deletes it."
    )
    copies = [w.to_dict() for w in waiting]
    body = {"error": text, "reason": "unmerged_copies", "copies": copies}
    return JSONResponse(body, status_code=409)


def _discard(workspace: Path, waiting: list[Waiting]) -> Response | None:
    """Drop each copy, then mark its record ``discarded: true``. At the first copy git
    cannot drop, stop: the 409 answer (``reason: "failed"``); it and the rest stay."""
    from agentkit import isolation as engine

    for w in waiting:
        try:
            engine.discard(Copy.from_dict(w.copy))
        except IsolationError as exc:
            text = (
                f"sub-agent #{w.agent_id}'s copy could not be discarded: {exc}. It and the"
                " copies after it stay, and the conversation was not deleted."
            )
            return JSONResponse({"error": text, "reason": "failed"}, status_code=409)
        if w.record_dir is not None:
            state = replace(w.state, discarded=True)
            mark_record(w.record_dir, workspace, w.sub_conversation_id, state)
    return None


def _decided(
    ws: Workspace, cid: str, choice: CopiesChoice, *, unchanged_only: bool = False
) -> Response:
    """Close the conversation (its sub-agents end, their copies are saved), keep or
    discard the copies, delete it; the answer. ``unchanged_only``: no one chose, so
    discard only when every copy still changes no file, else refuse (409)."""
    ws.close_session(cid)
    if conversation_held(ws.path, cid):  # deleting would be refused after discarding
        raise ConfigurationError(f"conversation {cid} is open in another process; close it there")
    rows, _ = _rows(ws, cid)
    waiting = waiting_copies(ws.path, rows, live=False)
    if unchanged_only and not all(_unchanged(w, recount=True) for w in waiting):
        return _refusal(waiting)
    failed = _discard(ws.path, waiting) if choice == "discard" else None
    if failed is not None:
        return failed
    ws.delete(cid)
    copies = [w.to_dict() for w in waiting]
    if choice == "discard":
        return JSONResponse({"deleted": cid, "copies": copies, "discarded": True})
    if not copies:
        return JSONResponse({"deleted": cid, "copies": []})
    for data, w in zip(copies, waiting, strict=True):
        data["remove"] = w.remove_commands()
    kept = (
        "The conversation was deleted; its sub-agents' branches were kept in git: "
        + ", ".join(c["branch"] for c in copies)
        + ". Merge one with git, or remove it with the git commands listed with it"
        " (its worktree, its branch and its base)."
    )
    return JSONResponse({"deleted": cid, "copies": copies, "kept": kept})


def delete_conversation(request: Request) -> Response:
    """``DELETE /api/conversations/{cid}[?copies=keep|discard]`` (the module's map).
    404 for no such conversation, 400 for a bad ``copies`` or one open in another
    process. Runs in the thread pool (closing ends sub-agents; git)."""
    cid = request.path_params["cid"]
    raw = request.query_params.get("copies")
    if raw not in (None, "keep", "discard"):
        raise ApiError(400, 'copies must be "keep" or "discard"')
    ws = _ws(request)
    with _conversation_errors(cid):
        if raw is not None:
            choice: CopiesChoice = "keep" if raw == "keep" else "discard"
            return _decided(ws, cid, choice)
        rows, live = _rows(ws, cid)
        waiting = waiting_copies(ws.path, rows, live=live)
        if waiting and all(_unchanged(w) for w in waiting):  # nothing to lose
            return _decided(ws, cid, "discard", unchanged_only=True)
        if waiting:
            return _refusal(waiting)
        ws.delete(cid)
    return JSONResponse({"deleted": cid})


def deleting_routes() -> list[BaseRoute]:
    """The route, ``DELETE /api/conversations/{cid}``."""
    return [Route("/api/conversations/{cid}", delete_conversation, methods=["DELETE"])]
