"""Pure parts of the isolation engine: names, pathspecs and git's machine-readable output.

One job: turn text into data and back without running anything, so each piece is tested
in-process (tests/unit/test_isolation_units.py): a conversation id made safe for a ref
name, the pathspecs that say which files a snapshot takes, ``git diff --raw --numstat
-z``, ``git merge-tree --write-tree -z`` and ``git cat-file --batch`` output parsed, a
blob's object id, whether a symbolic link's target leaves the workspace.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MAX_LINK_HOPS",
    "MergeTreeOutput",
    "RawChange",
    "blob_id",
    "conflict_reason",
    "link_leaves",
    "parse_batch",
    "parse_merge_tree",
    "parse_raw_numstat",
    "ref_component",
    "snapshot_pathspecs",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_COMPONENT = 64


def ref_component(name: str) -> str:
    """``name`` as one component of a git ref (and a folder name): letters, digits,
    ``.``, ``_`` and ``-`` only, no leading ``.``/``-``, no ``..``, not ending in
    ``.lock`` or ``.``, at most 64 characters. A name that had to change gets a short
    hash of the original appended, so two different ids never share a component;
    an empty name becomes ``conversation-<hash>``."""
    safe = _UNSAFE.sub("-", name)
    safe = re.sub(r"\.{2,}", ".", safe).strip(".-")
    while safe.endswith(".lock") or safe.endswith("."):
        safe = safe.removesuffix(".lock").rstrip(".-")
    if safe == name and 0 < len(safe) <= MAX_COMPONENT:
        return safe
    digest = hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    stem = (safe or "conversation")[: MAX_COMPONENT - len(digest) - 1].rstrip(".-")
    return f"{stem}-{digest}"


def snapshot_pathspecs(prefix: str, exclude: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The pathspecs (relative to the repository's top, with ``:(top)`` magic) that say
    what a snapshot of the workspace ``prefix`` takes: everything below it except its
    ``.agentkit`` folder, any ``.subagent`` folder and each ``exclude`` path
    (workspace-relative). ``prefix`` is ``""`` or ``"sub/dir/"``."""
    # ":/" is the whole tree (":(top)." matches nothing in git 2.39).
    specs = [f":(top,literal){prefix.rstrip('/')}" if prefix else ":/"]
    specs.append(f":(top,literal,exclude){prefix}.agentkit")
    specs.append(f":(top,glob,exclude){_glob_escape(prefix)}**/.subagent/**")
    for path in exclude:
        cleaned = path.strip("/")
        if cleaned:
            specs.append(f":(top,literal,exclude){prefix}{cleaned}")
    return specs


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


@dataclass(frozen=True)
class RawChange:
    """One entry of ``git diff --raw``: modes (octal text, ``000000`` for none), object
    ids, status letter (``A``, ``M``, ``D``, ``T``), the top-relative path and line
    counts (``None`` for a binary file)."""

    old_mode: str
    new_mode: str
    old_id: str
    new_id: str
    status: str
    path: str
    insertions: int | None = 0
    deletions: int | None = 0


def parse_raw_numstat(data: bytes) -> list[RawChange]:
    """Parse ``git diff --raw --numstat -z --no-renames`` output (either part may be
    absent). Raw records come first (``:<m1> <m2> <id1> <id2> <S>\\0<path>\\0``), then
    numstat records (``<ins>\\t<del>\\t<path>\\0``, ``-`` for binary). Returns one
    change per raw record, with its counts."""
    fields = data.split(b"\0")
    raws: list[RawChange] = []
    counts: dict[str, tuple[int | None, int | None]] = {}
    i = 0
    while i < len(fields):
        item = fields[i]
        if item.startswith(b":"):
            meta = item[1:].decode("ascii", "replace").split(" ")
            path = fields[i + 1].decode("utf-8", "surrogateescape") if i + 1 < len(fields) else ""
            if len(meta) >= 5:
                raws.append(RawChange(meta[0], meta[1], meta[2], meta[3], meta[4][:1], path))
            i += 2
            continue
        parts = item.split(b"\t", 2)
        if len(parts) == 3:
            ins, dels = (None if p == b"-" else int(p) for p in parts[:2])
            counts[parts[2].decode("utf-8", "surrogateescape")] = (ins, dels)
        i += 1
    out = []
    for raw in raws:
        ins, dels = counts.get(raw.path, (0, 0))
        out.append(
            RawChange(
                raw.old_mode, raw.new_mode, raw.old_id, raw.new_id, raw.status, raw.path, ins, dels
            )  # fmt: skip
        )
    return out


@dataclass(frozen=True)
class MergeTreeOutput:
    """``git merge-tree --write-tree -z``, parsed: the merged ``tree``, the conflicted
    paths with the stages present (1 base, 2 ours, 3 theirs), and per path the
    conflict types and messages git gave (``CONFLICT (contents)``, ...)."""

    tree: str
    stages: dict[str, set[int]]
    messages: dict[str, list[tuple[str, str]]]


def parse_merge_tree(data: bytes) -> MergeTreeOutput:
    """Parse ``git merge-tree --write-tree -z`` output: ``<tree>\\0``, then conflicted
    entries ``<mode> <id> <stage>\\t<path>\\0``, an empty field, then messages
    ``<n>\\0<path>...\\0<type>\\0<message>\\0``. A clean merge has the tree only."""
    fields = data.split(b"\0")
    tree = fields[0].decode("ascii", "replace").strip()
    stages: dict[str, set[int]] = {}
    i = 1
    while i < len(fields) and fields[i]:
        meta, _, path = fields[i].partition(b"\t")
        parts = meta.split(b" ")
        if len(parts) == 3 and parts[2].isdigit():
            stages.setdefault(path.decode("utf-8", "surrogateescape"), set()).add(int(parts[2]))
        i += 1
    i += 1
    messages: dict[str, list[tuple[str, str]]] = {}
    while i < len(fields) and fields[i].isdigit():
        count = int(fields[i])
        names = [f.decode("utf-8", "surrogateescape") for f in fields[i + 1 : i + 1 + count]]
        kind_index = i + 1 + count
        if kind_index + 1 >= len(fields):
            break
        kind = fields[kind_index].decode("utf-8", "replace")
        message = fields[kind_index + 1].decode("utf-8", "replace").strip()
        for name in names:
            messages.setdefault(name, []).append((kind, message))
        i = kind_index + 2
    return MergeTreeOutput(tree, stages, messages)


ConflictReason = Literal["both_modified", "modify_delete", "both_added", "other"]


def conflict_reason(stages: set[int], kinds: list[str]) -> ConflictReason:
    """The report's ``reason`` for one conflicted path, from the stages present and git's
    conflict types: all three stages (or ``contents``) are overlapping edits; base plus
    one side is an edit against a deletion; both sides without a base are two additions."""
    text = " ".join(kinds).lower()
    if "modify/delete" in text or stages in ({1, 2}, {1, 3}):
        return "modify_delete"
    if "add/add" in text or stages == {2, 3}:
        return "both_added"
    if "(content" in text or stages == {1, 2, 3}:
        return "both_modified"
    return "other"


def blob_id(data: bytes, object_format: str = "sha1") -> str:
    """The id git gives a blob holding ``data`` (``sha1`` or ``sha256`` repositories)."""
    digest = hashlib.new(object_format)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


MAX_LINK_TARGET = 4096
"""Characters of a symbolic link's target kept (Linux's PATH_MAX)."""


def parse_batch(data: bytes) -> dict[str, str]:
    """Parse ``git cat-file --batch`` output (``<id> <type> <size>\\n<bytes>\\n`` per
    object; ``<id> missing`` for none) into ``{id: contents}``, each decoded as a path
    (surrogateescape). A record cut short by an output cap ends the parse."""
    found: dict[str, str] = {}
    at = 0
    while (end := data.find(b"\n", at)) != -1:
        head = data[at:end].decode("ascii", "replace").split(" ")
        if len(head) != 3 or not head[2].isdigit():
            at = end + 1  # "<id> missing": nothing follows
            continue
        size = int(head[2])
        body = data[end + 1 : end + 1 + size]
        if len(body) < size:
            break
        found[head[0]] = body.decode("utf-8", "surrogateescape")
        at = end + 1 + size + 1
    return found


MAX_LINK_HOPS = 40
"""Links followed while judging one target (Linux's MAXSYMLINKS); more is a loop."""


def link_leaves(path: str, target: str, link_at: Callable[[str], str | None] | None = None) -> bool:
    """True when a symbolic link at ``path`` (top-relative, POSIX) pointing at
    ``target`` leads out of the top folder (a workspace, a deliverables folder).

    The target is followed component by component as the kernel would: where a prefix
    is itself a link (``link_at(prefix)`` gives its target, None for none), its target
    replaces it, so ``q -> .`` then ``pw -> q/q/../../etc/passwd`` is seen to climb
    out. Leaving means: an absolute target (here or along the way), an empty one, one
    no system takes (a NUL, :data:`MAX_LINK_TARGET` characters or more), ``..`` above
    the top, or more than :data:`MAX_LINK_HOPS` links followed (a loop). Without
    ``link_at`` no other link is known and the target is judged as text."""
    todo = _parts(target) + _parts(posixpath.dirname(path))
    if _unusable(target):
        return True
    where: list[str] = []  # the folders reached so far, none of them a link
    hops = 0
    while todo:
        part = todo.pop()
        if part == "..":
            if not where:
                return True
            where.pop()
            continue
        where.append(part)
        found = link_at("/".join(where)) if link_at is not None else None
        if found is None:
            continue
        hops += 1
        if hops > MAX_LINK_HOPS or _unusable(found):
            return True
        where.pop()  # the link's target is read from the link's own folder
        todo += _parts(found)
    return False


def _unusable(target: str) -> bool:
    return not target or target.startswith("/") or "\0" in target or len(target) >= MAX_LINK_TARGET


def _parts(text: str) -> list[str]:
    """``text``'s components, ``.`` and empty ones dropped, reversed (a stack)."""
    return [p for p in reversed(text.split("/")) if p not in ("", ".")]
