"""`agentkit demo` end to end: real workers, tools and files on a scripted model (issue 6)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def run_demo(*args: str) -> tuple[int, str]:
    env = {**os.environ, "AGENTKIT_DEMO_LATENCY": "0", "PYTHONIOENCODING": "utf-8"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "agentkit", "demo", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout + proc.stderr


def tool_calls(messages: list[dict]) -> list[str]:
    return [
        c["function"]["name"]
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]


def successful_calls(messages: list[dict]) -> list[str]:
    """Names of the tool calls whose result is not an ``Error:`` (what the counters count)."""
    names = {
        c["id"]: c["function"]["name"]
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    }
    return [
        names[m["tool_call_id"]]
        for m in messages
        if m.get("role") == "tool" and not m["content"].startswith("Error:")
    ]


def check_run(root: Path) -> None:
    """Deliverables written, transcripts valid, counters equal to the tool calls made."""
    assert (root / "agentkit_demo_report.md").is_file()
    for agent_id, name in ((1, "todos.md"), (2, "code_size.md"), (3, "summary.md")):
        folder = root / f"sub_agent_results/agent_{agent_id}"
        assert (folder / name).read_text().strip()
        record = json.loads((folder / ".subagent/conversations.json").read_text())
        assert record["status"] == "completed" and record["agent_id"] == agent_id
        calls = tool_calls(record["messages"])
        done = successful_calls(record["messages"])
        stats = record["stats"]
        assert stats["files_read"] == done.count("read_file")
        assert stats["searches"] == done.count("search_workspace") + done.count("web_search")
        assert stats["web_pages"] == done.count("extract_webpage")
        assert stats["commands"] == done.count("run_command")
        assert stats["tool_calls"] == {name: calls.count(name) for name in set(calls)}
        assert calls[-1] == "finish_task"
        # Every tool call was answered by one tool message (rule H1).
        answered = [m["tool_call_id"] for m in record["messages"] if m["role"] == "tool"]
        ids = [
            c["id"]
            for m in record["messages"]
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
        ]
        assert answered == ids
    [main_file] = (root / ".agentkit/conversations").glob("conv_*.json")
    main = json.loads(main_file.read_text())
    assert main["state"] == "idle"
    calls = tool_calls(main["messages"])
    assert main["stats"]["tool_calls"] == {name: calls.count(name) for name in set(calls)}
    assert calls.count("create_sub_agent") == 3
    assert sorted(r["agent_id"] for r in main["subagents"]) == [1, 2, 3]
    assert sum(r["background"] for r in main["subagents"]) == 2


def test_demo_on_the_shipped_sample_project() -> None:
    code, output = run_demo()
    assert code == 0, output
    assert "SCRIPTED DEMO" in output
    root = Path(re.search(r"^workspace: (.+)$", output, re.M).group(1))  # type: ignore[union-attr]
    try:
        check_run(root)
        todos = (root / "sub_agent_results/agent_1/todos.md").read_text()
        assert "inventory/store.py" in todos and "FIXME" in todos
        assert "deliverables:" in output and "transcripts:" in output
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def test_demo_on_a_real_python_project(tmp_path: Path) -> None:
    import httpx

    source = Path(httpx.__file__).resolve().parent
    root = tmp_path / "httpx-copy"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
    code, output = run_demo("-w", str(root))
    assert code == 0, output
    check_run(root)
    sizes = (root / "sub_agent_results/agent_2/code_size.md").read_text()
    assert "_client.py" in sizes
    total = sum(1 for p in root.rglob("*.py") if "sub_agent_results" not in p.parts)
    assert sizes.count(".py |") == total


def test_agentkit_s_own_files_stay_out_of_the_user_s_git_status(tmp_path: Path) -> None:
    # A trial saw .agentkit/conversations/*.json untracked in its repository.
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text("# A project\n\nIt counts things.\n")
    (root / "app.py").write_text("x = 1  # TODO: count\n")
    (root / ".agentkit" / "skills").mkdir(parents=True)
    (root / ".agentkit" / "skills" / "notes.md").write_text("the user's own\n")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip

    git("init", "-q")
    git("add", "README.md", "app.py")
    git("commit", "-q", "-m", "start")
    code, output = run_demo("-w", str(root))
    assert code == 0, output
    assert list((root / ".agentkit" / "conversations").glob("conv_*.json"))
    untracked = git("status", "--porcelain", "--untracked-files=all").splitlines()
    assert "?? .agentkit/skills/notes.md" in untracked  # the user's: never hidden
    assert [line for line in untracked if ".agentkit/" in line] == ["?? .agentkit/skills/notes.md"]
    # The deliverables are the user's to commit or ignore.
    assert "?? sub_agent_results/agent_1/todos.md" in untracked
