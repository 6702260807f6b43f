"""Text that arrives in many small fragments, kept compactly until it is joined.

A model streams its answer a token or two per event. Kept as a list of those
fragments, 1 MB of text costs about 17 MB (a str object of ~50 bytes and a list slot
per 4-character fragment; ``benchmarks/stream_memory.py``). :class:`Pieces` joins the
fragments in batches as they come, so the text costs about its own size.
"""

from __future__ import annotations

#: Fragments joined into one string at a time (bounds the list of small strings).
BATCH = 256


class Pieces:
    """Append-only text: ``append(fragment)``, then ``join()`` for the whole.

    ``last`` is the newest fragment (the tool-call assembler looks at it to see
    whether arguments may be complete); ``bool(pieces)`` is False until a
    non-empty fragment arrived.
    """

    __slots__ = ("_done", "_pending", "last")

    def __init__(self) -> None:
        self._done: list[str] = []
        self._pending: list[str] = []
        self.last = ""

    def append(self, fragment: str) -> None:
        """Add ``fragment`` (empty fragments are ignored)."""
        if not fragment:
            return
        self._pending.append(fragment)
        self.last = fragment
        if len(self._pending) >= BATCH:
            self._done.append("".join(self._pending))
            self._pending.clear()

    def join(self) -> str:
        """Return the whole text so far."""
        if self._pending:
            self._done.append("".join(self._pending))
            self._pending.clear()
        if len(self._done) > 1:
            self._done = ["".join(self._done)]
        return self._done[0] if self._done else ""

    def __bool__(self) -> bool:
        return bool(self.last)
