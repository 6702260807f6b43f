"""What a command may use (agentkit/process/limits.py): a fork bomb stops at
command_max_processes and a memory hog at command_max_memory_mb, while another tool
call completes; each ends with a note naming the limit it hit. In each mode this
machine can run: a cgroup, or rlimits (for the process count: as a non-root user, in
a process of that user); the others are skipped with the reason.

Real processes, cgroups and rlimits throughout. Each fork bomb runs only after a
bounded count of forks has shown that its limit binds.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from limits_child import MAX_MEMORY_MB, MAX_PROCESSES, bomb, hog, make_ctx, run
from subagent_helpers import wait_until

from agentkit.process import cgroups, limits
from agentkit.process import spawn as launch

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
# Fork bombs and memory hogs take the machine: run alone (the serial run).
pytestmark = [pytest.mark.usefixtures("command_sandbox"), pytest.mark.serial]


def _how_processes() -> str | None:
    settings = make_ctx(Path(".")).settings
    bounds = limits.prepare(settings, launch.user_namespace())
    if bounds is not None:
        bounds.close()
    return bounds.processes[1] if bounds is not None and bounds.processes else None


def _own_groups() -> list[Path]:
    return [
        entry
        for base in set(limits.plan().groups.values())
        for entry in base.iterdir()
        if entry.name.startswith(f"{cgroups.PREFIX}{os.getpid()}-")
    ]


def check_bomb(found: dict[str, Any], how: str) -> None:
    assert found["processes"] == how
    assert 0 <= found["counted"] <= MAX_PROCESSES, found  # the bounded count stopped at the limit
    assert found["other_ok"] and "alive" in found["other"], found
    assert found["bomb_running_after_other"], found  # answered while the bomb raged
    assert found["bomb_code"] == "killed", found
    if how == "cgroup":
        assert "reached its limit of 48 processes and threads" in found["bomb_output"]
    else:
        assert "a process start failed: the command may run 48 processes" in found["bomb_output"]
    assert f"(command_max_processes, {how})" in found["bomb_output"]


def test_fork_bomb_in_a_cgroup(workspace: Path) -> None:
    if "pids" not in limits.plan().groups:
        pytest.skip(
            "no cgroup this agent may create children in with the pids controller "
            "(a delegated cgroup v2, or root with the cgroup v1 pids hierarchy)"
        )
    check_bomb(bomb(workspace, sys.executable), "cgroup")
    assert wait_until(lambda: not _own_groups(), 10)  # removed, now or by the reaper


@pytest.fixture
def user_workspace() -> Iterator[Path]:
    """A workspace (and home) owned by the user ``nobody``, for an agent running as it."""
    folder = Path(tempfile.mkdtemp(prefix="agentkit-limits-"))
    (folder / "ws").mkdir()
    for path in (folder, folder / "ws"):
        os.chown(path, NOBODY, NOBODY)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_fork_bomb_under_rlimits(
    workspace: Path, user_workspace: Path, command_sandbox: str
) -> None:
    """RLIMIT_NPROC binds a non-root user only: as non-root, in this process (where no
    cgroup is available); as root, in an agent process run as ``nobody``."""
    if os.geteuid() != 0:
        if _how_processes() != "RLIMIT_NPROC":
            pytest.skip("commands here are limited by a cgroup, or rlimits are unavailable")
        check_bomb(bomb(workspace, sys.executable), "RLIMIT_NPROC")
        return
    if command_sandbox == "bwrap":
        pytest.skip(
            "as root, the agent runs as nobody holding CAP_DAC_READ_SEARCH (to read its "
            "Python in root's home), and bubblewrap refuses a non-root user with capabilities"
        )
    python = "/usr/bin/python3"  # the command's: the agent's may be in root's home
    if not (shutil.which("setpriv") and shutil.which("prlimit") and os.path.exists(python)):
        pytest.skip("needs setpriv, prlimit and /usr/bin/python3 to run an agent as another user")
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    userns = [*as_nobody, "unshare", "--user", "--map-current-user", "--pid", "--fork", "true"]
    if subprocess.run(userns, capture_output=True, timeout=30).returncode != 0:
        pytest.skip("a non-root user cannot create user namespaces here")
    # The agent's own Python may live under root's home (mode 0700): the agent process
    # (not its commands, which run in a user namespace of their own) may read it.
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--",
            sys.executable, str(REPO / "tests/limits_child.py"), "bomb",
            str(user_workspace / "ws"), python]  # fmt: skip
    env = {**os.environ, "HOME": str(user_workspace), "TMPDIR": str(user_workspace),
           "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"}  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    check_bomb(json.loads(done.stdout.strip().splitlines()[-1]), "RLIMIT_NPROC")


@pytest.mark.parametrize("how", ["cgroup", "RLIMIT_AS"])
def test_memory_hog(workspace: Path, how: str) -> None:
    plan = limits.plan()
    if how == "cgroup" and "memory" not in plan.groups:
        pytest.skip("no cgroup v2 memory controller is delegated to this agent")
    if how == "RLIMIT_AS" and ("memory" in plan.groups or plan.prlimit is None):
        pytest.skip("memory is limited by a cgroup here, or prlimit is missing")
    found = hog(workspace, sys.executable)
    assert found["memory"] == how
    assert found["other_ok"] and "alive" in found["other"], found
    output = found["hog_output"]
    assert f"memory limit of {MAX_MEMORY_MB} MB" in output or (
        f"each process may use {MAX_MEMORY_MB} MB of address space" in output
    ), output
    assert f"(command_max_memory_mb, {'cgroup' if how == 'cgroup' else 'RLIMIT_AS'})" in output
    if how == "cgroup":
        assert "the kernel killed" in output and "SIGKILL" in output
    else:
        assert "MemoryError" in output and found["hog_meta"]["exit_code"] == 1, output


def test_no_limits_when_turned_off(workspace: Path) -> None:
    ctx = make_ctx(workspace, command_max_processes=0, command_max_memory_mb=0)
    assert limits.prepare(ctx.settings, launch.user_namespace()) is None
    result = run(ctx, "ulimit -u; ulimit -v; cat /proc/self/cgroup")
    assert result.ok
    lines = result.output.splitlines()
    assert lines[1] == "unlimited"
    assert f"{cgroups.PREFIX}{os.getpid()}-" not in result.output


def test_the_log_says_once_what_is_limited(caplog: pytest.LogCaptureFixture) -> None:
    limits._said.clear()
    caplog.set_level(logging.INFO, logger="agentkit.process.limits")
    settings = make_ctx(Path(".")).settings
    for _ in range(2):
        bounds = limits.prepare(settings, launch.user_namespace())
        if bounds is not None:
            bounds.close()
    lines = [r.getMessage() for r in caplog.records if "command limits" in r.getMessage()]
    assert len(lines) == 1
    line = lines[0]
    how = _how_processes()
    if how is not None:
        assert f"processes ≤ {MAX_PROCESSES} per command ({how})" in line
    else:
        assert "processes NOT limited" in line
    assert "memory" in line and "CPU" in line


def test_stale_groups_of_dead_agents_are_swept() -> None:
    groups = limits.plan().groups
    if not groups:
        pytest.skip("no cgroup this agent may create children in")
    base = next(iter(groups.values()))
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert not psutil.pid_exists(gone.pid)
    stale = base / f"{cgroups.PREFIX}{gone.pid}-{uuid.uuid4().hex[:12]}"
    live = cgroups.create(base, {})
    stale.mkdir()
    try:
        cgroups.sweep(base)
        assert not stale.exists()
        assert live.exists()  # this agent is alive: its group stays
    finally:
        cgroups.remove(live)
        cgroups.remove(stale)


def test_a_kept_service_keeps_its_cgroup_until_it_ends(workspace: Path) -> None:
    if "pids" not in limits.plan().groups:
        pytest.skip("no cgroup this agent may create children in with the pids controller")
    from agentkit.process.spawn import end_background_services

    # Only this test's groups: an earlier command's may still wait for the reaper
    # (a zombie keeps it busy for up to its 0.5 s tick).
    before = set(_own_groups())

    def new_groups() -> list[Path]:
        return [g for g in _own_groups() if g not in before]

    ctx = make_ctx(workspace, command_background_services=True)
    try:
        result = run(ctx, "setsid sleep 600 >/dev/null 2>&1 &")
        assert "1 background process left running" in result.output, result.output
        groups = new_groups()
        assert len(groups) == 1  # the service still runs in it: still limited
        assert (groups[0] / "cgroup.procs").read_text().split()
    finally:
        end_background_services()
    assert wait_until(lambda: not new_groups(), 10)
    assert wait_until(lambda: not _own_groups(), 10)  # and the earlier ones go too
