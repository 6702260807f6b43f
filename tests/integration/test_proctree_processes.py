"""proctree: finding processes by their environment mark and killing whole trees (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agentkit.process import tree as proctree


def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            time.sleep(0.05)  # let the writer finish the line
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written")


def gone(pid: int) -> bool:
    try:
        return proctree.is_gone(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def mark() -> Iterator[str]:
    value = f"test-{uuid.uuid4().hex}"
    yield value
    proctree.kill_tree(None, value, 0.5)  # never leave anything behind, even on failure


def spawn(
    script: str, mark: str, tmp_path: Path, new_session: bool = True
) -> subprocess.Popen[bytes]:
    env = {**os.environ, **proctree.mark_env(mark)}
    return subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=new_session,
    )


def test_processes_with_mark_finds_only_marked(mark: str, tmp_path: Path) -> None:
    proc = spawn("sleep 30 & echo $! > child.pid; wait", mark, tmp_path)
    try:
        child = int(wait_for_file(tmp_path / "child.pid"))
        found = {p.pid for p in proctree.processes_with_mark(mark)}
        assert {proc.pid, child} <= found
        assert os.getpid() not in found
        assert proctree.processes_with_mark(mark + "-other") == []
        assert proctree.processes_with_mark("") == []
        assert not any(p.pid == proc.pid for p in proctree.processes_with_mark(mark, "PATH"))
    finally:
        proctree.kill_tree(proc.pid, mark, 0.5)
        proc.wait(5)


def test_kill_tree_reaches_setsid_daemons_and_descendants(mark: str, tmp_path: Path) -> None:
    # A background child, a grandchild in its own session (setsid) that re-parents to
    # init when its parent exits, and an unmarked child that only the tree walk finds.
    script = (
        "sleep 1000 & echo $! > bg.pid; "
        "(setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' &); "
        "env -u AGENTKIT_PROCESS_MARK sleep 1000 & echo $! > unmarked.pid; "
        "wait"
    )
    proc = spawn(script, mark, tmp_path)
    pids = [int(wait_for_file(tmp_path / n)) for n in ("bg.pid", "daemon.pid", "unmarked.pid")]
    assert psutil.Process(pids[1]).ppid() != proc.pid  # the daemon left the tree
    started = time.monotonic()
    killed = proctree.kill_tree(proc.pid, mark, grace=2.0)
    assert time.monotonic() - started < 10
    proc.wait(5)
    assert set(pids) | {proc.pid} <= set(killed)
    assert all(gone(pid) for pid in pids)
    assert proctree.processes_with_mark(mark) == []


def test_kill_tree_escalates_to_sigkill(mark: str, tmp_path: Path) -> None:
    code = "import signal, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); pathlib.Path('ready').write_text('1'); time.sleep(1000)"
    proc = spawn(f'{sys.executable} -c "{code}"', mark, tmp_path)
    wait_for_file(tmp_path / "ready")
    killed = proctree.kill_tree(None, mark, grace=0.3)
    assert proc.pid in killed
    assert proc.wait(5) == -9


def test_kill_tree_tolerates_gone_and_unknown(mark: str, tmp_path: Path) -> None:
    proc = spawn("exit 0", mark, tmp_path)
    proc.wait(5)
    assert proctree.kill_tree(proc.pid, mark, 0.1) == []  # reaped: nothing to do
    assert proctree.kill_tree(None, None, 0.1) == []
    assert proctree.kill_tree(2**22 + 12345, None, 0.1) == []  # no such pid


def test_kill_tree_never_kills_the_caller(mark: str) -> None:
    # A marked process that kills its own mark survives (and reports no targets).
    root = Path(proctree.__file__).resolve().parents[1]
    code = (
        "import sys; from agentkit.process import tree as proctree; "
        "print(proctree.kill_tree(None, sys.argv[1], 0.1)); print('alive')"
    )
    env = {**os.environ, **proctree.mark_env(mark), "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code, mark], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.split() == ["[]", "alive"], done.stderr


def test_descendants_from_one_scan(mark: str, tmp_path: Path) -> None:
    proc = spawn("sleep 1000 & sleep 1000 & wait", mark, tmp_path)
    try:
        end = time.monotonic() + 5
        kids: list[psutil.Process] = []
        # A forked child is named sh until it runs exec: wait for both to be sleep.
        while time.monotonic() < end and not (
            len(kids) == 2 and all(k.name() == "sleep" for k in kids)
        ):
            kids = proctree.descendants([psutil.Process(proc.pid)])
            time.sleep(0.02)
        assert len(kids) == 2 and all(k.name() == "sleep" for k in kids)
    finally:
        proctree.kill_tree(proc.pid, mark, 0.5)
        proc.wait(5)
