"""Starting workers on a Ray cluster: the Ray Launcher.

One job: :class:`RayLauncher` implements the contract's Launcher. Each sub-agent
runs as a job on a host actor (agentkit.subagent.launchers.ray_host.SubAgentHost)
taken from a warm pool (agentkit.subagent.launchers.ray_pool): non-detached actors
placed by Ray with the Settings' resources (``ray_num_cpus``, ``ray_memory_mb``,
``ray_resources``, ``ray_label_selector``, ``ray_scheduling``), each with a worker
process server already preloaded, reused one sub-agent after another
(``ray_pool_size``, ``ray_pool_idle_seconds``). On its node the host checks that the
workspace is shared, starts the ordinary worker process there (forkserver), and
relays its pipe to the driver over the Ray channel
(agentkit.subagent.launchers.ray_channel). :class:`RayWorker` is the driver's handle.

Timeout and terminate run the local kill (the worker and every process carrying
its mark, agentkit.process.tree) on the worker's node through the host; when the
sub-agent ended, the host kills whatever of it is left before the actor goes back
to the pool. An actor that dies fails its sub-agent with the reason, and the pool
replaces it.

Requirements: agentkit (same version) installed on every node, and the workspace
on storage every node mounts at the same path (docs/guide/ray.md, "The
workspace must be shared"), except for isolated sub-agents: their copy travels
with the job and their work comes back before their end is reported
(agentkit.subagent.launchers.ray_isolation). The endpoint's API key travels to the worker's node inside the spec,
as it travels over the pipe locally; use Ray's TLS on networks you do not trust.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

from agentkit.settings import MiB, Settings
from agentkit.subagent.contract import (
    Channel,
    ParentMessage,
    Result,
    WorkerMessage,
    WorkerSpec,
)
from agentkit.subagent.launchers import ray_isolation
from agentkit.subagent.launchers.ray_channel import RayEndpoint
from agentkit.subagent.launchers.ray_host import (
    MARKER_NAME,
    check_shared_workspace,
    marker_path,
    write_marker,
)
from agentkit.subagent.launchers.ray_pool import Host, HostPool, Ticket, join_pool
from agentkit.subagent.launchers.ray_waiting import STARTING, WAITING, note_waiting

__all__ = [
    "MARKER_NAME",
    "STARTING",
    "WAITING",
    "RayLauncher",
    "RayWorker",
    "actor_options",
    "check_shared_workspace",
    "connect",
    "marker_path",
    "note_waiting",
    "write_marker",
]

log = logging.getLogger("agentkit")
NAMESPACE = "agentkit"
# Seconds the driver waits for host calls that should answer at once.
CALL_TIMEOUT = 30.0
# Seconds the driver waits for an isolated sub-agent's work to be packed on its node
# (its worker is ending: a large copy takes a while to save and bundle).
COLLECT_TIMEOUT = 600.0

_connect_lock = threading.Lock()


def connect(address: str) -> None:
    """Join the Ray cluster at ``address`` ("auto", "host:port" or "ray://...") once
    per process. Never starts a cluster: raises ConnectionError when none answers."""
    with _connect_lock:
        if ray.is_initialized():
            return
        if not address:
            raise ValueError("ray_address is empty; give the cluster's address or 'auto'")
        _check_reachable(address)
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Raise ConnectionError when nothing accepts TCP connections at a ``host:port``
    or ``ray://host:port`` address (``auto`` is left to Ray). Without this check
    ``ray.init`` retries an unreachable address for minutes."""
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return
    host = host.strip("[]") or "127.0.0.1"
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}); "
            "check ray_address (the head's host:port, or ray://host:10001 for Ray Client)"
        ) from None


@dataclass
class RayWorker:
    """A worker running as a job on a pool's host actor (a contract WorkerHandle).
    Until the pool hands it a host (``ticket`` filled) the sub-agent waits: it is
    alive, its messages are held, a kill withdraws it. ``pid`` is None (the worker
    may be on another host); :attr:`remote_pid` and :attr:`node_id` say where."""

    pool: HostPool
    ticket: Ticket
    endpoint: RayEndpoint
    channel: Channel[ParentMessage, WorkerMessage]
    spec: WorkerSpec
    token: str  # the shared-workspace marker's ("" for an isolated sub-agent)
    carried: ray_isolation.Outbound | None = None  # an isolated sub-agent's copy
    _where: tuple[str, int | None] | None = None
    _brought: bool = False  # its work was brought back (or that was tried)
    _code: int | None = None
    _ended: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _where_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def host(self) -> Host | None:
        """The pool's host running the worker (None while the sub-agent waits for one)."""
        return self.ticket.host

    @property
    def job(self) -> int:
        """The job's number on its host (0 before it has one)."""
        return self.ticket.job

    @property
    def actor(self) -> Any:
        """The host actor's handle (None while the sub-agent waits for one)."""
        return self.host.actor if self.host is not None else None

    def begin(self) -> None:
        """Wait for the pool's host, then :meth:`attach` and learn where the worker
        runs (a thread's job: see RayLauncher.start)."""
        self.pool.wait(self.ticket)
        if self.attach():
            self.endpoint.note(STARTING)  # no longer waiting (until its first own progress)
            self._placement()  # asked later, a killed actor is mute

    def attach(self) -> bool:
        """Start the worker on the ticket's host and link the channel to it; False
        when the ticket was withdrawn or the pool closed first (the link then ends
        with the reason)."""
        host = self.host
        if host is None:
            self.endpoint.fail(f"no Ray host actor became free: {self.ticket.why}")
            return False
        host.actor.start.remote(self.job, self.spec, self.token, self.carried)
        self.endpoint.attach(host.actor, self.job)
        return True

    def _call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT) -> Any:
        """Call a host method about this job; None when the actor is gone or slow, or
        none was given yet."""
        actor = self.actor
        if actor is None:
            return None
        try:
            return ray.get(getattr(actor, method).remote(self.job, *args), timeout=timeout)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            return None

    def _placement(self) -> tuple[str, int | None]:
        with self._where_lock:
            self.ticket.filled.wait(CALL_TIMEOUT)  # a waiting sub-agent runs nowhere yet
            host = self.host
            if self._where is None and host is not None:
                # An actor ended since (its pool's size, a dead node) answers no more:
                # the node it was placed on is known all the same.
                self._where = self._call("where") or (host.node_id, None)
            return self._where or ("", None)

    @property
    def node_id(self) -> str:
        """The Ray node id the worker runs on ("" when unknown)."""
        return self._placement()[0]

    @property
    def remote_pid(self) -> int | None:
        """The worker's process id on its node."""
        return self._placement()[1]

    @property
    def pid(self) -> int | None:
        """None: the worker's pid is on its node (see remote_pid)."""
        return None

    @property
    def exit_code(self) -> int | None:
        """The worker's exit code once known, else None."""
        return self._code if self._code is not None else self.endpoint.exit_code

    def is_alive(self) -> bool:
        """True while the worker process runs (or the sub-agent waits for a host)."""
        if self._ended or self.endpoint.exit_code is not None:
            return False
        if self.host is None:
            return not self.ticket.filled.is_set()
        code = self._call("join", 0.0, timeout=5.0)
        if code is not None:
            self._code = code
        return code is None and not self._ended

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds (None: 1 hour) for the worker to end."""
        if self._ended or self.exit_code is not None:
            return
        wait = 3600.0 if timeout is None else timeout
        deadline = time.monotonic() + wait
        if not self.ticket.filled.wait(wait) or self.host is None:
            return
        wait = max(0.0, deadline - time.monotonic())
        code = self._call("join", wait, timeout=wait + CALL_TIMEOUT)
        if code is not None:
            self._code = code

    def kill(self, grace: float) -> None:
        """Kill the worker and its marked processes on its node (a sub-agent still
        waiting for a host stops waiting); the actor then goes back to the pool (or
        ends)."""
        self.endpoint.stop()  # ended on purpose: no failure to report, even without a host
        if not self._ended and self.pool.cancel(self.ticket) is not None:
            code = self._call("kill", grace, timeout=grace + CALL_TIMEOUT)
            if code is not None:
                self._code = code
        self.bring_back(None)
        self._end_job()

    def bring_back(self, result: Result | None) -> Result | None:
        """An isolated sub-agent's end: take its packed work from the node and put it in
        place (ray_isolation.bring_back), once; then the node may drop its folder, or
        keeps it when that failed, and ``result`` (returned) and the record say so.
        A shared sub-agent's ``result`` is returned as it is."""
        with self._lock:
            if self.carried is None or self._brought or self.host is None:
                return result
            self._brought = True
        returned = self._call("collect", COLLECT_TIMEOUT, timeout=COLLECT_TIMEOUT + CALL_TIMEOUT)
        why: str | None
        if returned is None:
            why, where = "its Ray node answers no more", f"node {self.host.node_id}"
        else:
            why, where = ray_isolation.bring_back(self.spec, returned), returned.where
            self._call("acknowledge", why is None)
        if why is None:
            return result
        log.warning("agentkit: sub-agent %s: %s (kept in %s)", self.spec.agent_id, why, where)
        return ray_isolation.with_note(self.spec, result, why, where)

    def close(self) -> None:
        """End the job (nothing of it is left on the node) and the channel; idempotent."""
        self.bring_back(None)
        self._end_job()
        self.channel.close()

    def _end_job(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self.endpoint.stop()
        host = self.pool.cancel(self.ticket)
        if host is not None:
            self.pool.give_back(host, self.job)


def actor_options(settings: Settings) -> dict[str, Any]:
    """Ray actor options for a host from Settings (resources, placement)."""
    options: dict[str, Any] = {
        "num_cpus": settings.ray_num_cpus,
        # take (long-poll), deliver, join, kill, where and the pool's live call at once
        "max_concurrency": 16,
        "max_restarts": 0,
        "max_task_retries": 0,
        "scheduling_strategy": settings.ray_scheduling,
    }
    if settings.ray_memory_mb:
        options["memory"] = settings.ray_memory_mb * MiB
    if settings.ray_resources:
        options["resources"] = dict(settings.ray_resources)
    if settings.ray_label_selector:
        options["label_selector"] = dict(settings.ray_label_selector)
    return options


class RayLauncher:
    """Launcher over a Ray cluster (Settings ``subagent_launcher = "ray"``).

    Args:
        settings: the main agent's Settings (``ray_address``, resources, pool).

    Uses the process's shared pool for its placement from the first start (or
    :meth:`prewarm`) until :meth:`close`.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool: HostPool | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _joined(self) -> HostPool:
        """The pool, joined on first use (and the cluster with it). Raises
        ConnectionError when no cluster answers, RuntimeError once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray launcher is closed")
            if self._pool is None:
                s = self.settings
                connect(s.ray_address)
                self._pool = join_pool(
                    actor_options(s),
                    s.subagent_start_method,
                    s.ray_pool_size,
                    s.ray_pool_idle_seconds,
                    keep=s.max_concurrent_subagents,
                )
            return self._pool

    def prewarm(self, wait: float = 0.0) -> int:
        """Join the cluster and start the pool's actors now; they warm up on their
        nodes. ``wait``: seconds to wait for all of them to be warm. Returns how many
        are warm. Raises as :meth:`start` does."""
        pool = self._joined()
        pool.warm_up()
        deadline = time.monotonic() + wait
        while True:
            warm = sum(1 for host in pool.hosts() if host.is_warm())
            if warm >= len(pool.hosts()) or time.monotonic() >= deadline:
                return warm
            time.sleep(0.05)

    def start(self, spec: WorkerSpec) -> RayWorker:
        """Take a host from the pool for ``spec`` and start its worker there
        (asynchronously); return the handle. An isolated sub-agent's copy is packed
        here and sent with the job (ray_isolation; raises IsolationError when it cannot
        be); no marker is written for it. When no warm actor is free the handle
        comes at once all the same, the sub-agent waiting for one (its record and
        status say so; its timeout runs). Joins the cluster on first use (raises
        when none answers: the agent then fails with the reason). The marker is
        written first; a node that cannot read it fails the agent."""
        pool = self._joined()
        carried = None
        if ray_isolation.is_isolated(spec):  # its copy travels: no shared workspace needed
            carried, token = ray_isolation.outbound(spec), ""
        else:
            token = write_marker(spec)
        ticket = pool.request()
        workers: list[RayWorker] = []

        def ending() -> None:
            if ticket.host is not None:
                pool.ending(ticket.host)

        def on_result(result: Result) -> Result:
            brought = workers[0].bring_back(result)  # before the end is reported
            return brought if brought is not None else result

        endpoint = RayEndpoint(on_end=ending, on_result=on_result if carried else None)
        worker = RayWorker(
            pool=pool,
            ticket=ticket,
            endpoint=endpoint,
            channel=Channel(endpoint),
            spec=spec,
            token=token,
            carried=carried,
        )
        workers.append(worker)
        if ticket.filled.is_set():  # a warm actor: the worker starts now
            worker.attach()
            target: Callable[[], object] = worker._placement  # asked later, a killed actor is mute
        else:  # it waits for one, and says so
            note_waiting(spec, endpoint, pool.options)
            target = worker.begin
        threading.Thread(target=target, name="agentkit-ray-host", daemon=True).start()
        return worker

    def close(self) -> None:
        """Stop using the pool (the last launcher to leave ends it); idempotent."""
        with self._lock:
            pool, self._pool, self._closed = self._pool, None, True
        if pool is not None:
            pool.leave()
