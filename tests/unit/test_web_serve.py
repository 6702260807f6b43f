"""``agentkit serve`` as a real process, and its access rules (no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit import Settings
from agentkit.errors import ConfigurationError
from agentkit.webchat import create_app
from agentkit.webchat.serve import access_token, hosts_for

pytestmark = pytest.mark.slow


def test_access_token_rule() -> None:
    assert access_token("127.0.0.1", None) is None
    assert access_token("::1", None) is None
    assert access_token("localhost", "given") == "given"
    generated = access_token("192.0.2.7", None)
    assert generated and len(generated) >= 24
    assert access_token("192.0.2.7", None) != generated  # fresh each time
    assert access_token("0.0.0.0", "mine") == "mine"


def test_token_redacted_from_access_log_lines() -> None:
    import logging

    from agentkit.webchat.security import RedactTokens

    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/?x=1&token=abc-DEF_123", "1.1", 303), None,
    )  # fmt: skip
    assert RedactTokens().filter(record) is True
    assert record.getMessage() == '127.0.0.1:5000 - "GET /?x=1&token=*** HTTP/1.1" 303'


STRONG = "0123456789abcdefXYZ"


def _settings() -> Settings:
    return Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", language="en")


@pytest.mark.parametrize(
    ("token", "hosts", "says"),
    [
        ("", None, "too short"),
        ("x", None, "too short"),
        ("fifteen-chars-x", ["0.0.0.0"], "too short"),
        (None, ["chat.example.org"], "needs a token"),
        (None, ["*"], "needs a token"),
        (None, hosts_for("0.0.0.0"), "needs a token"),
    ],
)
def test_create_app_refuses_weak_or_missing_token(
    workspace: Path, token: str | None, hosts: list[str] | None, says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        create_app(workspace, _settings(), token=token, allowed_hosts=hosts)


def test_create_app_accepts_strong_token_or_loopback_without_one(workspace: Path) -> None:
    create_app(workspace, _settings(), token=None)  # loopback names only
    create_app(workspace, _settings(), token=STRONG, allowed_hosts=hosts_for("::"))
