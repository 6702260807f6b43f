"""proctree: finding processes by their environment mark and killing whole trees (real processes)."""

from __future__ import annotations

import time

from agentkit.process import tree as proctree


def test_mark_env() -> None:
    assert proctree.mark_env("abc") == {"AGENTKIT_PROCESS_MARK": "abc"}
    assert proctree.mark_env("x", "OTHER") == {"OTHER": "x"}


def test_scan_is_fast() -> None:
    # Generous bound: the /proc scan takes a few ms; this only proves it is not O(seconds).
    started = time.monotonic()
    for _ in range(10):
        proctree.processes_with_mark("nobody-has-this-mark")
    assert (time.monotonic() - started) / 10 < 0.5
