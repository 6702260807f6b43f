"""The API comparison's agentkit programs (benchmarks/api_comparison/) run as written,
each a real process against the comparison's own scripted model
(``../shared/api-comparison/fake_model.py``, a process serving on loopback), and say
what they should; the line counts in their README are the counter's (issue 33)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fork_runner import PRELOAD, ForkRunner

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "benchmarks" / "api_comparison"
# shared/ lies beside the clone (as CI lays it); AGENTKIT_TEST_SHARED names another place.
SHARED = Path(os.environ.get("AGENTKIT_TEST_SHARED") or ROOT.parent / "shared")
COMPARISON = SHARED / "api-comparison"
RUN_TIMEOUT = 300  # seconds: only bounds a hang


def comparison() -> Path:
    """The shared comparison folder; a missing one fails the test (a broken checkout)."""
    if not (COMPARISON / "fake_model.py").is_file():
        pytest.fail(
            f"no API comparison at {COMPARISON}: these tests read shared/api-comparison "
            "beside the clone (or in AGENTKIT_TEST_SHARED)",
            pytrace=False,
        )
    return COMPARISON


@pytest.fixture(scope="module")
def fake_model() -> Iterator[str]:
    """``fake_model.py`` on a free loopback port; yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, str(comparison() / "fake_model.py"), "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()  # its first line, once it serves
        assert base_url.startswith("http://127.0.0.1:"), base_url
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def runner() -> Iterator[ForkRunner]:
    """One forking runner for the programs: each still runs as ``python <name>.py`` in a
    process of its own, without importing agentkit and openai again
    (tests/fork_runner.py)."""
    started = ForkRunner((*PRELOAD, "httpx", "starlette.applications", "uvicorn"))
    try:
        yield started
    finally:
        started.close()


def run_program(name: str, base_url: str, tmp_path: Path, runner: ForkRunner) -> str:
    """Run ``benchmarks/api_comparison/<name>.py``; return its stdout (it must exit 0).
    Its workspaces (``tempfile.mkdtemp``) go under ``tmp_path``."""
    env = {**os.environ, "FAKE_BASE_URL": base_url, "TMPDIR": str(tmp_path)}
    done = runner.run(PROGRAMS / f"{name}.py", cwd=PROGRAMS, env=env, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_p1_delegates_two_sub_agents(fake_model: str, tmp_path: Path, runner: ForkRunner) -> None:
    out = run_program("p1_delegate", fake_model, tmp_path, runner)
    lines = out.splitlines()
    for agent_id in (1, 2):
        assert f"SubAgentStarted {agent_id} running" in lines
        assert f"SubAgentFinished {agent_id} completed" in lines
    assert "Combined: " in out
    assert "tool calls: {'create_sub_agent': 2, 'word_stats': 1}" in lines


@pytest.mark.slow
def test_p2_streams_the_run_as_sse(fake_model: str, tmp_path: Path, runner: ForkRunner) -> None:
    seen = run_program("p2_sse", fake_model, tmp_path, runner).split()
    assert seen[0] == "RunStarted" and seen[-1] == "RunFinished"
    assert seen.count("SubAgentStarted") == 2 and seen.count("SubAgentFinished") == 2
    assert seen.count("ToolCallStarted") == 3 and "TextDelta" in seen
    # The run ends after its sub-agents: their ends come before the main agent's answer.
    assert max(i for i, kind in enumerate(seen) if kind == "SubAgentFinished") < seen.index(
        "TextDelta"
    )


@pytest.mark.slow
def test_p3_runs_ten_and_cancels_one(fake_model: str, tmp_path: Path, runner: ForkRunner) -> None:
    lines = run_program("p3_concurrent", fake_model, tmp_path, runner).splitlines()
    assert re.fullmatch(r"\d+\.\d\ds", lines[0]), lines[0]
    for n in range(10):
        expected = "cancelled" if n == 3 else f"('done', 'Done with [p3] [slow] job {n}')"
        assert lines[1 + n] == f"{n} {expected}"
    kept = lines[11]
    assert kept.startswith("agent 3: RunResult(") and "status='cancelled'" in kept


@pytest.mark.slow
def test_p4_gives_typed_findings(fake_model: str, tmp_path: Path, runner: ForkRunner) -> None:
    lines = run_program("p4_typed", fake_model, tmp_path, runner).splitlines()
    points = "['scripted point one', 'scripted point two']"
    for topic in ("alpha", "beta"):
        assert f"Finding {topic} 0.75 {points}" in lines


def test_readme_line_counts_are_the_counters(tmp_path: Path) -> None:
    """loc.py, run over these programs beside the peers', prints the README's table."""
    shared = comparison()
    (tmp_path / "agentkit_app").symlink_to(PROGRAMS)
    for peer in ("openai_agents_app", "pydantic_ai_app"):
        (tmp_path / peer).symlink_to(shared / peer)
    done = subprocess.run(
        [sys.executable, str(shared / "loc.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    counted = {
        cells[0]: re.findall(r"\d+ \(\+\d+ check\)|\d+", line.split(maxsplit=1)[1])
        for line in done.stdout.splitlines()[1:]
        if (cells := line.split())
    }
    readme = (PROGRAMS / "README.md").read_text(encoding="utf-8")
    for name, (ours, sdk, pydantic_ai) in counted.items():
        row = next(line for line in readme.splitlines() if line.startswith(f"| {name} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2:] == [ours, sdk, pydantic_ai], (name, cells, done.stdout)
