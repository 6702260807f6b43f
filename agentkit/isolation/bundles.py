"""An isolated copy carried to another machine and its work carried back: git bundles.

One job: move a copy (agentkit.isolation.copies) between the main machine and a
machine that does not share its disk (a Ray node), as bytes.

- :func:`pack_base` (main machine): the copy's saved state (its base, or its last saved
  head for a continued run) as one parentless commit, kept on a private ref
  ``refs/agentkit/transfer/<branch>`` and bundled (``git bundle``): the files only, never
  the repository's history.
- :func:`unpack` (the other machine): a bare repository and a worktree on the copy's
  branch under a local folder; returns the node-local :class:`Copy`.
- :func:`pack_result` (the other machine): save the local copy (its files committed on
  its branch) and bundle what it made since the base it was sent, behind a short header.
- :func:`import_result` (main machine): unbundle into the real repository, check that the
  work descends from the state sent, commit its files on the copy's branch (a
  fast-forward of the branch) and write the changed files into the copy's worktree here,
  so the copy on the main machine is what the sub-agent left.

The deliverables folder travels as a tar archive (:func:`pack_folder`,
:func:`unpack_folder`, from agentkit.isolation.archives).
Every bundle is capped (:data:`MAX_BUNDLE_BYTES`); errors are IsolationError.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agentkit.isolation._git import git
from agentkit.isolation.archives import pack_folder, unpack_folder
from agentkit.isolation.types import Copy, IsolationError

__all__ = [
    "MAX_BUNDLE_BYTES",
    "import_result",
    "pack_base",
    "pack_folder",
    "pack_result",
    "transfer_ref",
    "unpack",
    "unpack_folder",
]

MAX_BUNDLE_BYTES = 512 * 1024 * 1024
"""Largest bundle made or read (bytes). A copy's files beyond it do not travel."""
TRANSFER = "refs/agentkit/transfer"
RESULT_MAGIC = b"agentkit-result 1\n"
_HEADER_MAX = 1024
_MiB = 1024 * 1024


def transfer_ref(copy: Copy) -> str:
    """The private ref that keeps the commit sent to the other machine:
    ``refs/agentkit/transfer/<branch>``."""
    return f"{TRANSFER}/{copy.branch}"


# ------------------------------------------------------------------ main machine: out


def pack_base(copy: Copy) -> bytes:
    """Bundle what the copy's sub-agent starts from on another machine.

    The copy is saved first (when its worktree is here), then its branch's head tree
    becomes one parentless commit on :func:`transfer_ref` (so the bundle holds the files,
    not the repository's history); the bundle holds that ref.

    Returns:
        The bundle's bytes (at most :data:`MAX_BUNDLE_BYTES`).

    Raises:
        IsolationError: the copy is gone, git failed, or the bundle is over the cap.
    """
    from agentkit.isolation.copies import save_copy

    git_dir = Path(copy.git_dir)
    head = save_copy(copy)
    tree = _rev(git_dir, f"{head}^{{tree}}")
    message = f"agentkit: {copy.branch} as sent to another machine (from {head})"
    start = _run(git_dir, ["commit-tree", tree, "-m", message]).strip()
    _run(git_dir, ["update-ref", "-m", "agentkit transfer", transfer_ref(copy), start])
    return _bundle(git_dir, [transfer_ref(copy)], f"the copy of {copy.branch}")


# ------------------------------------------------------------------ other machine


def unpack(bundle: bytes, dest: Path, copy: Copy) -> Copy:
    """Make a node-local copy from :func:`pack_base`'s bundle.

    Args:
        bundle: the bytes :func:`pack_base` returned.
        dest: a folder of this machine (created; must not hold an earlier copy): the
            repository goes to ``dest/repo.git``, the worktree to ``dest/work``.
        copy: the copy as recorded on the main machine (branch, prefix, exclude).

    Returns:
        The local :class:`Copy`: ``root``, ``worktree`` and ``git_dir`` are here, ``base``
        is the commit sent; branch, base_ref, prefix and exclude are the recorded ones.

    Raises:
        IsolationError: the bundle is over the cap or damaged, ``dest`` holds a copy
        already, or git failed.
    """
    _check_size(len(bundle), "the copy's bundle")
    dest = Path(dest)
    git_dir, work = dest / "repo.git", dest / "work"
    if git_dir.exists() or work.exists():
        raise IsolationError(f"{dest} holds a copy already")
    dest.mkdir(parents=True, exist_ok=True)
    git(["init", "-q", "--bare", str(git_dir)], cwd=dest)
    refs = _unbundle(git_dir, bundle)
    if len(refs) != 1:
        raise IsolationError(f"the copy's bundle names {len(refs)} refs, not one")
    start = refs[0][0]
    _run(git_dir, ["update-ref", f"refs/heads/{copy.branch}", start, ""])
    _run(git_dir, ["update-ref", copy.base_ref, start, ""])
    _run(git_dir, ["worktree", "add", "-q", str(work), copy.branch], cwd=dest)
    root = work / copy.prefix if copy.prefix else work
    root.mkdir(parents=True, exist_ok=True)
    return Copy(
        kind=copy.kind, root=str(root), worktree=str(work), git_dir=str(git_dir),
        prefix=copy.prefix, branch=copy.branch, base=start, base_ref=copy.base_ref,
        exclude=copy.exclude, created_at=copy.created_at,
    )  # fmt: skip


def pack_result(local: Copy) -> bytes:
    """Save the node-local copy and bundle its work for :func:`import_result`.

    Returns:
        A header (``agentkit-result 1``, the base sent and the saved head) followed by a
        bundle of the commits from the base to the head (nothing when the sub-agent
        changed no file).

    Raises:
        IsolationError: git failed, or the bundle is over the cap.
    """
    from agentkit.isolation.copies import save_copy

    git_dir = Path(local.git_dir)
    head = save_copy(local)
    header = RESULT_MAGIC + f"base {local.base}\nhead {head}\n\n".encode("ascii")
    if head == local.base:
        return header
    ref = f"{TRANSFER}/result"
    _run(git_dir, ["update-ref", ref, head])
    return header + _bundle(git_dir, [ref, f"^{local.base}"], "the sub-agent's work")


def parse_result(data: bytes) -> tuple[str, str, bytes]:
    """``(base, head, bundle)`` from :func:`pack_result`'s bytes; IsolationError when the
    header is missing or damaged (``bundle`` is empty when nothing changed)."""
    if not data.startswith(RESULT_MAGIC):
        raise IsolationError("the work sent back is not an agentkit result bundle")
    end = data.find(b"\n\n", 0, _HEADER_MAX)
    if end < 0:
        raise IsolationError("the work sent back has a damaged header")
    fields: dict[str, str] = {}
    for line in data[len(RESULT_MAGIC) : end].decode("ascii", "replace").splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value.strip()
    base, head = fields.get("base", ""), fields.get("head", "")
    if not (_is_id(base) and _is_id(head)):
        raise IsolationError("the work sent back names no valid base and head commits")
    return base, head, data[end + 2 :]


# ------------------------------------------------------------------ main machine: in


def import_result(copy: Copy, data: bytes) -> str:
    """Bring the work done on another machine into the copy here.

    The bundle's commits go into the real repository; its head must descend from the
    commit :func:`pack_base` sent (the transfer ref), and the copy's branch here must
    still hold the files sent. The head's files (its paths under ``copy.exclude`` and any
    ``.subagent`` folder left as sent) are committed on the branch with the branch's
    head as parent (a fast-forward), the changed files are written into the copy's
    worktree (its own index updated; the user's index, HEAD and files untouched), and
    the transfer ref is dropped. Without a worktree here the work lives on the branch.

    Returns:
        The branch's head commit after the import.

    Raises:
        IsolationError: the bytes are damaged or over the cap, the result is not for
        the base sent, the work does not descend from it, the branch moved here
        meanwhile, or git failed. The branch then keeps what it had.
    """
    base, head, payload = parse_result(data)
    git_dir = Path(copy.git_dir)
    sent = _rev(git_dir, f"{transfer_ref(copy)}^{{commit}}", what="the commit sent")
    if sent != base:
        raise IsolationError(f"the work sent back starts from {base[:12]}, not {sent[:12]}")
    current = _rev(git_dir, f"refs/heads/{copy.branch}^{{commit}}", what="the copy's branch")
    sent_tree = _rev(git_dir, f"{sent}^{{tree}}")
    if _rev(git_dir, f"{current}^{{tree}}") != sent_tree:
        raise IsolationError(
            f"the branch {copy.branch} changed here since its files were sent; "
            "the work done elsewhere is not brought in"
        )
    new = current
    if head != sent:
        _check_size(len(payload), "the sub-agent's work")
        refs = _unbundle(git_dir, payload)
        if [sha for sha, _ in refs] != [head]:
            raise IsolationError("the work sent back does not hold the head it names")
        ancestry = git(["merge-base", "--is-ancestor", sent, head], cwd=git_dir,
                       git_dir=git_dir, check=False)  # fmt: skip
        if ancestry.returncode != 0:
            raise IsolationError("the work sent back does not descend from the files sent")
        tree = _kept_tree(copy, sent_tree, _rev(git_dir, f"{head}^{{tree}}"))
        if tree != sent_tree:
            message = f"agentkit: work done on another machine ({head})"
            new = _run(git_dir, ["commit-tree", tree, "-p", current, "-m", message]).strip()
            # The worktree first, the branch last: if writing a file fails, the branch
            # still matches the worktree's base and the next save cannot undo the work.
            try:
                _write_worktree(copy, sent_tree, tree)
            except (OSError, UnicodeError, ValueError) as exc:
                raise IsolationError(f"could not write the work into the copy: {exc}; "
                                     f"the branch {copy.branch} keeps what it had") from None  # fmt: skip
            _run(git_dir, ["update-ref", "-m", "agentkit import", f"refs/heads/{copy.branch}",
                           new, current])  # fmt: skip
    _run(git_dir, ["update-ref", "-d", transfer_ref(copy)])
    return new


def _kept_tree(copy: Copy, sent_tree: str, tree: str) -> str:
    """``tree`` with every path the copy never carries (``copy.exclude``, ``.subagent``
    folders, ``.agentkit``) as it was in ``sent_tree``: work there (a ``git commit``
    run by the sub-agent) is not part of its change."""
    git_dir = Path(copy.git_dir)
    changed = _changed(git_dir, sent_tree, tree)
    foreign = [path for _, path in changed if not _carried(copy, path)]
    if not foreign:
        return tree
    with _temp_index(git_dir) as index:
        env = {"cwd": git_dir, "git_dir": git_dir, "index_file": index}
        git(["read-tree", tree], **env)  # type: ignore[arg-type]
        git(["update-index", "--force-remove", "-z", "--stdin"],
            stdin=b"\0".join(os.fsencode(p) for p in foreign) + b"\0", **env)  # type: ignore[arg-type]  # fmt: skip
        listing = git(["ls-tree", "-r", "-z", sent_tree, "--", *foreign], **env).stdout  # type: ignore[arg-type]
        if listing:
            git(["update-index", "-z", "--index-info"], stdin=listing, **env)  # type: ignore[arg-type]
        return git(["write-tree"], **env).text.strip()  # type: ignore[arg-type]


def _write_worktree(copy: Copy, old_tree: str, new_tree: str) -> None:
    """Make the copy's worktree here hold ``new_tree``'s files where they differ from
    ``old_tree`` (deletions removed, the rest written by git); its own index follows."""
    from agentkit.confined import folder
    from agentkit.isolation.copies import _head_is_branch, _relink, _worktree_admin

    worktree = Path(copy.worktree)
    admin = _worktree_admin(copy)  # git's entry, never the copy's own .git file
    if admin is None or not worktree.is_dir():
        return  # no worktree here: the work lives on the branch
    _relink(worktree, admin)
    changed = [(s, p) for s, p in _changed(Path(copy.git_dir), old_tree, new_tree)
               if _carried(copy, p)]  # fmt: skip
    for _, path in (item for item in changed if item[0] == "D"):
        target = worktree / path
        try:
            with contextlib.suppress(FileNotFoundError), folder(worktree, target.parent) as fd:
                os.unlink(target.name, dir_fd=fd)
        except OSError as exc:  # a folder replaced by a link: never followed
            raise IsolationError(f"could not remove {target} from the copy: {exc}") from None
    written = [p for s, p in changed if s != "D"]
    with _temp_index(Path(copy.git_dir)) as index:
        env = {"cwd": worktree, "git_dir": admin, "work_tree": worktree, "index_file": index}
        git(["read-tree", new_tree], **env)  # type: ignore[arg-type]
        if written:
            paths = b"\0".join(os.fsencode(p) for p in written) + b"\0"
            git(["checkout-index", "-f", "-z", "--stdin"], stdin=paths, **env)  # type: ignore[arg-type]
        if _head_is_branch(admin, copy.branch):
            with contextlib.suppress(OSError):
                shutil.copyfile(index, admin / "index.agentkit")
                os.replace(admin / "index.agentkit", admin / "index")


def _carried(copy: Copy, path: str) -> bool:
    """True when the repository path ``path`` is part of the copy's change (below its
    prefix, not under an excluded path, a ``.subagent`` folder or ``.agentkit``)."""
    if not path.startswith(copy.prefix):
        return False
    rel = path[len(copy.prefix) :]
    parts = rel.split("/")
    if ".subagent" in parts[:-1] or parts[0] == ".agentkit":
        return False
    return not any(rel == ex or rel.startswith(ex + "/") for ex in copy.exclude)


def _changed(git_dir: Path, old: str, new: str) -> list[tuple[str, str]]:
    """``[(status letter, path)]`` from ``git diff-tree -r`` between two trees."""
    out = git(["diff-tree", "-r", "-z", "--no-renames", old, new], cwd=git_dir,
              git_dir=git_dir).stdout  # fmt: skip
    items = out.split(b"\0")
    result: list[tuple[str, str]] = []
    for meta, path in zip(items[0::2], items[1::2], strict=False):
        if meta.startswith(b":"):
            result.append((meta.decode("ascii", "replace").split()[-1][:1],
                           path.decode("utf-8", "surrogateescape")))  # fmt: skip
    return result


# ------------------------------------------------------------------ helpers


def _bundle(git_dir: Path, revs: list[str], what: str) -> bytes:
    result = git(["bundle", "create", "-q", "-", *revs], cwd=git_dir, git_dir=git_dir,
                 limit=MAX_BUNDLE_BYTES + 1)  # fmt: skip
    _check_size(len(result.stdout) + (1 if result.truncated else 0), what)
    return result.stdout


def _unbundle(git_dir: Path, bundle: bytes) -> list[tuple[str, str]]:
    """Write ``bundle``'s objects into ``git_dir`` (its prerequisites must be there);
    return its ``[(commit, ref name)]``. No ref is changed."""
    with tempfile.TemporaryDirectory(prefix="agentkit-bundle-") as folder:
        path = Path(folder) / "in.bundle"
        path.write_bytes(bundle)
        git(["bundle", "verify", "-q", str(path)], cwd=git_dir, git_dir=git_dir)
        out = git(["bundle", "unbundle", str(path)], cwd=git_dir, git_dir=git_dir).text
    refs = []
    for line in out.splitlines():
        sha, _, name = line.partition(" ")
        if _is_id(sha):
            refs.append((sha, name.strip()))
    return refs


@contextlib.contextmanager
def _temp_index(git_dir: Path) -> Iterator[Path]:
    """An empty temporary index in ``git_dir`` (never the user's), removed afterwards."""
    from agentkit.isolation.snapshot import temp_index

    with temp_index(git_dir, None) as index:
        yield index


def _check_size(size: int, what: str) -> None:
    if size > MAX_BUNDLE_BYTES:
        raise IsolationError(
            f"{what} is over {MAX_BUNDLE_BYTES // _MiB} MiB as a git bundle; "
            "it cannot travel between machines (use storage every node shares)"
        )


def _run(git_dir: Path, args: list[str], cwd: Path | None = None) -> str:
    return git(args, cwd=cwd or git_dir, git_dir=git_dir).text


def _rev(git_dir: Path, rev: str, *, what: str = "") -> str:
    result = git(["rev-parse", "-q", "--verify", rev], cwd=git_dir, git_dir=git_dir, check=False)
    if result.returncode != 0:
        raise IsolationError(f"{what or rev} is missing in {git_dir}")
    return result.text.strip()


def _is_id(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
