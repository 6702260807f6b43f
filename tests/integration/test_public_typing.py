"""The documented public API type-checks in a user's program: ``mypy --strict`` on the
example programs of ``examples/`` (run as a user would, outside the repository, with
agentkit found as an installed package through its py.typed) is clean, and a program
that misuses the API is caught (agentkit's names are typed, not Any)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# One mypy cache for every run of these tests, outside the repository (as a user's own
# cache would be): a cold strict check of agentkit and what it imports (openai's 2,000
# modules above all) takes about 14 s of CPU, a warm one under 1 s. mypy checks each
# cached module against its file (mtime, then hash), so an edit is always re-checked and
# errors of unchanged modules are reported again; files, not sqlite, so two runs at once
# replace whole entries and never wait on a lock.
MYPY_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentkit-tests" / "mypy"
)

# A user program with six mistakes mypy can only see when agentkit is typed.
MISUSE = """
from pydantic import BaseModel

from agentkit import Agent, RunFailed, Settings, SubAgentFinished


def first(agent: Agent) -> int:
    return agent.run("task").raise_for_status().final_text


def kind(exc: RunFailed) -> int:
    return exc.kind


def seconds(event: SubAgentFinished) -> str:
    return event.stats["runtime_seconds"]


Settings(model="m", agent_profiles=["not a profile"])


class City(BaseModel):
    name: str


def tools(agent: Agent) -> None:
    @agent.tool
    def weather(params: City) -> str:
        return "sunny"

    degrees: int = weather(City(name="Oslo"))


def typed(agent: Agent) -> int:
    return agent.run("task", output_type=City).output
"""


def mypy_strict(paths: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``mypy --strict`` as a user would: from ``cwd``, with no configuration file
    (the repository's own mypy settings left out) and the shared cache
    :data:`MYPY_CACHE`."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "",
         "--no-sqlite-cache", "--cache-dir", str(MYPY_CACHE), *map(str, paths)],
        cwd=cwd, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.timeout(900)
def test_the_examples_pass_mypy_strict_and_misuse_is_caught(tmp_path: Path) -> None:
    examples = sorted(EXAMPLES.glob("*.py"))
    assert {p.name for p in examples} >= {"quickstart.py", "events.py", "profiles.py"}
    misuse = tmp_path / "misuse.py"
    misuse.write_text(MISUSE, encoding="utf-8")
    # One run for both (a cold strict check of the package takes about 14 s of CPU).
    done = mypy_strict([EXAMPLES, misuse], tmp_path)
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if ": error:" in line]
    assert all(line.startswith("misuse.py:") for line in errors), output  # examples clean
    assert 'got "str | None", expected "int"' in output, output
    kinds = next(line for line in errors if "got \"Literal['cancelled', 'failed'] |" in line)
    assert "'rate_limit'" in kinds and "'output_invalid'" in kinds, output
    assert 'got "int", expected "str"' in output, output
    assert 'List item 0 has incompatible type "str"' in output, output
    assert 'expression has type "str", variable has type "int"' in output, output
    assert 'got "City | None", expected "int"' in output, output  # RunResult[City]
    assert len(errors) == 6, output


def test_the_offline_example_runs(tmp_path: Path) -> None:
    """examples/tools.py needs no key: FakeOpenAIServer plays the model."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "tools.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Sunny in Paris. | the model was sent: Sunny in Paris"


def test_the_typed_output_example_runs(tmp_path: Path) -> None:
    """examples/typed_output.py needs no key: its first final_result is refused."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "typed_output.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok 8 | first try refused: True"


def test_the_wheel_ships_py_typed(tmp_path: Path) -> None:
    """Build the wheel (when build and hatchling are installed: no network here) and
    find ``agentkit/py.typed`` in it."""
    for module in ("build", "hatchling"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=ROOT, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "agentkit/py.typed" in archive.namelist()
