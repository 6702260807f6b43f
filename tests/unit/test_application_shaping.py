"""The options an application shapes its main agent with (instructions, builtin_tools,
user_files) and the one language rule (agentkit.language), in process."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from agentkit import Agent, Settings
from agentkit.chat.setup import builtin_tool_names, refresh_conventions
from agentkit.conventions import gather
from agentkit.conversation import Conversation
from agentkit.errors import ConfigurationError
from agentkit.language import detect_language, settle_language
from agentkit.mcp.config import load_servers
from agentkit.profiles import load_profiles
from agentkit.prompts import render


def base(**overrides: object) -> Settings:
    values: dict[str, object] = {"model": "m", "api_key": "k", "language": "en"}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


# ------------------------------------------------------------------ language
@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("请读取 README.md 并总结", "zh"),
        ("帮我看一下 src/app.py 里的 bug", "zh"),
        ("Summarise the README", "en"),
        ("Translate 你好 into French, please, and explain the grammar", "en"),
        ("", "en"),
        ("1234 !!!", "en"),
        ("日本語のテキストです", "zh"),  # kanji share: CJK ideographs over the threshold
    ],
)
def test_detect_language(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_an_explicit_language_wins_and_a_bad_one_is_refused() -> None:
    assert settle_language("en", "请总结") == "en"
    assert settle_language("zh", "Summarise") == "zh"
    assert settle_language("auto", "请总结") == "zh"
    with pytest.raises(ValueError):
        settle_language("fr", "bonjour")


def test_language_defaults_to_auto_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().language == "auto"
    monkeypatch.setenv("AGENTKIT_LANGUAGE", "zh")
    assert Settings().language == "zh"


def test_a_conversation_keeps_its_language_in_its_file(tmp_path: Path) -> None:
    conv = Conversation(language="zh")
    conv.save(tmp_path / "c.json")
    assert Conversation.load(tmp_path / "c.json").language == "zh"
    unsettled = Conversation()
    assert "language" not in unsettled.to_dict()  # files without one stay as they were


def test_an_auto_session_settles_its_language_at_the_first_message(workspace: Path) -> None:
    with Agent(workspace, base(language="auto")) as agent:
        session = agent.session
        assert session.settings.language == "auto"
        session.settle_language("请帮我整理这个目录")
        assert session.settings.language == "zh"
        assert session.conversation.language == "zh"
        assert "你" in session.system_prompt()  # the seed's Chinese prompt
        session.settle_language("Now in English")  # settled once
        assert session.settings.language == "zh"
        assert agent.settings.language == "auto"  # the next conversation settles again
        agent.new_conversation()
        assert agent.session.settings.language == "auto"


# ------------------------------------------------------------- builtin_tools
def test_builtin_tools_names_the_tools_offered(workspace: Path) -> None:
    chosen = ["read_file", "create_sub_agent", "get_sub_agent_status", "wait_for_sub_agents"]
    with Agent(workspace, base(subagent_control=True), builtin_tools=chosen) as agent:
        assert sorted(agent.registry.names()) == sorted(chosen)
    with Agent(workspace, base(subagent_control=False), builtin_tools=chosen) as agent:
        # a control-plane tool is a known name, offered only when the plane is on
        assert "wait_for_sub_agents" not in agent.registry.names()
    with Agent(workspace, base(), builtin_tools=[]) as agent:
        assert agent.registry.names() == []
    with Agent(workspace, base()) as agent:  # None: all of them, as before
        names = agent.registry.names()
    assert "run_command" in names and "get_sub_agent_status" in names


class Doubled(BaseModel):
    x: int


def double(p: Doubled) -> str:
    return str(p.x * 2)


def test_builtin_tools_keeps_the_users_tools(workspace: Path) -> None:
    with Agent(workspace, base(), builtin_tools=["read_file"], tools=[double]) as agent:
        assert sorted(agent.registry.names()) == ["double", "read_file"]


def test_an_unknown_builtin_tool_is_refused_with_the_known_names(workspace: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Agent(workspace, base(), builtin_tools=["read_file", "shell"])
    message = str(caught.value)
    assert "'shell'" in message
    for name in builtin_tool_names():
        assert name in message
    seed = {"create_sub_agent", "terminate_sub_agent", "get_sub_agent_status"}
    assert seed | {"wait_for_sub_agents", "message_sub_agent"} <= set(builtin_tool_names())
    with pytest.raises(ConfigurationError, match="list of names"):
        Agent(workspace, base(), builtin_tools="read_file")


def test_a_workspace_refuses_an_unknown_builtin_tool_at_once(workspace: Path) -> None:
    from agentkit.chat.workspace import Workspace

    with pytest.raises(ConfigurationError, match="'nope'"):
        Workspace(workspace, base(), builtin_tools=["nope"])


# --------------------------------------------------------------- instructions
def test_instructions_come_after_agentkits_prompt_and_before_agents_md(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("PROJECT RULE: tabs.\n", encoding="utf-8")
    settings = base(user_files=False)
    with Agent(workspace, settings, instructions="You answer as Acme's helper.") as agent:
        prompt = agent.session.system_prompt()
        conv = Conversation(messages=[{"role": "system", "content": prompt}])
        refresh_conventions(conv, agent.registry, workspace, settings)
    text = conv.messages[0]["content"]
    own = render("en", "main_system.txt")[:60]  # agentkit's own prompt opens it
    assert text.startswith(own)
    assert text.index("You answer as Acme's helper.") < text.index("PROJECT RULE: tabs.")
    with Agent(workspace, settings) as agent:  # without: no trace of it
        assert "Acme" not in agent.session.system_prompt()
        plain = agent.session.system_prompt()
    assert prompt.startswith(plain.split("\nCurrent time")[0][:200])


# ----------------------------------------------------------------- user_files
@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    config = home / ".config" / "agentkit"
    (config / "skills" / "homeskill").mkdir(parents=True)
    (config / "skills" / "homeskill" / "SKILL.md").write_text(
        "---\nname: homeskill\ndescription: a skill from home\n---\nDo it.\n", encoding="utf-8"
    )
    (config / "agents").mkdir()
    (config / "agents" / "homeprofile.md").write_text(
        "---\ndescription: a profile from home\n---\nYou review.\n", encoding="utf-8"
    )
    (config / "AGENTS.md").write_text("HOME RULE: never.\n", encoding="utf-8")
    (config / "mcp.json").write_text(
        '{"mcpServers": {"homemcp": {"command": "true"}}}', encoding="utf-8"
    )
    (config / "hooks.json").write_text("not json", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def test_user_files_off_reads_nothing_from_home(workspace: Path, fake_home: Path) -> None:
    on, off = base(), base(user_files=False)
    # With them (the default), the home's files are read: the fixture is seen.
    assert "HOME RULE" in gather(workspace, on).text
    assert "homeskill" in gather(workspace, on).text
    assert "homeprofile" in load_profiles(workspace, on)[0]
    assert "homemcp" in load_servers(workspace, on)[0]
    assert any("skills" in str(p) for p in on.read_only_paths())
    with pytest.raises(ConfigurationError, match="hooks"):  # its damaged hooks.json is read
        Agent(workspace, on)
    # Without: none of them.
    found = gather(workspace, off)
    assert "HOME RULE" not in found.text and "homeskill" not in found.text
    assert load_profiles(workspace, off)[0] == {}
    assert load_servers(workspace, off)[0] == {}
    assert off.read_only_paths() == []
    with Agent(workspace, off) as agent:  # the damaged hooks.json is not even opened
        assert "homeprofile" not in agent.session.system_prompt()


def test_session_and_workspace_take_instructions_and_builtin_tools(workspace: Path) -> None:
    from agentkit.chat import Session
    from agentkit.chat.workspace import Workspace

    with Session(
        workspace, base(), instructions="Session rule.", builtin_tools=["read_file"], prewarm=False
    ) as session:
        assert session.system_prompt().endswith("Session rule.")
        assert session.registry.names() == ["read_file"]
    shared = Workspace(
        workspace,
        base(),
        instructions="Server rule.",
        builtin_tools=(n for n in ["edit_file"]),
        prewarm=False,
    )
    try:
        for _ in range(2):  # every session, not only the first (a generator is kept)
            session = shared.create()
            assert session.system_prompt().endswith("Server rule.")
            assert session.registry.names() == ["edit_file"]
    finally:
        shared.close()
