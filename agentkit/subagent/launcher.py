"""Starting worker processes, behind a small interface.

The manager only needs :class:`Launcher` (``start(spec) -> WorkerHandle``), so
another execution engine (Ray, a job queue) can run workers later without
touching the manager or the worker loop. :class:`LocalLauncher` uses
multiprocessing with a context that is safe beside threads: forkserver with the
heavy modules preloaded (fast starts, DESIGN §8), or spawn.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import agentkit

PRELOAD = ["agentkit.subagent.worker"]


@dataclass
class WorkerSpec:
    """Everything a worker needs, picklable.

    Attributes:
        agent_id, summary, task, timeout_seconds: from create_sub_agent (seconds).
        deliverables_dir: as the model gave it (relative, for messages).
        deliverables_path: absolute folder.
        workspace: absolute workspace root.
        sub_conversation_id: the worker's conversation id.
        settings: ``Settings.model_dump()`` of the parent.
        process_mark: AGENTKIT_PROCESS_MARK value inherited by everything it starts.
        created_at: ISO UTC time of creation (seed §6).
    """

    agent_id: int
    summary: str
    task: str
    timeout_seconds: int
    deliverables_dir: str
    deliverables_path: str
    workspace: str
    sub_conversation_id: str
    settings: dict[str, Any]
    process_mark: str
    created_at: str
    extra: dict[str, Any] = field(default_factory=dict)


class WorkerHandle(Protocol):
    """A started worker: its end of the pipe and process control."""

    conn: Connection

    @property
    def pid(self) -> int | None: ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...

    def kill(self) -> None: ...


class Launcher(Protocol):
    """Starts a worker for a spec; the worker runs agentkit.subagent.worker.worker_main."""

    def start(self, spec: WorkerSpec) -> WorkerHandle: ...


@dataclass
class LocalWorker:
    """A worker in a local multiprocessing.Process."""

    process: Any
    conn: Connection

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def is_alive(self) -> bool:
        return bool(self.process.is_alive())

    def join(self, timeout: float | None = None) -> None:
        self.process.join(timeout)

    def kill(self) -> None:
        self.process.kill()


_forkserver_lock = threading.Lock()
_forkserver_started = False


def _ensure_forkserver(ctx: Any) -> None:
    """Start the forkserver once with agentkit importable and preloaded.

    Python 3.11's forkserver ignores the parent's sys.path and silently skips a
    preload it cannot import, so the package's folder is put on PYTHONPATH for
    the server's start only.
    """
    global _forkserver_started
    with _forkserver_lock:
        if _forkserver_started:
            return
        ctx.set_forkserver_preload(PRELOAD)
        root = str(Path(agentkit.__file__).resolve().parent.parent)
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = root + (os.pathsep + old if old else "")
        try:
            from multiprocessing import forkserver

            forkserver.ensure_running()
        finally:
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old
        _forkserver_started = True


_main_lock = threading.Lock()


@contextlib.contextmanager
def _hidden_main() -> Iterator[None]:
    """Start a worker without re-running the caller's ``__main__``.

    spawn and forkserver children re-import the parent's main script (so a script
    without an ``if __name__ == "__main__":`` guard would run twice, and fail).
    Workers need nothing from it (their target and arguments live in agentkit), so
    the main module is hidden from multiprocessing while the process starts.
    """
    with _main_lock:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class LocalLauncher:
    """Launcher over multiprocessing ("forkserver" by default, or "spawn").

    On platforms without forkserver (Windows, macOS default) spawn is used.
    """

    def __init__(self, start_method: str = "forkserver") -> None:
        if (
            start_method == "forkserver"
            and "forkserver" not in multiprocessing.get_all_start_methods()
        ):
            start_method = "spawn"
        self.start_method = start_method
        self._ctx = multiprocessing.get_context(start_method)

    def start(self, spec: WorkerSpec) -> LocalWorker:
        """Start a worker process; returns its handle. Raises OSError if it cannot start."""
        from agentkit.subagent.worker import worker_main

        if self.start_method == "forkserver":
            _ensure_forkserver(self._ctx)
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=worker_main,
            args=(spec, child_conn),
            name=f"agentkit-subagent-{spec.agent_id}",
            daemon=True,
        )
        with _hidden_main():
            process.start()
        child_conn.close()  # only the worker holds this end: its EOF tells us it died
        return LocalWorker(process=process, conn=parent_conn)
