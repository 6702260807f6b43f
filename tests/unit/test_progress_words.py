"""The chat's progress lines say "cost unknown" where no price is known, never "$0"."""

from __future__ import annotations

from agentkit import events as ev
from agentkit.cli.progress import event_line, usage_text


def _warning(cost: float | None) -> ev.BudgetWarning:
    return ev.BudgetWarning(
        scope="session", exhausted=False, tokens=900, max_tokens=1000, cost_usd=cost,
        max_cost_usd=None,
    )  # fmt: skip


def test_a_budget_warning_with_an_unknown_cost_says_so() -> None:
    line = str(event_line(_warning(None)))
    assert line.endswith("900 tokens, cost unknown") and "$0" not in line
    assert str(event_line(_warning(0.25))).endswith("900 tokens, $0.250000")


def test_a_row_without_a_price_says_cost_unknown() -> None:
    assert usage_text({"tokens": 1234, "cost_usd": None}) == "1,234 tokens · cost unknown"
