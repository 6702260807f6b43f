"""Which environment variables reach a command (agentkit/process/secrets.py; hardening item 7).

A table of names and values, each asserted dropped or kept, then the same table through
a real ``run_command env``. Key-shaped values are assembled at run time (no key-like
literal in the repository for scanners to flag); none of them is a real credential.
"""

from __future__ import annotations

import uuid

import pytest
from secret_cases import B62, JWT, PEM, SHA, TABLE, rand_chars

from agentkit.process import tree as proctree
from agentkit.process.secrets import (
    REDACTED,
    is_secret_name,
    is_secret_value,
    is_secret_var,
    scrub_env,
    scrub_text,
)
from agentkit.settings import Settings
from agentkit.tools.shell import command_env


def test_table_is_large_and_covers_both_outcomes() -> None:
    assert len(TABLE) >= 30
    assert sum(d for _, _, d in TABLE) >= 30 and sum(not d for _, _, d in TABLE) >= 20


@pytest.mark.parametrize(("name", "value", "dropped"), TABLE, ids=[r[0] for r in TABLE])
def test_secret_rule(name: str, value: str, dropped: bool) -> None:
    assert is_secret_var(name, value) is dropped


def test_name_and_value_rules_separately() -> None:
    # A name rule alone drops whatever the value; a value rule alone whatever the name.
    assert is_secret_name("AZURE_OPENAI_KEY") and not is_secret_value("abc")
    assert is_secret_value("postgres://u:pw@h/db") and not is_secret_name("DATABASE_URL")
    assert not is_secret_name("SSH_AUTH_SOCK") and not is_secret_name("GPG_KEY_ID")
    assert is_secret_var("GITHUB_SHA_TOKEN", SHA)  # hex is only an identifier by value


def test_scrub_env_keeps_order_and_values() -> None:
    first = {name: i for i, (name, _, _) in reversed(list(enumerate(TABLE)))}
    rows = [row for i, row in enumerate(TABLE) if first[row[0]] == i]  # names once each
    kept = scrub_env({name: value for name, value, _ in rows})
    expected = {name: value for name, value, dropped in rows if not dropped}
    assert kept == expected and list(kept) == list(expected) and len(expected) >= 20


def test_passthrough_drop_and_hidden_values() -> None:
    env = {
        "GITHUB_TOKEN": "abc",
        "npm_token": "def",
        "OPENAI_API_KEY": "sk-main",
        "AGENTKIT_API_KEY": "sk-main",
        "COPY_OF_KEY_VALUE": "prefix-the-endpoint-key-0123-suffix",
        "CUSTOM_THING": "plain",
        "KEEP": "x",
    }
    kept = scrub_env(
        env,
        passthrough=["GITHUB_TOKEN", "NPM_*", "OPENAI_API_KEY", "AGENTKIT_*", "COPY_*"],
        drop=["custom_*"],
        hidden_values=["the-endpoint-key-0123", None, "k"],  # "k": too short to hide
    )
    assert kept == {"GITHUB_TOKEN": "abc", "npm_token": "def", "KEEP": "x"}
    # drop beats passthrough
    assert scrub_env({"A_TOKEN": "t"}, passthrough=["A_*"], drop=["A_TOKEN"]) == {}


def test_ray_cluster_token_never_reaches_a_command_even_passed_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The agent's process keeps them (it connects to the cluster with them); a
    # command, which could submit code to the cluster, never gets them.
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/home/u/.ray/auth_token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "0123456789abcdef" * 4)  # hex: not secret by value
    for passthrough in (["RAY_*"], ["*"], ["RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"]):
        settings = Settings(command_env_passthrough=passthrough)
        env = command_env("mark", "cid", settings)
        assert "RAY_AUTH_TOKEN" not in env and "RAY_AUTH_TOKEN_PATH" not in env, passthrough
        assert env["RAY_ADDRESS"] == "127.0.0.1:6379" and env["RAY_AUTH_MODE"] == "token"
    assert "RAY_AUTH_TOKEN" not in command_env("mark", "cid")  # the built-in rule alone


def test_command_env_uses_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-endpoint-" + rand_chars(24)
    monkeypatch.setenv("GITHUB_TOKEN", "gh-visible")
    monkeypatch.setenv("PLAIN_VAR", "plain")
    monkeypatch.setenv("HOLDS_THE_KEY", f"Bearer {key}")
    settings = Settings(
        api_key=key,
        command_env_passthrough="GITHUB_TOKEN",  # type: ignore[arg-type]
        command_env_drop=["PLAIN_*"],
    )
    env = command_env("mark", "cid", settings)
    assert env["GITHUB_TOKEN"] == "gh-visible"
    assert "PLAIN_VAR" not in env and "HOLDS_THE_KEY" not in env
    assert env["AGENTKIT_COMMAND_ID"] == "cid" and env[proctree.AGENT_MARK_VAR] == "mark"
    assert "GITHUB_TOKEN" not in command_env("mark", "cid")  # no settings: built-in rule only


def test_scrub_text_redacts_what_the_rule_calls_secret_and_keeps_the_rest() -> None:
    openai_like = "sk-proj-" + rand_chars(32)
    cases = [
        (f"key {openai_like} ok", f"key {REDACTED} ok"),
        (f"token {B62} end", f"token {REDACTED} end"),
        (f"jwt {JWT}", f"jwt {REDACTED}"),
        ("postgres://app:pw1234@db/x", f"postgres://app:{REDACTED}@db/x"),
        ("export DB_PASSWORD=hunter2 X=1", f"export DB_PASSWORD={REDACTED} X=1"),
        ('{"api_key": "abc", "name": "bob"}', f'{{"api_key": "{REDACTED}", "name": "bob"}}'),
        ("the endpoint key hidden-value-123 here", f"the endpoint key {REDACTED} here"),
        (f"sha {SHA} and uuid {uuid.UUID(int=7)}", f"sha {SHA} and uuid {uuid.UUID(int=7)}"),
        ("PATH=/usr/bin HOME=/root", "PATH=/usr/bin HOME=/root"),
        ("a plain sentence, nothing to hide", "a plain sentence, nothing to hide"),
    ]
    for text, expected in cases:
        assert scrub_text(text, ["hidden-value-123", None, "x"]) == expected, text
    assert PEM.split("\n")[0] not in scrub_text(PEM)
