"""The user's own git in tests: run it as a person would (their identity, none of the
test process's ``GIT_*`` variables) and make a repository with one commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    """The user's own git in ``cwd``; stdout. Raises CalledProcessError when it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    out = subprocess.run(
        ["git", "-c", "user.name=User", "-c", "user.email=user@example.com", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout


def make_repo(root: Path, files: dict[str, str]) -> Path:
    """``root`` (made if missing) as a git repository on ``main`` with one commit of
    ``files`` (relative name → text; folders made as needed). Returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root
