"""Reading results back: a conversation's sub-agents, and any transcript, readably.

Sources (docs/architecture.md §1, docs/specification.md §6): the main conversation file
``<workspace>/.agentkit/conversations/<id>.json`` (with its ``subagents`` rows) and
each sub-agent's ``<deliverables_dir>/.subagent/conversations.json``. Everything
here is plain data in, plain text out, so the CLI can print it or dump it as JSON.
Light imports only: this runs in ``agentkit show`` / ``agentkit transcript``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.cli.show_isolation import copy_line, copy_state
from agentkit.cli.show_transcript import flat
from agentkit.cli.show_transcript import render_transcript as render_transcript
from agentkit.cli.show_transcript import stats_line as stats_line
from agentkit.conversation import (
    LIVE_STATES,
    PROCESS_GONE,
    conversations_dir,
)
from agentkit.errors import AgentkitError
from agentkit.subagent.record import fallback_path, load_record, record_path
from agentkit.subagent.record_folder import list_deliverables
from agentkit.subagent.reuse import earlier_folder
from agentkit.subagent.sweep import conversation_held, live_rows


class InspectError(AgentkitError):
    """Nothing to show: no conversation yet, unknown id, unreadable file (one-line message)."""


def latest_conversation(workspace: Path) -> Path | None:
    """Return the most recently modified conversation file of ``workspace``, or None."""
    folder = conversations_dir(workspace)
    try:
        files = [p for p in folder.glob("*.json") if p.is_file()]
    except OSError:
        return None
    if not files:
        return None
    return max(files, key=lambda p: p.stat().st_mtime)


def conversation_file(workspace: Path, conversation_id: str | None) -> Path:
    """Return the file of ``conversation_id`` (default: the latest conversation).

    Raises InspectError when there is no conversation yet or no such id.
    """
    if not conversation_id:
        path = latest_conversation(workspace)
        if path is None:
            raise InspectError(f"no conversation yet in {conversations_dir(workspace)}")
        return path
    path = conversations_dir(workspace) / f"{conversation_id}.json"
    if not path.is_file():
        raise InspectError(f"no conversation {conversation_id!r} in {path.parent}")
    return path


def load_document(path: Path) -> dict[str, Any]:
    """Return the JSON object stored at ``path`` (a running sub-agent record with its
    journal applied: agentkit.subagent.record.load_record); raises InspectError when
    unreadable."""
    try:
        data = load_record(path)
    except FileNotFoundError:
        raise InspectError(f"no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise InspectError(f"cannot read {path}: {flat(exc, 200)}") from None
    if not isinstance(data, dict):
        raise InspectError(f"{path} does not hold a JSON object")
    return data


def _deliverables(workspace: Path, row: dict[str, Any], limit: int) -> dict[str, Any]:
    folder = row.get("deliverables_dir")
    if not isinstance(folder, str) or not folder:
        return {"files": [], "total": 0}
    run = row.get("sub_conversation_id")
    if isinstance(run, str) and run:
        # A later conversation's sub-agent took the folder: this run's files were
        # set aside (agentkit.subagent.reuse), and the folder now holds the other's.
        moved = earlier_folder(workspace / folder, run)
        files, total = list_deliverables(moved, limit, workspace)
        if total:
            return {"files": files, "total": total, "moved_to": moved.relative_to(workspace)}
    files, total = list_deliverables(workspace / folder, limit, workspace)
    return {"files": files, "total": total}


def conversation_overview(
    workspace: Path, conversation_id: str | None = None, *, files_limit: int = 50
) -> dict[str, Any]:
    """Return what ``agentkit show`` prints, as JSON-able data.

    Keys: conversation_id, path, state, model, created_at, updated_at, error,
    final_text, stats, subagents (rows of the conversation file as their records say
    now, agentkit.subagent.sweep.live_rows, each plus ``deliverables_files`` and
    ``deliverables_total`` read from disk, and ``deliverables_moved_to`` when a later
    conversation's sub-agent took the folder and this run's files were set aside
    there, agentkit.subagent.reuse, and ``copy`` for an isolated sub-agent:
    agentkit.cli.show_isolation.copy_state). A conversation or sub-agent saved as
    running whose process is gone shows ``ended (process gone)``
    (agentkit.conversation.PROCESS_GONE). Reads only. Raises InspectError when there
    is nothing to show.
    """
    path = conversation_file(workspace, conversation_id)
    doc = load_document(path)
    state = doc.get("state")
    alive = state not in LIVE_STATES or conversation_held(workspace, path.stem)
    saved = doc.get("subagents")
    rows = []
    for row in live_rows(workspace, saved if isinstance(saved, list) else [], owner_alive=alive):
        found = _deliverables(workspace, row, files_limit)
        row = {**row, "deliverables_files": found["files"], "deliverables_total": found["total"]}
        if "moved_to" in found:
            row["deliverables_moved_to"] = found["moved_to"].as_posix()
        if (copy := copy_state(workspace, row)) is not None:
            row["copy"] = copy
        rows.append(row)
    return {
        "conversation_id": doc.get("conversation_id") or path.stem,
        "path": str(path),
        "state": state if alive else PROCESS_GONE,
        "model": doc.get("model"),
        "created_at": doc.get("created_at"),
        "updated_at": doc.get("updated_at"),
        "error": doc.get("error"),
        "final_text": doc.get("final_text"),
        "stats": doc.get("stats") or {},
        "subagents": rows,
        "workspace": str(workspace),
    }


def stats_counters(row: dict[str, Any]) -> str:
    """A row's counters in the front ends' words (agentkit.chat.explain.counter_words)."""
    from agentkit.chat.explain import counter_words

    return counter_words(row)


def render_overview(data: dict[str, Any], *, final_chars: int = 600) -> str:
    """Return :func:`conversation_overview` data as readable text."""
    lines = [
        f"conversation {data['conversation_id']}  state: {data.get('state')}  model: {data.get('model')}",
        f"  file: {data['path']}",
        f"  updated: {data.get('updated_at')}",
        f"  {stats_line(data.get('stats') or {})}",
    ]
    if data.get("error"):
        lines.append(f"  error: {flat(data['error'], 300)}")
    final = data.get("final_text")
    lines.append(f"  final: {flat(final, final_chars) if final else '(none)'}")
    agents = data.get("subagents") or []
    lines.append("")
    lines.append(f"sub-agents: {len(agents)}" if agents else "sub-agents: none")
    waiting = [
        f"#{r.get('agent_id')}" for r in agents if (r.get("copy") or {}).get("state") == "unmerged"
    ]
    if waiting:
        lines.append(
            f"  not merged yet: {', '.join(waiting)} (their copies wait for a merge or a discard)"
        )
    for row in agents:
        lines.append(
            f"  #{row.get('agent_id')}  {row.get('status')}  {row.get('runtime_seconds', 0)}s"
            f"  {flat(row.get('summary', ''), 80)}"
        )
        lines.append("      " + stats_counters(row))
        files = row.get("deliverables_files") or []
        total = row.get("deliverables_total", len(files))
        shown = ", ".join(files[:10]) + (", …" if total > 10 else "")
        where = row.get("deliverables_dir")
        if row.get("deliverables_moved_to"):
            where = f"{row['deliverables_moved_to']} (moved from {where}: a later conversation's sub-agent used it)"
        lines.append(f"      deliverables: {where} ({total} files{': ' + shown if files else ''})")
        if row.get("copy"):
            lines.append("      " + copy_line(row.get("agent_id"), row["copy"]))
        if row.get("transcript"):
            lines.append(f"      transcript: {_transcript_of(row, data)}")
        if row.get("last_action"):
            lines.append(f"      last action: {flat(row['last_action'], 100)}")
        if row.get("result_summary"):
            lines.append(f"      result: {flat(row['result_summary'], 300)}")
    return "\n".join(lines)


def _transcript_of(row: dict[str, Any], data: dict[str, Any]) -> str:
    """The row's transcript path, or the archived copy a later sub-agent in the same
    folder left (``conversations.<sub_conversation_id>.json``)."""
    shown = str(row["transcript"])
    workspace = data.get("workspace")
    archived = Path(shown).with_name(f"conversations.{row.get('sub_conversation_id')}.json")
    if workspace and (Path(workspace) / archived).is_file():
        return archived.as_posix()
    return shown


def resolve_transcript(workspace: Path, target: str) -> Path:
    """Return the JSON file ``target`` names.

    ``target`` is a path to a JSON file, a sub-agent id number (looked up in the
    latest conversation's ``subagents`` rows; its record is
    ``<deliverables_dir>/.subagent/conversations.json``, docs/specification.md §6) or a
    conversation id. Raises InspectError when nothing matches, or when ``target`` is
    blank (it would have read as "the latest conversation", which ``show`` is for).
    """
    if not target.strip():
        raise InspectError("name a transcript: a conversation id, a sub-agent number or a file")
    as_path = Path(target).expanduser()
    if as_path.is_file():
        return as_path
    if target.isdigit():
        conv = load_document(conversation_file(workspace, None))
        for row in conv.get("subagents") or []:
            if isinstance(row, dict) and str(row.get("agent_id")) == target:
                return subagent_transcript(workspace, row)
        raise InspectError(
            f"no sub-agent #{target} in conversation {conv.get('conversation_id', '?')}"
        )
    if target.endswith(".json"):
        raise InspectError(f"no such file: {target}")
    return conversation_file(workspace, target)


def subagent_transcript(workspace: Path, row: dict[str, Any]) -> Path:
    """Return the record file of the sub-agent of status ``row`` (a ``subagents`` row:
    ``<deliverables_dir>/.subagent/conversations.json``, docs/specification.md §6, or
    the archived copy a later sub-agent in the same folder left).

    Raises InspectError when the row names no folder or the file is missing.
    """
    agent_id = row.get("agent_id")
    folder = row.get("deliverables_dir")
    if not isinstance(folder, str) or not folder:
        raise InspectError(f"sub-agent #{agent_id} has no deliverables directory")
    path = record_path(workspace / folder)
    # A later sub-agent in the same folder archived this one's record.
    archived = path.with_name(f"conversations.{row.get('sub_conversation_id')}.json")
    if archived.is_file():
        return archived
    # The folder refused its final record (read-only, full): the parent wrote it here.
    moved = fallback_path(workspace, row.get("sub_conversation_id"))
    if moved is not None and moved.is_file():
        return moved
    if not path.is_file():
        raise InspectError(f"sub-agent #{agent_id} has no transcript at {path}")
    return path


def render_conversations(infos: list[Any]) -> str:
    """The ``agentkit conversations`` table: one line per conversation (newest first:
    id, last change, state in words, turns, sub-agents running/all, title), then how
    to continue one; ``infos``: agentkit.chat.store.ConversationInfo."""
    from agentkit.chat.explain import state_words

    if not infos:
        return "no conversations in this workspace yet (start one: agentkit chat)"
    lines = [f"{'ID':<18}  {'UPDATED':<20}  {'STATE':<24}  {'TURNS':>5}  SUB-AGENTS  TITLE"]
    for info in infos:
        state = state_words(info.state, info.subagents_running)
        agents = f"{info.subagents_running}/{info.subagents}"
        updated = info.updated_at.replace("T", " ").removesuffix("Z")
        title = flat(info.error, 60) if info.error else flat(info.title, 60)  # why, if damaged
        lines.append(
            f"{info.id:<18}  {updated:<20}  {state:<24}  {info.turns:>5}  {agents:<10}  {title}"
        )
    lines.append("continue one: agentkit chat --continue ID (with -w DIR when not here)")
    return "\n".join(lines)
