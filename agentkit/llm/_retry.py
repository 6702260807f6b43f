"""When to retry a failed model request, and how long to wait first.

One rule for every transient failure (5xx, 429, timeouts, refused or dropped
connections, broken streams, in-band stream errors, empty replies): at most
``max_retries`` retries, each starting within ``retry_total_seconds`` of the
request's first failure, whichever ends first. The table of docs/providers.md
§4.5 lists it, with the few kinds held to less (RETRY_LIMITS) and a server never
reached (one retry). Waits are exponential backoff with full jitter
(``retry_base_delay`` doubling, capped at ``retry_max_delay``) or the server's hint;
a hint above the cap fails at once. ``max_retries`` 0 turns retries off.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from agentkit.errors import LLMError
from agentkit.settings import Settings

#: Kinds retried at most this many times, within the rule above: a
#: broken stream and a cut-off call once, an empty reply twice (the second time
#: without streaming).
RETRY_LIMITS = {"incomplete_stream": 1, "truncated_tool_call": 1, "empty_response": 2}
#: Kinds retried at most once whatever ``max_retries`` says (a broken stream, a cut-off call).
ONCE_ONLY_KINDS = frozenset(kind for kind, limit in RETRY_LIMITS.items() if limit == 1)
#: Kinds of a model outage (the server failing, slow or gone): their give-up message
#: says how long the server kept failing.
OUTAGE_KINDS = frozenset(("server_error", "overloaded", "timeout", "connection"))


@dataclass
class RetryPlan:
    """The retries of one request (one ``LLMClient.complete`` call).

    Attributes:
        settings: uses ``max_retries``, ``retry_base_delay``, ``retry_max_delay`` and
            ``retry_total_seconds`` (seconds).
        rng: the jitter's source.
        retries: retries granted so far.
    """

    settings: Settings
    rng: random.Random
    retries: int = 0
    _used: dict[str, int] = field(default_factory=dict)  # retries granted per kind
    _first_failure: float | None = None  # monotonic time of the request's first failure

    def used(self, kind: str) -> int:
        """Retries granted so far after failures of ``kind``."""
        return self._used.get(kind, 0)

    def next_delay(self, error: LLMError, *, reached: bool) -> float | None:
        """Seconds to wait before retrying after ``error`` (and count the retry), or
        None to give up. ``reached``: the server has answered this client before.
        When retries ran out, the error's message says after how many and how long."""
        settings = self.settings
        kind = error.kind
        now = time.monotonic()
        if self._first_failure is None:
            self._first_failure = now
        elapsed = now - self._first_failure
        if not error.retryable or settings.max_retries == 0:
            return None
        if kind == "connection" and not reached and self.retries >= 1:
            return None  # a wrong port should not cost a minute of backoff
        if kind in RETRY_LIMITS and self.used(kind) >= RETRY_LIMITS[kind]:
            return None
        if self.retries >= settings.max_retries:
            self._say_why(error, elapsed, f"max_retries={settings.max_retries}")
            return None
        delay = 0.0 if kind == "empty_response" else self._backoff(error, self.retries + 1)
        if delay is None:
            return None
        budget = settings.retry_total_seconds
        if budget and elapsed + delay > budget:
            self._say_why(error, elapsed, f"retry_total_seconds={budget:g}")
            return None
        self._used[kind] = self.used(kind) + 1
        self.retries += 1
        return delay

    def _say_why(self, error: LLMError, elapsed: float, limit: str) -> None:
        """Append why retrying stopped to ``error``'s message (the run's error says it)."""
        what = "the model server kept failing" if error.kind in OUTAGE_KINDS else "it kept failing"
        text = error.message  # shortened so that the reason survives one_line()'s cut
        text = text if len(text) <= 180 else text[:180] + "…"
        error.message = (
            f"{text} ({what} for {elapsed:.1f} s; gave up after {self.retries} retries: {limit})"
        )
        error.args = (error.message,)

    def _backoff(self, error: LLMError, retry: int) -> float | None:
        """Seconds to wait before retry number ``retry``; None to fail fast (hint > cap)."""
        cap = self.settings.retry_max_delay
        if error.retry_after is not None:
            return None if error.retry_after > cap else error.retry_after
        ceiling = min(cap, self.settings.retry_base_delay * 2 ** min(retry - 1, 60))
        return self.rng.uniform(0, ceiling)  # full jitter
