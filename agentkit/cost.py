"""What a model response cost, in US dollars.

One job: price one response's usage (prompt tokens, the cached part of them, completion
tokens) for a model. Prices come from ``model_prices`` (a setting: model name → USD per
million tokens for ``input``, ``cached_input`` and ``output``), which wins, else from
`genai-prices <https://pypi.org/project/genai-prices/>`_, the price table the pydantic
team maintains (bundled data, no network: its auto-update is never started). The
provider is the one genai-prices matches to ``base_url`` (api.openai.com,
api.deepseek.com, openrouter.ai...), else the one whose models the name matches; a
model it does not know is priced ``None``, never 0 (a local server's model has no
price).

Each response is priced on its own (a long-context tier or an off-peak rate applies per
request), where the engine counts usage once per response (``Hooks.after_response``):
retries and streaming give one response, so nothing is counted twice.

The cached part: OpenAI's ``prompt_tokens_details.cached_tokens``, else DeepSeek's
``prompt_cache_hit_tokens`` (genai-prices reads only the former), from the usage
agentkit already normalised (agentkit.llm.turns.Usage.extras).

genai-prices is imported at the first price asked (about 0.1-0.25 s and 5-9 MB with its
data); :func:`warm` does it ahead (the worker process server does, so that sub-agents
share the loaded table).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit.llm.turns import Usage

__all__ = ["PRICE_KEYS", "Pricer", "ResponseUsage", "check_model_prices", "response_usage", "warm"]

PRICE_KEYS = ("input", "cached_input", "output")
"""The keys of one ``model_prices`` entry: USD per million tokens (``cached_input``
optional: the input price when absent)."""

_MILLION = 1_000_000


@dataclass(frozen=True)
class ResponseUsage:
    """One response's tokens: ``prompt`` (cached included), ``cached`` (the part of the
    prompt the server had cached), ``completion``; ``estimated`` when the server
    reported none and agentkit counted them."""

    prompt: int
    cached: int
    completion: int
    estimated: bool = False


def response_usage(usage: Usage) -> ResponseUsage:
    """Return ``usage`` (a normalised response usage) with its cached part read from the
    provider's extras (see the module docstring); the cached part never exceeds the
    prompt."""
    extras = usage.extras or {}
    details = extras.get("prompt_tokens_details")
    cached: Any = details.get("cached_tokens") if isinstance(details, dict) else None
    if not _count(cached):
        cached = extras.get("prompt_cache_hit_tokens")
    cached_tokens = min(cached if _count(cached) else 0, max(usage.prompt_tokens, 0))
    return ResponseUsage(
        prompt=max(usage.prompt_tokens, 0),
        cached=cached_tokens,
        completion=max(usage.completion_tokens, 0),
        estimated=usage.estimated,
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_model_prices(value: Any) -> dict[str, dict[str, float]]:
    """Return ``value`` as a ``model_prices`` table, or raise ValueError saying what is
    wrong: a mapping of model names to ``{"input": usd, "output": usd[, "cached_input":
    usd]}``, USD per million tokens, each a finite non-negative number (a NaN price
    would make every cost NaN: the cost cap then never trips and the conversation file
    holds a bare NaN)."""
    if not isinstance(value, dict):
        raise ValueError("model_prices must map model names to prices")
    table: dict[str, dict[str, float]] = {}
    for model, prices in value.items():
        if not isinstance(prices, dict) or not {"input", "output"} <= set(prices):
            raise ValueError(
                f"model_prices[{model!r}] must give input and output (USD per million "
                "tokens; cached_input optional)"
            )
        unknown = set(prices) - set(PRICE_KEYS)
        if unknown:
            raise ValueError(f"model_prices[{model!r}]: unknown key(s) {sorted(unknown)}")
        entry: dict[str, float] = {}
        for key, price in prices.items():
            if (
                isinstance(price, bool)
                or not isinstance(price, (int, float))
                or not math.isfinite(price)
                or price < 0
            ):
                raise ValueError(
                    f"model_prices[{model!r}][{key!r}] must be a finite number >= 0 (got {price!r})"
                )
            entry[key] = float(price)
        table[str(model)] = entry
    return table


def _table_cost(prices: dict[str, float], usage: ResponseUsage) -> float:
    cached_price = prices.get("cached_input", prices["input"])
    dollars = (
        (usage.prompt - usage.cached) * prices["input"]
        + usage.cached * cached_price
        + usage.completion * prices["output"]
    )
    return dollars / _MILLION


class Pricer:
    """Prices responses for models (thread-safe).

    Args:
        model_prices: the ``model_prices`` setting (checked again by
            :func:`check_model_prices`, which raises ValueError).

    A model genai-prices does not know is remembered, so an unpriced (local) model costs
    one lookup per process, not one per response.
    """

    def __init__(self, model_prices: dict[str, dict[str, float]] | None = None) -> None:
        self.model_prices = check_model_prices(dict(model_prices or {}))
        self._unknown: set[tuple[str, str | None]] = set()
        self._lock = threading.Lock()

    def price(self, model: str | None, base_url: str | None, usage: ResponseUsage) -> float | None:
        """Return the response's cost in USD, or None when the model has no known price."""
        if not model:
            return None
        own = self.model_prices.get(model)
        if own is not None:
            return round(_table_cost(own, usage), 10)
        key = (model, base_url)
        with self._lock:
            if key in self._unknown:
                return None
        cost = _library_cost(model, base_url, usage)
        if cost is None:
            with self._lock:
                self._unknown.add(key)
        return cost


def _library_cost(model: str, base_url: str | None, usage: ResponseUsage) -> float | None:
    """genai-prices' price, or None (not installed, unknown model or provider, bad usage)."""
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:
        return None
    priced = PriceUsage(
        input_tokens=usage.prompt,
        cache_read_tokens=usage.cached or None,
        output_tokens=usage.completion,
    )
    # The endpoint's provider first; a URL no provider matches (a local server, a
    # proxy) falls back to the model name. A provider that lacks the model does not:
    # another provider's model of the same name is not what this one serves.
    attempts: list[dict[str, Any]] = [{"provider_api_url": base_url}] if base_url else []
    attempts.append({})
    for options in attempts:
        try:
            return round(float(calc_price(priced, model, **options).total_price), 10)
        except LookupError as exc:
            if options and str(exc).startswith("Unable to find provider"):
                continue
            return None
        except ValueError:  # usage the library refuses (it should not happen)
            return None
    return None


def warm() -> None:
    """Import genai-prices and load its table now (the first price otherwise pays it);
    never raises, never reaches the network."""
    try:
        _library_cost("gpt-4o-mini", None, ResponseUsage(1, 0, 1))
    except Exception:  # warming is an optimisation only
        pass
