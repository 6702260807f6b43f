"""The worker's SIGTERM/SIGHUP handler only wakes a thread; that thread ends the worker.

Issue 20 (item 1): a signal handler that does real work can block for ever on a lock
its own thread holds. The worker's handler used to record the end, kill the commands
and exit inside the handler; a SIGTERM arriving while the worker saved its record (it
holds the record folder's lock then) blocked in the handler on that same lock, and the
worker never ended. The end-to-end outcome (record ``terminated``, commands killed)
is tested in tests/integration/test_subagents.py with a real worker and command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from agentkit.subagent.record import ORPHANED_ERROR

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from multiprocessing import Pipe
    from pathlib import Path

    from agentkit.settings import Settings
    from agentkit.subagent.contract import WorkerSpec
    from agentkit.subagent.record import guarded
    from agentkit.subagent.worker import Worker

    workspace = Path(sys.argv[1])
    signals = [getattr(signal, name) for name in sys.argv[2].split(",")]
    spec = WorkerSpec(
        agent_id=1, summary="s", task="t", timeout_seconds=60, deliverables_dir="out",
        deliverables_path=str(workspace / "out"), workspace=str(workspace),
        sub_conversation_id="conv_sub", settings=Settings(model="m", api_key="k").model_dump(),
        process_mark="agentkit-test-worker-signals", created_at="2026-01-01T00:00:00Z",
    )
    parent, child = Pipe()  # the parent's end stays open: the link does not close
    worker = Worker(spec, child)
    worker.handle_signals()
    worker.link.start_reader()

    def write():
        # The main thread holds the record folder's lock, as when it saves a turn; a
        # handler that wrote the record itself would wait here for ever.
        for signum in signals:
            os.kill(os.getpid(), signum)
        time.sleep(0.5)
        print("released", flush=True)

    guarded(workspace / "out", {"sub_conversation_id": "other"}, write, root=workspace)
    time.sleep(30)
    print("still running", flush=True)
    """
)


def run_worker(workspace: Path, signals: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workspace), signals],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,  # the child imports the worker (openai, the tools): seconds on a busy machine
    )


def test_sigterm_while_the_worker_holds_the_record_lock_still_ends_it(tmp_path: Path) -> None:
    done = run_worker(tmp_path, "SIGTERM")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "released\n"
    record = json.loads((tmp_path / "out/.subagent/conversations.json").read_text())
    assert record["status"] == "terminated" and record["error"] == ORPHANED_ERROR


def test_signals_in_quick_succession_end_the_worker_once(tmp_path: Path) -> None:
    # SIGINT is ignored (the parent decides how its sub-agents end); a second and third
    # SIGTERM, and a SIGHUP, find the ending under way.
    done = run_worker(tmp_path, "SIGINT,SIGTERM,SIGTERM,SIGHUP,SIGTERM")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    record = json.loads((tmp_path / "out/.subagent/conversations.json").read_text())
    assert record["status"] == "terminated" and record["completed_at"]
