"""Skill folders past the 500 looked at in one skills folder are not dropped without
a word (issue 31, item 11): one warning names the folder and how many were skipped."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agentkit.conventions.skills import MAX_SKILLS_PER_FOLDER, discover_skills


def _skill(folder: Path, name: str) -> None:
    (folder / name).mkdir(parents=True)
    header = f"---\nname: {name}\ndescription: does {name}\n---\nbody\n"
    (folder / name / "SKILL.md").write_text(header)


def test_folders_past_the_cap_are_counted_in_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    workspace = tmp_path / "ws"
    folder = workspace / ".agents" / "skills"
    folder.mkdir(parents=True)
    for n in range(MAX_SKILLS_PER_FOLDER + 7):
        (folder / f"s{n:04d}").mkdir()
    _skill(folder, "s0000-real")  # sorts among the first: used
    (folder / ".hidden").mkdir()  # hidden folders are not skills: not counted
    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # every round looks again: still one warning
            scan = discover_skills(workspace)
    assert [s.name for s in scan.skills] == ["s0000-real"]
    said = [r.getMessage() for r in caplog.records if "more than" in r.getMessage()]
    assert said == [
        f"agentkit: skills folder .agents/skills holds more than {MAX_SKILLS_PER_FOLDER} "
        f"skill folders: only the first {MAX_SKILLS_PER_FOLDER} (by name) are used, 8 skipped"
    ]


def test_a_folder_within_the_cap_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    folder = tmp_path / "ws" / ".agents" / "skills"
    folder.mkdir(parents=True)
    for n in range(MAX_SKILLS_PER_FOLDER):
        (folder / f"s{n:04d}").mkdir()
    with caplog.at_level(logging.WARNING):
        discover_skills(tmp_path / "ws")
    assert not [r for r in caplog.records if "more than" in r.getMessage()]
