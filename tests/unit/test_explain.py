"""Words for people (agentkit.chat.explain): states, failed rounds, endpoints shown
without their secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit.chat.explain import DEFAULT_BASE_URL, round_failure, shown_url, state_words


@pytest.mark.parametrize(
    ("state", "running", "words"),
    [
        ("running", 0, "working"),
        ("waiting_for_subagents", 1, "waiting for 1 sub-agent"),
        ("waiting_for_subagents", 2, "waiting for 2 sub-agents"),
        ("waiting_for_subagents", 0, "waiting for sub-agents"),
        ("idle", 0, "idle"),
        ("damaged", 0, "damaged (cannot be read)"),  # a trial saw these two as idle
        ("ended (process gone)", 0, "ended (process gone)"),
    ],
)
def test_state_words(state: str, running: int, words: str) -> None:
    assert state_words(state, running) == words


def test_shown_url_drops_user_password_query_and_fragment() -> None:
    assert shown_url("https://user:secret@host.example:8443/v1?key=abc#x") == (
        "https://host.example:8443/v1"
    )
    assert shown_url(None) == shown_url("") == DEFAULT_BASE_URL
    assert shown_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"


def test_a_dead_endpoint_is_named_with_what_to_do() -> None:
    text = round_failure(
        "connection: cannot reach the model server: [Errno 111] Connection refused",
        "connection",
        base_url="http://me:pw@127.0.0.1:9/v1",
        model="m",
    )
    assert text == (
        "The round failed: cannot reach the model server at http://127.0.0.1:9/v1 "
        "([Errno 111] Connection refused). Check that it is running and that the base URL "
        "is right, then send the message again."
    )


def test_every_model_error_kind_gets_advice_and_others_a_plain_line() -> None:
    kinds = ["timeout", "authentication", "not_found", "rate_limit", "quota_exhausted",
             "overloaded", "server_error", "context_length_exceeded", "request_too_large",
             "content_filter"]  # fmt: skip
    for kind in kinds:
        text = round_failure(f"{kind} (HTTP 400): why", kind, base_url=None, model="gpt-x")
        assert text.startswith("The round failed: ") and "(why)" in text, kind
        assert f"{kind} (HTTP" not in text  # the identifier is not shown
    plain = round_failure("max_turns (2) reached", None, base_url=None, model="m")
    assert plain == "The round failed: max_turns (2) reached. Send a message to try again."


def test_the_conversations_table_says_damaged_and_why(tmp_path: Path) -> None:
    """Regression (a new user's trial): a damaged file was listed as idle with 0 turns."""
    from agentkit.chat.store import list_conversations
    from agentkit.cli.show import render_conversations

    folder = tmp_path / ".agentkit" / "conversations"
    folder.mkdir(parents=True)
    (folder / "conv_deadbeef0001.json").write_text('{"conversation_id": "conv_deadbeef0001", [')
    infos = list_conversations(tmp_path)
    (row,) = [line for line in render_conversations(infos).splitlines() if "conv_deadbeef" in line]
    assert "damaged (cannot be read)" in row and "idle" not in row
    (info,) = infos
    assert info.error and info.error[:20] in row  # the reason, where the title goes
