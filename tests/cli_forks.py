"""Several ``python -m agentkit`` commands run as forks of one process that has
already imported the CLI and its ``show``/``transcript`` modules (about 0.25 s of
CPU a command saved). Used by test_cli_servers.py for the read-only commands
(``show``, ``transcript``), which start no thread, no server and no worker.

:class:`AgentkitForks` starts ``python tests/cli_forks.py``: it imports the CLI once,
then reads one job a line on its stdin (JSON: the arguments and the environment)
and forks a child for each. The child is the command's own process: stdin is
``/dev/null``, stdout and stderr files of its own, its folder the repository, its
environment the job's, and it runs ``agentkit`` as ``python -m agentkit`` does
(runpy, as ``__main__``), ending as a Python program ends with the command's exit
status, which the runner writes back as one line. Each command's output and status
are its own, as with a process started for it.
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

REPO = Path(__file__).resolve().parents[1]
PRELOAD = ("agentkit.cli", "agentkit.cli.show", "agentkit.chat.explain")
"""Imported once by the runner; nothing in them starts a thread."""


class AgentkitForks:
    """The forking runner as a subprocess; :meth:`run` runs one command to its end."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=REPO,
            text=True,
            start_new_session=True,  # its children share its group: one kill ends all
        )

    def __enter__(self) -> AgentkitForks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self, *args: str, env: dict[str, str], timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """``python -m agentkit ARGS`` with ``env`` (stdin closed, output captured), as
        cli_helpers.agentkit runs it. A hang past ``timeout`` kills the runner and fails."""
        with tempfile.TemporaryDirectory(prefix="agentkit-fork-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            job = {"args": list(args), "env": env, "out": str(out), "err": str(err)}
            code = self._job(job, timeout)
            return subprocess.CompletedProcess(
                [sys.executable, "-m", "agentkit", *args],
                code,
                out.read_text(encoding="utf-8"),
                err.read_text(encoding="utf-8"),
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
            self.close(kill=True)
            raise AssertionError(f"agentkit {job['args']} did not end within {timeout} s")
        return int(answer[0])

    def close(self, kill: bool = False) -> None:
        """Stop the runner: the end of its input ends an idle one; ``kill`` (or a
        runner still there after 10 s) kills it and anything it started."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if not kill:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _child(job: dict[str, Any]) -> None:
    """In the forked child: become ``python -m agentkit ARGS`` and run it (it exits)."""
    import runpy

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, job["out"]), (2, job["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(REPO)
    os.environ.clear()
    os.environ.update(job["env"])
    tempfile.tempdir = None  # found again from this environment (TMPDIR), as at a start
    extra = [p for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [str(REPO), *extra, *sys.path[1:]]  # as ``python -m`` in REPO makes it
    sys.argv[:] = ["-m", *job["args"]]  # runpy sets sys.argv[0] to agentkit/__main__.py
    # agentkit/__main__.py ends with sys.exit(main()): the SystemExit goes up to the
    # interpreter, which sets the status as for ``python -m agentkit``.
    runpy.run_module("agentkit", run_name="__main__", alter_sys=True)


def _serve() -> None:
    """Preload, then fork a child per job until the end of input."""
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
            _child(job)
            return  # not reached: agentkit's __main__ exits
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
