"""One real FakeOpenAIServer per test module, in two styles.

Scripted through a Switch (tests/subagent_helpers.py: ``script(model, main, subs)``):
import ``model_fixture`` and ``server_fixture`` for the ``model`` fixture (the module's
server and its Switch) and the ``server`` fixture (that server, its recorded requests
cleared for the test).

Scripted by setting the server's handler in each test: import
``handled_server_fixture`` and ``handled_model_fixture`` for the ``server`` fixture (the
module's server) and the ``model`` fixture (that server, its requests cleared); or
``handled_server_fixture`` and ``cleared_fixture`` for that ``server`` cleared before
every test of the module.
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


@pytest.fixture(scope="module", name="server")
def handled_server_fixture() -> Iterator[FakeOpenAIServer]:
    """One model server for the module; each test sets its handler."""
    with FakeOpenAIServer(lambda request: "unused") as model:
        yield model


@pytest.fixture(name="model")
def handled_model_fixture(server: FakeOpenAIServer) -> FakeOpenAIServer:
    server.clear()
    return server


@pytest.fixture(autouse=True, name="cleared")
def cleared_fixture(server: FakeOpenAIServer) -> None:
    """The module's server with no request recorded, before every test."""
    server.clear()
