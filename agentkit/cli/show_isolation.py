"""What ``agentkit show`` says about isolated sub-agents' copies (docs/guide/isolation.md).

One job: for each sub-agent row of a conversation, read its record and, when it worked
on its own copy, add what a person must decide: its branch, its changes and whether it
is merged, discarded or waiting. Reads only: nothing is saved, counted or merged here
(``changes`` are the record's, counted when the sub-agent ended).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.subagent.isolated import from_record, row_record

__all__ = ["copy_line", "copy_state"]


def copy_state(workspace: Path, row: dict[str, Any]) -> dict[str, Any] | None:
    """The copy of the sub-agent ``row`` (a conversation file's row), or None when it
    is shared or its record cannot be read.

    Returns ``{"branch": str, "changes": {"files", "insertions", "deletions"} | None,
    "state": "unmerged" | "merged" | "discarded" | "running"}``.
    """
    state = from_record(row_record(workspace, row)[1])
    if state is None:
        return None
    if state.discarded:
        word = "discarded"
    elif state.merged:
        word = "merged"
    elif row.get("status") == "running":
        word = "running"
    else:
        word = "unmerged"
    branch = (state.copy or {}).get("branch")
    return {
        "branch": branch if isinstance(branch, str) else "",
        "changes": state.changes,
        "state": word,
    }


def copy_line(agent_id: Any, copy: dict[str, Any]) -> str:
    """One line for :func:`copy_state`'s data, e.g. ``copy: agentkit/conv_x/agent-1,
    2 files +5 -1, not merged (merge or discard it: /merge 1, /discard 1 in agentkit
    chat)``."""
    changes = copy.get("changes")
    if isinstance(changes, dict):
        counted = (
            f"{changes.get('files', 0)} files +{changes.get('insertions', 0)}"
            f" -{changes.get('deletions', 0)}"
        )
    else:
        counted = "changes not counted yet"
    words = {
        "unmerged": f"not merged (merge or discard it: /merge {agent_id}, /discard {agent_id}"
        " in agentkit chat)",
        "merged": "merged",
        "discarded": "discarded",
        "running": "still working",
    }[copy["state"]]
    return f"copy: {copy['branch']}, {counted}, {words}"
