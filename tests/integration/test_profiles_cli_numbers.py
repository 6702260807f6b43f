"""``agentkit profiles`` names the file and the field of a profile header that breaks the
number rule, instead of "internal error" (issue 31 item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import agentkit


def test_agentkit_profiles_names_the_bad_file_and_field(workspace: Path, tmp_path: Path) -> None:
    folder = workspace / ".agentkit" / "agents"
    folder.mkdir(parents=True)
    (folder / "nan.md").write_text("---\ntimeout_seconds: .nan\n---\nBody\n")
    (folder / "zero.md").write_text("---\nmax_tokens: 0\n---\nBody\n")
    (folder / "fine.md").write_text("---\ndescription: Fine.\n---\nBody\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "PYTHONPATH": str(Path(agentkit.__file__).parents[1])}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "agentkit", "profiles", "-w", str(workspace)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert "internal error" not in done.stdout + done.stderr
    assert done.returncode == 1, done.stderr
    assert f"nan: refused: {folder / 'nan.md'}: timeout_seconds: " in done.stdout
    assert f"zero: refused: {folder / 'zero.md'}: max_tokens: " in done.stdout
    assert "fine: Fine." in done.stdout


def test_agentkit_profiles_names_a_bad_setting(workspace: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "AGENTKIT_SESSION_MAX_COST_USD": "inf",
           "PYTHONPATH": str(Path(agentkit.__file__).parents[1])}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "agentkit", "profiles", "-w", str(workspace)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert "internal error" not in done.stderr
    assert done.returncode == 2
    assert "invalid settings: session_max_cost_usd: " in done.stderr
