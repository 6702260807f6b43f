"""Ignore rules, glob filter, the pure-Python walker and the search's shared data (private).

Shared by both engines of search_workspace: :class:`SearchJob` (what to search),
:class:`Collector` (bounded result rows) and :func:`preview_line` (long-line cutting).

Ignore semantics follow ripgrep's ``ignore`` crate with ``--no-require-git --hidden``, so
the Python path and the ripgrep path give the same files (docs/tools.md §6 search_workspace):

* each folder may hold ``.rgignore``, ``.ignore``, ``.gitignore`` and
  ``.git/info/exclude``; patterns use gitignore syntax (pathspec's GitIgnoreSpec)
  relative to that folder;
* for an entry, each kind of file is consulted from the deepest folder upwards and the
  first folder whose patterns match decides (ignore, or whitelist with ``!pattern``);
  with ``--no-require-git`` ripgrep sees no repository boundaries, so neither do we (a
  nested repository still inherits its parent folders' ``.gitignore``);
* precedence between kinds: ``.rgignore`` > ``.ignore`` > ``.gitignore`` > exclude;
* ``.git`` is always skipped, symbolic links are never followed (files or folders) and
  only regular files are read, so a walk cannot loop or leave the tree.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pathspec import GitIgnoreSpec

_NAMES = (".rgignore", ".ignore", ".gitignore")
Chain = tuple["DirRules", ...]


def _read_spec(path: str) -> GitIgnoreSpec | None:
    try:
        with open(path, "rb") as fh:
            text = fh.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return GitIgnoreSpec.from_lines(lines) if lines else None


@dataclass(frozen=True)
class DirRules:
    """The ignore patterns of one folder.

    ``base`` is the folder relative to the ignore root, ``""`` or ending with ``/``.
    ``specs`` holds (rgignore, ignore, gitignore, exclude) specs, None when absent.
    """

    base: str
    specs: tuple[GitIgnoreSpec | None, ...]


def load_rules(abs_dir: str, base: str, present: set[str] | None = None) -> DirRules | None:
    """Read the ignore files of ``abs_dir``; None when it has none.

    ``present`` (names found by a directory listing) avoids stat calls when given.
    """

    def has(name: str) -> bool:
        if present is not None:
            return name in present
        return os.path.lexists(os.path.join(abs_dir, name))

    specs: list[GitIgnoreSpec | None] = [
        _read_spec(os.path.join(abs_dir, n)) if has(n) else None for n in _NAMES
    ]
    exclude = None
    if has(".git"):
        exclude = _read_spec(os.path.join(abs_dir, ".git", "info", "exclude"))
    specs.append(exclude)
    if not any(specs):
        return None
    return DirRules(base, tuple(specs))


def is_ignored(chain: Chain, rel: str, is_dir: bool) -> bool:
    """Return True when ``rel`` (relative to the ignore root) is ignored by ``chain``."""
    if not chain:
        return False
    found: list[bool | None] = [None, None, None, None]
    for rules in reversed(chain):
        sub = rel[len(rules.base) :] + ("/" if is_dir else "")
        for kind, spec in enumerate(rules.specs):
            if spec is not None and found[kind] is None:
                found[kind] = spec.check_file(sub).include
    for decision in found:
        if decision is not None:
            return decision
    return False


def expand_braces(glob: str) -> list[str]:
    """Expand ``{a,b}`` alternatives (nested allowed): ``*.{ts,tsx}`` -> ``*.ts``, ``*.tsx``."""
    depth = 0
    start = -1
    for i, ch in enumerate(glob):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                parts, level, last = [], 0, start + 1
                for j in range(start + 1, i):
                    c = glob[j]
                    level += c == "{"
                    level -= c == "}"
                    if c == "," and level == 0:
                        parts.append(glob[last:j])
                        last = j + 1
                parts.append(glob[last:i])
                if len(parts) == 1:
                    continue
                out: list[str] = []
                for part in parts:
                    out.extend(expand_braces(glob[:start] + part + glob[i + 1 :]))
                return out
    return [glob]


class GlobFilter:
    """A path filter from one glob (gitignore glob syntax, ``**`` and ``{a,b}`` supported).

    A glob without ``/`` matches the name at any depth; with ``/`` it is anchored to the
    searched folder; a glob naming a folder selects the files inside it; a leading ``!``
    excludes instead of selecting.
    """

    def __init__(self, glob: str) -> None:
        self.negate = glob.startswith("!")
        body = glob[1:] if self.negate else glob
        self.patterns = [p for p in expand_braces(body.strip()) if p]
        self.spec = GitIgnoreSpec.from_lines(self.patterns)

    def accepts(self, rel: str) -> bool:
        """Return True when the file ``rel`` (relative to the searched folder) passes."""
        return self.spec.match_file(rel) != self.negate

    def prunes_dir(self, rel: str) -> bool:
        """Return True when the folder ``rel`` can be skipped entirely (negated globs)."""
        return self.negate and self.spec.match_file(rel + "/")


def prefix_chain(root: str, parts: list[str]) -> tuple[Chain, bool]:
    """Rules of ``root`` and of each folder down to (excluding) ``root/parts``.

    Returns ``(chain, ignored)``: ``ignored`` is True when ``parts`` (or a folder on the
    way) is itself excluded by those rules.
    """
    chain: Chain = ()
    abs_dir = root
    base = ""
    ignored = False
    for part in parts:
        rules = load_rules(abs_dir, base)
        if rules is not None:
            chain = (*chain, rules)
        rel = base + part
        ignored = ignored or part == ".git" or is_ignored(chain, rel, True)
        abs_dir = os.path.join(abs_dir, part)
        base = rel + "/"
    return chain, ignored


@dataclass
class WalkStats:
    """Counters of one walk (files seen, folders visited, hard-linked files skipped)."""

    files: int = 0
    dirs: int = 0
    linked: int = 0


def walk_files(
    abs_root: str,
    ignore_base: str,
    chain: Chain | None,
    glob: GlobFilter | None,
    stop: threading.Event,
    stats: WalkStats,
    skip_top: frozenset[str] = frozenset(),
) -> Iterator[tuple[str, str]]:
    """Yield ``(rel, abs_path)`` for every regular file under ``abs_root`` that passes.

    Args:
        abs_root: the folder to walk.
        ignore_base: ``abs_root`` relative to the ignore root, ``""`` or ending with ``/``.
        chain: rules of the folders above ``abs_root`` (None: ignore files disabled).
        glob: optional path filter, applied to paths relative to ``abs_root``.
        stop: set to end the walk early.
        stats: updated as the walk goes.
        skip_top: names skipped directly under ``abs_root`` (e.g. ``.agentkit``).

    Order is unspecified (callers sort). Never follows symlinks; tracks (dev, inode) of
    folders so bind-mount loops end too.
    """
    seen: set[tuple[int, int]] = set()
    try:
        st = os.stat(abs_root)
        seen.add((st.st_dev, st.st_ino))
    except OSError:
        return
    stack: list[tuple[str, str, Chain | None]] = [(abs_root, "", chain)]
    while stack:
        if stop.is_set():
            return
        abs_dir, rel_dir, dir_chain = stack.pop()
        try:
            with os.scandir(abs_dir) as it:
                entries = list(it)
        except OSError:
            continue
        stats.dirs += 1
        if dir_chain is not None:
            rules = load_rules(abs_dir, ignore_base + rel_dir, {e.name for e in entries})
            if rules is not None:
                dir_chain = (*dir_chain, rules)
        for entry in entries:
            name = entry.name
            if name == ".git" or (not rel_dir and name in skip_top):
                continue
            rel = rel_dir + name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if dir_chain and is_ignored(dir_chain, ignore_base + rel, True):
                        continue
                    if glob is not None and glob.prunes_dir(rel):
                        continue
                    est = entry.stat(follow_symlinks=False)
                    key = (est.st_dev, est.st_ino)
                    if key not in seen:
                        seen.add(key)
                        stack.append((entry.path, rel + "/", dir_chain))
                elif entry.is_file(follow_symlinks=False):
                    if dir_chain and is_ignored(dir_chain, ignore_base + rel, False):
                        continue
                    if glob is not None and not glob.accepts(rel):
                        continue
                    stats.files += 1
                    yield rel, entry.path
            except OSError:
                continue


PREVIEW_CHARS = 200  # docs/tools.md: per-line preview around the match


def preview_line(line: str, col: int) -> str:
    """Return ``line`` for a row: whole when short, else ~200 chars around column ``col``.

    ``col`` is the 0-based character offset of the first match.
    """
    if len(line) <= PREVIEW_CHARS:
        return line
    start = max(0, min(col - PREVIEW_CHARS * 2 // 5, len(line) - PREVIEW_CHARS))
    end = start + PREVIEW_CHARS
    cut = ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")
    return f"{cut} [line is {len(line)} chars, match at col {col + 1}]"


class Collector:
    """Keeps the first ``keep`` rows by (path, line) with bounded memory, counts the rest."""

    def __init__(self, keep: int, withhold: Callable[[str], bool] | None = None) -> None:
        self.keep = keep
        self.withhold = withhold  # a shown path -> True: its lines are left out, uncounted
        self.rows: list[tuple[str, int, str]] = []
        self.per_file: dict[str, int] = {}
        self.total = 0
        self.lock = threading.Lock()

    def add(self, path: str, line: int, text: str) -> None:
        """Add one row (thread-safe). Rows beyond the first ``keep`` are only counted."""
        with self.lock:
            self.rows.append((path, line, text))
            self.per_file[path] = self.per_file.get(path, 0) + 1
            self.total += 1
            if len(self.rows) > 2 * self.keep + 256:
                self.rows.sort()
                del self.rows[self.keep :]

    def add_file(self, path: str, rows: list[tuple[int, str]], count: int) -> None:
        """Add the first rows of one file and the number of its matching lines (none of
        a file ``withhold`` names: not even counted, so no count tells what it holds)."""
        if self.withhold is not None and self.withhold(path):
            return
        with self.lock:
            self.rows.extend((path, line, text) for line, text in rows)
            self.per_file[path] = self.per_file.get(path, 0) + count
            self.total += count
            if len(self.rows) > 2 * self.keep + 256:
                self.rows.sort()
                del self.rows[self.keep :]

    def snapshot(self) -> tuple[list[tuple[str, int, str]], int, int]:
        """Return ``(first keep rows sorted by path and line, matching lines, files)``."""
        with self.lock:
            rows = sorted(self.rows)[: self.keep]
            return rows, self.total, len(self.per_file)


@dataclass
class SearchJob:
    """What one search looks at and how (built by search._make_job)."""

    root: str  # absolute search folder (or file)
    prefix: str  # display prefix of paths under root ("" or "src/")
    ignore_root: str
    ignore_base: str  # root relative to ignore_root ("" or "src/")
    chain: Chain | None  # rules above root; None when ignore files are off
    rx: re.Pattern[str] | None  # None lists files
    prefilter: bool
    glob: GlobFilter | None
    max_bytes: int
    skip_top: frozenset[str]
    allow_hard_links: bool = (
        False  # settings.allow_hard_links (see agentkit.tools.paths.check_links)
    )
    stats: WalkStats = field(default_factory=WalkStats)


def read_text(
    abs_path: str, max_bytes: int, allow_links: bool = True, stats: WalkStats | None = None
) -> str | None:
    """Return a file's text for searching, or None when it is binary, unreadable or too big.

    Mirrors ripgrep's defaults: a UTF-8 BOM is dropped, UTF-16 files with a BOM are
    transcoded, and a NUL byte anywhere marks the file binary (the sniff of the first
    8 KiB catches most; the rest is checked because ripgrep checks it too). Invalid UTF-8
    is replaced. Opened with O_NONBLOCK | O_NOFOLLOW so a FIFO or a swapped-in symlink
    cannot block or redirect the read. Unless ``allow_links``, a file with several hard
    links is not read (its other names may be outside the workspace; see
    ``agentkit.tools.paths.check_links``) and counted in ``stats.linked``.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(abs_path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        if st.st_nlink > 1 and not allow_links:
            if stats is not None:
                stats.linked += 1
            return None
        parts: list[bytes] = []
        got = 0
        while got <= max_bytes:  # the file may grow after fstat: never read past the cap
            chunk = os.read(fd, st.st_size + 1 if not parts else 1 << 20)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts) if len(parts) != 1 else parts[0]
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return None
    if data.startswith(codecs.BOM_UTF8):
        text = data[3:].decode("utf-8", "replace")
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", "replace")
    else:
        if b"\0" in data:  # covers the 8 KiB sniff and ripgrep's NUL-anywhere rule
            return None
        return data.decode("utf-8", "replace")
    return None if "\0" in text else text
