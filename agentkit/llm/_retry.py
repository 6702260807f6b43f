"""When to retry a failed model request, and how long to wait first (docs/providers.md E2).

Transient failures are retried with exponential backoff and full jitter
(``retry_base_delay`` doubling, capped at ``retry_max_delay``), honouring server
hints; a hint above the cap fails at once. A model outage (OUTAGE_KINDS) goes on
past ``max_retries`` while the next wait ends within ``retry_total_seconds`` of its
first failure; a server never reached fails after one retry; ``max_retries`` 0
turns retries off.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from agentkit.errors import LLMError
from agentkit.settings import Settings

#: Kinds retried at most once whatever ``max_retries`` says (docs/providers.md R3 and T4).
ONCE_ONLY_KINDS = frozenset(("incomplete_stream", "truncated_tool_call"))
#: Kinds of a model outage: retried beyond ``max_retries`` within ``retry_total_seconds``.
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
    _once_used: set[str] = field(default_factory=set)
    _outage_since: float | None = None  # monotonic time of the outage's first failure

    def next_delay(self, error: LLMError, *, reached: bool) -> float | None:
        """Seconds to wait before retrying after ``error`` (and count the retry), or
        None to give up. ``reached``: the server has answered this client before.
        When an outage outlasts ``retry_total_seconds``, the error's message says so."""
        settings = self.settings
        kind = error.kind
        if not error.retryable or settings.max_retries == 0:
            return None
        if self.retries >= settings.max_retries and kind not in OUTAGE_KINDS:
            return None
        if kind == "connection" and not reached and self.retries >= 1:
            return None  # a wrong port should not cost a minute of backoff
        if kind in ONCE_ONLY_KINDS:
            if kind in self._once_used:
                return None
            self._once_used.add(kind)
        delay = self._backoff(error, self.retries + 1)
        if delay is None:
            return None
        if kind in OUTAGE_KINDS:
            now = time.monotonic()
            if self._outage_since is None:
                self._outage_since = now
            elapsed = now - self._outage_since
            budget = settings.retry_total_seconds
            if self.retries >= settings.max_retries and elapsed + delay > budget:
                error.message = (
                    f"{error.message} (the model server kept failing for {elapsed:.1f} s; "
                    f"gave up after retry_total_seconds={budget:g})"
                )
                error.args = (error.message,)
                return None
        self.retries += 1
        return delay

    def _backoff(self, error: LLMError, retry: int) -> float | None:
        """Seconds to wait before retry number ``retry``; None to fail fast (hint > cap)."""
        cap = self.settings.retry_max_delay
        if error.retry_after is not None:
            return None if error.retry_after > cap else error.retry_after
        ceiling = min(cap, self.settings.retry_base_delay * 2 ** min(retry - 1, 60))
        return self.rng.uniform(0, ceiling)  # full jitter
