"""Settings for an Agent against a FakeOpenAIServer, shared by the Agent tests (run and
stream): model "m", key "k", English, quick retries."""

from __future__ import annotations

from typing import Any

from agentkit import Settings
from agentkit.testing import FakeOpenAIServer


def settings_for(server: FakeOpenAIServer, **overrides: Any) -> Settings:
    """Settings pointing at ``server``; ``overrides``: any other Settings fields."""
    return Settings(
        model="m",
        base_url=server.base_url,
        api_key="k",
        language="en",
        retry_base_delay=0.01,
        **overrides,
    )
