"""The suite's own failure modes: a missing optional dependency skips its tests (it
never stops collection), and a missing shared data folder fails loudly (it never
passes by collecting nothing). Each runs pytest on a few modules in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import REPO

# Makes `import opentelemetry...` fail as it does where the otel extra is not installed.
NO_OTEL = """
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def pytest_run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_tracing_tests_skip_without_opentelemetry(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(NO_OTEL, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = pytest_run(
        "--collect-only",
        "tests/unit/test_tracing.py",
        "tests/integration/test_tracing_servers.py",
        "tests/e2e/test_tracing_phoenix.py",
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1]


def test_provider_cases_fail_loudly_without_the_shared_folder(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTKIT_TEST_SHARED": str(tmp_path / "absent")}
    done = pytest_run("tests/integration/test_llm_providers.py", env=env)
    assert done.returncode == 1, done.stdout[-2000:]
    assert f"no provider cases at {tmp_path / 'absent'}" in done.stdout
