"""One live session per conversation across real processes (agentkit/chat/lock.py).

Regressions (trial): two processes opening one conversation at the same instant
could both succeed (the claim was read, checked, then written); right after
``kill -9`` of the holder a new opening was refused while the dead process was
not reaped yet; a conversation open elsewhere but not saved yet was "not found".
Every process here is a real one (tests/lock_child.py), started together with a
shared start time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from lock_child import write
from subagent_helpers import wait_until

from agentkit.chat import Session
from agentkit.chat.store import conversation_path
from agentkit.conversation import Conversation, conversations_dir
from agentkit.errors import ConfigurationError
from agentkit.settings import Settings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock: Linux and macOS")

CHILD = Path(__file__).resolve().parents[1].joinpath("lock_child.py")
ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", language="en")


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The test's child processes; any still running at the end is killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def start(
    children: list[subprocess.Popen[bytes]], mode: str, workspace: Path, ctl: Path, *args: object
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(CHILD.parent)])}
    cmd = [sys.executable, str(CHILD), mode, str(workspace), str(ctl), *map(str, args)]
    proc = subprocess.Popen(cmd, env=env)
    children.append(proc)
    return proc


def hold_elsewhere(
    children: list[subprocess.Popen[bytes]], workspace: Path, ctl: Path, cid: str
) -> tuple[subprocess.Popen[bytes], int]:
    """Open ``cid`` in another process (lock_child ``hold``) and wait until it holds
    it; returns that process and the pid of the grandchild it started."""
    holder = start(children, "hold", workspace, ctl, cid)
    assert wait_until(lambda: (ctl / "held").exists(), 60)
    return holder, int((ctl / "grandchild").read_text())


def saved_conversation(workspace: Path) -> str:
    conversation = Conversation(model="m")
    conversation.save(conversation_path(workspace, conversation.id))
    return conversation.id


def all_appear(paths: list[Path], timeout: float = 60) -> bool:
    """Wait until every one of ``paths`` exists (polled every 5 ms: a round of the
    race waits for its results and its closes, twenty rounds)."""
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def open_here(workspace: Path, cid: str | None) -> Session:
    return Session(workspace, SETTINGS, conversation_id=cid, subagents=False, prewarm=False)


def test_processes_racing_to_open_one_conversation_never_both_win(
    workspace: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    cid, ctl, rounds, names = saved_conversation(workspace), tmp_path / "ctl", 20, ["a", "b", "c"]
    ctl.mkdir()
    procs = [start(children, "race", workspace, ctl, cid, name, rounds) for name in names]
    assert all_appear([ctl / f"ready-{name}" for name in names])  # each imported once
    winners: list[list[str]] = []
    for r in range(rounds):
        # Every child already waits for this round's go (ready, or closed the last
        # round): a short lead lets each see the start time before it comes.
        write(ctl / f"go-{r}", str(time.time() + 0.1))
        results = [ctl / f"result-{r}-{name}" for name in names]
        assert all_appear(results), f"round {r}"
        outcomes = {name: p.read_text() for name, p in zip(names, results, strict=True)}
        winners.append([name for name, text in outcomes.items() if text == "OPENED"])
        for text in outcomes.values():
            assert text == "OPENED" or "is open in another agentkit process (pid " in text, text
        (ctl / f"close-{r}").write_text("")
        closed = [ctl / f"closed-{r}-{name}" for name in names]
        assert all_appear(closed), f"round {r}"
    assert all(proc.wait(60) == 0 for proc in procs)
    assert [len(w) for w in winners] == [1] * rounds, winners
    assert not (conversations_dir(workspace) / f"{cid}.lock").exists()  # closed: no file left


def test_claims_churning_in_five_processes_are_never_held_twice(
    workspace: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """Claim and release in tight loops: an opener that locked a lock file just
    released and unlinked must not count it as a claim (it retries on the new file)."""
    ctl, names, count = tmp_path / "ctl", ["a", "b", "c", "d", "e"], 1500
    ctl.mkdir()
    begin = time.time() + 1.0
    procs = [start(children, "churn", workspace, ctl, name, count, begin) for name in names]
    assert all(proc.wait(120) == 0 for proc in procs)
    rows = [(ctl / f"churn-{name}").read_text().split() for name in names]
    violations = sum(int(r[1]) for r in rows)
    assert violations == 0, rows
    assert sum(1 for r in rows if int(r[0]) > 0) >= 2, rows  # they did take turns


def dead_not_reaped(pid: int) -> bool:
    """True once every thread of ``pid`` has ended and only its zombie is left (the
    leader turns zombie while other threads may still be exiting, its descriptors
    still open: Linux lists them in /proc/<pid>/task)."""
    if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        return False
    tasks = Path(f"/proc/{pid}/task")
    return not tasks.is_dir() or len(list(tasks.iterdir())) <= 1


def test_opening_right_after_kill_9_of_the_holder_succeeds_before_it_is_reaped(
    workspace: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    """The holder's grandchild outlives it and inherited whatever it could: the lock
    descriptor must not be among that (close-on-exec), or the claim would live on."""
    cid, ctl = saved_conversation(workspace), tmp_path / "ctl"
    ctl.mkdir()
    holder, grandchild = hold_elsewhere(children, workspace, ctl, cid)
    try:
        with pytest.raises(
            ConfigurationError, match=f"another agentkit process \\(pid {holder.pid}\\)"
        ):
            open_here(workspace, cid)
        os.kill(holder.pid, signal.SIGKILL)
        # Only the kernel's own work: the killed process becomes a zombie (not reaped).
        assert wait_until(lambda: dead_not_reaped(holder.pid), 30)
        session = open_here(workspace, cid)
        assert holder.poll() == -signal.SIGKILL  # reaped only now
        session.close()
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_a_release_in_one_process_never_frees_a_claim_held_by_another(
    workspace: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    cid, ctl = saved_conversation(workspace), tmp_path / "ctl"
    ctl.mkdir()
    lock = conversations_dir(workspace) / f"{cid}.lock"
    mine = open_here(workspace, cid)
    mine.close()  # released here...
    holder, grandchild = hold_elsewhere(children, workspace, ctl, cid)  # ...and claimed there
    try:
        mine._release()  # a stale release, again, and the session's close again
        mine.close()
        for _ in range(2):  # a refused opening has nothing to release either
            with pytest.raises(ConfigurationError, match=f"\\(pid {holder.pid}\\)"):
                open_here(workspace, cid)
        assert lock.exists()
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_a_live_conversation_not_saved_yet_is_open_elsewhere_not_unknown(
    workspace: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    other = start(children, "new", workspace, ctl)
    assert wait_until(lambda: (ctl / "new-id").exists(), 60)
    cid = (ctl / "new-id").read_text()
    with pytest.raises(
        ConfigurationError, match=f"is open in another agentkit process \\(pid {other.pid}\\)"
    ):
        open_here(workspace, cid)
    (ctl / "close").write_text("")
    assert other.wait(60) == 0
    open_here(workspace, cid).close()  # closed there (and saved): free
    assert not (conversations_dir(workspace) / f"{cid}.lock").exists()


def test_deleting_a_conversation_open_in_another_process_is_refused(
    workspace: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    # Deleted under a live session elsewhere, the file would be written back by it.
    from agentkit.chat import Workspace

    cid, ctl = saved_conversation(workspace), tmp_path / "ctl"
    ctl.mkdir()
    holder, grandchild = hold_elsewhere(children, workspace, ctl, cid)
    try:
        with Workspace(workspace, SETTINGS) as space:
            with pytest.raises(ConfigurationError, match="another agentkit process"):
                space.delete(cid)
            assert conversation_path(workspace, cid).is_file()
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(30)
            space.delete(cid)  # the holder is gone: now it goes
        assert not conversation_path(workspace, cid).exists()
    finally:
        os.kill(grandchild, signal.SIGKILL)
