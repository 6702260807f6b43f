"""The one cap on text a hook or a person gives before it reaches the model.

One job: :data:`REASON_MAX` and :func:`cap_reason`. A hook's reason (exit 2's stderr,
``permissionDecisionReason``, ``stopReason``), its ``additionalContext``, and a
person's deny note (terminal, ``chat --jsonl``, the web API, ACP, the Python API's
approval callback) are all cut by this function, so every surface agrees
(docs/approvals.md §4 "Caps").
"""

from __future__ import annotations

import re

__all__ = ["REASON_MAX", "cap_reason"]

REASON_MAX = 10_000
"""Characters of one reason or note kept (Claude Code's cap on a hook's context)."""


_NOTE = re.compile(r"\.\.\. \[cut: [\d,]+ of [\d,]+ characters\]")


def cap_reason(text: str, limit: int = REASON_MAX) -> str:
    """Return ``text`` whole when it has at most ``limit`` characters, else its first
    ``limit`` characters followed by ``"... [cut: 10,000 of N characters]"`` (N the
    original length), so a reader knows it was cut. A text this function cut already
    comes back unchanged (cutting twice keeps the first note)."""
    if len(text) <= limit:
        return text
    done = _NOTE.search(text, max(0, limit))
    if done is not None and done.start() <= limit and done.end() == len(text):
        return text
    return f"{text[:limit]}... [cut: {limit:,} of {len(text):,} characters]"
