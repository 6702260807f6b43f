"""One rule: a model that repeats the identical failing tool call is told so, once.

A small model can loop on one failing call: issue 20 saw the toy local model run the
same failing ``run_command`` 17 times in a row in a sub-agent. When the same tool is
called with the same arguments and fails ``Settings.repeated_failure_note`` times in a
row, the result of that call carries one note (``repeated_failure`` in
``prompts/<lang>/phrases.txt``): the call failed that many times, change the
arguments or the approach. The note rides in the tool result, not in a message of
its own (a new message made the tiny model wander). One note per streak: the calls
after it are left alone; a different call or a success starts over.

"Failing": an error result (``Error: ...``, a refusal, a timeout) or a command that
ran and exited with a status other than 0 (``meta["exit_code"]``).
"""

from __future__ import annotations

import json
from typing import Any

from agentkit import prompts
from agentkit.tools.base import ToolResult


def failed(result: ToolResult) -> bool:
    """Whether ``result`` is a failure for this rule (see the module docstring)."""
    return not result.ok or result.meta.get("exit_code") not in (None, 0)


def call_key(name: str, arguments: dict[str, Any] | None, raw: str) -> str:
    """The identity of one call: its name and its arguments, keys in any order
    (the raw text when the arguments could not be parsed)."""
    shown = raw if arguments is None else json.dumps(arguments, sort_keys=True, default=str)
    return f"{name}\x00{shown}"


class FailureStreak:
    """Counts identical failing calls in a row (one per engine run, fed from its loop).

    Args:
        limit: the streak length that gets the note (0: never).
        language: the note's language (``zh`` or ``en``).
    """

    def __init__(self, limit: int, language: str) -> None:
        self.limit = limit
        self.language = language
        self._key: str | None = None
        self._count = 0

    def observe(self, key: str, result: ToolResult) -> ToolResult:
        """Take the next call's result, in the model's order; return it, with the note
        when this call makes the streak ``limit`` long."""
        if not failed(result):
            self._key, self._count = None, 0
            return result
        if key == self._key:
            self._count += 1
        else:
            self._key, self._count = key, 1
        if self.limit <= 0 or self._count != self.limit:
            return result
        note = prompts.phrase(self.language, "repeated_failure", count=self._count)
        return result.with_note(note)
