"""The public API: what ``agentkit.__all__`` promises is importable, documented and lazy."""

from __future__ import annotations

import subprocess
import sys


def test_import_is_lazy() -> None:
    """`import agentkit` must not pull in openai or pydantic-settings (start-up time)."""
    code = (
        "import sys, agentkit\n"
        "heavy = [m for m in ('openai', 'pydantic_settings', 'trafilatura', 'tiktoken') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"imported eagerly: {out}"
