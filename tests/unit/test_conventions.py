"""agentkit.conventions on real files: AGENTS.md order and cap, skill parsing and
precedence, the capped skill list, the first system message kept current, load_skill
through a real ToolRegistry, and profiles' ``skills`` allow-list. The end-to-end tests
(real CLI, real workers, FakeOpenAIServer) are in test_conventions_cli.py."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from agentkit.conventions import gather, sync_first_message
from agentkit.conventions.agents_md import read_agents_md
from agentkit.conventions.gather import Conventions
from agentkit.conventions.section import MIN_DESCRIPTION, render_skill_list
from agentkit.conventions.skills import Skill, discover_skills
from agentkit.conventions.tool import LOAD_SKILL
from agentkit.conversation import Conversation
from agentkit.profiles import AgentProfile, ProfileError, parse_profile
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext
from agentkit.tools.registry import ToolRegistry


@pytest.fixture(autouse=True)
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's config folder, empty unless a test fills it."""
    folder = tmp_path / "xdg"
    folder.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder / "agentkit"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(folder: Path, name: str, description: str, body: str = "Do it.") -> Path:
    return write(
        folder / name / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
    )


def en(**values: object) -> Settings:
    return Settings(language="en", **values)  # type: ignore[arg-type]


# ---------------------------------------------------------------- AGENTS.md
def test_agents_md_order_is_user_root_then_down_to_the_deliverables(
    workspace: Path, xdg: Path
) -> None:
    write(xdg / "AGENTS.md", "user rule")
    write(workspace / "AGENTS.md", "root rule")
    write(workspace / "pkg" / "AGENTS.md", "pkg rule")
    write(workspace / "pkg" / "a" / "AGENTS.md", "  \n")  # empty: skipped
    write(workspace / "other" / "AGENTS.md", "other rule")
    main = read_agents_md(workspace, en())
    sub = read_agents_md(workspace, en(), workspace / "pkg" / "a" / "out")
    assert [f.text for f in main.files] == ["user rule", "root rule"]
    assert [f.text for f in sub.files] == ["user rule", "root rule", "pkg rule"]
    assert sub.labels == (str(xdg / "AGENTS.md"), "AGENTS.md", "pkg/AGENTS.md")
    assert read_agents_md(workspace, en(agents_md=False)).files == ()


def test_agents_md_cap_cuts_the_farthest_file_first_and_says_so(workspace: Path, xdg: Path) -> None:
    write(xdg / "AGENTS.md", "U" * 3000)
    write(workspace / "AGENTS.md", "R" * 3000)
    write(workspace / "pkg" / "AGENTS.md", "P" * 1500)
    found = gather(workspace, en(agents_md_max_chars=4000), deliverables=workspace / "pkg")
    assert "P" * 1500 in found.text and "R" * 2500 in found.text and "R" * 2501 not in found.text
    assert "U" not in found.text.replace("AGENTS.md", "")
    assert f"3500 characters of {xdg / 'AGENTS.md'}, AGENTS.md are left out" in found.text
    assert "agents_md_max_chars = 4000" in found.text
    assert found.agents_md == (str(xdg / "AGENTS.md"), "AGENTS.md", "pkg/AGENTS.md")


def test_unusable_agents_md_files_are_skipped_with_a_warning_and_never_block(
    workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = write(tmp_path / "elsewhere.md", "not the project's")
    os.symlink(outside, workspace / "AGENTS.md")
    (workspace / "a").mkdir()
    os.mkfifo(workspace / "a" / "AGENTS.md")  # opening it for reading would block
    (workspace / "a" / "b").mkdir()
    (workspace / "a" / "b" / "AGENTS.md").write_bytes(b"caf\xe9\n")
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        found = read_agents_md(workspace, en(), workspace / "a" / "b")
    assert found.files == ()
    assert (
        "AGENTS.md is not used: it links to" in caplog.text
        and "outside the workspace" in caplog.text
    )
    assert "a/AGENTS.md is not used: it is not a regular file" in caplog.text
    assert "a/b/AGENTS.md is not used: it is not UTF-8 text (byte 3)" in caplog.text


def test_a_secret_in_agents_md_is_sent_as_written_with_a_warning_naming_the_file(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = "ghp_" + "a1B2c3D4e5" * 4
    write(workspace / "AGENTS.md", f"Deploy with care.\nUse the token {token} for the API.\n")
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        found = gather(workspace, en())
    assert token in found.text
    assert "AGENTS.md (line 2) holds what looks like a secret" in caplog.text


# ------------------------------------------------------------------- skills
def test_skill_headers_lenient_where_the_guide_says_and_skipped_otherwise(workspace: Path) -> None:
    folder = workspace / ".agents" / "skills"
    skill(folder, "good", "Use it: when things need doing")  # unquoted ": " read again quoted
    write(folder / "noname" / "SKILL.md", "---\ndescription: No name given.\n---\nB\n")
    write(folder / "other-dir" / "SKILL.md", "---\nname: renamed\ndescription: D.\n---\nB\n")
    write(folder / "nohead" / "SKILL.md", "# just text\n")
    write(folder / "open" / "SKILL.md", "---\nname: open\ndescription: D\n")
    write(folder / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\nB\n")
    write(folder / "badname" / "SKILL.md", "---\nname: Bad Name\ndescription: D\n---\n")
    write(folder / "list" / "SKILL.md", "---\n- a\n- b\n---\n")
    write(folder / "yaml" / "SKILL.md", "---\nname: [unclosed\ndescription: D\n---\n")
    (folder / "empty-folder").mkdir()
    scan = discover_skills(workspace, warn=False)
    by_name = scan.by_name()
    assert sorted(by_name) == ["good", "noname", "renamed"]
    assert by_name["good"].description == "Use it: when things need doing"
    assert by_name["noname"].notes == ("the header has no name: the folder's name is used",)
    assert by_name["renamed"].notes == ("its name 'renamed' differs from its folder's 'other-dir'",)
    reasons = {s.label.split("/")[2]: s.reason for s in scan.skipped}
    assert reasons == {
        "badname": "name 'Bad Name' is not a skill name: 1-64 lowercase letters, digits and "
        "single hyphens, not first or last",
        "list": "the YAML header must be a mapping of keys to values",
        "nodesc": "the header has no description (required: what the skill does and when to use it)",
        "nohead": "the file must start with a --- line opening the YAML header",
        "open": "the YAML header has no closing --- line",
        "yaml": reasons["yaml"],
    }
    assert reasons["yaml"].startswith("the YAML header cannot be read: ")


def test_skill_precedence_agents_then_agentkit_then_user(workspace: Path, xdg: Path) -> None:
    skill(workspace / ".agents" / "skills", "deploy", "From .agents.")
    skill(workspace / ".agentkit" / "skills", "deploy", "From .agentkit.")
    skill(workspace / ".agentkit" / "skills", "lint", "From .agentkit.")
    skill(xdg / "skills", "lint", "From the user.")
    skill(xdg / "skills", "mine", "From the user.")
    scan = discover_skills(workspace, warn=False)
    assert [(s.name, s.folder) for s in scan.skills] == [
        ("deploy", ".agents/skills"),
        ("lint", ".agentkit/skills"),
        ("mine", str(xdg / "skills")),
    ]
    assert [(lost.label, winner.label) for lost, winner in scan.shadowed] == [
        (".agentkit/skills/deploy/SKILL.md", ".agents/skills/deploy/SKILL.md"),
        (f"{xdg}/skills/lint/SKILL.md", ".agentkit/skills/lint/SKILL.md"),
    ]
    assert discover_skills(workspace, warn=False).skills[2].scope == "user"


def test_a_project_skill_linking_out_of_the_workspace_is_skipped(
    workspace: Path, tmp_path: Path
) -> None:
    outside = skill(tmp_path / "elsewhere", "stolen", "Outside the project.")
    (workspace / ".agents" / "skills").mkdir(parents=True)
    os.symlink(outside.parent, workspace / ".agents" / "skills" / "stolen")
    scan = discover_skills(workspace, warn=False)
    assert scan.skills == ()
    assert "outside the workspace" in scan.skipped[0].reason


def _skills(count: int, description_chars: int) -> list[Skill]:
    words = ("Extracts text and tables from the documents it is given, then ") * 40
    return [
        Skill(
            f"skill-{i:02d}",
            words[:description_chars],
            f"/w/.agents/skills/skill-{i:02d}/SKILL.md",
            f".agents/skills/skill-{i:02d}/SKILL.md",
            ".agents/skills",
        )  # fmt: skip
        for i in range(count)
    ]


def test_the_skill_list_names_and_describes_within_its_cap() -> None:
    few = render_skill_list(_skills(3, 200), "en", 1500)
    assert few.count("- skill-") == 3 and "…" not in few  # room enough: whole descriptions
    many = render_skill_list(_skills(20, 300), "en", 1500)
    lines = [line for line in many.splitlines() if line.startswith("- skill-")]
    assert len(lines) == 20 and all(line.endswith("…") for line in lines)
    assert sum(len(line) + 1 for line in lines) <= 1500
    crowd = render_skill_list(_skills(200, 300), "en", 1500)
    kept = [line for line in crowd.splitlines() if line.startswith("- skill-")]
    assert 0 < len(kept) < 200
    assert all(len(line.split(": ", 1)[1]) <= MIN_DESCRIPTION for line in kept)
    assert f"- … and {200 - len(kept)} more skills, not listed for space" in crowd


# --------------------------------------------------------- the system message
def test_the_first_system_message_keeps_its_text_and_swaps_only_the_section() -> None:
    seed = "SEED PROMPT\n- Current time: 2026-03-10 12:00:00 +0800"
    conversation = Conversation(
        messages=[{"role": "system", "content": seed}, {"role": "user", "content": "hi"}]
    )
    assert not sync_first_message(conversation, Conventions())
    assert conversation.messages[0]["content"] == seed and conversation.conventions == {}
    assert "conventions" not in conversation.to_dict()
    assert sync_first_message(conversation, Conventions("\n\nRULES ONE", ("AGENTS.md",)))
    assert conversation.messages[0]["content"] == seed + "\n\nRULES ONE"
    assert conversation.to_dict()["conventions"]["agents_md"] == ["AGENTS.md"]
    assert not sync_first_message(conversation, Conventions("\n\nRULES ONE", ("AGENTS.md",)))
    assert sync_first_message(conversation, Conventions("\n\nRULES TWO, LONGER", ("AGENTS.md",)))
    assert conversation.messages[0]["content"] == seed + "\n\nRULES TWO, LONGER"
    assert sync_first_message(conversation, Conventions())
    assert conversation.messages[0]["content"] == seed and conversation.conventions == {}
    # Someone else changed the end: that text stays, the section comes after it.
    sync_first_message(conversation, Conventions("\n\nRULES"))
    conversation.messages[0]["content"] += " (edited)"
    sync_first_message(conversation, Conventions("\n\nNEW"))
    assert conversation.messages[0]["content"] == seed + "\n\nRULES (edited)\n\nNEW"


# ----------------------------------------------------------------- load_skill
def test_load_skill_errors_name_the_skills_and_the_file(workspace: Path) -> None:
    path = skill(workspace / ".agents" / "skills", "pdf", "PDFs.", body="Use pdftotext.")
    write(workspace / ".agents" / "skills" / "pdf" / "scripts" / "x.py", "print(1)\n")
    ctx = ToolContext(workspace=workspace, settings=en())
    registry = ToolRegistry([LOAD_SKILL])
    loaded = registry.execute("load_skill", {"name": "pdf"}, ctx)
    assert (
        loaded.ok
        and loaded.output == "Skill pdf loaded: its instructions follow in the next message."
    )
    [message] = loaded.messages
    assert message["role"] == "system" and "Use pdftotext." in message["content"]
    assert "- .agents/skills/pdf/scripts/x.py" in message["content"]
    unknown = registry.execute("load_skill", {"name": "word"}, ctx)
    assert unknown.output == "Error: not_found: there is no skill named 'word'; skills: pdf"
    path.write_text("---\nname: pdf\n---\nno description now\n")
    broken = registry.execute("load_skill", {"name": "pdf"}, ctx)
    assert broken.error_code == "not_found"  # no longer a usable skill, so not in the catalog
    assert "no skill named 'pdf'" in broken.output


# ------------------------------------------------------------------ profiles
def test_profile_skills_allow_list_forms() -> None:
    profile = parse_profile("---\nskills: pdf-*, deploy\n---\nB\n", "f.md", "p")
    assert profile.skills == ("pdf-*", "deploy")
    assert AgentProfile.from_dict(profile.to_dict()).skills == ("pdf-*", "deploy")
    assert parse_profile("---\nskills: []\n---\n", "f.md", "p").skills == ()
    assert parse_profile("---\n---\n", "f.md", "p").skills is None
    with pytest.raises(ProfileError, match="skills must be a list of skill names"):
        parse_profile("---\nskills: {a: 1}\n---\n", "f.md", "p")


def test_the_user_skills_folder_is_a_read_only_root_for_the_tools_and_the_sandbox(
    workspace: Path, xdg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentkit.process.sandbox import bwrap_works, confine

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = en(read_only_roots=["~/docs"], command_sandbox="bwrap")
    assert settings.read_only_paths() == [tmp_path / "home" / "docs"]  # no skills folder yet
    skill(xdg / "skills", "mine", "Mine.")
    assert settings.read_only_paths() == [tmp_path / "home" / "docs", (xdg / "skills").resolve()]
    assert en(skills=False).read_only_paths() == []
    if bwrap_works("bwrap") is None:
        pytest.skip("bubblewrap cannot run here")
    confinement = confine(settings, workspace, workspace)
    assert confinement is not None
    argv = " ".join(confinement.argv)
    # Shown read-only, "~" expanded as read_file expands it (was bound as a relative "~").
    assert f"--ro-bind-try {tmp_path / 'home' / 'docs'} " in argv
    assert f"--ro-bind-try {(xdg / 'skills').resolve()} " in argv
