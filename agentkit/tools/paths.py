"""The workspace path guard shared by every tool (docs/architecture.md §6, docs/tools.md §1 "Path resolution").

Every path a tool touches goes through :func:`resolve_path`: it is joined with the
workspace root, resolved after symlinks (``os.path.realpath``: the deepest existing
ancestor is resolved and the remaining components appended), then checked with
``Path.is_relative_to`` against the resolved root, never with a string prefix test.
``Settings.read_only_roots`` are extra roots that may be read but never written, and the
workspace's own ``.agentkit`` folder (agentkit's records and logs) is never written either,
nor a ``.subagent`` folder at any depth (a sub-agent's record). ``ToolContext.shared_roots``
are folders outside the workspace that may be read and written (an isolated sub-agent's
deliverables folder, reached from its copy through a link: :func:`shared_root`); a path
there is shown by the spelling that reaches it from the workspace. :func:`resolved_subject`
gives the approval rules and hooks the file a call's path reaches after links.
Hard links are checked where files are opened (:func:`check_links`).

Public API (kept small and stable, other tool modules import it):
``resolve_path(ctx, path, *, write=False) -> Path``, ``display_path(ctx, path) -> str``,
``resolved_subject(ctx, tool, arguments) -> str | None``, ``shared_root(ctx, path)`` and
``write_root(ctx, path) -> Path``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agentkit.conversation import STATE_DIR
from agentkit.errors import ToolError
from agentkit.tools.base import ToolContext

__all__ = [
    "PATH_ARGUMENTS",
    "display_path",
    "resolve_path",
    "resolved_subject",
    "shared_root",
    "workspace_root",
    "write_root",
]

RECORD_DIR = ".subagent"
"""A sub-agent's record folder, at any depth (agentkit.subagent.record.RECORD_DIR): never
written by the file tools."""

PATH_ARGUMENTS: dict[str, str] = {
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "search_workspace": "path",
    "run_command": "cwd",
}
"""The built-in tools that take a workspace path, and which argument it is (MCP and
imported tools have no known path argument)."""


def workspace_root(ctx: ToolContext) -> Path:
    """Return the resolved (symlink-free) workspace root of ``ctx``."""
    return Path(os.path.realpath(ctx.workspace))


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def shared_root(ctx: ToolContext, path: Path) -> Path | None:
    """The resolved ``ctx.shared_roots`` folder that holds ``path`` (absolute and
    resolved), or None. Each root is resolved at every call: what counts is where the
    folder is now, never where a link once pointed."""
    for shared in ctx.shared_roots:
        real = Path(os.path.realpath(shared))
        if _inside(path, real):
            return real
    return None


def write_root(ctx: ToolContext, path: Path) -> Path:
    """The trusted folder below which a write of ``path`` (as :func:`resolve_path`
    returned it) opens every folder without following links (agentkit.confined): the
    shared root that holds it, else the workspace root."""
    return shared_root(ctx, path) or workspace_root(ctx)


def resolve_path(ctx: ToolContext, path: str, *, write: bool = False) -> Path:
    """Resolve a tool's ``path`` argument to an absolute, symlink-free path inside the workspace.

    Args:
        ctx: the tool context (``ctx.workspace`` is the root; ``ctx.shared_roots`` are
            extra roots allowed for reads and writes; ``ctx.settings.read_only_paths()``
            are extra roots allowed when ``write`` is False).
        path: relative to the workspace, or absolute inside it. ``~`` is expanded so that a
            home-relative path is refused clearly instead of creating a folder named ``~``.
        write: True when the caller will create or modify the path.

    Returns:
        The resolved absolute path (it may not exist yet).

    Raises:
        ToolError("invalid_argument"): empty path or a NUL byte in it.
        ToolError("outside_workspace"): the path, after ``..`` and symlinks, leaves the
            workspace and every shared root (and, for reads, every read-only root); or ``write`` is True and the
            path is inside a read-only root only, or inside the workspace's ``.agentkit``
            state folder (readable, never writable by the tools), or inside a ``.subagent``
            folder at any depth, spelled or reached through a link (a sub-agent's record).
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError(
            "invalid_argument", "path is empty; give a file path relative to the workspace"
        )
    if "\x00" in path:
        raise ToolError("invalid_argument", "path contains a NUL byte")
    root = workspace_root(ctx)
    raw = path
    if raw == "~" or raw.startswith("~/"):
        raw = os.path.expanduser(raw)
    joined = Path(raw) if os.path.isabs(raw) else root / raw
    if raw != raw.strip() and not os.path.lexists(joined):
        # Models often add a stray space or newline; use the trimmed name unless the
        # untrimmed one really exists.
        raw = raw.strip()
        joined = Path(raw) if os.path.isabs(raw) else root / raw
    # realpath resolves symlinks of every existing component and appends the rest;
    # a dangling symlink is followed to its (missing) target, so it is checked too.
    resolved = Path(os.path.realpath(joined))
    if _inside(resolved, root):
        if write:
            _refuse_state_folder(path, resolved, root)
            _refuse_record_folder(path, Path(os.path.normpath(joined)), resolved, (root,))
        return resolved
    shared = shared_root(ctx, resolved)
    if shared is not None:
        if write:
            spelled = Path(os.path.normpath(joined))
            _refuse_record_folder(path, spelled, resolved, (root, shared))
        return resolved
    for extra in ctx.settings.read_only_paths():
        extra_root = Path(os.path.realpath(extra))
        if _inside(resolved, extra_root):
            if write:
                raise ToolError(
                    "outside_workspace",
                    f"{path} is in the read-only folder {extra_root}; only files inside the "
                    f"workspace {root} can be written",
                )
            return resolved
    how = "through a symbolic link " if _leaves_by_symlink(joined, root) else ""
    raise ToolError(
        "outside_workspace",
        f"{path} resolves {how}to {resolved}, which is outside the workspace {root}; "
        "use a path inside the workspace",
    )


"""agentkit's own folder at the workspace root: conversation records, command logs."""


def _refuse_state_folder(path: str, resolved: Path, root: Path) -> None:
    # Reads stay allowed (run_command points the model at its spilled logs there); a write
    # could forge or destroy the records agentkit itself keeps. casefold: on a
    # case-insensitive file system ".AgentKit" is the same folder.
    rel = resolved.relative_to(root).parts
    if rel and rel[0].casefold() == STATE_DIR:
        raise ToolError(
            "outside_workspace",
            f"{path} is inside {STATE_DIR}/, agentkit's own state folder (conversation "
            "records, command logs); the file tools may read it but never write or edit "
            "there. Write your files elsewhere in the workspace.",
        )


def _refuse_record_folder(
    path: str, spelled: Path, resolved: Path, roots: tuple[Path, ...]
) -> None:
    # A sub-agent's record (<deliverables>/.subagent/conversations.json and its journal)
    # is the audit transcript `agentkit show` and the web page display, and what
    # continue_sub_agent replays: no agent may forge another's (or its own). Both the
    # spelled path and the file it reaches through links are checked, against the
    # workspace and the shared root that holds the file.
    for candidate in (spelled, resolved):
        for root in roots:
            try:
                parts = candidate.relative_to(root).parts
            except ValueError:
                continue
            if any(part.casefold() == RECORD_DIR for part in parts):
                raise ToolError(
                    "outside_workspace",
                    f"{path} is inside a {RECORD_DIR}/ folder, a sub-agent's record (its "
                    "conversation, shown by agentkit show and the web page); the file tools "
                    "may read it but never write or edit there. Write your files elsewhere.",
                )


def _leaves_by_symlink(joined: Path, root: Path) -> bool:
    # Only for the error message: did ".." alone stay inside (so a symlink must be to blame)?
    return _inside(Path(os.path.normpath(joined)), root)


def resolved_subject(ctx: ToolContext, tool: str, arguments: dict[str, object]) -> str | None:
    """The file a call's path argument (:data:`PATH_ARGUMENTS`; missing: ``.``) reaches
    after ``..`` and symbolic links, as :func:`display_path` shows it (workspace-relative,
    or absolute in a read-only root), for the approval rules and the hooks to judge; None
    for a tool without a path argument, or a path the tool itself will refuse."""
    key = PATH_ARGUMENTS.get(tool)
    if key is None:
        return None
    value = arguments.get(key, ".")
    if not isinstance(value, str):
        return None
    try:
        return display_path(ctx, resolve_path(ctx, value or "."))
    except ToolError:
        return None


def display_path(ctx: ToolContext, path: Path) -> str:
    """Return ``path`` for tool output: workspace-relative with forward slashes.

    The root itself is ``"."``; a path in a shared root (``ctx.shared_roots``) is shown
    by the workspace-relative spelling that reaches that root through a link (e.g.
    ``sub_agent_results/agent_1/report.md``); any other path outside the workspace (a
    read-only root) is shown absolute, with forward slashes.
    """
    root = workspace_root(ctx)
    p = Path(path)
    if not p.is_absolute():
        p = root / p
    try:
        rel = p.relative_to(root)
    except ValueError:
        real = Path(os.path.realpath(p))
        try:
            rel = real.relative_to(root)
        except ValueError:
            shown = _shared_spelling(ctx, root, real)
            return shown if shown is not None else p.as_posix()
    text = rel.as_posix()
    return text if text else "."


def _shared_spelling(ctx: ToolContext, root: Path, real: Path) -> str | None:
    """``real`` (resolved, in a shared root) spelled from the workspace: the shared
    root's last components, as few as reach it from ``root`` now (its link sits at the
    same relative path in the copy as the folder in the real workspace). None when no
    such spelling reaches it (the link was moved or swapped)."""
    shared = shared_root(ctx, real)
    if shared is None:
        return None
    parts = shared.parts
    for count in range(1, len(parts)):
        spelled = Path(*parts[-count:])
        if os.path.realpath(root / spelled) == str(shared):
            return (spelled / real.relative_to(shared)).as_posix()
    return None


def check_links(ctx: ToolContext, path: Path, st: os.stat_result) -> None:
    """Refuse a regular file with more than one hard link (unless ``allow_hard_links``).

    Symlinks are resolved by the path guard, but a hard link is the file itself: a link
    inside the workspace to a file outside it (``ln /etc/shadow x``, or a tarball that
    carried one) would let the tools show or change that file. Its other names cannot be
    found cheaply (it would take a walk of the whole file system), so every multiply
    linked file is refused; ``settings.allow_hard_links`` accepts them for workspaces
    that use hard links on purpose (``cp -al`` snapshots, pnpm's node_modules).
    Files the tools write are replaced by rename, so they always have one link.

    Raises:
        ToolError("outside_workspace") naming the reason and the setting.
    """
    if st.st_nlink > 1 and stat.S_ISREG(st.st_mode) and not ctx.settings.allow_hard_links:
        raise ToolError(
            "outside_workspace",
            f"{display_path(ctx, path)} has {st.st_nlink} hard links; its other names may be "
            "outside the workspace, so the file tools do not open it. Work on a copy "
            "(run_command: cp --no-preserve=links), or set allow_hard_links=true "
            "(AGENTKIT_ALLOW_HARD_LINKS=1) if this workspace uses hard links on purpose.",
        )
