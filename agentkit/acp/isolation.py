"""A merge_sub_agent call as an editor sees it: the files the merge wrote, as ACP diffs.

One job: :class:`MergeDiffs`, used by agentkit.acp.updates.UpdateMapper on the thread
that publishes events. When a ``merge_sub_agent`` call (not a dry run) starts, it
asks which files the sub-agent changed (the ``changed_files`` callable: workspace-
relative paths) and reads each one's text in the workspace; when the call ends and
its result says ``status: "merged"``, it reads them again and returns one ACP diff
content per file whose text changed (``{"type": "diff", "path", "oldText",
"newText"}``, ``oldText`` None for a new file). A deleted file, or one that cannot be
shown (binary, over agentkit.acp.toolcalls.MAX_DIFF_BYTES), is left to the result's
text. A failure to list or read never costs the event: the card then shows the text
only. Asking permission first (an approval rule ``merge_sub_agent: ask``) is the
ordinary approval path (agentkit.acp.approvals).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp.schema import FileEditToolCallContent

from agentkit.acp import toolcalls as tc

__all__ = ["MAX_FILES", "MergeDiffs"]

MAX_FILES = 50
"""Most files of one merge shown as diffs (the result's text lists them all)."""

_ABSENT = "\0absent"  # no file there before the merge (no file text holds NUL)


class MergeDiffs:
    """The workspace's text of each file a merge may write, per open merge call.

    Args:
        workspace: the conversation's workspace (paths are shown absolute).
        changed_files: returns the paths isolated sub-agent ``agent_id`` changed
            (workspace-relative); raises when it has no copy.
    """

    def __init__(self, workspace: Path, changed_files: Callable[[int], list[str]]) -> None:
        self.workspace = workspace
        self._changed_files = changed_files
        self._before: dict[str, dict[str, str | None]] = {}

    def start(self, call_id: str, name: str, arguments: dict[str, Any] | None) -> None:
        """A tool call starts: for a real merge, read the files it may write."""
        args = arguments or {}
        agent_id = args.get("agent_id")
        if name != "merge_sub_agent" or args.get("dry_run") is True:
            return
        if not isinstance(agent_id, int) or isinstance(agent_id, bool):
            return
        try:
            paths = self._changed_files(agent_id)[:MAX_FILES]
        except Exception:  # no copy, git failing: the card shows the result's text
            return
        before: dict[str, str | None] = {}
        for rel in paths:
            path = os.path.normpath(self.workspace / rel)
            text = tc.read_text(path)
            before[path] = (
                text if text is not None else (None if os.path.lexists(path) else _ABSENT)
            )
        self._before[call_id] = before

    def end(self, call_id: str, output: str) -> list[FileEditToolCallContent]:
        """A tool call ended: the diffs of a merge that wrote files, else ``[]``."""
        before = self._before.pop(call_id, None)
        if not before:
            return []
        try:
            result = json.loads(output)
        except ValueError:
            return []
        if not isinstance(result, dict) or result.get("status") != "merged":
            return []
        diffs = []
        for path, old in before.items():
            new = tc.read_text(path)
            if old is None or new is None or new == old:  # unreadable, deleted, unchanged
                continue
            diffs.append(
                FileEditToolCallContent(
                    type="diff", path=path, old_text=None if old == _ABSENT else old, new_text=new
                )
            )
        return diffs
