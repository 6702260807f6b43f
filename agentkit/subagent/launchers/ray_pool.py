"""Warm host actors on the Ray cluster, reused from one sub-agent to the next.

One job: :class:`HostPool` keeps the :class:`~agentkit.subagent.launchers.ray_host.SubAgentHost`
actors of one placement (the Settings' resources, labels and scheduling) and hands
each to one sub-agent at a time. Starting an actor costs a Ray worker process and a
worker process server with agentkit's modules preloaded (about 2 s of CPU); a warm
one starts a sub-agent in tens of milliseconds.

- Size (``Settings.ray_pool_size``): that many actors are started when the pool is
  first used (placed by Ray as every actor is: SPREAD over the nodes by default);
  when all are busy another starts for the sub-agent that needs it; an actor whose
  sub-agent ended goes back to the pool, unless the pool already holds that many
  idle ones (then it ends). 0: one fresh actor per sub-agent, ended with it.
- Idle time (``Settings.ray_pool_idle_seconds``): an actor unused that long ends.
- A sub-agent gets an idle warm actor on the node running the fewest of this pool's
  sub-agents, else one still warming up, else one being released (its sub-agent just
  ended: it is free in tens of milliseconds; waited for up to RELEASE_WAIT s), else a
  new one. Waiting beats starting: a new actor costs about 2 s of CPU on a node
  whose sub-agents are running (measured in benchmarks/ray_launcher.py).
- An actor that dies (its node, Ray) is seen at once (each holds a ``live`` call
  open), dropped and replaced; a sub-agent it was running fails through its
  channel, naming the reason (agentkit.subagent.launchers.ray_channel).
- Ownership: every pool is shared by the launchers that use it (:func:`join_pool`,
  :meth:`HostPool.leave`); when the last one leaves (its session or agent closed),
  the idle actors end at once and the busy ones when their sub-agent ends. The
  actors are not detached: Ray ends them with the process anyway.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from agentkit.subagent.launchers.ray_host import SubAgentHost

log = logging.getLogger("agentkit")
# Seconds the driver waits for a host to release a job (kill its leftovers).
RELEASE_TIMEOUT = 30.0
# How often the pool's watcher looks for dead and long-idle actors (seconds, at most).
WATCH_EVERY = 1.0
# Seconds a sub-agent waits for an actor being released before a new one is started.
RELEASE_WAIT = 5.0


@dataclass(eq=False)
class Host:
    """One actor of a pool (driver side)."""

    actor: Any
    ready: Any  # the ObjectRef of actor.ready(): done once the actor is warm
    life: Any  # the ObjectRef of actor.live(): ready only when the actor is gone
    node_id: str = ""
    jobs: int = 0  # job numbers handed out on this actor
    busy: bool = False
    releasing: bool = False  # busy, its sub-agent ended: free once its job is released
    idle_since: float = field(default_factory=time.monotonic)

    def is_warm(self) -> bool:
        """True once the actor's construction finished (its server preloaded)."""
        if not self.node_id:
            done, _ = ray.wait([self.ready], timeout=0)
            if done:
                try:
                    self.node_id = ray.get(done[0], timeout=1)
                except ray.exceptions.RayError:
                    return False
        return bool(self.node_id)


class HostPool:
    """The warm host actors of one placement (see the module docstring).

    Args:
        options: Ray actor options for every host (agentkit.subagent.launchers.ray.actor_options).
        start_method: ``Settings.subagent_start_method`` for the workers.
        size: ``Settings.ray_pool_size``; idle_seconds: ``Settings.ray_pool_idle_seconds``.
    """

    def __init__(
        self, options: dict[str, Any], start_method: str, size: int, idle_seconds: float
    ) -> None:
        self.options = options
        self.start_method = start_method
        self.size = size
        self.idle_seconds = idle_seconds
        self.key = pool_key(options, start_method, size, idle_seconds)
        self.users = 0  # launchers using the pool (under the registry's lock)
        self._hosts: list[Host] = []
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # an actor became idle or went
        self._closed = False
        self._watcher: threading.Thread | None = None
        self._class = ray.remote(SubAgentHost).options(**options)

    # ------------------------------------------------------------ hosts
    def _new_host(self) -> Host:
        """Start one actor (asynchronously) and add it to the pool; under the lock."""
        actor: Any = self._class.remote(self.start_method)
        host = Host(actor=actor, ready=actor.ready.remote(), life=actor.live.remote())
        self._hosts.append(host)
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch, name="agentkit-ray-pool", daemon=True
            )
            self._watcher.start()
        return host

    def warm_up(self) -> list[Host]:
        """Start actors until the pool holds ``size`` of them; returns the new ones."""
        with self._lock:
            if self._closed:
                return []
            return [self._new_host() for _ in range(max(0, self.size - len(self._hosts)))]

    def _warm_after(self, first: Host) -> None:
        """Start the rest of the pool once ``first`` is warm: starting them all at once
        would slow the first sub-agent down (they compete for the node's CPU)."""
        with contextlib.suppress(ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            ray.wait([first.ready], timeout=RELEASE_TIMEOUT * 4)
        self.warm_up()

    def acquire(self) -> tuple[Host, int]:
        """Take a host for one sub-agent: ``(host, job number)``. Prefers a warm idle
        actor on the node running the fewest of this pool's sub-agents, then one
        warming up, then one being released (waits up to RELEASE_WAIT s), then a new
        one. Raises RuntimeError once the pool was closed."""
        deadline = time.monotonic() + RELEASE_WAIT
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray host pool is closed")
            if not self._hosts and self.size > 1:  # first use: the rest once this one is up
                first = self._new_host()
                threading.Thread(
                    target=self._warm_after, args=(first,), name="agentkit-ray-warm", daemon=True
                ).start()
            host = self._pick()
            # (size 0 keeps no actor: a released one ends, so it is not waited for)
            while host is None and self.size > 0 and any(h.releasing for h in self._hosts):
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    break
                self._freed.wait(left)
                host = self._pick()
            if self._closed:
                raise RuntimeError("the Ray host pool is closed")
            if host is None:
                host = self._new_host()
            host.busy = True
            host.jobs += 1
            return host, host.jobs

    def _pick(self) -> Host | None:
        """An idle actor (warm ones first, on the least loaded node), or None; under
        the lock."""
        idle = [h for h in self._hosts if not h.busy]
        warm = [h for h in idle if h.is_warm()]
        if not warm:
            return idle[0] if idle else None
        load: dict[str, int] = {}
        for h in self._hosts:
            if h.busy:
                load[h.node_id] = load.get(h.node_id, 0) + 1
        return min(warm, key=lambda h: load.get(h.node_id, 0))

    def ending(self, host: Host) -> None:
        """``host``'s sub-agent gave its result (or its link ended): the actor is
        free once :meth:`give_back` released the job, so a sub-agent starting now
        waits for it rather than for a new actor (acquire)."""
        with self._lock:
            if host.busy:
                host.releasing = True

    def give_back(self, host: Host, job: int) -> None:
        """The sub-agent of ``host``'s job ``job`` ended: release the job on the actor
        (its leftovers are killed there) and keep the actor for the next sub-agent,
        or end it (not clean, pool full or closed). Blocks up to RELEASE_TIMEOUT s."""
        with self._lock:
            host.releasing = True  # a sub-agent starting now waits for it (acquire)
        try:
            clean = bool(ray.get(host.actor.release.remote(job), timeout=RELEASE_TIMEOUT))
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            clean = False
        with self._lock:
            idle = sum(1 for h in self._hosts if not h.busy)
            keep = clean and not self._closed and idle < self.size and host in self._hosts
            host.releasing = False
            if keep:
                host.busy, host.idle_since = False, time.monotonic()
            else:
                self._drop(host)
            self._freed.notify_all()

    def _drop(self, host: Host) -> None:
        """End ``host``'s actor and forget it; under the lock."""
        if host in self._hosts:
            self._hosts.remove(host)
        with contextlib.suppress(Exception):
            ray.kill(host.actor, no_restart=True)

    def leave(self) -> None:
        """One launcher stops using the pool; the last one closes it (idle actors end
        now, busy ones when their sub-agent ends)."""
        with _pools_lock:
            self.users -= 1
            if self.users > 0:
                return
            if _pools.get(self.key) is self:
                del _pools[self.key]
        with self._lock:
            self._closed = True
            for host in [h for h in self._hosts if not h.busy]:
                self._drop(host)
            self._freed.notify_all()

    # ---------------------------------------------------------- watching
    def _watch(self) -> None:
        """Drop dead actors (and start replacements) and long-idle ones; ends with the
        pool's last actor."""
        while True:
            with self._lock:
                lives = {id(h.life): h for h in self._hosts}
                if not lives:
                    self._watcher = None
                    return
            refs = [h.life for h in lives.values()]
            done, _ = ray.wait(refs, num_returns=1, timeout=WATCH_EVERY)
            now = time.monotonic()
            with self._lock:
                for ref in done:
                    host = next((h for h in self._hosts if h.life is ref), None)
                    if host is None:
                        continue
                    log.info("agentkit: a Ray host actor of the pool is gone; replacing it")
                    self._drop(host)
                    if not self._closed and len(self._hosts) < self.size:
                        self._new_host()
                for host in [h for h in self._hosts if not h.busy]:
                    if now - host.idle_since > self.idle_seconds:
                        self._drop(host)

    def hosts(self) -> list[Host]:
        """The pool's actors now (a copy)."""
        with self._lock:
            return list(self._hosts)


_pools: dict[tuple[Any, ...], HostPool] = {}
_pools_lock = threading.Lock()


def pool_key(
    options: dict[str, Any], start_method: str, size: int, idle_seconds: float
) -> tuple[Any, ...]:
    """What makes two launchers share a pool: the same actor options and pool settings."""
    return (repr(sorted(options.items())), start_method, size, idle_seconds)


def join_pool(
    options: dict[str, Any], start_method: str, size: int, idle_seconds: float
) -> HostPool:
    """Return the open pool for these actor options and settings, made on first use,
    counting the caller as one more user (call :meth:`HostPool.leave` once done)."""
    key = pool_key(options, start_method, size, idle_seconds)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = HostPool(options, start_method, size, idle_seconds)
        pool.users += 1
        return pool
