"""Folder listings and "did you mean" suggestions for missing files (read_file, edit_file)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from agentkit.errors import ToolError
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.files._text import human_size
from agentkit.tools.paths import display_path, workspace_root

LISTING_MAX_ENTRIES = 200
SUGGEST_WALK_DEPTH = 3
SUGGEST_WALK_MAX = 5000
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".tox"}


def list_directory(ctx: ToolContext, path: Path) -> ToolResult:
    """List a folder: sub-folders first (marked ``/``), then files with sizes; capped."""
    shown = display_path(ctx, path)
    dirs: list[str] = []
    files: list[tuple[str, str]] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    if entry.is_symlink():
                        files.append((entry.name, "-> " + os.readlink(entry.path)))
                    elif entry.is_dir(follow_symlinks=False):
                        dirs.append(entry.name)
                    else:
                        files.append(
                            (entry.name, human_size(entry.stat(follow_symlinks=False).st_size))
                        )
                except OSError:
                    files.append((entry.name, "?"))
    except OSError as exc:
        raise ToolError("permission_denied", f"cannot list {shown}: {exc.strerror}") from None
    dirs.sort(key=str.lower)
    files.sort(key=lambda f: f[0].lower())
    rows = [f"  {d}/" for d in dirs] + [f"  {name}  {info}" for name, info in files]
    header = (
        f"{shown} is a directory: {len(dirs)} folder{'s' if len(dirs) != 1 else ''}, "
        f"{len(files)} file{'s' if len(files) != 1 else ''}. Read a file inside it by its path."
    )
    if not rows:
        rows = ["  (empty)"]
    truncated = len(rows) > LISTING_MAX_ENTRIES
    text = header + "\n" + "\n".join(rows[:LISTING_MAX_ENTRIES])
    if truncated:
        text += f"\n[showing {LISTING_MAX_ENTRIES} of {len(rows)} entries; use search_workspace with a glob to find more]"
    return ToolResult(
        text, truncated=truncated, meta={"path": shown, "directory": True, "entries": len(rows)}
    )


def _walk_names(root: Path) -> list[Path]:
    """Files and folders of a shallow walk (depth 3, at most 5000 entries, no symlinks)."""
    found: list[Path] = []
    stack = [(root, 0)]
    while stack and len(found) < SUGGEST_WALK_MAX:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    found.append(Path(entry.path))
                    if (
                        depth < SUGGEST_WALK_DEPTH
                        and entry.name not in _SKIP_DIRS
                        and entry.is_dir(follow_symlinks=False)
                    ):
                        stack.append((Path(entry.path), depth + 1))
        except OSError:
            continue
    return found


def not_found_message(ctx: ToolContext, path: Path) -> str:
    """Message for a missing path: the nearest existing folder and close names (difflib)."""
    shown = display_path(ctx, path)
    root = workspace_root(ctx)
    parent = path.parent
    missing_dir = None
    while not parent.is_dir() and parent != parent.parent:
        missing_dir = parent
        parent = parent.parent
    suggestions: list[str] = []
    want = path.name
    try:
        siblings = os.listdir(parent)
    except OSError:
        siblings = []
    for name in difflib.get_close_matches(want, siblings, n=3, cutoff=0.6):
        suggestions.append(display_path(ctx, parent / name))
    if parent == root or path.is_relative_to(root):
        candidates = _walk_names(root)
        by_name: dict[str, list[Path]] = {}
        for p in candidates:
            by_name.setdefault(p.name, []).append(p)
        same = sorted(by_name.get(want, []))
        close = difflib.get_close_matches(want, list(by_name), n=3, cutoff=0.75)
        for p in same + [p for name in close for p in sorted(by_name[name])[:2]]:
            d = display_path(ctx, p)
            if d not in suggestions:
                suggestions.append(d)
    msg = f"no such file: {shown}"
    if missing_dir is not None:
        msg += f" (the folder {display_path(ctx, missing_dir)} does not exist)"
    if suggestions:
        msg += ". Did you mean: " + ", ".join(suggestions[:5]) + "?"
    else:
        msg += ". Use search_workspace with a glob to find the file."
    return msg
