"""Which environment variables reach a command (agentkit/process/secrets.py; hardening item 7).

A table of names and values, each asserted dropped or kept, then the same table through
a real ``run_command env``. Key-shaped values are assembled at run time (no key-like
literal in the repository for scanners to flag); none of them is a real credential.
"""

from __future__ import annotations

import random
import string
import uuid

import pytest

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

_rng = random.Random(7)


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


B62 = _rand(40)
JWT = "eyJ" + _rand(20) + ".eyJ" + _rand(30) + "." + _rand(43)
PEM = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow" + _rand(40) + "\n-----END RSA PRIVATE KEY-----"
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"

# (name, value, dropped?)
TABLE: list[tuple[str, str, bool]] = [
    # secret by name, whatever the value
    ("OPENAI_API_KEY", "x", True),
    ("AGENTKIT_API_KEY", "x", True),
    ("AZURE_OPENAI_KEY", "abc", True),
    # the OTLP exporter's headers carry the collector's credentials; its endpoint does not
    ("OTEL_EXPORTER_OTLP_HEADERS", "x-api=abc", True),
    ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Basic%20abc", True),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", False),
    ("OPENAI_KEY", "abc", True),
    ("STRIPE_KEY", "abc", True),
    ("my_api_key", "abc", True),
    ("API_KEY", "abc", True),
    ("OPENAI_APIKEY", "abc", True),
    ("GITHUB_TOKEN", "abc", True),
    ("TOKEN", "abc", True),
    ("HF_TOKENS", "abc", True),
    ("GH_PAT", "abc", True),
    ("AZURE_DEVOPS_PAT", "abc", True),
    ("DB_PASSWORD", "hunter2", True),
    ("FTP_PASSWD", "hunter2", True),
    ("SMTP_PASS", "hunter2", True),
    ("MYSQL_PWD", "hunter2", True),
    ("GPG_PASSPHRASE", "words", True),
    ("SIGNING_SECRET", "abc", True),
    ("SECRET", "abc", True),
    ("CLIENT_SECRETS", "abc", True),
    ("SECRET_LOCATION", "abc", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/creds.json", True),
    ("DOCKER_CREDS", "abc", True),
    ("AWS_ACCESS_KEY_ID", "abc", True),
    ("AWS_SECRET_ACCESS_KEY", "abc", True),
    ("AWS_SESSION_TOKEN", "abc", True),
    ("NPM_CONFIG__AUTH", "abc", True),
    ("HTTP_AUTHORIZATION", "Bearer abc", True),
    ("SESSION_COOKIE", "abc", True),
    ("ssh.private-key", "abc", True),
    # secret by value under an innocent name
    ("DATABASE_URL", "postgres://u:pw@db.example/app", True),
    ("REDIS_URL", "redis://:pw@127.0.0.1:6379/0", True),
    ("HTTPS_PROXY", "http://user:pass@proxy.example:3128", True),
    ("GIT_REMOTE", "https://" + "ghp_" + _rand(36) + "@github.com/o/r.git", True),
    ("MY_SETTING", "sk-proj-" + _rand(40), True),
    ("ANTHROPIC", "sk-ant-api03-" + _rand(40), True),
    ("CONFIG", "ghp_" + _rand(36), True),
    ("X", "github_pat_" + _rand(22) + "_" + _rand(59), True),
    ("GL", "glpat-" + _rand(20), True),
    ("SLACK", "xoxb-" + _rand(12, string.digits) + "-" + _rand(24), True),
    ("AWS_ID", "AKIA" + _rand(16, string.ascii_uppercase + string.digits), True),
    ("GOOGLE", "AIza" + _rand(35), True),
    ("HUB", "hf_" + _rand(34), True),
    ("PAY", "sk_live_" + _rand(24), True),
    ("SESSION_DATA", JWT, True),
    ("CURL_OPTS", "-H 'Authorization: Bearer sk-" + _rand(48) + "'", True),
    ("BLOB", B62, True),
    ("AWS_STUFF", _rand(40, string.ascii_letters + string.digits + "+/"), True),
    ("DEPLOY", PEM, True),
    # ordinary variables: kept
    ("PATH", "/usr/local/bin:/usr/bin:/bin", False),
    ("HOME", "/home/u", False),
    ("LANG", "en_US.UTF-8", False),
    ("LC_ALL", "C.UTF-8", False),
    ("TERM", "xterm-256color", False),
    ("PYTHONPATH", "/work/src:/work/lib", False),
    ("VIRTUAL_ENV", "/work/.venv", False),
    ("CONDA_PREFIX", "/opt/conda/envs/myEnv2024py311AbcXyz0987654321", False),
    ("KEYBOARD_LAYOUT", "us", False),
    ("MONKEY", "banana", False),
    ("KEYS_DIR", "/etc/keys", False),
    ("SSH_AUTH_SOCK", "/tmp/ssh-XXXXabcd/agent.1234", False),
    ("GPG_KEY_ID", "ABCDEF0123456789", False),
    ("PWD", "/work", False),
    ("OLDPWD", "/tmp", False),
    ("AGENTKIT_TOKENIZER", "estimate", False),
    ("AGENTKIT_TIKTOKEN_TIMEOUT", "5", False),
    ("GITHUB_SHA", SHA, False),
    ("INVOCATION_ID", uuid.UUID(int=_rng.getrandbits(128)).hex, False),
    ("BUILD_UUID", str(uuid.UUID(int=_rng.getrandbits(128))), False),
    ("DATABASE_URL", "postgres://db.example/app", False),
    ("GIT_URL", "ssh://git@github.com/o/r.git", False),
    ("HTTP_PROXY", "http://proxy.example:3128", False),
    ("LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35", False),
    ("DESK_DIR", "/home/u/desk-organizer-project-2024-final-version", False),
    ("TASK", "task-management-service-config-file-v2", False),
    ("NODE_OPTIONS", "--max-old-space-size=4096", False),
    ("CUDA_VISIBLE_DEVICES", "0,1", False),
    ("SHORT", "abc123XYZ", False),
]


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
    key = "sk-endpoint-" + _rand(24)
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
    openai_like = "sk-proj-" + _rand(32)
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
