"""LLMClient against FakeOpenAIServer over real HTTP: retries, hints, cancel, modes, and
provider quirks beyond the recorded cases (docs/providers.md rules cited per test)."""

from __future__ import annotations

import pytest

from agentkit.errors import ConfigurationError
from agentkit.llm import LLMClient
from agentkit.settings import Settings


def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        LLMClient(Settings(model=None, api_key="k"))
    with pytest.raises(ConfigurationError):
        LLMClient(Settings(model="m", api_key=None, base_url=None))
