"""The Ray actor that runs sub-agent workers on its node, one after another.

One job: :class:`SubAgentHost`, a long-lived actor that starts a worker process
server (the local launcher's forkserver, agentkit's heavy modules preloaded) when
it is created, then runs jobs: each job is one sub-agent's ordinary worker process,
forked from that server, with its pipe relayed to the driver through a
:class:`~agentkit.subagent.launchers.ray_channel.Mailbox`. The driver's pool
(agentkit.subagent.launchers.ray_pool) keeps such actors warm and hands each to one
sub-agent at a time; every call names its job, and calls for an earlier job than
the current one answer as for an ended worker.

Also the shared-workspace check: the driver writes a random token into
``<deliverables>/.subagent/shared-workspace-check`` (:func:`write_marker`) and the
actor reads it back before it starts the worker (:func:`check_shared_workspace`).
An isolated sub-agent skips it: its copy comes with the job and goes back at its end
(agentkit.subagent.launchers.ray_isolation); the node's folder for it stays until the
driver has both (:meth:`SubAgentHost.acknowledge`).

Why a host process and not the worker inside the actor: Ray ends a dead owner's
actors by force (no handler runs), so a worker living in the actor could neither
record its end nor kill the commands it started. Behind a pipe it sees the host
die as EOF, exactly as a local worker sees its parent die, and then records
``terminated`` and kills everything carrying its mark on its own node.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from agentkit.subagent.contract import ChannelClosed, Result, WorkerSpec
from agentkit.subagent.launchers.ray_channel import Mailbox, failed_result
from agentkit.subagent.launchers.ray_isolation import (
    NodeCopy,
    Outbound,
    Returned,
    arrive,
    depart,
)
from agentkit.subagent.record import RECORD_DIR

if TYPE_CHECKING:
    from agentkit.subagent.launchers.local import LocalWorker

log = logging.getLogger("agentkit")

MARKER_NAME = "shared-workspace-check"
"""File the main process writes in ``<deliverables>/.subagent/`` for the node to read."""
# Seconds a call about a job waits for the job's start to have happened (calls to a
# threaded actor may run before the start that precedes them).
START_WAIT = 30.0
# Seconds a leftover worker gets between SIGTERM and SIGKILL when its job is released.
RELEASE_GRACE = 0.5


def marker_path(spec: WorkerSpec) -> Path:
    """Where the shared-workspace marker of ``spec`` lives."""
    return Path(spec.deliverables_path) / RECORD_DIR / MARKER_NAME


def write_marker(spec: WorkerSpec) -> str:
    """Write a fresh random token into the marker file; return the token."""
    token = secrets.token_hex(16)
    from agentkit.confined import write_bytes_atomic

    # 0644: a worker on another node may run as another user of the shared storage.
    write_bytes_atomic(Path(spec.workspace), marker_path(spec), token.encode("ascii"), mode=0o644)
    return token


def check_shared_workspace(spec: WorkerSpec, token: str) -> str | None:
    """On the worker's node: None when the marker holds ``token`` (the workspace is
    the one the main process wrote; the marker is then removed), else the reason."""
    path = marker_path(spec)
    try:
        found = path.read_text(encoding="ascii").strip()
    except OSError as exc:
        found, error = "", f"{type(exc).__name__}: {exc.strerror or exc}"
    else:
        error = "it holds another token (a different folder at the same path)"
    if found == token:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return (
        f"the workspace {spec.workspace} is not shared with this Ray node "
        f"({ray.util.get_node_ip_address()}): the marker {path} written by the main "
        f"process cannot be read there ({error}). Put the workspace on storage every "
        "node mounts at the same path (NFS, a shared volume)."
    )


class _Job:
    """One sub-agent's run on a host: its mailbox, its worker once started."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.mailbox = Mailbox()
        self.local: LocalWorker | None = None
        self.mark = ""
        self.started = threading.Event()
        self.killed = False
        self.lock = threading.Lock()  # start, kill and release, one at a time
        self.node: NodeCopy | None = None  # an isolated sub-agent's copy on this node
        self.returned: Returned | None = None  # its work, packed once the worker ended
        self.packed = threading.Event()  # returned is final (or there is nothing)
        self.acknowledged = False  # the driver has it: the node's folder may go


class SubAgentHost:
    """The Ray actor on one node that runs sub-agent workers, one job at a time.

    Args:
        start_method: how workers start on the node (``Settings.subagent_start_method``);
            with ``forkserver`` the server is started and preloaded here, so the
            actor is warm once its construction returned (:meth:`ready`).

    Job calls (``start``, ``take``, ``deliver``, ``where``, ``join``, ``kill``,
    ``release``) take the job number first; the driver numbers each actor's jobs
    1, 2, ... and starts one only once the previous one was released. Construction
    and calls never raise for a worker that cannot start: that becomes a ``failed``
    Result in the job's mailbox.
    """

    def __init__(self, start_method: str = "forkserver") -> None:
        from agentkit.subagent.launchers.local import prewarm

        self.node_id = ray.get_runtime_context().get_node_id()
        self.start_method = start_method
        self._lock = threading.Lock()
        self._job: _Job | None = None
        self._last = 0  # the highest job number seen
        self._stopped = threading.Event()
        prewarm(start_method)  # the server and its preloads, before the first job

    def ready(self) -> str:
        """The node id, once the actor is constructed (its worker server is warm)."""
        return str(self.node_id)

    def live(self) -> None:
        """Return only when the driver ends the actor (it then answers with an error):
        the pool holds this call open to learn at once that the actor died."""
        self._stopped.wait()

    def _get(self, number: int) -> _Job | None:
        """The job ``number`` (made on its first call, whichever it is), or None when
        it is an earlier one than the current job (it ended)."""
        with self._lock:
            if number < self._last or (number == self._last and self._job is None):
                return None
            if number > self._last:
                self._last, self._job = number, _Job(number)
            return self._job

    def start(
        self, number: int, spec: WorkerSpec, token: str, carried: Outbound | None = None
    ) -> None:
        """Check the shared workspace (or, with ``carried``, an isolated sub-agent's
        copy: unpack it into a node-local folder instead), then start the job's worker
        (failures become a ``failed`` Result)."""
        from agentkit.subagent.launchers.local import LocalLauncher

        job = self._get(number)
        if job is None:
            return
        with job.lock:
            if job.started.is_set():
                return
            job.mark = spec.process_mark
            why = None
            if not job.killed:
                spec, why = self._arrive(job, spec, token, carried)
            if why is None and not job.killed:
                try:
                    job.local = LocalLauncher(self.start_method).start(spec)  # type: ignore[arg-type]
                except Exception as exc:
                    why = f"could not start the worker on the Ray node: {exc}"
            if job.local is None:
                self._pack(job)  # a copy unpacked for nothing goes back as it came
                job.mailbox.put(failed_result(why or "the worker was ended before it started"))
                job.mailbox.close(None)
            else:
                job.mailbox.attach(job.local.channel.send)
                threading.Thread(
                    target=self._relay, args=(job,), name="agentkit-relay", daemon=True
                ).start()
            job.started.set()

    @staticmethod
    def _arrive(
        job: _Job, spec: WorkerSpec, token: str, carried: Outbound | None
    ) -> tuple[WorkerSpec, str | None]:
        """``(the spec the worker runs with, why it cannot start or None)``."""
        if carried is None:
            return spec, check_shared_workspace(spec, token)
        try:
            job.node = arrive(spec, carried)
        except Exception as exc:
            return spec, f"could not set up the sub-agent's own copy on the Ray node: {exc}"
        return job.node.spec, None

    def _relay(self, job: _Job) -> None:
        local = job.local
        assert local is not None
        held: Result | None = None  # an isolated job's Result waits for its packed work
        while True:
            try:
                message = local.channel.receive()
            except ChannelClosed:
                break
            if job.node is not None and isinstance(message, Result):
                held = message
                continue
            job.mailbox.put(message)
        local.join(5)
        self._pack(job)
        if held is not None:
            job.mailbox.put(held)
        job.mailbox.close(local.exit_code)

    @staticmethod
    def _pack(job: _Job) -> None:
        """Pack an isolated job's work once its worker ended (packed set either way)."""
        if job.node is not None and not job.packed.is_set():
            job.returned = depart(job.node)
        job.packed.set()

    def collect(self, number: int, timeout: float) -> Returned | None:
        """Job ``number``'s packed work (an isolated sub-agent's), waiting up to
        ``timeout`` seconds for its worker to end; None when there is none."""
        job = self._started(number)
        if job is None or job.node is None:
            return None
        job.packed.wait(timeout)
        return job.returned

    def acknowledge(self, number: int, brought: bool) -> None:
        """The driver took job ``number``'s work: with ``brought`` the node's folder is
        removed, else it is kept (its path logged)."""
        job = self._get(number)
        if job is None or job.node is None:
            return
        job.acknowledged = True
        if brought:
            shutil.rmtree(job.node.folder, ignore_errors=True)
        else:
            log.warning("agentkit: sub-agent work kept on this node in %s", job.node.folder)

    def take(
        self, number: int, after: int, timeout: float
    ) -> tuple[list[tuple[int, Any]], bool, int | None]:
        """Worker messages of job ``number`` after ``after`` (see Mailbox.take)."""
        job = self._get(number)
        if job is None:
            return [], True, None
        return job.mailbox.take(after, timeout)

    def deliver(self, number: int, seq: int, message: Any) -> None:
        """Parent message number ``seq`` for job ``number``'s worker (Mailbox.deliver)."""
        job = self._get(number)
        if job is not None:
            job.mailbox.deliver(seq, message)

    def _started(self, number: int) -> _Job | None:
        job = self._get(number)
        if job is not None:
            job.started.wait(START_WAIT)
        return job

    def where(self, number: int) -> tuple[str, int | None]:
        """``(node id, the job's worker pid on that node or None)``."""
        job = self._started(number)
        return self.node_id, job.local.pid if job is not None and job.local else None

    def join(self, number: int, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for job ``number``'s worker; its exit code or None."""
        job = self._started(number)
        if job is None or job.local is None:
            return None
        job.local.join(timeout)
        return job.local.exit_code

    def kill(self, number: int, grace: float) -> int | None:
        """Kill job ``number``'s worker and every process carrying its mark on this node
        (SIGTERM, ``grace`` seconds, SIGKILL); return its exit code. A job not started
        yet never starts."""
        job = self._get(number)
        if job is None:
            return None
        with job.lock:
            job.killed = True
            local = job.local
        if local is None:
            return None
        local.kill(grace)
        local.join(1)
        return local.exit_code

    def release(self, number: int) -> bool:
        """End job ``number``: its worker and every process with its mark are killed,
        its pipe closed; the actor is then free for the next job. Returns True when
        nothing of the job is left running (else the driver ends the actor)."""
        from agentkit.process.tree import kill_tree, processes_with_mark

        job = self._get(number)
        if job is None:
            return True
        with job.lock:
            job.killed = True
            job.started.set()
            local = job.local
        if local is not None and local.is_alive():
            local.kill(RELEASE_GRACE)
            local.join(1)
        if job.mark:
            kill_tree(None, job.mark, grace=RELEASE_GRACE)
        clean = (local is None or not local.is_alive()) and not (
            job.mark and processes_with_mark(job.mark)
        )
        if local is not None:
            local.close()
        if job.node is not None and not job.acknowledged:  # never removed unasked
            log.warning("agentkit: sub-agent work kept on this node in %s", job.node.folder)
        with self._lock:
            if self._job is job:
                self._job = None
        return clean
