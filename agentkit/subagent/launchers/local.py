"""Starting worker processes on this machine: the local Launcher.

One job: :class:`LocalLauncher` implements the contract's Launcher
(``start(spec) -> WorkerHandle``) with multiprocessing, using a context that is
safe beside threads: forkserver with the heavy modules preloaded (fast starts,
docs/architecture.md §8), or spawn. Another execution engine (Ray, a job queue) implements
the same protocol in its own module.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit.process.secrets import ALWAYS_HIDDEN
from agentkit.process.tree import kill_tree
from agentkit.subagent.contract import Channel, ParentMessage, WorkerMessage, WorkerSpec

if TYPE_CHECKING:
    from agentkit.settings import Settings

PRELOAD = [
    "agentkit.subagent.worker",
    # Imported by every worker after the fork (its tools, profile, skills, MCP set-up).
    "agentkit.tools.imported",
    "agentkit.mcp.config",
    "agentkit.profiles",
    "agentkit.conventions.tool",
    "agentkit.process.spawn",
    "agentkit.subagent.launchers.local",
]


def run_worker(spec: WorkerSpec, conn: Any) -> None:
    """The worker process's target: imports agentkit.subagent.worker there and runs
    ``worker_main(spec, conn)``.

    A small trampoline on purpose: multiprocessing pickles a target by reference,
    and a target defined in the worker module made the parent import it too
    (openai, every tool: 0.76 s before the first sub-agent could start). The
    forkserver has preloaded it, so in the child this import costs nothing.
    """
    from agentkit.subagent.worker import worker_main

    worker_main(spec, conn)


@dataclass
class LocalWorker:
    """A worker in a local multiprocessing.Process (a contract WorkerHandle);
    ``mark`` is the AGENTKIT_PROCESS_MARK of everything it starts."""

    process: Any
    channel: Channel[ParentMessage, WorkerMessage]
    mark: str
    # Kept when the process object is closed (it then answers nothing).
    _closed_pid: int | None = None
    _closed_code: int | None = None
    _closed: bool = False

    @property
    def pid(self) -> int | None:
        """The worker's process id."""
        return self._closed_pid if self._closed else self.process.pid

    @property
    def exit_code(self) -> int | None:
        """The process's exit code once it ended, else None."""
        code = self._closed_code if self._closed else self.process.exitcode
        return code if isinstance(code, int) else None

    def is_alive(self) -> bool:
        """True while the process runs."""
        return not self._closed and bool(self.process.is_alive())

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the process to end."""
        if not self._closed:
            self.process.join(timeout)

    def kill(self, grace: float) -> None:
        """Kill the worker (while alive) and every process carrying its mark, with
        ``grace`` seconds between SIGTERM and SIGKILL."""
        kill_tree(self.pid if self.is_alive() else None, self.mark, grace=grace)

    def close(self) -> None:
        """Close the pipe end and the process's resources (its sentinel fd) once it
        ended, so a finished sub-agent holds no file descriptor; idempotent."""
        self.channel.close()
        if self._closed or self.process.exitcode is None:
            return  # already closed, or still running: keep it joinable
        self._closed_pid, self._closed_code = self.process.pid, self.process.exitcode
        self.process.close()
        self._closed = True


_forkserver_lock = threading.Lock()
_forkserver_started = False


def _ensure_forkserver(ctx: Any, api_key: str | None) -> None:
    """Start the forkserver once with agentkit importable and preloaded, from an
    environment without the endpoint's key.

    Python 3.11's forkserver ignores the parent's sys.path and silently skips a
    preload it cannot import, so the package's folder is put on PYTHONPATH for
    the server's start only. Every worker is forked from this server and shares its
    initial environment block (``/proc/<pid>/environ``), which a command can read;
    so ``OPENAI_API_KEY``, ``AGENTKIT_API_KEY`` and any variable holding ``api_key``
    are taken out of ``os.environ`` for the start only. Workers get the key in
    their WorkerSpec's settings, over the pipe. Other threads reading
    ``os.environ`` during those few milliseconds would miss those variables.
    """
    global _forkserver_started
    with _forkserver_lock:
        if _forkserver_started:
            return
        ctx.set_forkserver_preload(PRELOAD)
        root = str(Path(__file__).resolve().parents[3])  # the folder holding agentkit/
        saved = {
            name: value
            for name, value in os.environ.items()
            if name.upper() in ALWAYS_HIDDEN or (api_key and len(api_key) >= 8 and api_key in value)
        }
        saved_path = os.environ.get("PYTHONPATH")
        for name in saved:
            del os.environ[name]
        os.environ["PYTHONPATH"] = root + (os.pathsep + saved_path if saved_path else "")
        try:
            from multiprocessing import forkserver

            from agentkit.process.mp_tempdir import owned_temp_dir

            # Its socket goes in this folder: workers (forked from the server, with
            # its environment) must know it, to hide it from their commands' sandbox.
            # Named by this pid, so that the next start sweeps it after a SIGKILL.
            from agentkit.process.sandbox_folders import SOCKET_DIRS_VAR

            folders = [f for f in os.environ.get(SOCKET_DIRS_VAR, "").split(os.pathsep) if f]
            os.environ[SOCKET_DIRS_VAR] = os.pathsep.join([*folders, owned_temp_dir()])
            forkserver.ensure_running()
        finally:
            if saved_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved_path
            os.environ.update(saved)
        _forkserver_started = True


_main_lock = threading.Lock()
_main_hidden = 0  # starts in progress (under _main_lock)
_main_saved: types.ModuleType | None = None


@contextlib.contextmanager
def _hidden_main() -> Iterator[None]:
    """Start a worker without re-running the caller's ``__main__``.

    spawn and forkserver children re-import the parent's main script (so a script
    without an ``if __name__ == "__main__":`` guard would run twice, and fail).
    Workers need nothing from it (their target and arguments live in agentkit), so
    the main module is hidden from multiprocessing while processes start: the first
    start hides it, the last one to finish puts it back, so starts from several
    threads run at once (a turn's parallel create_sub_agent calls).
    """
    global _main_hidden, _main_saved
    with _main_lock:
        if _main_hidden == 0:
            _main_saved = sys.modules.get("__main__")
            sys.modules["__main__"] = types.ModuleType("__main__")
        _main_hidden += 1
    try:
        yield
    finally:
        with _main_lock:
            _main_hidden -= 1
            if _main_hidden == 0 and _main_saved is not None:
                sys.modules["__main__"] = _main_saved
                _main_saved = None


class LocalLauncher:
    """Launcher over multiprocessing ("forkserver" by default, or "spawn").

    On platforms without forkserver (Windows, macOS default) spawn is used.
    """

    def __init__(self, start_method: Literal["forkserver", "spawn"] = "forkserver") -> None:
        if (
            start_method == "forkserver"
            and "forkserver" not in multiprocessing.get_all_start_methods()
        ):
            start_method = "spawn"
        self.start_method = start_method
        self._ctx = (
            multiprocessing.get_context("spawn")
            if start_method == "spawn"
            else multiprocessing.get_context("forkserver")
        )

    def start(self, spec: WorkerSpec) -> LocalWorker:
        """Start a worker process; returns its handle. Raises OSError if it cannot start."""
        if self.start_method == "forkserver":
            _ensure_forkserver(self._ctx, spec.settings.get("api_key"))
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=run_worker,
            args=(spec, child_conn),
            name=f"agentkit-subagent-{spec.agent_id}",
            daemon=True,
        )
        with _hidden_main():
            process.start()
        child_conn.close()  # only the worker holds this end: its EOF tells us it died
        return LocalWorker(process=process, channel=Channel(parent_conn), mark=spec.process_mark)


_prewarm_lock = threading.Lock()
_prewarmed = False


def _ready() -> None:
    """A worker that does nothing: starting it proves the server has preloaded."""


def prewarm(start_method: str = "forkserver", api_key: str | None = None) -> None:
    """Start the worker process server now and wait until it has preloaded the heavy
    modules (openai, the tools), by starting one empty process through it. Later
    sub-agents then start in tens of milliseconds. Once per process; a failure is
    logged, never raised (the first sub-agent then starts it the usual way)."""
    global _prewarmed
    with _prewarm_lock:
        if _prewarmed or start_method != "forkserver":
            return
        _prewarmed = True
        if "forkserver" not in multiprocessing.get_all_start_methods():
            return
        ctx = multiprocessing.get_context("forkserver")
        try:
            _ensure_forkserver(ctx, api_key)
            process = ctx.Process(target=_ready, name="agentkit-prewarm", daemon=True)
            with _hidden_main():
                process.start()
            process.join(60)
            process.close()
        except Exception as exc:  # only an optimisation
            logging.getLogger("agentkit").info("worker prewarm failed: %s", exc)


def prewarm_in_background(settings: Settings) -> None:
    """Run :func:`prewarm` on a daemon thread for ``settings``' start method and key."""
    if _prewarmed:
        return
    threading.Thread(
        target=prewarm,
        args=(settings.subagent_start_method, settings.api_key),
        name="agentkit-prewarm",
        daemon=True,
    ).start()


def stop_forkserver() -> bool:
    """End the worker process server this process started, if it runs; returns True
    when there was one. For a command's exit (``agentkit run`` and the others): the
    server would see its parent gone only once it has finished preloading, up to
    seconds after the command ended.

    Its input pipe is closed and it gets SIGKILL at once: an idle server's own exit
    is only the interpreter's teardown of the preloaded modules (0.2-0.3 s of CPU
    the command waited for), and nothing in it needs to run (its socket is removed
    here). Workers it started are separate processes and are not touched (a command
    has ended its sub-agents before). A later ``start`` starts a new server. Relies
    on multiprocessing.forkserver's private state (Python 3.10-3.13); where that is
    missing, nothing is done.
    """
    global _forkserver_started, _prewarmed
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    # Not the prewarm lock: a prewarm waiting for the preload must not delay this.
    server_lock = getattr(server, "_lock", None) or contextlib.nullcontext()
    with _forkserver_lock, server_lock:
        pid = getattr(server, "_forkserver_pid", None)
        alive = getattr(server, "_forkserver_alive_fd", None)
        if server is None or not isinstance(pid, int):
            return False
        if isinstance(alive, int):
            with contextlib.suppress(OSError):
                os.close(alive)
        if not _reaped(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
        address = getattr(server, "_forkserver_address", None)
        if isinstance(address, str) and not address.startswith("\0"):
            with contextlib.suppress(OSError):
                os.unlink(address)
        server._forkserver_pid = server._forkserver_alive_fd = None
        server._forkserver_address = None
        _forkserver_started = _prewarmed = False
    return True


def _reaped(pid: int) -> bool:
    """True once the child ``pid`` has ended (and is reaped), or is not ours."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid
