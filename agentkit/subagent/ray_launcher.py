"""Starting workers on a Ray cluster: the Ray Launcher.

One job: :class:`RayLauncher` implements the contract's Launcher. Each sub-agent
gets one non-detached host actor (:class:`SubAgentHost`) placed by Ray with the
Settings' resources (``ray_num_cpus``, ``ray_memory_mb``, ``ray_resources``,
``ray_label_selector``, ``ray_scheduling``). On its node the host checks that the
workspace is shared (:func:`check_shared_workspace`), then starts the ordinary
worker process there with the local launcher (forkserver), and relays its pipe to
the driver over the Ray channel (agentkit.subagent.ray_channel).

Why a host process and not the worker inside the actor: Ray ends a dead owner's
actors by force (no handler runs), so a worker living in the actor could neither
record its end nor kill the commands it started. Behind a pipe it sees the host
die as EOF, exactly as a local worker sees its parent die, and then records
``terminated`` and kills everything carrying its mark (agentkit.proctree) on its
own node. Timeout and terminate run that same kill on the worker's node through
the host (:meth:`SubAgentHost.kill`) before the actor is killed.

Requirements: agentkit (same version) installed on every node, and the workspace
on storage every node mounts at the same path (README: "Running on a Ray
cluster"). The endpoint's API key travels to the worker's node inside the spec,
as it travels over the pipe locally; use Ray's TLS on networks you do not trust.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from agentkit.settings import MiB, Settings
from agentkit.subagent.contract import (
    Channel,
    ChannelClosed,
    ParentMessage,
    WorkerMessage,
    WorkerSpec,
)
from agentkit.subagent.ray_channel import Mailbox, RayEndpoint, failed_result
from agentkit.subagent.record import RECORD_DIR

MARKER_NAME = "shared-workspace-check"
"""File the main process writes in ``<deliverables>/.subagent/`` for the node to read."""
NAMESPACE = "agentkit"
# Seconds the driver waits for host calls that should answer at once.
CALL_TIMEOUT = 30.0

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


class SubAgentHost:
    """The Ray actor beside one worker process on its node (one per sub-agent).

    Args:
        spec: the worker's spec. token: the shared-workspace marker's token.
    Construction never raises: a failed check or start becomes a ``failed`` Result.
    """

    def __init__(self, spec: WorkerSpec, token: str) -> None:
        from agentkit.subagent.local_launcher import LocalLauncher, LocalWorker

        self.node_id = ray.get_runtime_context().get_node_id()
        self.local: LocalWorker | None = None
        self.mailbox = Mailbox()
        why = check_shared_workspace(spec, token)
        if why is None:
            try:
                method = spec.settings.get("subagent_start_method", "forkserver")
                self.local = LocalLauncher(method).start(spec)
            except Exception as exc:
                why = f"could not start the worker on the Ray node: {exc}"
        if self.local is None:
            self.mailbox.put(failed_result(why or "the worker did not start"))
            self.mailbox.close(None)
            return
        self.mailbox.forward = self.local.channel.send
        threading.Thread(target=self._relay, name="agentkit-relay", daemon=True).start()

    def _relay(self) -> None:
        assert self.local is not None
        while True:
            try:
                message = self.local.channel.receive()
            except ChannelClosed:
                break
            self.mailbox.put(message)
        self.local.join(5)
        self.mailbox.close(self.local.exit_code)

    def take(self, after: int, timeout: float) -> tuple[list[tuple[int, Any]], bool, int | None]:
        """Worker messages after ``after`` (see Mailbox.take)."""
        return self.mailbox.take(after, timeout)

    def deliver(self, seq: int, message: Any) -> None:
        """Parent message number ``seq`` for the worker (see Mailbox.deliver)."""
        self.mailbox.deliver(seq, message)

    def where(self) -> tuple[str, int | None]:
        """``(node id, worker pid on that node or None)``."""
        return self.node_id, self.local.pid if self.local else None

    def join(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the worker; return its exit code or None."""
        if self.local is None:
            return None
        self.local.join(timeout)
        return self.local.exit_code

    def kill(self, grace: float) -> int | None:
        """Kill the worker and every process carrying its mark on this node (SIGTERM,
        ``grace`` seconds, SIGKILL); return its exit code."""
        if self.local is None:
            return None
        self.local.kill(grace)
        self.local.join(1)
        return self.local.exit_code


@dataclass
class RayWorker:
    """A worker behind a host actor (a contract WorkerHandle). ``pid`` is None (the
    worker may be on another host); :attr:`remote_pid` and :attr:`node_id` say where."""

    actor: Any
    endpoint: RayEndpoint
    channel: Channel[ParentMessage, WorkerMessage]
    _where: tuple[str, int | None] | None = None
    _code: int | None = None
    _ended: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _where_lock: threading.Lock = field(default_factory=threading.Lock)

    def _call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT) -> Any:
        """Call a host method; None when the actor is gone or slow."""
        try:
            return ray.get(getattr(self.actor, method).remote(*args), timeout=timeout)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            return None

    def _placement(self) -> tuple[str, int | None]:
        with self._where_lock:
            if self._where is None:
                self._where = self._call("where") or ("", None)
            return self._where

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
        """True while the worker process runs."""
        if self._ended or self.endpoint.exit_code is not None:
            return False
        code = self._call("join", 0.0, timeout=5.0)
        if code is not None:
            self._code = code
        return code is None and not self._ended

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds (None: 1 hour) for the worker to end."""
        if self._ended or self.exit_code is not None:
            return
        wait = 3600.0 if timeout is None else timeout
        code = self._call("join", wait, timeout=wait + CALL_TIMEOUT)
        if code is not None:
            self._code = code

    def kill(self, grace: float) -> None:
        """Kill the worker and its marked processes on its node, then the actor."""
        if not self._ended:
            code = self._call("kill", grace, timeout=grace + CALL_TIMEOUT)
            if code is not None:
                self._code = code
        self._end_actor()

    def close(self) -> None:
        """End the actor (it is never left behind) and the channel; idempotent."""
        self._end_actor()
        self.channel.close()

    def _end_actor(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self.endpoint.stop()
        with contextlib.suppress(Exception):
            ray.kill(self.actor, no_restart=True)


def actor_options(settings: Settings) -> dict[str, Any]:
    """Ray actor options for a host from Settings (resources, placement)."""
    options: dict[str, Any] = {
        "num_cpus": settings.ray_num_cpus,
        "max_concurrency": 8,  # take (long-poll), deliver, join, kill at once
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
        settings: the main agent's Settings (``ray_address`` and resources).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._host: Any = None

    def start(self, spec: WorkerSpec) -> RayWorker:
        """Place a host actor for ``spec`` (asynchronously) and return its handle.
        Joins the cluster on first use (raises when none answers: the agent then
        fails with the reason). The marker is written first; a node that cannot
        read it fails the agent."""
        if self._host is None:
            connect(self.settings.ray_address)
            self._host = ray.remote(SubAgentHost).options(**actor_options(self.settings))
        token = write_marker(spec)
        actor = self._host.remote(spec, token)
        endpoint = RayEndpoint(actor)
        worker = RayWorker(actor=actor, endpoint=endpoint, channel=Channel(endpoint))
        # Learn where it runs while the actor lives (asked later, a killed actor is mute).
        threading.Thread(target=worker._placement, name="agentkit-ray-where", daemon=True).start()
        return worker
