"""``AGENTKIT_DEMO_LATENCY``: a number of seconds in range, else a usage error that
names the variable (it gave an internal error before)."""

from __future__ import annotations

import pytest

from agentkit.cli.common import UsageError
from agentkit.cli.demo import MAX_DEMO_LATENCY, demo_latency


@pytest.mark.parametrize("text, seconds", [("", 0.6), ("0", 0.0), (" 1.5 ", 1.5), ("60", 60.0)])
def test_a_number_in_range_is_taken(
    monkeypatch: pytest.MonkeyPatch, text: str, seconds: float
) -> None:
    monkeypatch.setenv("AGENTKIT_DEMO_LATENCY", text)
    assert demo_latency(0.6) == seconds


def test_unset_gives_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTKIT_DEMO_LATENCY", raising=False)
    assert demo_latency(0.8) == 0.8


@pytest.mark.parametrize("text", ["abc", "nan", "inf", "-1", "1e9", str(MAX_DEMO_LATENCY + 1)])
def test_anything_else_is_a_usage_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("AGENTKIT_DEMO_LATENCY", text)
    with pytest.raises(UsageError, match="AGENTKIT_DEMO_LATENCY must be a number"):
        demo_latency(0.6)
