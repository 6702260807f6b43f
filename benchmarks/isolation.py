"""Benchmark: isolated sub-agents' copies (issue 34) on a 10,000-file workspace.

Usage: ``python benchmarks/isolation.py [--files N] [--reps N] [--changed N]``

Two workspaces with the same files (100 folders of 100 text files, about 1 kB each):
a git repository (everything committed, then 10 files edited and 10 new untracked
files, as a working tree usually is) and a plain folder (outside git: the private
snapshots repository). For each it prints, as medians over ``--reps`` runs:

* ``create_copy``: snapshot of the workspace (a temporary index copied from the user's,
  ``git add -A``, ``write-tree``, ``commit-tree``) and the worktree (``git worktree add``,
  which writes every file of the copy), and the two parts measured alone. For the plain
  folder the very first copy is shown apart: it reads every file once (no index yet).
* ``merge`` of a change to ``--changed`` files (half edited, a quarter new, a quarter
  deleted) made in the copy and not yet saved: the save, the workspace's snapshot,
  ``merge-tree`` and writing the files; and the same as a dry run.
* ``discard``.

Goals (issue 34): create under 300 ms, merge of a 50-file change under 500 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# Loopback only: tiktoken would download its tables from the internet.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentkit import isolation as iso  # noqa: E402
from agentkit.isolation.snapshot import locate, snapshot  # noqa: E402

LINE = "the quick brown fox jumps over the lazy dog, line {n} of file {f}\n"


def build(folder: Path, files: int, use_git: bool) -> None:
    """``files`` text files in folders of 100; with git, committed then a little dirty."""
    for i in range(files):
        path = folder / f"pkg{i // 100:03d}" / f"mod{i % 100:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(LINE.format(n=n, f=i) for n in range(16)))
    if not use_git:
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    run = dict(cwd=folder, env=env, check=True, capture_output=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "add", "-A"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"],
                   **run)  # type: ignore[call-overload]  # fmt: skip
    for i in range(10):
        (folder / f"pkg{i:03d}" / "mod000.py").write_text("edited by the user\n")
        (folder / f"pkg{i:03d}" / "untracked.py").write_text("new, not added\n")


def timed(func: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    value = func()
    return (time.perf_counter() - started) * 1000, value


def edit(root: Path, changed: int) -> None:
    """A sub-agent's change to ``changed`` files: half edited, a quarter new, a quarter
    deleted, spread over the tree."""
    edits, adds = changed // 2, changed // 4
    dels = changed - edits - adds
    for n in range(edits):
        path = root / f"pkg{(n * 7) % 100:03d}" / f"mod{50 + n % 40:03d}.py"
        path.write_text(path.read_text().replace("lazy dog", "sleepy cat", 1))
    for n in range(adds):
        (root / f"pkg{n:03d}" / f"new_{n}.py").write_text(f"added by the sub-agent {n}\n")
    for n in range(dels):
        (root / f"pkg{(n * 13) % 100:03d}" / f"mod{95 + n % 5:03d}.py").unlink(missing_ok=True)


def bench(kind: str, folder: Path, reps: int, changed: int) -> dict[str, float]:
    med: dict[str, list[float]] = {}

    def note(name: str, ms: float) -> None:
        med.setdefault(name, []).append(ms)

    if kind == "plain":
        ms, first = timed(lambda: iso.create_copy(folder, "bench", 999))
        note("first create_copy (no index yet)", ms)
        iso.discard(first)  # type: ignore[arg-type]
    for rep in range(reps):
        repo = locate(folder)
        ms, _ = timed(lambda: snapshot(repo, (), repo.head, "bench"))  # noqa: B023
        note("  snapshot alone", ms)
        ms, copy = timed(lambda: iso.create_copy(folder, "bench", rep))  # noqa: B023
        note("create_copy", ms)
        assert isinstance(copy, iso.Copy)
        edit(Path(copy.root), changed)
        ms, _ = timed(lambda: iso.merge(folder, copy, dry_run=True))  # noqa: B023
        note(f"merge of {changed} files, dry run (saves first)", ms)
        edit(Path(copy.root), 0)
        Path(copy.root, "pkg099", "touch.py").write_text(f"rep {rep}\n")  # unsaved again
        ms, report = timed(lambda: iso.merge(folder, copy))  # noqa: B023
        assert report.status == "merged", report  # type: ignore[attr-defined]
        note(f"merge of {changed}+1 files", ms)
        ms, _ = timed(lambda: iso.discard(copy))  # noqa: B023
        note("discard", ms)
    return {name: statistics.median(values) for name, values in med.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--changed", type=int, default=50)
    parser.add_argument("--dir", default=None, help="where the workspaces go (default: temp)")
    parser.add_argument("--kinds", default="git,plain", help="which workspaces, in order")
    args = parser.parse_args()
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    print(f"{args.files} files, {args.reps} runs each, {git_version.strip()}, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="agentkit-isolation-bench-", dir=args.dir) as tmp:
        ms, _ = timed(lambda: build(Path(tmp) / "floor", args.files, False))
        print(f"floor: writing the same {args.files} files from Python here: {ms:.0f} ms\n")
        shutil.rmtree(Path(tmp) / "floor")
        for kind in args.kinds.split(","):
            folder = Path(tmp) / kind
            folder.mkdir()
            build(folder, args.files, kind == "git")
            print(f"{kind} workspace (medians, ms)")
            for name, value in bench(kind, folder, args.reps, args.changed).items():
                print(f"  {name:<48}{value:>8.0f}")
            print()
            shutil.rmtree(folder)
    print("goals: create_copy < 300 ms, merge of a 50-file change < 500 ms")


if __name__ == "__main__":
    main()
