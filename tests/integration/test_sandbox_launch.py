"""bubblewrap's launch ends with its owner at every stage (agentkit/process/sandbox_launch.py).

bubblewrap 0.8.0's child, pid 1 of the sandbox, waits on an eventfd for its parent's
go before it sets its own parent-death signal. An owner SIGKILLed in that window killed
the parent (setpriv's parent-death signal) and left the child waiting for ever (seen on
CI). A stand-in bubblewrap here stops at that stage for good: its child waits and
holds no tie to its parent, so only the pid namespace around bubblewrap can end it.
Real processes: the owner runs run_command and is killed by SIGKILL to its group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest
from shell_helpers import running_with
from subagent_helpers import wait_until

from agentkit.process import sandbox_launch
from agentkit.process import spawn as launch

REPO = Path(__file__).resolve().parents[2]

# Passes the probe (``/bin/sh -c "exit 7"`` comes last); for a command, leaves a
# child that waits for a go that never comes, and waits for that child.
STAND_IN = textwrap.dedent(
    """\
    #!/bin/sh
    for last; do :; done
    [ "$last" = "exit 7" ] && exit 7
    sleep {n} &
    wait
    """
)

OWNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentkit.settings import Settings
    from agentkit.tools.base import ToolContext
    from agentkit.tools.registry import ToolRegistry
    from agentkit.tools.shell import SHELL_TOOLS

    settings = Settings(model="m", api_key="k", command_sandbox="bwrap",
                        command_bwrap_path=sys.argv[1])
    ctx = ToolContext(workspace=Path.cwd(), settings=settings, process_mark="owner-test")
    ToolRegistry(SHELL_TOOLS).execute("run_command", {"command": "true"}, ctx)
    """
)


def test_bubblewraps_child_waiting_at_its_start_dies_with_the_owner(
    workspace: Path, tmp_path: Path
) -> None:
    if launch.launch_mode() != "pidns":
        pytest.skip("no pid namespaces here: bubblewrap starts under setpriv alone")
    n = str(900_000_000 + uuid.uuid4().int % 99_999_999)
    stand_in = tmp_path / "bwrap"
    stand_in.write_text(STAND_IN.format(n=n))
    stand_in.chmod(0o755)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(stand_in)],
        cwd=workspace,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: len(running_with(f"sleep {n}")) == 1, 30)
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait(10)
        assert wait_until(lambda: running_with(f"sleep {n}") == [], 10), "the child outlived"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(owner.pid, signal.SIGKILL)
        for proc in running_with(f"sleep {n}"):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def test_the_probe_settles_how_bubblewrap_starts(tmp_path: Path) -> None:
    """Inside its own pid namespace where one can be made, else under setpriv alone."""
    stand_in = tmp_path / "bwrap"
    stand_in.write_text(STAND_IN.format(n=1))
    stand_in.chmod(0o755)
    found = sandbox_launch.bwrap_works(str(stand_in))
    assert found == str(stand_in)
    argv = sandbox_launch.launcher(found, [found, "--"])
    assert argv[argv.index(found) :] == [found, "--"]
    nested = launch.launch_mode() == "pidns"
    assert ("--kill-child" in argv) is nested and ("--pid" in argv) is nested
    assert argv[:4] == ["setpriv", "--pdeathsig", "KILL", "--"]
