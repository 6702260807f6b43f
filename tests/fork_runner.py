"""Run example scripts and ``agentkit`` commands, each in a process of its own, forked
from one that has already imported the heavy modules (about 1.2 s of CPU a process
saved for openai; 0.25 s for the CLI): the guide's examples (test_guide_examples.py),
the API comparison's programs (test_api_comparison.py), and the read-only ``show`` and
``transcript`` commands (test_cli_servers.py).

:class:`ForkRunner` starts ``python tests/fork_runner.py``: it imports the preloaded
modules once, then reads one job a line on its stdin (JSON: a script or the agentkit
command's arguments, its folder, environment and output files) and forks a child for
each. The child is the job's own process: its stdin is ``/dev/null``, its stdout and
stderr the job's files, its folder and environment the job's, ``sys.path`` as
``python SCRIPT`` or ``python -m agentkit`` would make it (the folder, then
``PYTHONPATH``), and the code runs as ``__main__`` in fresh globals (runpy), so a
missing import still fails. It ends as a Python program ends (atexit handlers,
non-daemon threads joined) with the job's exit status, which the runner writes back
as one line. Jobs that start threads, servers or workers of their own are fine; the
runner itself starts none (a fork copies only the thread that forks).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

PRELOAD = ("openai", "pydantic", "agentkit", "agentkit.agent")
"""What example scripts import, imported once by the runner; nothing in them starts a
thread (a fork copies only the thread that forks)."""
CLI_PRELOAD = (*PRELOAD, "agentkit.cli", "agentkit.cli.show", "agentkit.chat.explain")
"""What ``agentkit`` commands import (``run``, ``show``, ``transcript``...); no thread
either."""
REPO = Path(__file__).resolve().parents[1]


class ForkRunner:
    """The forking runner as a subprocess, with the modules ``preload`` imported;
    :meth:`run` runs one script, :meth:`agentkit` one command, to its end."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            start_new_session=True,  # its children share its group: one kill ends all
        )

    def __enter__(self) -> ForkRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self, script: Path, cwd: Path, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script`` as ``python SCRIPT`` would, in ``cwd`` with ``env``; return
        its exit status and output. A hang past ``timeout`` kills the runner and fails."""
        job = {"script": str(script), "cwd": str(cwd), "env": env}
        return self._completed(job, [sys.executable, str(script)], timeout)

    def agentkit(
        self, *args: str, env: dict[str, str], timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """``python -m agentkit ARGS`` in the repository with ``env`` (stdin closed,
        output captured), as cli_helpers.agentkit runs it."""
        job = {"module": "agentkit", "args": list(args), "cwd": str(REPO), "env": env}
        return self._completed(job, [sys.executable, "-m", "agentkit", *args], timeout)

    def _completed(
        self, job: dict[str, Any], argv: list[str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="fork-runner-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            code = self._job({**job, "out": str(out), "err": str(err)}, timeout)
            return subprocess.CompletedProcess(
                argv, code, out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
            )

    def _job(self, job: dict[str, Any], timeout: float) -> int:
        """Send one job and wait for its exit status."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(job) + "\n")
        stdin.flush()
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not answer or not answer[0]:
            self.close()
            what = job.get("script") or f"agentkit {job.get('args')}"
            raise AssertionError(f"{what} did not end within {timeout} s (or the runner died)")
        return int(answer[0])

    def close(self) -> None:
        """Stop the runner and anything it started."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def _child(job: dict[str, Any]) -> int:
    """In the forked child: become the script's process, run it, return its status."""
    import runpy

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, job["out"]), (2, job["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.close(null)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    tempfile.tempdir = None  # found again from this environment (TMPDIR), as at a start
    extra = [p for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    if "module" in job:  # python -m MODULE ARGS, in cwd
        sys.path[:] = [job["cwd"], *extra, *sys.path[1:]]
        sys.argv[:] = ["-m", *job["args"]]  # runpy sets sys.argv[0] to the module's file
        # agentkit/__main__.py ends the process with the command's status
        # (agentkit.cli.entry), as for ``python -m agentkit``.
        runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
        return 0
    sys.path[:] = [str(Path(job["script"]).parent), *extra, *sys.path[1:]]
    sys.argv[:] = [job["script"]]
    # Kept until the end, as a script's globals are: objects it did not close live until
    # the interpreter's exit, after the atexit handlers. An exception or SystemExit goes
    # up to the interpreter, which reports it and sets the status as for ``python SCRIPT``.
    globals()["_example_globals"] = runpy.run_path(job["script"], run_name="__main__")
    return 0


def _serve() -> int | None:
    """Preload, then fork a child per job; ``None`` at end of input, an exit status in a child."""
    import importlib

    for name in sys.argv[1:]:
        importlib.import_module(name)
    assert threading.active_count() == 1, threading.enumerate()  # safe to fork
    while line := sys.stdin.readline():
        job = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return _child(job)
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()
    return None


if __name__ == "__main__":
    code = _serve()
    if code is not None:
        sys.exit(code)  # the child ends as the script's interpreter would
