"""The public Python API: Agent, RunResult, events, custom tools, persistence (issue 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit import Agent, ConfigurationError, Settings


def test_a_damaged_conversation_file_is_a_clear_error(workspace: Path) -> None:
    folder = workspace / ".agentkit" / "conversations"
    folder.mkdir(parents=True)
    (folder / "conv_broken.json").write_text('{"messages": [')
    with pytest.raises(ConfigurationError, match="damaged"):
        Agent(workspace, Settings(model="m", api_key="k"), conversation_id="conv_broken")


def test_configuration_errors_are_clear(workspace: Path) -> None:
    with pytest.raises(ConfigurationError, match="model"):
        Agent(workspace, Settings(api_key="k"))
    with pytest.raises(ConfigurationError, match="API key"):
        Agent(workspace, Settings(model="m"))
    with pytest.raises(ConfigurationError, match="not a folder"):
        Agent(workspace / "missing", Settings(model="m", api_key="k"))
    with pytest.raises(FileNotFoundError):
        Agent(workspace, Settings(model="m", api_key="k"), conversation_id="conv_nope")
    # A local server needs no key.
    Agent(workspace, Settings(model="m", base_url="http://127.0.0.1:9/v1")).close()


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example.invalid/v1")
    monkeypatch.setenv("AGENTKIT_MODEL", "env-model")
    monkeypatch.setenv("AGENTKIT_LANGUAGE", "en")
    monkeypatch.setenv("AGENTKIT_MAX_CONCURRENT_SUBAGENTS", "3")
    monkeypatch.setenv("AGENTKIT_WEB_ALLOW_HOSTS", "127.0.0.1, 10.0.0.0/8")
    s = Settings()
    assert (s.api_key, s.base_url, s.model, s.language) == (
        "sk-env",
        "http://example.invalid/v1",
        "env-model",
        "en",
    )
    assert s.max_concurrent_subagents == 3 and s.web_allow_hosts == ["127.0.0.1", "10.0.0.0/8"]
    assert Settings(model="arg").model == "arg"  # arguments win over the environment
