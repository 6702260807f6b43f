"""Running the ``agentkit`` command in tests: a clean environment for it, a one-shot
run and a started process (used by the CLI, chat, ACP and terminal tests of every tier)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cli_env(base_url: str | None = None, **extra: str) -> dict[str, str]:
    """A clean environment for the CLI: the repo importable, no real endpoint or key."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTKIT_", "PYTEST"))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(
        AGENTKIT_TOKENIZER="estimate",  # no download of tiktoken's tables (conftest.py)
        AGENTKIT_MAX_RETRIES="0",
        AGENTKIT_RETRY_BASE_DELAY="0.01",
        AGENTKIT_LANGUAGE="en",
        PYTHONUNBUFFERED="1",
    )
    if base_url is not None:
        env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY="test-key", AGENTKIT_MODEL="fake-model")
    env.update(extra)
    return env


def agentkit(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agentkit ARGS`` to completion (stdin closed, output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "agentkit", *args],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def start_agentkit(
    *args: str,
    env: dict[str, str],
    new_session: bool = False,
    stdin: int = subprocess.DEVNULL,
    stdout: int = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """Start ``python -m agentkit ARGS`` (stdin closed, stdout and stderr piped as text;
    ``stdin`` and ``stdout`` may be descriptors of the caller's); ``new_session``: in a
    session and process group of its own. The caller waits for the process or kills it."""
    return subprocess.Popen(
        [sys.executable, "-m", "agentkit", *args],
        env=env,
        cwd=REPO,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )
