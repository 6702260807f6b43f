"""The parent/worker contract: what a worker is given, what crosses the pipe, and
what a launcher must provide.

One job: the shapes both processes agree on. :class:`WorkerSpec` is everything a
worker needs (picklable); the messages are frozen dataclasses, one per kind;
:class:`Channel` sends and receives them over any :class:`Endpoint` (a
multiprocessing ``Connection`` is one); :class:`Launcher` and
:class:`WorkerHandle` are what another execution engine (Ray, a job queue)
implements to run workers without touching the manager or the worker loop
(docs/architecture.md §4).

Worker → parent: :class:`Progress` after every tool call, :class:`ClaimRequest`
before a write, :class:`Result` at the end. Parent → worker: :class:`ClaimAnswer`,
:class:`WrapUp` (time is nearly up) and :class:`Terminate` (stop now).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from agentkit.subagent.state import EndStatus


@dataclass(frozen=True)
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
        created_at: ISO UTC time of creation (docs/specification.md §6).
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


# ------------------------------------------------------------ worker → parent
@dataclass(frozen=True)
class Progress:
    """The worker's counters after a tool call (docs/specification.md §1 status row fields).

    ``counters``: the four seed counters by name; ``token_usage``: ``{"prompt",
    "completion", "total"}`` tokens; ``last_action``: one line, may be empty;
    ``finishing``: it is calling finish_task (its Result follows), so a
    notification about to go out can wait for it (agents ending together share one).
    """

    counters: dict[str, int]
    last_action: str
    turns: int
    token_usage: dict[str, int]
    finishing: bool = False


@dataclass(frozen=True)
class ClaimRequest:
    """Ask for the right to write ``path`` (absolute); answered by ClaimAnswer."""

    request: int
    path: str


@dataclass(frozen=True)
class Result:
    """How the worker ended; its last message. ``runtime_seconds`` by its own clock.

    ``record``: the worker's final record (record.build_record) when it could not
    write it itself (full disk); the parent writes it or keeps it. None otherwise.
    """

    status: EndStatus
    result_summary: str
    error: str | None
    progress: Progress
    runtime_seconds: int
    record: dict[str, Any] | None = None


# ------------------------------------------------------------ parent → worker
@dataclass(frozen=True)
class ClaimAnswer:
    """Answer to ClaimRequest ``request``: None grants it, else the refusal text."""

    request: int
    error: str | None


@dataclass(frozen=True)
class WrapUp:
    """Time is nearly up: ``seconds_left`` until the parent kills the worker."""

    seconds_left: int


@dataclass(frozen=True)
class Terminate:
    """Stop now: record the end, kill every process started, exit. A launcher
    that cannot signal its worker (remote) relies on this message alone."""

    reason: str


WorkerMessage = Progress | ClaimRequest | Result
ParentMessage = ClaimAnswer | WrapUp | Terminate

SendT = TypeVar("SendT")
ReceiveT = TypeVar("ReceiveT")


class Endpoint(Protocol):
    """One end of a duplex link that carries picklable objects
    (``multiprocessing.connection.Connection`` is one)."""

    def send(self, obj: Any) -> None: ...

    def recv(self) -> Any: ...

    def poll(self, timeout: float | None = ...) -> bool: ...

    def close(self) -> None: ...


class ChannelClosed(Exception):
    """The other end is gone (its process died or closed the link)."""


class Channel(Generic[SendT, ReceiveT]):
    """Typed messages over an Endpoint; sends are thread-safe, one reader at a time.

    The parent holds ``Channel[ParentMessage, WorkerMessage]``, the worker
    ``Channel[WorkerMessage, ParentMessage]``.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._send_lock = threading.Lock()

    def send(self, message: SendT) -> bool:
        """Send one message; returns False when the other end is gone."""
        try:
            with self._send_lock:
                self.endpoint.send(message)
        except (OSError, ValueError):
            return False
        return True

    def receive(self, timeout: float | None = None) -> ReceiveT | None:
        """Return the next message, or None if none came within ``timeout`` seconds
        (None: wait for ever). Raises ChannelClosed when the other end is gone."""
        try:
            if timeout is not None and not self.endpoint.poll(timeout):
                return None
            message: ReceiveT = self.endpoint.recv()
        except (EOFError, OSError) as exc:
            raise ChannelClosed(str(exc)) from exc
        return message

    def close(self) -> None:
        """Close this end (idempotent; errors ignored)."""
        try:
            self.endpoint.close()
        except OSError:
            pass


class WorkerHandle(Protocol):
    """A started worker: the parent's end of its channel and process control."""

    channel: Channel[ParentMessage, WorkerMessage]

    @property
    def pid(self) -> int | None:
        """The worker's process id where it has one on this host, else None."""
        ...

    @property
    def exit_code(self) -> int | None:
        """The worker's exit code once it ended, else None."""
        ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the worker to end."""
        ...

    def kill(self, grace: float) -> None:
        """End the worker and every process it started (SIGTERM, ``grace`` seconds,
        SIGKILL, or the engine's equivalent). Never raises for a gone worker."""
        ...

    def close(self) -> None:
        """Release what the handle holds (its channel, process resources) once the
        worker ended; idempotent."""
        ...


class Launcher(Protocol):
    """Starts a worker for a spec; the worker runs
    ``agentkit.subagent.worker.worker_main(spec, endpoint)``."""

    def start(self, spec: WorkerSpec) -> WorkerHandle:
        """Start the worker; raises (any exception) when it cannot."""
        ...
