"""A separate process for tests/integration/test_conversation_lock_processes.py: opens conversations of a
workspace as another agentkit process would, and reports through files.

Usage: ``python lock_child.py MODE WORKSPACE CONTROL_FOLDER [ARGS...]``

- ``race CID NAME ROUNDS``: write ``ready-<NAME>``; each round, wait for ``go-<r>``
  (a start time), open CID, write ``result-<r>-<NAME>`` (OPENED or the error), wait
  for ``close-<r>``, close, write ``closed-<r>-<NAME>`` (and wait for the next go).
- ``churn NAME COUNT START``: from START (time.time()), COUNT times claim the lock
  of conversation ``churn`` and, holding it, create and remove a marker file with
  O_EXCL (failing = two holders at once); write ``churn-<NAME>`` "opened violations".
- ``hold CID``: open CID, start a grandchild that inherits every inheritable
  descriptor (pid in ``grandchild``), write ``held``, sleep until killed.
- ``new``: open a new conversation (never saved), write its id to ``new-id``, wait
  for ``close``, close it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from agentkit.chat import Session
from agentkit.chat.lock import claim_conversation
from agentkit.conversation import conversations_dir
from agentkit.errors import ConfigurationError
from agentkit.settings import Settings

SETTINGS = Settings(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", language="en")


def write(path: Path, text: str) -> None:
    """Write whole or not at all: the test polls for the name."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.001)


def until(start: float) -> None:
    """Sleep, then spin, until time.time() reaches ``start``: processes released
    this way begin within microseconds of each other."""
    while time.time() < start - 0.003:
        time.sleep(0.001)
    while time.time() < start:
        pass


def open_session(workspace: str, cid: str | None) -> Session:
    return Session(workspace, SETTINGS, conversation_id=cid, subagents=False, prewarm=False)


def race(workspace: str, ctl: Path, cid: str, name: str, rounds: int) -> None:
    write(ctl / f"ready-{name}", "")  # imported: waits for go-0 from now on
    for r in range(rounds):
        go = ctl / f"go-{r}"
        wait_for(go)
        until(float(go.read_text()))
        session: Session | None = None
        try:
            session = open_session(workspace, cid)
            outcome = "OPENED"
        except ConfigurationError as exc:
            outcome = f"REFUSED {exc}"
        write(ctl / f"result-{r}-{name}", outcome)
        wait_for(ctl / f"close-{r}")
        if session is not None:
            session.close()
        write(ctl / f"closed-{r}-{name}", "")


def spin() -> None:
    while True:
        pass


def churn(workspace: str, ctl: Path, name: str, count: int, start: float) -> None:
    folder = conversations_dir(Path(workspace))
    lock, marker = folder / "churn.lock", folder / "churn.holder"
    opened = violations = 0
    # A busy second thread and a short GIL switch interval pause this one at random
    # points of the claim (e.g. between opening the lock file and locking it),
    # widening the windows where a wrong claim would show.
    threading.Thread(target=spin, daemon=True).start()
    sys.setswitchinterval(0.0002)
    until(start)
    for _ in range(count):
        try:
            release = claim_conversation(lock, "churn", lambda: True)
        except ConfigurationError:
            continue
        opened += 1
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            violations += 1
        else:
            os.close(fd)
            time.sleep(0)  # let a rival run while this one holds the claim
            os.unlink(marker)
        release()
    write(ctl / f"churn-{name}", f"{opened} {violations}")


def hold(workspace: str, ctl: Path, cid: str) -> None:
    open_session(workspace, cid)
    grandchild = subprocess.Popen(["sleep", "600"], close_fds=False)
    write(ctl / "grandchild", str(grandchild.pid))
    write(ctl / "held", "")
    time.sleep(600)


def new(workspace: str, ctl: Path) -> None:
    session = open_session(workspace, None)
    write(ctl / "new-id", session.id)
    wait_for(ctl / "close")
    session.close()


def main() -> None:
    mode, workspace, ctl = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    args = sys.argv[4:]
    if mode == "race":
        race(workspace, ctl, args[0], args[1], int(args[2]))
    elif mode == "churn":
        churn(workspace, ctl, args[0], int(args[1]), float(args[2]))
    elif mode == "hold":
        hold(workspace, ctl, args[0])
    elif mode == "new":
        new(workspace, ctl)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
