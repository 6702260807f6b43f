"""What a person must hear at the start (issue 31, items 11 and 12): the command
sandbox cannot run (with the install command), and a cost cap that can never trip (a
model with no known price). In-process: the notices, ACP's mode descriptions, and
the Python API's one log warning each. bubblewrap's absence is forced by the
``command_bwrap_path`` setting (a program that does not exist)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agentkit.acp.options import MODES, available_modes
from agentkit.chat.notices import claim_notices, cost_cap_notice, log_notices, start_notices
from agentkit.process import sandbox
from agentkit.settings import Settings

NO_BWRAP = "/nonexistent/agentkit-test/bwrap"


def settings(**overrides: Any) -> Settings:
    return Settings(**{"model": "m", "api_key": "k", "language": "en", **overrides})


def test_a_missing_bubblewrap_is_said_with_the_install_command() -> None:
    notices = start_notices(settings(command_bwrap_path=NO_BWRAP))
    assert len(notices) == 1
    text = notices[0]
    assert "The command sandbox is off" in text and NO_BWRAP in text
    assert "commands run with your full rights" in text
    assert "sudo apt-get install bubblewrap (Debian, Ubuntu)" in text
    assert "sudo dnf install bubblewrap" in text  # what to do elsewhere
    # the setting it suggests is not the one in effect (auto)
    assert "set command_sandbox = none" in text


@pytest.mark.parametrize(
    "overrides",
    [
        {"command_sandbox": "bwrap"},
        {"command_sandbox_mode": "read-only"},
    ],
)
def test_a_required_sandbox_that_cannot_run_says_commands_are_refused(
    overrides: dict[str, Any],
) -> None:
    [text] = start_notices(settings(command_bwrap_path=NO_BWRAP, **overrides))
    assert "every command will be refused" in text
    assert "sudo apt-get install bubblewrap" in text
    assert "command_sandbox = none" not in text


@pytest.mark.parametrize(
    "overrides", [{"command_sandbox": "none"}, {"command_sandbox_mode": "full"}]
)
def test_no_notice_when_no_sandbox_was_asked_for(overrides: dict[str, Any]) -> None:
    assert start_notices(settings(command_bwrap_path=NO_BWRAP, **overrides)) == []


def test_the_first_command_does_not_warn_again_once_the_start_said_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sandbox, "_warned", type(sandbox._warned)())
    chosen = settings(command_bwrap_path=NO_BWRAP)
    start_notices(chosen)
    with caplog.at_level(logging.WARNING):
        assert sandbox.confine(chosen, tmp_path, tmp_path) is None  # unconfined
    assert not [r for r in caplog.records if "sandbox" in r.getMessage()]


def test_a_cost_cap_on_a_model_without_a_price_is_said() -> None:
    text = cost_cap_notice(settings(model="my-local-model", session_max_cost_usd=0.5))
    assert text is not None
    assert "session_max_cost_usd = 0.5 USD" in text and "can never be reached" in text
    assert "'my-local-model' has no known price" in text and "model_prices" in text


@pytest.mark.parametrize(
    "overrides",
    [
        {"model": "my-local-model"},  # no cap
        {"model": "gpt-4o-mini", "session_max_cost_usd": 1.0},  # genai-prices knows it
        {
            "model": "my-local-model",
            "session_max_cost_usd": 1.0,
            "model_prices": {"my-local-model": {"input": 0.5, "output": 1.5}},
        },
    ],
)
def test_no_cost_notice_when_the_cap_can_trip_or_there_is_none(overrides: dict[str, Any]) -> None:
    assert cost_cap_notice(settings(**overrides)) is None


def test_acp_modes_say_there_is_no_sandbox_and_how_to_install_it() -> None:
    modes = {m.id: m.description for m in available_modes(settings(command_bwrap_path=NO_BWRAP))}
    assert not any("run in the sandbox" in (d or "") for d in modes.values())
    assert "commands run unconfined" in (modes["workspace-write"] or "")
    assert "commands are refused in this mode" in (modes["read-only"] or "")
    for mode in ("workspace-write", "read-only"):
        assert "sudo apt-get install bubblewrap" in (modes[mode] or "")
    required = available_modes(settings(command_bwrap_path=NO_BWRAP, command_sandbox="bwrap"))
    assert "commands are refused" in (required[1].description or "")
    chosen_none = available_modes(settings(command_sandbox="none"))
    assert "command_sandbox = none" in (chosen_none[1].description or "")


def test_acp_modes_are_unchanged_where_the_sandbox_works() -> None:
    if sandbox.bwrap_works("bwrap") is None:
        pytest.skip("bubblewrap cannot run on this machine")
    assert available_modes(settings()) == list(MODES)


def test_the_python_api_logs_each_notice_once_unless_a_front_end_claimed_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chosen = settings(model="unpriced-model-for-a-log-test", session_max_cost_usd=2.0)
    [text] = start_notices(chosen)
    with caplog.at_level(logging.WARNING):
        log_notices([text])
        log_notices([text])
    assert [r.getMessage() for r in caplog.records] == [f"agentkit: {text}"]
    claimed = settings(model="unpriced-model-claimed", session_max_cost_usd=2.0)
    assert claim_notices(claimed)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        log_notices(start_notices(claimed))
    assert caplog.records == []
