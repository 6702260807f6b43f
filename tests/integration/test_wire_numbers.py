"""Numbers from the wire obey the number rule: a model server's usage that is NaN,
infinite or negative is treated as unreported (counted locally), never a crash or a
negative count (issue 31 item 6)."""

from __future__ import annotations

import math

import pytest

from agentkit.llm import LLMClient
from agentkit.settings import Settings
from agentkit.testing import FakeOpenAIServer, Reply

USER = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -5, 1e309])
def test_a_usage_count_that_is_not_a_finite_count_reads_as_unreported(
    bad: float, stream: bool
) -> None:
    usage = {"prompt_tokens": bad, "completion_tokens": bad, "total_tokens": bad}
    with FakeOpenAIServer([Reply(content="hi", usage=usage)]) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", stream=stream,
                            max_retries=0)  # fmt: skip
        with LLMClient(settings) as client:
            turn = client.complete(USER, None)
    assert turn.content == "hi"
    assert turn.usage.estimated  # counted locally instead
    assert turn.usage.prompt_tokens > 0 and turn.usage.completion_tokens > 0


def test_a_finite_usage_is_kept() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3.0, "total_tokens": 15}
    with FakeOpenAIServer([Reply(content="hi", usage=usage)]) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", max_retries=0)
        with LLMClient(settings) as client:
            turn = client.complete(USER, None)
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (12, 3)
    assert not turn.usage.estimated
