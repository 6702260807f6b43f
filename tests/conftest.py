"""Shared fixtures: a fresh workspace folder, Settings for tests and a ToolContext."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit.settings import Settings
from agentkit.tools.base import ToolContext

# tiktoken downloads its tables from outside on first use (agentkit.tokens): the tests
# count with the estimate, so every byte stays on loopback. Processes the tests start
# inherit it (cli_helpers.cli_env keeps it); tests of the tokenizer set their own.
os.environ.setdefault("AGENTKIT_TOKENIZER", "estimate")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests must not pick up a developer's real endpoint or key.
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTKIT_MODEL", "AGENTKIT_LANGUAGE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace folder (resolved, so symlinked /tmp cannot confuse guards)."""
    root = tmp_path / "ws"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def settings() -> Settings:
    """Settings for tests: English texts, a dummy model and key."""
    return Settings(model="test-model", api_key="test-key", language="en")


@pytest.fixture
def ctx(workspace: Path, settings: Settings) -> ToolContext:
    """A ToolContext on the test workspace."""
    return ToolContext(workspace=workspace, settings=settings)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A two-node Ray cluster on loopback (tests/ray_cluster.py), started once per
    session and killed at the end; skips outside a private network namespace."""
    from ray_cluster import RayTestCluster, skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = RayTestCluster(tmp_path_factory.mktemp("ray"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_node_without_workspace(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A third node of the session's cluster, with the resource ``no_shared_disk`` and no
    CPU (nothing else is placed there: ask for ``ray_num_cpus=0``), that cannot see the
    folder returned: its own mount namespace puts an empty tmpfs over it. A test makes
    its workspace inside that folder. Started once (a node takes seconds to start); the
    cluster's end kills it."""
    hidden = tmp_path_factory.mktemp("hidden").resolve()
    mount = f'mount -t tmpfs none {hidden} && exec "$@"'
    wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh"]
    ray_cluster.add_node({"no_shared_disk": 10}, wrap=wrap, cpus=0)
    return hidden


@pytest.fixture(scope="module")
def agentkit_forks() -> Iterator[Any]:
    """A tests/fork_runner.ForkRunner for the module: ``.agentkit(*args, env=...)``
    runs ``python -m agentkit`` as a process of its own, forked from one that imported
    openai and the CLI once (about 1 s of CPU a ``run`` less, 0.25 s a ``show``). For
    commands whose output goes to files, not to a terminal or a reader of stdin."""
    from fork_runner import CLI_PRELOAD, ForkRunner

    with ForkRunner(CLI_PRELOAD) as runner:
        yield runner


@pytest.fixture(params=["bwrap", "none"])
def command_sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test twice: commands in the bubblewrap sandbox, then without it
    (``AGENTKIT_COMMAND_SANDBOX``, read by every Settings the test builds). The sandboxed
    run is skipped where bubblewrap cannot run."""
    from agentkit.process.sandbox import bwrap_works

    if request.param == "bwrap" and bwrap_works("bwrap") is None:
        pytest.skip("bubblewrap is missing or cannot create namespaces here")
    monkeypatch.setenv("AGENTKIT_COMMAND_SANDBOX", request.param)
    return str(request.param)
