"""Settings read only the documented environment names (docs/architecture.md §6; hardening item 1).

A generic ``API_KEY``/``BASE_URL`` (or any other spelling of a field) must never set a
field: a key meant for another service would go to this endpoint, or this endpoint's
key to another host. Also: the user guide's settings table (docs/guide/settings.md) matches the fields.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices
from pydantic.fields import FieldInfo

from agentkit import Agent
from agentkit.settings import Settings, env_names
from agentkit.testing import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
FIELDS = Settings.model_fields


@pytest.fixture(autouse=True)
def _no_agentkit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        upper = name.upper()
        if upper.startswith(("AGENTKIT_", "OPENAI_")) or upper in ("API_KEY", "BASE_URL"):
            monkeypatch.delenv(name)


def _sample(name: str, field: FieldInfo) -> tuple[str, Any]:
    """A valid environment string for ``name`` and the value it parses to, never the default."""
    default = field.get_default(call_default_factory=True)
    # Annotated members of a union (FiniteFloat | None) count as their base type.
    args = tuple(
        typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a
        for a in typing.get_args(field.annotation)
    )
    if name == "base_url":
        return "http://127.0.0.1:9/probe/v1", "http://127.0.0.1:9/probe/v1"
    if typing.get_origin(field.annotation) is typing.Literal:
        other = next(a for a in args if a != default)
        return other, other
    if name == "approvals":  # values are allow, ask or deny
        return '{"run_command:git push*": "ask"}', {"run_command:git push*": "ask"}
    if name == "hooks":  # the hooks shape (agentkit.policy.hook_config)
        value = {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}
        return json.dumps(value), value
    if name == "model_prices":  # model name -> prices per million tokens
        return '{"probe": {"input": 1, "output": 2}}', {"probe": {"input": 1.0, "output": 2.0}}
    if isinstance(default, dict):  # JSON objects, e.g. dict[str, float]
        convert = str if args[1] is Any else args[1]
        return '{"probe": "2"}', {"probe": convert("2")}
    if name == "agent_profiles":  # a JSON list of objects
        return '[{"name": "probe"}]', [{"name": "probe"}]
    literals = [a for a in args if typing.get_origin(a) is typing.Literal]
    if literals:  # Optional[Literal[...]]
        value = typing.get_args(literals[0])[0]
        return value, value
    kinds = set(args) | {field.annotation}
    if bool in kinds:
        return str(not default).lower(), not default
    if int in kinds and float not in kinds:
        value = 7 if default is None else default + 1
        return str(value), value
    if float in kinds:
        value = 0.5 if default is None else default / 2
        return str(value), value
    if isinstance(default, list):
        return "probe-a,probe-b", ["probe-a", "probe-b"]
    return "probe-value", "probe-value"


def _wrong_spellings(name: str, field: FieldInfo) -> set[str]:
    """Every plausible environment name for ``name`` that is NOT documented."""
    upper = name.upper()
    names = {name, upper, name.capitalize(), f"OPENAI_{upper}", f"openai_{name}"}
    names |= {f"AGENTKIT_{name}", f"agentkit_{name}", f"Agentkit_{upper}", f"agentkit_{upper}"}
    names |= {f"{upper}S", f"AGENT_{upper}", f"AGENTKIT{upper}", f"AGENTKIT__{upper}"}
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        for choice in alias.choices:
            if isinstance(choice, str):
                names |= {choice, choice.lower(), choice.upper()}
    return names - set(env_names(name))


def test_documented_names_are_agentkit_field_and_two_openai_names() -> None:
    assert env_names("model") == ("AGENTKIT_MODEL",)
    assert env_names("api_key") == ("AGENTKIT_API_KEY", "OPENAI_API_KEY")
    assert env_names("base_url") == ("AGENTKIT_BASE_URL", "OPENAI_BASE_URL")
    documented = {n for f in FIELDS for n in env_names(f)}
    assert documented == {f"AGENTKIT_{f.upper()}" for f in FIELDS} | {
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    }


@pytest.mark.parametrize("name", list(FIELDS))
def test_only_documented_names_set_a_field(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    field = FIELDS[name]
    raw, parsed = _sample(name, field)
    default = Settings().model_dump()[name]
    assert parsed != default
    wrong = _wrong_spellings(name, field)
    assert {name, name.upper(), f"OPENAI_{name.upper()}"} - set(env_names(name)) <= wrong
    for spelling in sorted(wrong):
        monkeypatch.setenv(spelling, raw)
        assert getattr(Settings(), name) == default, f"{spelling} set {name}"
        monkeypatch.delenv(spelling)
    # All the wrong spellings at once, then each documented name among them.
    for spelling in wrong:
        monkeypatch.setenv(spelling, raw)
    assert getattr(Settings(), name) == default
    for documented in env_names(name):
        monkeypatch.setenv(documented, raw)
        assert getattr(Settings(), name) == parsed, documented
        monkeypatch.delenv(documented)


def test_agentkit_name_wins_over_openai_name_and_arguments_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai")
    monkeypatch.setenv("AGENTKIT_API_KEY", "from-agentkit")
    assert Settings().api_key == "from-agentkit"
    assert Settings(api_key="arg").api_key == "arg"


def test_constructor_spellings_and_round_trips_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", "generic")
    monkeypatch.setenv("BASE_URL", "http://127.0.0.1:9/generic")
    url = "http://127.0.0.1:8/v1"
    for kwargs in (
        {"api_key": "k", "base_url": url},
        {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url},
        {"AGENTKIT_API_KEY": "k", "AGENTKIT_BASE_URL": url},
    ):
        s = Settings(**kwargs)  # type: ignore[arg-type]
        assert (s.api_key, s.base_url) == ("k", url), kwargs
    s = Settings(api_key="k", base_url=url, command_deny="rm, dd")  # type: ignore[arg-type]
    dumped = s.model_dump()  # what the sub-agent manager sends to a worker
    assert Settings.model_construct(**dumped) == s and Settings(**dumped) == s
    assert Settings.model_validate(dumped) == s and s.command_deny == ["rm", "dd"]


def test_generic_names_never_send_a_request_elsewhere(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAIServer(["documented"]) as good, FakeOpenAIServer(["decoy"]) as decoy:
        monkeypatch.setenv("OPENAI_BASE_URL", good.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-documented")
        monkeypatch.setenv("AGENTKIT_MODEL", "m")
        for spelling in ("BASE_URL", "base_url", "AGENTKIT_base_url", "OPENAI_base_url"):
            monkeypatch.setenv(spelling, decoy.base_url)
        for spelling in ("API_KEY", "api_key", "AGENTKIT_api_key"):
            monkeypatch.setenv(spelling, "generic-key-for-another-service")
        with Agent(workspace=workspace, settings=Settings(language="en")) as agent:
            result = agent.run("hello")
        assert result.final_text == "documented"
        assert decoy.records == []
        assert [r.headers["authorization"] for r in good.records] == ["Bearer sk-documented"]


def test_cli_ignores_generic_names(workspace: Path) -> None:
    with FakeOpenAIServer(["from the documented host"]) as good, FakeOpenAIServer([]) as decoy:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST",))}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.update(
            OPENAI_BASE_URL=good.base_url,
            OPENAI_API_KEY="sk-documented",
            AGENTKIT_MODEL="m",
            AGENTKIT_MAX_RETRIES="0",
            BASE_URL=decoy.base_url,
            base_url=decoy.base_url,
            API_KEY="generic-key",
        )
        proc = subprocess.run(
            [sys.executable, "-m", "agentkit", "run", "hi", "-w", str(workspace), "--json"],
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert "from the documented host" in proc.stdout
        assert decoy.records == []
        assert {r.headers["authorization"] for r in good.records} == {"Bearer sk-documented"}


SETTINGS_PAGE = REPO / "docs" / "guide" / "settings.md"


def _readme_row(name: str, field: FieldInfo) -> str:
    default = field.get_default(call_default_factory=True)
    shown = "(empty)" if default == [] else str(default)
    envs = ", ".join(f"`{n}`" for n in env_names(name))
    return f"| `{name}` | {envs} | `{shown}` | {field.description} |"


def test_guide_settings_table_matches_the_fields() -> None:
    """The user guide's table (docs/guide/settings.md) is generated from the fields:
    rerun this file as a script (``python tests/integration/test_settings_env.py``) to
    rewrite it after changing a field."""
    readme = SETTINGS_PAGE.read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    table = [r for r in rows if r.split("|")[1].strip(" `") in FIELDS]
    assert table == [_readme_row(n, f) for n, f in FIELDS.items()]


if __name__ == "__main__":  # regenerate the user guide's settings table
    path = SETTINGS_PAGE
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index("| field | environment | default | meaning |")
    end = start + 2
    while end < len(lines) and lines[end].startswith("| `"):
        end += 1
    lines[start + 2 : end] = [_readme_row(n, f) for n, f in FIELDS.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
