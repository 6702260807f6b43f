"""Token and cost budgets: one sub-agent run's, and a whole conversation's.

One job: count tokens and US dollars against limits and say where they stand
(docs/control-plane.md §3). Both sides use it:

- a sub-agent run's limits (:class:`Limits`: ``subagent_max_tokens`` or its profile's
  ``max_tokens``, and what the conversation has left) travel in its spec; its worker
  meters every response (agentkit.subagent.worker.hooks): past :data:`WRAPUP_SHARE`
  it is told once to wrap up, at 100 % it ends as ``budget_exhausted`` before its next
  request. A continued run gets its own budget.
- the conversation's (:class:`Meter` over ``session_max_tokens`` and
  ``session_max_cost_usd``) counts the main agent's responses and every sub-agent's
  (their UsageReports); a sub-agent is never given more than it has left
  (:func:`carve`); once it is spent the main agent's round ends with a clear error and
  the running sub-agents are told to wrap up (agentkit.subagent.control).

Tokens are prompt plus completion tokens of each response as the server reported them
(estimated when it reported none), counted once per response. A cost limit counts the
priced responses; a response without a known price adds no dollars (its tokens still
count against a token limit).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["WRAPUP_SHARE", "Limits", "Meter", "State", "carve"]

WRAPUP_SHARE = 0.85
"""Share of a budget after which the one wrap-up message is sent (as the timeout's)."""

State = Literal["ok", "wrap_up", "exhausted"]


@dataclass(frozen=True)
class Limits:
    """A budget: ``max_tokens`` (prompt plus completion) and ``max_cost_usd``; None:
    no limit on that."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    def __bool__(self) -> bool:
        return self.max_tokens is not None or self.max_cost_usd is not None

    def to_dict(self) -> dict[str, Any]:
        """``{"max_tokens", "max_cost_usd"}`` (for a WorkerSpec, picklable)."""
        return {"max_tokens": self.max_tokens, "max_cost_usd": self.max_cost_usd}

    @classmethod
    def from_dict(cls, data: Any) -> Limits:
        """Read :meth:`to_dict`'s shape; anything else gives no limits."""
        if not isinstance(data, dict):
            return cls()
        tokens, cost = data.get("max_tokens"), data.get("max_cost_usd")
        return cls(
            tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
            float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
        )


class Meter:
    """Tokens and dollars spent against :class:`Limits` (thread-safe).

    Args:
        limits: the budget.
        tokens, cost_usd: what was spent before (a loaded conversation).
    """

    def __init__(self, limits: Limits, tokens: int = 0, cost_usd: float = 0.0) -> None:
        self.limits = limits
        self.tokens = tokens
        self.cost_usd = cost_usd
        self._lock = threading.Lock()
        self._warned = False
        self.unpriced = False  # a response came with no known price

    def add(self, tokens: int, cost_usd: float | None) -> None:
        """Count one response: ``tokens`` (prompt plus completion), ``cost_usd`` (None:
        no known price, no dollars)."""
        with self._lock:
            self.tokens += max(tokens, 0)
            if cost_usd is not None:
                self.cost_usd += max(cost_usd, 0.0)
            else:
                self.unpriced = True

    def share(self) -> float:
        """The largest used share of a limit (0 with no limits)."""
        shares = [0.0]
        if self.limits.max_tokens is not None:
            shares.append(self.tokens / max(self.limits.max_tokens, 1))
        if self.limits.max_cost_usd is not None:
            shares.append(self.cost_usd / self.limits.max_cost_usd)
        return max(shares)

    def state(self) -> State:
        """``exhausted`` at 100 % of a limit, ``wrap_up`` past WRAPUP_SHARE, else ``ok``."""
        share = self.share()
        if share >= 1.0:
            return "exhausted"
        return "wrap_up" if share >= WRAPUP_SHARE else "ok"

    def first_warning(self) -> bool:
        """True once, the first time this is asked past WRAPUP_SHARE (the one wrap-up)."""
        with self._lock:
            if self._warned or self.state() == "ok":
                return False
            self._warned = True
            return True

    def remaining(self) -> Limits:
        """What is left of each limit (None where there is none; never below 0)."""
        tokens = self.limits.max_tokens
        cost = self.limits.max_cost_usd
        return Limits(
            None if tokens is None else max(tokens - self.tokens, 0),
            None if cost is None else max(cost - self.cost_usd, 0.0),
        )

    def shown(self, language: str) -> dict[str, str]:
        """:meth:`used` as text for the budget messages (``tokens``, ``max_tokens``,
        ``cost``) in ``language``: dollars to 6 places, "no limit" where there is
        none, and "cost unknown" when no response had a known price (docs/
        control-plane.md §3: an unknown price is never $0; a trial read "$0.000000")."""
        from agentkit import prompts

        used = self.used()
        limit = used["max_cost_usd"]
        values = {"cost_usd": f"{used['cost_usd']:.6f}", "max_cost_usd": f"{limit or 0:.6f}"}
        if self.unpriced and not used["cost_usd"]:
            cost = prompts.phrase(language, "budget_cost_unknown")
        else:
            key = "budget_cost" if limit is not None else "budget_cost_no_limit"
            cost = prompts.phrase(language, key, **values)
        most = used["max_tokens"]
        return {
            "tokens": str(used["tokens"]),
            "max_tokens": prompts.phrase(language, "budget_no_limit")
            if most is None
            else str(most),
            "cost": cost,
        }

    def used(self) -> dict[str, Any]:
        """``{"tokens", "max_tokens", "cost_usd", "max_cost_usd"}`` (cost rounded)."""
        return {
            "tokens": self.tokens,
            "max_tokens": self.limits.max_tokens,
            "cost_usd": round(self.cost_usd, 10),
            "max_cost_usd": self.limits.max_cost_usd,
        }


def carve(own_max_tokens: int | None, session: Meter | None) -> Limits:
    """The budget of a new sub-agent run: ``own_max_tokens`` (``subagent_max_tokens``
    or its profile's ``max_tokens``), never more than the conversation has left."""
    left = session.remaining() if session is not None else Limits()
    tokens = own_max_tokens
    if left.max_tokens is not None:
        tokens = left.max_tokens if tokens is None else min(tokens, left.max_tokens)
    return Limits(tokens, left.max_cost_usd)
