"""How one agentkit tool call looks in an editor: its ACP title, kind, locations and content.

One job: pure functions from a tool call (name, arguments, result) to the fields of
ACP's ``tool_call`` / ``tool_call_update`` (docs/acp.md has the table):

* :func:`describe`: ``title`` (the call's ``last_action`` phrase, in the
  conversation's language, e.g. "Reading src/app.py"; a sub-agent's summary added),
  ``kind`` (read, edit, execute, search, fetch, think, other) and ``locations``
  (absolute paths, with the first line read where it is known);
* :func:`result_content`: what the card shows when the call ended: a diff for
  ``write_file``/``edit_file`` (ACP diff content, from the file's text before and
  after: :func:`read_text`), the output of ``run_command`` in a code block, the other
  tools' results as text, a sub-agent's result in words;
* :func:`result_locations`: the files a ``search_workspace`` call found;
* :func:`subagent_progress`: a sub-agent's last action and counters, for its card.

Nothing here reads the network or writes anything; :func:`read_text` is the only
read of a file (regular files under a size bound, never a pipe or a device).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import (
    ContentToolCallContent,
    FileEditToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolKind,
)

from agentkit.chat.explain import counter_words
from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.paths import resolve_path

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_DIFF_BYTES",
    "CallView",
    "SUBAGENT_TOOLS",
    "absolute",
    "describe",
    "edit_target",
    "read_text",
    "result_content",
    "result_locations",
    "seed_result",
    "subagent_progress",
    "text_content",
]

MAX_CONTENT_CHARS = 20_000
"""Most characters of a tool's output shown on its card (the model got all of it)."""

MAX_DIFF_BYTES = 512 * 1024
"""Largest file whose text is sent as a diff (each side); larger files show no diff."""

MAX_LOCATIONS = 20
"""Most search hits listed as locations."""

SUBAGENT_TOOLS = ("create_sub_agent", "terminate_sub_agent", "get_sub_agent_status")
FILE_EDITS = ("write_file", "edit_file")

_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "load_skill": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "search_workspace": "search",
    "run_command": "execute",
    "web_search": "fetch",
    "extract_webpage": "fetch",
    "create_sub_agent": "think",
}
_FENCED = ("run_command", "read_file", "search_workspace")
_HIT = re.compile(r"^(.+?):(\d+):", re.MULTILINE)


@dataclass(frozen=True)
class CallView:
    """A tool call's card: ``title``, ``kind`` and ``locations`` (ACP fields)."""

    title: str
    kind: ToolKind
    locations: list[ToolCallLocation] = field(default_factory=list)


def absolute(workspace: Path, path: Any) -> str | None:
    """``path`` (an argument of a file tool) as an absolute path, without following
    links; None when it is not a usable path string."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        return None
    candidate = Path(path).expanduser()
    return os.path.normpath(candidate if candidate.is_absolute() else workspace / candidate)


def describe(
    name: str, arguments: dict[str, Any] | None, last_action: str, workspace: Path
) -> CallView:
    """The card of a tool call as it starts.

    Args:
        name: the tool's name (``mcp__server__tool`` for an MCP tool).
        arguments: the parsed arguments, or None when they did not parse.
        last_action: the call's progress phrase (agentkit.prompts.last_action).
        workspace: the conversation's workspace (relative paths are inside it).
    """
    args = arguments or {}
    title = " ".join(last_action.split()) or name
    if name == "create_sub_agent" and isinstance(args.get("summary"), str):
        title = f"{title}: {' '.join(args['summary'].split())[:80]}"
    locations: list[ToolCallLocation] = []
    path = absolute(workspace, args.get("path")) if name in _KINDS else None
    if path is not None:
        line = args.get("offset") if name == "read_file" else None
        ok_line = isinstance(line, int) and not isinstance(line, bool) and line >= 1
        locations.append(ToolCallLocation(path=path, line=line if ok_line else None))
    return CallView(title=title[:200], kind=_KINDS.get(name, "other"), locations=locations)


def text_content(text: str) -> ContentToolCallContent:
    """``text`` as a card's content block (cut at :data:`MAX_CONTENT_CHARS`)."""
    if len(text) > MAX_CONTENT_CHARS:
        text = text[:MAX_CONTENT_CHARS] + f"\n… ({len(text) - MAX_CONTENT_CHARS} more characters)"
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=text))


def _fenced(text: str) -> str:
    # A fence longer than any run of backticks inside, so the output cannot close it.
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip()}\n{fence}"


def seed_result(output: str) -> dict[str, Any] | None:
    """A sub-agent tool's JSON result (docs/specification.md §1), or None."""
    try:
        value = json.loads(output)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _subagent_words(result: dict[str, Any]) -> str:
    lines = [str(result.get("message") or result.get("error") or "")]
    if result.get("result_summary"):
        lines.append(str(result["result_summary"]))
    if result.get("deliverables_dir"):
        files = result.get("deliverables_files") or []
        shown = ", ".join(str(f) for f in files[:10]) + (" …" if len(files) > 10 else "")
        lines.append(
            f"Deliverables: {result['deliverables_dir']}" + (f" ({shown})" if shown else "")
        )
    for row in result.get("agents") or []:
        if isinstance(row, dict):
            lines.append(subagent_progress(row))
    return "\n".join(line for line in lines if line)


def result_content(
    name: str,
    arguments: dict[str, Any] | None,
    ok: bool,
    output: str,
    *,
    workspace: Path,
    before: str | None = None,
    after: str | None = None,
) -> list[ContentToolCallContent | FileEditToolCallContent]:
    """What a finished call's card shows.

    Args:
        name, arguments: the call.
        ok: False for an ``Error:`` result or a refusal.
        output: the result text the model got.
        workspace: the conversation's workspace.
        before, after: a write_file/edit_file target's text before and after the call
            (:func:`read_text`; None: unknown, or the file did not exist before).
    """
    args = arguments or {}
    path = absolute(workspace, args.get("path"))
    if ok and name in FILE_EDITS and path is not None and after is not None:
        if before != after:
            return [
                FileEditToolCallContent(type="diff", path=path, old_text=before, new_text=after)
            ]
        return [text_content(output)]
    if name in SUBAGENT_TOOLS and (result := seed_result(output)) is not None:
        return [text_content(_subagent_words(result))]
    if not output.strip():
        return []
    return [text_content(_fenced(output) if name in _FENCED and ok else output)]


def result_locations(
    name: str, arguments: dict[str, Any] | None, output: str, workspace: Path
) -> list[ToolCallLocation] | None:
    """The files a search_workspace call found (``path:line:text`` rows), as
    locations; None for other tools (their locations do not change)."""
    if name != "search_workspace":
        return None
    base = absolute(workspace, (arguments or {}).get("path") or ".") or str(workspace)
    seen: list[ToolCallLocation] = []
    for match in _HIT.finditer(output):
        path = absolute(Path(base), match.group(1)) if not os.path.isabs(match.group(1)) else None
        if path is None:
            continue
        seen.append(ToolCallLocation(path=path, line=int(match.group(2))))
        if len(seen) >= MAX_LOCATIONS:
            break
    return seen


def subagent_progress(row: dict[str, Any]) -> str:
    """One sub-agent's state in a line or two: ``Sub-agent 1 (summary): running, 45 s``,
    its last action and its four counters (docs/specification.md §1.3 row)."""
    head = f"Sub-agent {row.get('agent_id')} ({row.get('summary', '')}): {row.get('status', '')}"
    if isinstance(row.get("runtime_seconds"), (int, float)):
        head += f", {row['runtime_seconds']} s"
    counters = counter_words(row)  # the chat's and agentkit show's words
    action = str(row.get("last_action") or "")
    return "\n".join(part for part in (head, action, counters) if part)


def edit_target(
    name: str, arguments: dict[str, Any] | None, workspace: Path, settings: Settings
) -> str | None:
    """The file a write_file/edit_file call changes, resolved by the tools' own path
    guard (agentkit.tools.paths: inside the workspace after links, writable), or None
    for other tools and for paths the tool itself would refuse."""
    path = (arguments or {}).get("path") if name in FILE_EDITS else None
    if not isinstance(path, str):
        return None
    try:
        return str(
            resolve_path(ToolContext(workspace=workspace, settings=settings), path, write=True)
        )
    except ToolError:
        return None


def read_text(path: str | None) -> str | None:
    """The text of a regular file (UTF-8, damaged bytes replaced), or None: no path,
    no such file, not a regular file (a pipe or a device is never opened for
    reading), over :data:`MAX_DIFF_BYTES`, or binary (a NUL byte)."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_DIFF_BYTES:
            return None
        data = os.read(fd, MAX_DIFF_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_DIFF_BYTES or b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")
