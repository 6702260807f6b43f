"""AGENTS.md and Agent Skills end to end: the real ``agentkit`` command, real sub-agent
workers, FakeOpenAIServer (one for the module), real files; the user's config folder
is the test's own ``XDG_CONFIG_HOME``.

What is checked is what reaches the model: whole request bodies, the system message
word for word up to the conventions' section, the tool list, the messages after a
load_skill call; and what is left on disk (the transcripts' ``conventions`` key).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import cli_env
from fork_runner import ForkRunner
from subagent_helpers import Router, call, calls, finish, who
from test_chat_cli_servers import JsonlChat

from agentkit import prompts
from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow

TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [+-]\d{4}")
SECTION = "\n\n# Project instructions (AGENTS.md)"


class Script:
    """The module server's handler: the current test's router."""

    router: Any = None

    def __call__(self, request: dict[str, Any]) -> Any:
        return self.router(request)


@pytest.fixture(scope="module")
def server(agentkit_forks: ForkRunner) -> Any:
    """The module's fake endpoint; its ``forks`` runs the ``agentkit`` commands (the
    agentkit_forks fixture of conftest.py)."""
    script = Script()
    with FakeOpenAIServer(script) as fake:
        fake.script = script  # type: ignore[attr-defined]
        fake.forks = agentkit_forks  # type: ignore[attr-defined]
        yield fake


@pytest.fixture
def fake(server: Any) -> Any:
    server.clear()
    return server


@pytest.fixture
def xdg(tmp_path: Path) -> Path:
    (tmp_path / "xdg" / "agentkit").mkdir(parents=True)
    return tmp_path / "xdg"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(folder: Path, name: str, description: str, body: str) -> Path:
    return write(
        folder / name / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
    )


def run(
    fake: Any, router: Router, workspace: Path, xdg: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    fake.script.router = router
    proc = fake.forks.agentkit("run", "go", "-w", str(workspace), "--json", *args,
                               env=cli_env(fake.base_url, XDG_CONFIG_HOME=str(xdg), **env),
                               timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc


def requests(fake: Any, agent: int | None) -> list[dict[str, Any]]:
    return [r for r in fake.requests if who(r) == agent]


def system(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def seed_pattern(template: str, workspace: Path, **values: Any) -> re.Pattern[str]:
    """The seed's rendered prompt, word for word, any current time."""
    text = prompts.render("en", template, workspace=str(workspace), system=prompts.describe_system(),
                          current_time="\x00", **values)  # fmt: skip
    return re.compile(re.escape(text).replace("\x00", TIME.pattern))


def assert_seed_leads(request: dict[str, Any], template: str, workspace: Path) -> str:
    """Assert the system message is the seed's prompt then the section; return the section."""
    content = system(request)
    head = content.split(SECTION)[0].split("\n\n# Skills")[0]
    assert seed_pattern(template, workspace, max_concurrent=5).fullmatch(head), head[-300:]
    return content[len(head) :]


def not_outside_the_system_prompt(fake: Any, *texts: str) -> None:
    """The user's text is in system messages only: never a tool result or user message."""
    for request in fake.requests:
        for message in request["messages"]:
            if message["role"] != "system":
                assert not any(t in str(message.get("content")) for t in texts), message


def record(workspace: Path, folder: str) -> dict[str, Any]:
    return json.loads((workspace / folder / ".subagent" / "conversations.json").read_text())


def conversation_file(workspace: Path) -> dict[str, Any]:
    [path] = (workspace / ".agentkit" / "conversations").glob("conv_*.json")
    return json.loads(path.read_text())


# ---------------------------------------------------------------- AGENTS.md
def test_agents_md_reaches_the_main_agent_and_each_sub_agent_nearest_last(
    fake: Any, workspace: Path, xdg: Path
) -> None:
    key = "sk-" + "Zq9" * 12
    write(xdg / "agentkit" / "AGENTS.md", "USER-RULE: answer briefly.")
    write(workspace / "AGENTS.md", f"ROOT-RULE: run make test.\nStaging key: {key}\n")
    write(workspace / "pkg" / "AGENTS.md", "PKG-RULE: no new dependencies.")
    write(workspace / "pkg" / "a" / "AGENTS.md", "NESTED-RULE: keep the API stable.")
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent",
                    agent_id=1,
                    summary="under pkg/a",
                    task="t",
                    deliverables_dir="pkg/a/out",
                ),
                call(
                    "create_sub_agent",
                    agent_id=2,
                    summary="elsewhere",
                    task="t",
                    deliverables_dir="other/out",
                ),
            ),  # fmt: skip
            "done",
        ],
        subs={
            1: [finish("Finished the work under pkg/a.")],
            2: [finish("Finished the other work.")],
        },
    )
    proc = run(fake, router, workspace, xdg)
    main = assert_seed_leads(requests(fake, None)[0], "main_system.txt", workspace)
    sub1 = assert_seed_leads(requests(fake, 1)[0], "subagent/system.txt", workspace)
    sub2 = assert_seed_leads(requests(fake, 2)[0], "subagent/system.txt", workspace)
    order = ["USER-RULE", "ROOT-RULE", "PKG-RULE", "NESTED-RULE"]
    assert [main.find(r) >= 0 for r in order] == [True, True, False, False]
    assert [sub2.find(r) >= 0 for r in order] == [True, True, False, False]
    assert sorted(order, key=sub1.find) == order and -1 not in map(sub1.find, order)
    assert (
        '<agents_md path="pkg/a/AGENTS.md">\nNESTED-RULE: keep the API stable.\n</agents_md>'
        in sub1
    )
    not_outside_the_system_prompt(fake, *order)
    # The user's text is sent as written, and the file holding a key is named.
    assert key in main and "AGENTS.md (line 2) holds what looks like a secret" in proc.stderr
    user_file = str(xdg / "agentkit" / "AGENTS.md")
    both = [user_file, "AGENTS.md"]
    assert record(workspace, "pkg/a/out")["conventions"] == {
        "agents_md": [*both, "pkg/AGENTS.md", "pkg/a/AGENTS.md"]
    }
    assert record(workspace, "other/out")["conventions"] == {"agents_md": both}
    assert conversation_file(workspace)["conventions"]["agents_md"] == both


def test_a_changed_agents_md_is_read_again_at_the_next_round(
    fake: Any, workspace: Path, xdg: Path
) -> None:
    fake.script.router = Router(main=["answered"])
    agents_md = write(workspace / "AGENTS.md", "VERSION-ONE of the rules.")
    # No sub-agent here: spawn, so the session makes no worker process server ready.
    env = cli_env(fake.base_url, XDG_CONFIG_HOME=str(xdg), AGENTKIT_SUBAGENT_START_METHOD="spawn")
    chat = JsonlChat(workspace, env)
    try:
        chat.send("first")
        assert chat.round_end()["status"] == "done"
        agents_md.write_text("VERSION-TWO of the rules.")
        skill(workspace / ".agents" / "skills", "deploy", "Ship a release.", "Tag, then push.")
        chat.send("second")
        assert chat.round_end()["status"] == "done"
        agents_md.unlink()
        (workspace / ".agents" / "skills" / "deploy" / "SKILL.md").unlink()
        chat.send("third")
        assert chat.round_end()["status"] == "done"
    finally:
        code, stderr = chat.finish()
    assert code == 0, stderr
    first, second, third = (system(r) for r in fake.requests)
    seed = first.split(SECTION)[0]
    assert seed_pattern("main_system.txt", workspace, max_concurrent=5).fullmatch(seed)
    assert "VERSION-ONE" in first
    assert (
        second.startswith(seed + SECTION)
        and "VERSION-TWO" in second
        and "VERSION-ONE" not in second
    )
    assert "- deploy: Ship a release." in second
    assert third == seed  # byte for byte the prompt the conversation opened with
    assert [("load_skill" in tool_names(r)) for r in fake.requests] == [False, True, False]
    saved = conversation_file(workspace)
    assert saved["messages"][0]["content"] == seed and "conventions" not in saved


# ------------------------------------------------------------------- skills
def test_skills_are_listed_by_description_and_loaded_by_load_skill_read_file_and_run_command(
    fake: Any, workspace: Path, xdg: Path, command_sandbox: str
) -> None:
    pdf = skill(workspace / ".agents" / "skills", "pdf-reader",
                "Extract text from PDF files. Use when the user gives a PDF.",
                "BODY-PDF: run scripts/extract.py on the file.")  # fmt: skip
    write(pdf.parent / "scripts" / "extract.py", "print('EXTRACTED')\n")
    notes = skill(
        xdg / "agentkit" / "skills",
        "notes",
        "Write meeting notes.",
        "BODY-NOTES: use the template.",
    )
    write(notes.parent / "template.txt", "TEMPLATE-TEXT\n")
    router = Router(
        main=[
            calls(call("load_skill", name="pdf-reader"), call("load_skill", name="notes")),
            calls(
                call("read_file", path=".agents/skills/pdf-reader/SKILL.md"),
                call("read_file", path=str(notes)),
                call("run_command", command="python3 .agents/skills/pdf-reader/scripts/extract.py"),
                call("run_command", command=f"cat {notes.parent / 'template.txt'}"),
            ),
            "done",
        ]
    )
    run(fake, router, workspace, xdg, AGENTKIT_COMMAND_SANDBOX=command_sandbox)
    first, second, third = requests(fake, None)
    listed = assert_seed_leads(first, "main_system.txt", workspace)
    assert "- pdf-reader: Extract text from PDF files. Use when the user gives a PDF." in listed
    assert "- notes: Write meeting notes." in listed and "BODY" not in listed
    assert tool_names(first)[-1] == "load_skill"
    after = second["messages"][-4:]
    assert [m["role"] for m in after] == ["tool", "tool", "system", "system"]
    assert (
        after[0]["content"]
        == "Skill pdf-reader loaded: its instructions follow in the next message."
    )
    assert (
        "BODY-PDF" in after[2]["content"]
        and "- .agents/skills/pdf-reader/scripts/extract.py" in after[2]["content"]
    )
    assert (
        "BODY-NOTES" in after[3]["content"]
        and f"- {notes.parent / 'template.txt'}" in after[3]["content"]
    )
    results = [m["content"] for m in third["messages"][-4:]]
    assert "BODY-PDF" in results[0] and "BODY-NOTES" in results[1]
    assert "EXTRACTED" in results[2] and "TEMPLATE-TEXT" in results[3], results
    assert conversation_file(workspace)["conventions"]["skills"] == [
        {"name": "pdf-reader", "file": ".agents/skills/pdf-reader/SKILL.md"},
        {"name": "notes", "file": str(notes)},
    ]


def test_a_profile_restricts_the_skills_its_sub_agents_see(
    fake: Any, workspace: Path, xdg: Path
) -> None:
    folder = workspace / ".agents" / "skills"
    skill(folder, "pdf-reader", "Read PDFs.", "BODY-PDF")
    skill(folder, "notes", "Write notes.", "BODY-NOTES")
    write(workspace / ".agentkit" / "agents" / "reader.md",
          "---\ndescription: Reads PDFs.\ntools: [read_file]\nskills: [pdf-*]\n---\nRead.\n")  # fmt: skip
    router = Router(
        main=[
            calls(
                call(
                    "create_sub_agent", agent_id=1, summary="pdf only", task="t", profile="reader"
                ),
                call("create_sub_agent", agent_id=2, summary="every skill", task="t"),
            ),
            "done",
        ],
        subs={
            1: [calls(call("load_skill", name="notes")), finish("Could not load the notes skill.")],
            2: [finish("Finished with every skill available.")],
        },
    )
    run(fake, router, workspace, xdg)
    sub1, sub2 = requests(fake, 1), requests(fake, 2)
    assert "- pdf-reader: Read PDFs." in system(sub1[0]) and "notes" not in system(sub1[0])
    seed = seed_pattern("subagent/system.txt", workspace).pattern
    assert re.match(
        seed + re.escape("\n\nRead.\n\n# Skills\n"), system(sub1[0])
    )  # seed, profile, skills
    assert "- pdf-reader: Read PDFs." in system(sub2[0]) and "- notes: Write notes." in system(
        sub2[0]
    )
    assert tool_names(sub1[0]) == ["read_file", "load_skill", "finish_task"]
    refusal = sub1[1]["messages"][-1]["content"]
    assert refusal == "Error: not_found: there is no skill named 'notes'; skills: pdf-reader"
    assert record(workspace, "sub_agent_results/agent_1")["conventions"] == {
        "skills": [{"name": "pdf-reader", "file": ".agents/skills/pdf-reader/SKILL.md"}]
    }
    env = cli_env(None, XDG_CONFIG_HOME=str(xdg))
    listing = fake.forks.agentkit("profiles", "-w", str(workspace), env=env)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    assert "    skills: pdf-reader\n" in listing.stdout
    write(workspace / ".agentkit" / "agents" / "typo.md", "---\nskills: [pfd-*]\n---\n")
    listing = fake.forks.agentkit("profiles", "-w", str(workspace), env=env)
    assert listing.returncode == 1 and "problem: 'pfd-*' names no skill found" in listing.stdout


def test_broken_skill_files_are_skipped_with_a_warning_naming_them(
    fake: Any, workspace: Path, xdg: Path
) -> None:
    folder = workspace / ".agents" / "skills"
    skill(folder, "good", "A usable skill.", "B")
    write(folder / "nohead" / "SKILL.md", "Just text, no header.\n")
    write(folder / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\nB\n")
    skill(workspace / ".agentkit" / "skills", "good", "Hidden by the one in .agents.", "B")
    proc = run(fake, Router(main=["done"]), workspace, xdg)
    listed = system(fake.requests[0])
    assert "- good: A usable skill." in listed and "nodesc" not in listed and "nohead" not in listed
    assert (
        "skill .agents/skills/nohead/SKILL.md is skipped: the file must start with a --- line"
        in proc.stderr
    )
    assert (
        "skill .agents/skills/nodesc/SKILL.md is skipped: the header has no description"
        in proc.stderr
    )
    assert (
        "skill 'good' in .agentkit/skills/good/SKILL.md is hidden by .agents/skills/good/SKILL.md"
        in proc.stderr
    )
    env = cli_env(None, XDG_CONFIG_HOME=str(xdg))
    report = fake.forks.agentkit("skills", "-w", str(workspace), env=env)
    assert report.returncode == 1
    assert report.stdout.splitlines() == [
        "good: A usable skill.",
        "    source: .agents/skills (project)",
        "    file: .agents/skills/good/SKILL.md",
        "good: hidden: .agentkit/skills/good/SKILL.md (by .agents/skills/good/SKILL.md, same name)",
        "skipped: .agents/skills/nodesc/SKILL.md: the header has no description (required: what "
        "the skill does and when to use it)",
        "skipped: .agents/skills/nohead/SKILL.md: the file must start with a --- line opening the "
        "YAML header",
    ]


# --------------------------------------------------- nothing there, nothing changes
def _normalised(fake: Any, workspace: Path) -> str:
    text = json.dumps(fake.requests, ensure_ascii=False, sort_keys=True)
    text = TIME.sub("TIME", text.replace(str(workspace), "WS"))
    text = re.sub(r"call_[0-9a-f]{24}", "CALL", re.sub(r"conv_[0-9a-f]{12}", "CONV", text))
    return re.sub(r'runtime_seconds\\": \d+', "RT", text)


def test_without_agents_md_and_skills_every_request_is_unchanged(
    fake: Any, tmp_path: Path, xdg: Path
) -> None:
    router = Router(
        main=[
            calls(call("read_file", path="a.txt")),
            calls(call("create_sub_agent", agent_id=1, summary="write", task="t")),
            "done",
        ],
        subs={
            1: [
                calls(call("write_file", path="sub_agent_results/agent_1/r.md", content="x")),
                finish("Wrote the report file as asked."),
            ]
        },  # fmt: skip
    )
    bodies = []
    for case, env in (
        ("none", {}),
        ("off", {"AGENTKIT_AGENTS_MD": "false", "AGENTKIT_SKILLS": "false"}),
    ):
        workspace = tmp_path / case
        write(workspace / "a.txt", "hello\n")
        if case == "off":  # there, but turned off
            write(workspace / "AGENTS.md", "RULES")
            skill(workspace / ".agents" / "skills", "s", "A skill.", "B")
            write(xdg / "agentkit" / "AGENTS.md", "USER RULES")
        fake.clear()
        run(fake, router, workspace, xdg, **env)
        bodies.append(_normalised(fake, workspace))
        assert "conventions" not in conversation_file(workspace)
        assert "conventions" not in record(workspace, "sub_agent_results/agent_1")
    assert bodies[0] == bodies[1]
    # And they are the seed's: its system prompts word for word, its tools.
    main, sub = requests(fake, None), requests(fake, 1)
    assert len(main) == 3 and len(sub) == 2
    assert seed_pattern("main_system.txt", workspace, max_concurrent=5).fullmatch(system(main[0]))
    assert seed_pattern("subagent/system.txt", workspace).fullmatch(system(sub[0]))
    base = ["read_file", "write_file", "edit_file", "search_workspace", "run_command",
            "web_search", "extract_webpage"]  # fmt: skip
    assert tool_names(main[0]) == [
        *base,
        "create_sub_agent",
        "terminate_sub_agent",
        "get_sub_agent_status",
    ]
    assert tool_names(sub[0]) == [*base, "finish_task"]
    assert all(m["role"] != "system" for r in fake.requests for m in r["messages"][1:])
