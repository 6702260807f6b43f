"""One real FakeOpenAIServer per test module, scripted per test through its Switch
(tests/subagent_helpers.py: ``script(model, main, subs)``).

Import ``model_fixture`` and ``server_fixture`` into a test module to use the ``model``
fixture (the module's server and its Switch) and the ``server`` fixture (that server,
its recorded requests cleared for the test).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from subagent_helpers import Switch

from agentkit.testing import FakeOpenAIServer


@pytest.fixture(scope="module", name="model")
def model_fixture() -> Iterator[tuple[FakeOpenAIServer, Switch]]:
    switch = Switch()
    with FakeOpenAIServer(switch) as server:
        yield server, switch


@pytest.fixture(name="server")
def server_fixture(model: tuple[FakeOpenAIServer, Switch]) -> FakeOpenAIServer:
    model[0].clear()
    return model[0]
