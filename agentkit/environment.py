"""Facts about the machine that prompts fill in: workspace, system, current time."""

from __future__ import annotations

import platform
from datetime import datetime
from pathlib import Path


def describe_system() -> str:
    """Return e.g. ``Linux 6.1 (x86_64), Python 3.11.7``."""
    return f"{platform.system()} {platform.release()} ({platform.machine()}), Python {platform.python_version()}"


def current_time() -> str:
    """Return the local time as ``2026-03-10 12:00:00 +0800``."""
    return datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def prompt_values(workspace: Path) -> dict[str, str]:
    """Return the ``{workspace}``, ``{system}`` and ``{current_time}`` template values (docs/specification.md §5)."""
    return {
        "workspace": str(workspace),
        "system": describe_system(),
        "current_time": current_time(),
    }
