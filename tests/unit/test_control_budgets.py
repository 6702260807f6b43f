"""Cost, budgets and typed results (docs/control-plane.md §3-4) over real workers and
FakeOpenAIServer: a priced and an unpriced model, model_prices, usage counted once
under retries and streaming, a sub-agent's wrap-up then budget_exhausted, the
conversation's budget, and a profile's output_schema refused then accepted."""

from __future__ import annotations

import pytest

from agentkit import prompts
from agentkit.cost import Pricer, ResponseUsage, response_usage
from agentkit.llm.turns import Usage
from agentkit.subagent.budget import Limits, Meter

pytestmark = pytest.mark.slow
PRICED_COST = 0.0012  # 2000 x 0.15e-6 + 8000 x 0.075e-6 + 500 x 0.6e-6


def tokens(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def test_cached_tokens_are_read_from_either_spelling_and_never_exceed_the_prompt() -> None:
    openai = Usage(100, 5, 105, extras={"prompt_tokens_details": {"cached_tokens": 40}})
    deepseek = Usage(100, 5, 105, extras={"prompt_cache_hit_tokens": 60})
    broken = Usage(100, 5, 105, extras={"prompt_cache_hit_tokens": 500})
    assert response_usage(openai).cached == 40
    assert response_usage(deepseek).cached == 60
    assert response_usage(broken).cached == 100
    assert Pricer().price("my-local-llama", "http://127.0.0.1:1/v1", ResponseUsage(1, 0, 1)) is None
    assert Pricer().price(
        "gpt-4o-mini", "http://127.0.0.1:1/v1", ResponseUsage(10_000, 8_000, 500)
    ) == pytest.approx(PRICED_COST)


def test_the_page_header_and_the_usage_route_sum_the_same_way() -> None:
    """Regression: the page's header (webchat.views.usage_view) summed each row's
    current-run ``token_usage`` and skipped rows without a cost, while ``/usage`` and
    the conversation file (usage_total) took all runs' ``tokens`` and call a missing
    cost unknown; a continued sub-agent showed two different totals on one page."""
    from agentkit.conversation import Conversation, Stats, usage_total
    from agentkit.webchat.views import usage_view

    stats = Stats(prompt_tokens=1000, completion_tokens=200, total_tokens=1200)
    stats.add_cost(0, 0.25)
    conv = Conversation(stats=stats)
    continued = {"tokens": 300, "cost_usd": 0.5, "token_usage": {"total": 100}}
    unpriced = {"tokens": 50, "token_usage": {"total": 50}}  # no cost known
    for rows, cost in (([continued], 0.75), ([continued, unpriced], None)):
        shown, summed = usage_view(conv, rows), usage_total(conv.stats, rows)
        assert shown["total_tokens"] == summed["tokens"] == 1200 + sum(r["tokens"] for r in rows)
        assert shown["main_tokens"] == 1200
        assert shown["cost_usd"] == summed["cost_usd"] == (cost and pytest.approx(cost))


@pytest.mark.parametrize(
    ("language", "limits", "spent", "words"),
    [
        ("en", Limits(1000, None), [(10, None)], "10 tokens of 1000; cost unknown"),
        ("en", Limits(None, 0.5), [(10, 0.01)], "10 tokens of no limit; $0.010000 of $0.500000"),
        ("en", Limits(1000, None), [(10, 0.02), (5, None)], "15 tokens of 1000; $0.020000"),
        ("zh", Limits(1000, 1.0), [(10, None)], "10 tokens of 1000; 费用未知"),
    ],
)
def test_budget_texts_say_an_unknown_cost_and_no_limit_in_words(
    language: str, limits: Limits, spent: list[tuple[int, float | None]], words: str
) -> None:
    meter = Meter(limits)
    for count, cost in spent:
        meter.add(count, cost)
    shown = meter.shown(language)
    tokens, rest = words.split(" tokens of ")
    most, cost = rest.split("; ")
    assert shown["tokens"] == tokens and shown["max_tokens"] == most.replace(
        "no limit", prompts.phrase(language, "budget_no_limit")
    )
    assert shown["cost"].startswith(cost) and "-" not in shown["cost"]
