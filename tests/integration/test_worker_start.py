"""How sub-agent workers start on this machine, and that nothing of it outlives a
command: the parent never imports the worker module itself (a small trampoline is
the target), the worker process server is stopped on demand and then started again,
and ``agentkit run`` leaves no process behind, with or without a sub-agent.

Real processes throughout; the checks that need a clean process (the forkserver is
per process) run in a child interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import cli_env
from subagent_helpers import Router, call, calls, finish

from agentkit.testing import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]


def python(code: str, **env: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (this checkout importable); its last line of
    output is JSON, returned."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": str(REPO), "AGENTKIT_TOKENIZER": "estimate", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_starting_a_sub_agent_does_not_import_the_worker_in_the_parent(workspace: Path) -> None:
    router = Router(main=["unused"], subs={1: [finish("done")]})
    with FakeOpenAIServer(router) as server:
        out = python(
            f"""
            import json, sys
            from pathlib import Path
            from agentkit.settings import Settings
            from agentkit.subagent.manager import SubAgentManager
            settings = Settings(model="m", base_url={server.base_url!r}, api_key="k", language="en")
            manager = SubAgentManager(workspace=Path({str(workspace)!r}), settings=settings)
            result = manager.create(agent_id=1, summary="s", task="t")
            manager.shutdown()
            print(json.dumps({{
                "status": result["status"],
                "worker_imported": "agentkit.subagent.worker" in sys.modules,
                "openai_imported": "openai" in sys.modules,
            }}))
            """
        )
    assert out["status"] == "completed"
    assert out["worker_imported"] is False  # the worker module loads in the child only
    assert out["openai_imported"] is False  # the parent never built a client here


def test_the_worker_process_server_stops_on_demand_and_starts_again(workspace: Path) -> None:
    router = Router(main=["unused"], subs={1: [finish("one")], 2: [finish("two")]})
    with FakeOpenAIServer(router) as server:
        out = python(
            f"""
            import json
            from multiprocessing import forkserver
            from pathlib import Path
            import psutil
            from agentkit.settings import Settings
            from agentkit.subagent.launchers import local
            from agentkit.subagent.manager import SubAgentManager
            settings = Settings(model="m", base_url={server.base_url!r}, api_key="k", language="en")
            manager = SubAgentManager(workspace=Path({str(workspace)!r}), settings=settings)
            first = manager.create(agent_id=1, summary="s", task="t", deliverables_dir="one")
            pid = forkserver._forkserver._forkserver_pid
            stopped = local.stop_forkserver()
            gone = not psutil.pid_exists(pid)
            again = local.stop_forkserver()
            second = manager.create(agent_id=2, summary="s", task="t", deliverables_dir="two")
            new_pid = forkserver._forkserver._forkserver_pid
            manager.shutdown()
            print(json.dumps({{
                "statuses": [first["status"], second["status"]],
                "stopped": stopped, "gone": gone, "again": again,
                "new_server": new_pid not in (None, pid),
            }}))
            """
        )
    assert out["statuses"] == ["completed", "completed"]
    assert out["stopped"] is True and out["gone"] is True
    assert out["again"] is False  # nothing left to stop
    assert out["new_server"] is True


LEFTOVERS = """
import ctypes, json, os, subprocess, sys
import psutil
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans become ours
done = subprocess.run([sys.executable, "-m", "agentkit", *sys.argv[1:]], capture_output=True)
def alive():
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != "zombie":
                found.append((p, " ".join(p.cmdline())))
        except psutil.NoSuchProcess:
            pass
    return found
# multiprocessing's resource tracker ends by itself once the last holder of its pipe
# (the command) is gone, moments after it; so does a process already in its exit (its
# command line reads empty). Those get 10 s; anything else must be gone now.
def ending(line):
    return "resource_tracker" in line or not line
found = alive()
left = [f"{p.pid} {line[:200]}" for p, line in found if not ending(line)]
_, stayed = psutil.wait_procs([p for p, line in found if ending(line)], timeout=10)
left += [f"{p.pid} (did not end by itself)" for p in stayed]
print(json.dumps({"code": done.returncode, "left": left, "stderr": done.stderr.decode()[-2000:]}))
"""


def cli_leftovers(workspace: Path, base_url: str) -> dict[str, Any]:
    """Run ``agentkit run`` under a child subreaper; what of its tree is alive at once
    after it exited."""
    env = {**cli_env(base_url), "AGENTKIT_TOKENIZER": "estimate"}
    done = subprocess.run(
        [sys.executable, "-c", LEFTOVERS, "run", "go", "-w", str(workspace)],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_one_turn_run_leaves_no_process_behind(workspace: Path) -> None:
    with FakeOpenAIServer(["Hello."]) as server:
        out = cli_leftovers(workspace, server.base_url)
    assert out["code"] == 0, out["stderr"]
    assert out["left"] == []  # no worker process server was started (nor left preloading)


@pytest.mark.serial  # checks for leftovers at once: a loaded machine delays exits by moments
def test_a_run_with_a_sub_agent_leaves_no_process_behind(workspace: Path) -> None:
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="s", task="t")), "All done."],
        subs={1: [finish("sub done")]},
    )
    with FakeOpenAIServer(router) as server:
        out = cli_leftovers(workspace, server.base_url)
        asked = len(server.requests)
    assert out["code"] == 0, out["stderr"]
    assert asked == 3  # main, the sub-agent, main again
    assert out["left"] == []  # the worker process server ended with the command


class SlowExit:
    """A Launcher whose workers take a while to be joined after their result, as a
    loaded machine's do: each handle's first join waits up to a second first."""

    def __init__(self) -> None:
        from agentkit.subagent.launchers.local import LocalLauncher

        self.local = LocalLauncher()
        self.handles: list[Any] = []

    def start(self, spec: Any) -> Any:
        worker = self.local.start(spec)
        slow_join = worker.join

        def join(timeout: float | None = None) -> None:
            threading.Event().wait(1.0)  # the exit in progress
            slow_join(timeout)

        worker.join = join  # type: ignore[method-assign]
        self.handles.append(worker)
        return worker


def test_closing_waits_for_the_workers_of_ended_sub_agents(workspace: Path) -> None:
    """A sub-agent's result comes before its worker exits; closing the manager then
    still ends with every worker joined and closed, none left running."""
    from subagent_helpers import wait_until

    from agentkit.settings import Settings
    from agentkit.subagent.manager import SubAgentManager

    router = Router(main=["unused"], subs={1: [finish("ok")]})
    launcher = SlowExit()
    with FakeOpenAIServer(router) as server:
        settings = Settings(model="m", base_url=server.base_url, api_key="k", language="en")
        manager = SubAgentManager(workspace=workspace, settings=settings, launcher=launcher)
        manager.create(agent_id=1, summary="s", task="t", run_in_background=True)
        assert wait_until(lambda: manager.agents[1].done.is_set(), 60)
        manager.shutdown()
    [handle] = launcher.handles
    assert handle._closed and handle.exit_code is not None


HOLDER = """
import sys
from agentkit.subagent.launchers.local import prewarm
prewarm("forkserver")
print("ready", flush=True)
sys.stdin.readline()  # a clean exit once told, unless killed first
"""


def test_a_killed_owners_forkserver_folder_is_swept_at_the_next_start() -> None:
    """Regression (a fresh user's trial): every `kill -9` of chat or serve left a
    `pymp-*` folder with the forkserver's dead socket in the temp folder, for good.
    The folder is now named by its owner's pid; the next start removes a dead one."""
    import signal

    from agentkit.process.mp_tempdir import PREFIX

    # A short temp folder: the forkserver's socket path must fit in 108 bytes.
    temp = Path(tempfile.mkdtemp(prefix="mp-", dir="/tmp"))
    env = {**cli_env(), "TMPDIR": str(temp)}

    def holder() -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER], env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    def folders() -> list[str]:
        return sorted(p.name for p in temp.iterdir() if p.name.startswith(("pymp-", PREFIX)))

    try:
        killed = holder()
        (mine,) = folders()
        assert mine.startswith(f"{PREFIX}{killed.pid}-")
        assert any(p.is_socket() for p in (temp / mine).iterdir())  # the forkserver's
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert folders() == [mine]  # what a kill leaves
        second = holder()
        (now,) = folders()
        assert now.startswith(f"{PREFIX}{second.pid}-")  # the dead one swept, its own made
        second.communicate("\n", timeout=30)
        assert second.returncode == 0 and folders() == []  # a clean exit removes its own
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_the_sweep_spares_live_owners_other_names_and_files(tmp_path: Path) -> None:
    from agentkit.process.mp_tempdir import PREFIX, sweep_dead

    dead = 2**22 + 12_345  # above Linux's largest pid: never a live process
    for name in (f"{PREFIX}{dead}-a", f"{PREFIX}{os.getpid()}-b", "pymp-c", f"{PREFIX}x-d"):
        (tmp_path / name).mkdir()
    (tmp_path / f"{PREFIX}{dead}-file").write_text("not a folder")
    assert sweep_dead(str(tmp_path)) == [str(tmp_path / f"{PREFIX}{dead}-a")]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{PREFIX}{os.getpid()}-b", "pymp-c", f"{PREFIX}x-d", f"{PREFIX}{dead}-file"]
    )
