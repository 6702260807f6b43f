"""The number rule: every number read from settings, config files, YAML headers and saved
files is finite and in range, or refused with an error naming the file and the field
(issue 31 item 6; issue 32 item 4's config files)."""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentkit.configfile import read_front_matter
from agentkit.conventions.skills import discover_skills
from agentkit.conversation import Conversation, usage_total
from agentkit.cost import Pricer, check_model_prices
from agentkit.errors import AgentkitError, ConfigFileError
from agentkit.mcp.config import parse_servers
from agentkit.policy.hook_config import HookConfigError, load_hooks
from agentkit.profiles import AgentProfile, ProfileError, load_profiles, parse_profile
from agentkit.settings import Settings

BAD = ["nan", "inf", "-inf", "1e309", "-1"]

# One field of each kind: a duration, a delay, a share, an optional cap, a count.
FIELDS = {
    "hook_timeout_seconds": BAD + ["0"],
    "retry_base_delay": BAD,
    "context_budget": BAD + ["0"],
    "session_max_cost_usd": BAD + ["0"],
    "temperature": BAD + ["3"],
    "ray_num_cpus": BAD,
    "read_max_lines": BAD + ["0"],
    "max_output_tokens": BAD + ["0"],
}
CASES = [(name, value) for name, values in FIELDS.items() for value in values]


@pytest.mark.parametrize(("name", "value"), CASES)
def test_a_setting_that_is_not_finite_or_in_range_is_refused_naming_it(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValidationError, match=name):
        Settings(**{name: value})
    monkeypatch.setenv(f"AGENTKIT_{name.upper()}", value)
    with pytest.raises(ValidationError, match=name):
        Settings()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e309", "-1"])
@pytest.mark.parametrize("name", ["ray_resources", "model_prices"])
def test_a_number_inside_a_json_setting_is_finite(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = '{"m": {"input": %s, "output": 1}}' if name == "model_prices" else '{"m": %s}'
    monkeypatch.setenv(f"AGENTKIT_{name.upper()}", text % value)
    with pytest.raises(ValidationError, match=rf"{name}\.m"):
        Settings()


def _numeric_fields() -> list[str]:
    names = []
    for name, field in Settings.model_fields.items():
        kinds = set()
        for arg in typing.get_args(field.annotation) or (field.annotation,):
            if typing.get_origin(arg) is typing.Annotated:
                arg = typing.get_args(arg)[0]
            kinds.add(arg)
        if kinds & {int, float} and bool not in kinds:
            names.append(name)
    return names


@pytest.mark.parametrize("name", _numeric_fields())
def test_every_numeric_setting_refuses_nan_infinity_and_negatives(name: str) -> None:
    for value in ("nan", "inf", "-inf", "1e309", "-1"):
        with pytest.raises(ValidationError, match=name):
            Settings(**{name: value})


def _whole_number_fields() -> list[str]:
    return [
        n for n in _numeric_fields() if float not in _kinds(Settings.model_fields[n].annotation)
    ]


def _kinds(annotation: object) -> set[object]:
    kinds = set()
    for arg in typing.get_args(annotation) or (annotation,):
        kinds.add(typing.get_args(arg)[0] if typing.get_origin(arg) is typing.Annotated else arg)
    return kinds


@pytest.mark.parametrize("name", _whole_number_fields())
def test_every_whole_number_setting_has_an_upper_bound(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trial's AGENTKIT_MAX_CONCURRENT_SUBAGENTS=100000000000000000000 was accepted.
    with pytest.raises(ValidationError, match=f"{name}\n  Input should be less than"):
        Settings(**{name: 10**20})
    monkeypatch.setenv(f"AGENTKIT_{name.upper()}", "100000000000000000000")
    with pytest.raises(ValidationError, match=name):
        Settings()


OUT_OF_ORDER = [
    ({"subagent_timeout_min": 5000}, "subagent_timeout_min (5000)", "subagent_timeout_max (3600)"),
    ({"subagent_timeout_max": 30}, "subagent_timeout_min (60)", "subagent_timeout_max (30)"),
    ({"subagent_default_timeout": 30}, "subagent_timeout_min (60)", "subagent_default_timeout"),
    ({"subagent_default_timeout": 5000}, "subagent_default_timeout (5000)", "_max (3600)"),
    ({"retry_base_delay": 90}, "retry_base_delay (90.0)", "retry_max_delay (60.0)"),
]


@pytest.mark.parametrize(("given", "low", "high"), OUT_OF_ORDER)
def test_a_range_given_out_of_order_is_refused_naming_both_fields(
    given: dict[str, int], low: str, high: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A trial's subagent_timeout_min=5000 was accepted, then every sub-agent refused
    # with "timeout_seconds must be between 5000 and 3600".
    with pytest.raises(ValidationError) as caught:
        Settings(**given, api_key="sk-never-shown")
    assert low in str(caught.value) and high in str(caught.value)
    assert "sk-never-shown" not in str(caught.value)
    for name, value in given.items():
        monkeypatch.setenv(f"AGENTKIT_{name.upper()}", str(value))
    with pytest.raises(ValidationError, match=r"must not be above"):
        Settings()


def test_ranges_in_order_are_accepted() -> None:
    settings = Settings(subagent_timeout_min=5, subagent_timeout_max=5, subagent_default_timeout=5)
    assert settings.subagent_default_timeout == 5
    assert Settings(retry_base_delay=2, retry_max_delay=2).retry_max_delay == 2


def test_the_largest_duration_is_bounded_and_defaults_still_hold() -> None:
    with pytest.raises(ValidationError, match="request_timeout"):
        Settings(request_timeout=1e300)
    settings = Settings(hook_timeout_seconds=5, session_max_cost_usd=0.5, temperature=0)
    assert (settings.hook_timeout_seconds, settings.session_max_cost_usd) == (5.0, 0.5)


@pytest.mark.parametrize("price", [math.nan, math.inf, -0.5])
def test_a_model_price_is_finite_and_not_negative(price: float) -> None:
    table = {"m": {"input": price, "output": 1.0}}
    with pytest.raises(ValueError, match=r"model_prices\['m'\]\['input'\].*finite"):
        check_model_prices(table)
    with pytest.raises(ValueError, match="finite"):
        Pricer(table)  # given in Python, past Settings
    assert check_model_prices({"m": {"input": 0, "output": 2}}) == {
        "m": {"input": 0.0, "output": 2.0}
    }


@pytest.mark.parametrize(
    "timeout", ["NaN", "Infinity", "-Infinity", "1e309", "0", "-1", "1e300", '"5"', "true"]
)
def test_a_hook_timeout_is_finite_and_named_with_its_file(tmp_path: Path, timeout: str) -> None:
    state, user = tmp_path / ".agentkit", tmp_path / "user"
    state.mkdir()
    path = state / "hooks.json"
    hook = '{"hooks": {"Stop": [{"hooks": [{"command": "true", "timeout": %s}]}]}}'
    path.write_text(hook % timeout)
    with pytest.raises(HookConfigError) as caught:
        load_hooks(state, None, user)
    error = caught.value
    assert isinstance(error, ConfigFileError) and isinstance(error, AgentkitError)
    assert (error.path, error.field) == (str(path), "hooks.Stop[0].hooks[0].timeout")
    assert str(error).startswith(f"{path}: hooks.Stop[0].hooks[0].timeout: ")
    path.write_text(hook % "2.5")
    assert load_hooks(state, None, user).matching("Stop")[0].timeout == 2.5


PROFILE_NUMBERS = ["timeout_seconds", "max_tokens", "max_turns", "temperature"]


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "-1", "0"])
@pytest.mark.parametrize("key", PROFILE_NUMBERS)
def test_a_profile_header_number_is_finite_and_in_range(key: str, value: str) -> None:
    if key == "temperature" and value == "0":
        assert parse_profile(f"---\n{key}: 0\n---\n", "/w/p.md", "p").temperature == 0
        return
    with pytest.raises(ProfileError) as caught:
        parse_profile(f"---\n{key}: {value}\n---\nBody\n", "/w/p.md", "p")
    assert (caught.value.path, caught.value.field) == ("/w/p.md", key)
    assert str(caught.value).startswith(f"/w/p.md: {key}: ")


def test_a_profile_given_in_python_obeys_the_same_rule() -> None:
    with pytest.raises(ProfileError, match=r"^python: max_tokens: .*greater than or equal to 1"):
        AgentProfile.from_dict({"name": "p", "max_tokens": 0})
    profile = AgentProfile.from_dict({"name": "p", "max_tokens": 5, "timeout_seconds": 300.0})
    assert (profile.max_tokens, profile.timeout_seconds) == (5, 300)


def test_an_unknown_profile_key_is_refused_naming_the_file_and_the_key() -> None:
    with pytest.raises(ProfileError, match=r"^/w/p.md: colour: unknown key; known: .*max_tokens"):
        parse_profile("---\ncolour: red\n---\n", "/w/p.md", "p")


def test_a_bad_profile_file_is_refused_with_its_path_and_others_load(
    workspace: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    folder = workspace / ".agentkit" / "agents"
    folder.mkdir(parents=True)
    (folder / "bad.md").write_text("---\ntimeout_seconds: .nan\n---\nB\n")
    (folder / "good.md").write_text("---\ntimeout_seconds: 300\n---\nB\n")
    usable, refused = load_profiles(workspace, settings)
    assert list(usable) == ["good"]
    assert refused["bad"].startswith(f"{folder / 'bad.md'}: timeout_seconds: ")


@pytest.mark.parametrize(
    "entry",
    [{"command": "x", "enviroment": {}}, {"url": "http://127.0.0.1:1/mcp", "header": {}}],
)
def test_an_unknown_mcp_key_is_named_and_the_server_skipped(entry: dict[str, object]) -> None:
    servers, problems = parse_servers({"mcpServers": {"s": entry, "ok": {"command": "y"}}}, "f")
    assert list(servers) == ["ok"]
    assert len(problems) == 1 and problems[0].startswith("f: mcpServers.s.")
    assert "unknown key" in problems[0]


def test_a_non_finite_mcp_env_value_is_refused() -> None:
    data = json.loads('{"mcpServers": {"s": {"command": "x", "env": {"A": NaN}}}}')
    servers, problems = parse_servers(data, "f")
    assert not servers and "env" in problems[0] and "finite" in problems[0]


def test_the_front_matter_reader_is_one_and_lenient() -> None:
    text = "\ufeff---\ndescription: Finds things: fast\n---\n\nBody\n\n"
    assert read_front_matter(text) == ({"description": "Finds things: fast"}, "Body")
    assert read_front_matter("---\n---\n") == ({}, "")
    for bad, why in [("no header", "must start"), ("---\na: 1\n", "no closing"),
                     ("---\n- a\n---\n", "mapping")]:  # fmt: skip
        with pytest.raises(ConfigFileError, match=why):
            read_front_matter(bad)
    # The profile reader gained the skills' leniency (the copies had drifted).
    profile = parse_profile(text, "/w/p.md", "p")
    assert (profile.description, profile.prompt) == ("Finds things: fast", "Body")


def test_a_skill_header_with_a_non_finite_value_is_skipped_with_the_field(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    folder = workspace / ".agents" / "skills"
    for name, header in [("a", "description: .nan"), ("b", "name: .inf\ndescription: d")]:
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(f"---\n{header}\n---\nBody\n")
    scan = discover_skills(workspace, warn=False)
    assert not scan.skills
    reasons = {s.label: s.reason for s in scan.skipped}
    assert "description" in reasons[".agents/skills/a/SKILL.md"]
    assert "name" in reasons[".agents/skills/b/SKILL.md"]


def test_a_conversation_file_holding_nan_reads_as_cost_unknown(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    data = {"id": "c", "messages": [], "stats": {"turns": 2, "cost_usd": math.nan}}
    path.write_text(json.dumps(data))  # Python writes a bare NaN, as an old version did
    assert "NaN" in path.read_text()
    conversation = Conversation.load(path)
    assert conversation.stats.cost() is None
    json.dumps(conversation.to_dict(), allow_nan=False)  # what the web API answers with
    rows = [{"tokens": 5, "cost_usd": math.inf}]
    assert usage_total(conversation.stats, rows)["cost_usd"] is None
    data["stats"]["cost_usd"] = 0.25
    path.write_text(json.dumps(data))
    assert Conversation.load(path).stats.cost() == 0.25


def test_a_profile_in_settings_is_refused_naming_the_setting(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    given = AgentProfile(name="hot", temperature=math.nan)  # built past from_dict
    settings = Settings(agent_profiles=[given, {"name": "ok", "max_turns": 3}])
    usable, refused = load_profiles(workspace, settings)
    assert list(usable) == ["ok"] and usable["ok"].source == "Settings.agent_profiles"
    assert refused["hot"].startswith("Settings.agent_profiles: temperature: ")


def test_a_profile_output_schema_holds_only_finite_numbers() -> None:
    header = "output_schema: {type: object, properties: {n: {type: number, maximum: .nan}}}"
    with pytest.raises(ProfileError) as caught:
        parse_profile(f"---\n{header}\n---\n", "/w/p.md", "p")
    assert caught.value.field == "output_schema.properties.n.maximum"
    fine = parse_profile(f"---\n{header.replace('.nan', '10')}\n---\n", "/w/p.md", "p")
    assert fine.output_schema == {
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 10}},
    }
