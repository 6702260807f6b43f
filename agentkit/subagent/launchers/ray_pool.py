"""Warm host actors on the Ray cluster, reused from one sub-agent to the next.

One job: :class:`HostPool` keeps the :class:`~agentkit.subagent.launchers.ray_host.SubAgentHost`
actors of one placement (the Settings' resources, labels and scheduling) and hands
each to one sub-agent at a time. Starting an actor costs a Ray worker process and a
worker process server with agentkit's modules preloaded (about 2 s of CPU); a warm
one starts a sub-agent in tens of milliseconds.

- Size (``Settings.ray_pool_size``): that many actors are started when the pool is
  first used (placed by Ray as every actor is: SPREAD over the nodes by default);
  when all are busy another starts for the sub-agent that needs it. An actor whose
  sub-agent ended stays warm while fewer than ``keep`` are idle: the larger of the
  size and ``Settings.max_concurrent_subagents``, so a second batch of as many
  sub-agents as ran at once (the seed's limit: five) finds them all warm. 0: one
  fresh actor per sub-agent, ended with it.
- Idle time (``Settings.ray_pool_idle_seconds``): an actor unused that long ends.
- A sub-agent asks with a :class:`Ticket` (:meth:`HostPool.request`) and gets the
  first warm idle actor (on the node running the fewest of this pool's sub-agents):
  at once, when one finishes warming up, or when one is released. It is never bound
  to an actor not yet placed, so one the cluster cannot place (no CPUs left) never
  holds it while another is idle. A new actor starts for a waiting sub-agent unless
  one is starting for it, or one being released (free in tens of milliseconds) is
  there to wait for, up to RELEASE_WAIT s: a new actor costs about 2 s of CPU on a
  node whose sub-agents run (benchmarks/ray_launcher.py).
- Room: while a sub-agent waits long and the cluster lacks the resources for its
  actor, idle actors of the process's other pools give way (end), one per waiter.
- An actor that dies (its node, Ray) is seen at once (each holds a ``live`` call
  open), dropped and replaced; a sub-agent it was running fails through its
  channel, naming the reason (agentkit.subagent.launchers.ray_channel).
- Ownership: every pool is shared by the launchers that use it (:func:`join_pool`,
  :meth:`HostPool.leave`); when the last one leaves (its session or agent closed),
  the idle actors end at once, the busy ones when their sub-agent ends, and
  waiting sub-agents are told the pool closed. The actors are not detached: Ray
  ends them with the process anyway.
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
# How often the pool's watcher looks for dead, warm and long-idle actors (seconds, at most).
WATCH_EVERY = 1.0
# Seconds a sub-agent waits for an actor being released before a new one is started.
RELEASE_WAIT = 5.0
# Seconds between a waiting sub-agent's looks at the actors warming up.
WAIT_STEP = 0.2
# Seconds a sub-agent waits for an actor before other pools' idle actors give way
# (when the cluster lacks room): an actor starting normally is warm well before.
GIVE_WAY_AFTER = 10.0


@dataclass(eq=False)
class Host:
    """One actor of a pool (driver side)."""

    actor: Any
    ready: Any  # the ObjectRef of actor.ready(): done once the actor is warm
    life: Any  # the ObjectRef of actor.live(): ready only when the actor is gone
    node_id: str = ""
    failed: bool = False  # its construction failed (it is dropped once seen gone)
    jobs: int = 0  # job numbers handed out on this actor
    busy: bool = False
    releasing: bool = False  # busy, its sub-agent ended: free once its job is released
    idle_since: float = field(default_factory=time.monotonic)

    def is_warm(self) -> bool:
        """True once the actor's construction finished (its server preloaded)."""
        if not self.node_id and not self.failed:
            done, _ = ray.wait([self.ready], timeout=0)
            if done:
                try:
                    self.node_id = ray.get(done[0], timeout=1)
                except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
                    self.failed = True
        return bool(self.node_id)


@dataclass(eq=False)
class Ticket:
    """One sub-agent's request for an actor: ``filled`` is set once it has ``host`` and
    ``job`` (its job number there), or once it was cancelled (``host`` None: the
    pool closed or the sub-agent ended first; ``why`` says which)."""

    since: float = field(default_factory=time.monotonic)
    host: Host | None = None
    job: int = 0
    why: str = ""
    filled: threading.Event = field(default_factory=threading.Event)


class HostPool:
    """The warm host actors of one placement (see the module docstring).

    Args:
        options: Ray actor options for every host (agentkit.subagent.launchers.ray.actor_options).
        start_method: ``Settings.subagent_start_method`` for the workers.
        size: ``Settings.ray_pool_size``; idle_seconds: ``Settings.ray_pool_idle_seconds``.
        keep: idle actors kept warm at most (``Settings.max_concurrent_subagents``;
            never fewer than ``size``; none with size 0).

    Counters (read them under no lock; they only grow): ``started`` actors started,
    ``waited`` sub-agents that found no warm idle actor when they asked.
    """

    def __init__(
        self,
        options: dict[str, Any],
        start_method: str,
        size: int,
        idle_seconds: float,
        keep: int = 0,
    ) -> None:
        self.options = options
        self.start_method = start_method
        self.size = size
        self.idle_seconds = idle_seconds
        self.keep = max(size, keep) if size > 0 else 0
        self.key = pool_key(options, start_method, size, idle_seconds, keep)
        self.users = 0  # launchers using the pool (under the registry's lock)
        self.started = 0
        self.waited = 0
        self._hosts: list[Host] = []
        self._waiters: list[Ticket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._watcher: threading.Thread | None = None
        self._class = ray.remote(SubAgentHost).options(**options)

    # ------------------------------------------------------------ hosts
    def _new_host(self) -> Host:
        """Start one actor (asynchronously) and add it to the pool; under the lock."""
        actor: Any = self._class.remote(self.start_method)
        host = Host(actor=actor, ready=actor.ready.remote(), life=actor.live.remote())
        self._hosts.append(host)
        self.started += 1
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

    def request(self) -> Ticket:
        """Ask for a host for one sub-agent: the Ticket is filled at once when a warm
        actor is idle, else as soon as one is (see the module docstring); cancel it
        with :meth:`cancel`. Raises RuntimeError once the pool was closed."""
        ticket = Ticket()
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray host pool is closed")
            if not self._hosts and self.size > 1:  # first use: the rest once this one is up
                first = self._new_host()
                threading.Thread(
                    target=self._warm_after, args=(first,), name="agentkit-ray-warm", daemon=True
                ).start()
            self._waiters.append(ticket)
            self._serve()
            if not ticket.filled.is_set():
                self.waited += 1
        return ticket

    def wait(self, ticket: Ticket) -> None:
        """Block until ``ticket`` is filled (or cancelled), watching the actors still
        warming up meanwhile, so the sub-agent takes one the moment it is warm (the
        pool's watcher sees it too, but only every WATCH_EVERY s when it is new)."""
        while not ticket.filled.is_set():
            with self._lock:
                refs = [h.ready for h in self._hosts if not h.node_id and not h.failed]
            done = ray.wait(refs, num_returns=1, timeout=WAIT_STEP)[0] if refs else []
            if done:
                with self._lock:
                    self._serve()  # finds it warm (is_warm)
            else:
                ticket.filled.wait(0 if refs else WAIT_STEP)

    def cancel(self, ticket: Ticket, why: str = "the sub-agent ended") -> Host | None:
        """Withdraw ``ticket``: returns its host when it was filled meanwhile (give it
        back with :meth:`give_back`), else None (it will never be filled)."""
        with self._lock:
            if ticket in self._waiters:
                self._waiters.remove(ticket)
                ticket.why = why
                ticket.filled.set()
            return ticket.host

    def _serve(self) -> None:
        """Hand warm idle actors to the waiting sub-agents, oldest first, and start
        actors for those nothing is starting or being released for; under the lock."""
        while self._waiters:
            host = self._pick()
            if host is None:
                break
            ticket = self._waiters.pop(0)
            host.busy, host.releasing = True, False
            host.jobs += 1
            ticket.host, ticket.job = host, host.jobs
            ticket.filled.set()
        if not self._waiters or self._closed:
            return
        now = time.monotonic()
        starting = sum(1 for h in self._hosts if not h.busy and not h.node_id and not h.failed)
        releasing = sum(1 for h in self._hosts if h.releasing) if self.keep else 0
        young = sum(1 for t in self._waiters if now - t.since < RELEASE_WAIT)
        for _ in range(len(self._waiters) - starting - min(releasing, young)):
            self._new_host()

    def _pick(self) -> Host | None:
        """A warm idle actor on the node running the fewest of this pool's
        sub-agents, or None; under the lock."""
        warm = [h for h in self._hosts if not h.busy and h.is_warm()]
        if not warm:
            return None
        load: dict[str, int] = {}
        for h in self._hosts:
            if h.busy:
                load[h.node_id] = load.get(h.node_id, 0) + 1
        return min(warm, key=lambda h: load.get(h.node_id, 0))

    def ending(self, host: Host) -> None:
        """``host``'s sub-agent gave its result (or its link ended): the actor is
        free once :meth:`give_back` released the job, so a sub-agent starting now
        waits for it rather than for a new actor (request)."""
        with self._lock:
            if host.busy:
                host.releasing = True

    def give_back(self, host: Host, job: int) -> None:
        """The sub-agent of ``host``'s job ``job`` ended: release the job on the actor
        (its leftovers are killed there) and hand the actor to a waiting sub-agent or
        keep it idle, or end it (not clean, too many idle, pool closed). Blocks up to
        RELEASE_TIMEOUT s."""
        with self._lock:
            host.releasing = True  # a sub-agent starting now waits for it (request)
        try:
            clean = bool(ray.get(host.actor.release.remote(job), timeout=RELEASE_TIMEOUT))
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            clean = False
        with self._lock:
            host.releasing = False
            if clean and self.keep and not self._closed and host in self._hosts:
                host.busy, host.idle_since = False, time.monotonic()
                self._serve()  # a waiting sub-agent takes it at once
                if not host.busy and sum(1 for h in self._hosts if not h.busy) > self.keep:
                    self._drop(host)
            else:
                self._drop(host)
                self._serve()  # whoever waited for it gets another

    def _drop(self, host: Host) -> None:
        """End ``host``'s actor and forget it; under the lock."""
        if host in self._hosts:
            self._hosts.remove(host)
        with contextlib.suppress(Exception):
            ray.kill(host.actor, no_restart=True)

    def leave(self) -> None:
        """One launcher stops using the pool; the last one closes it (idle actors end
        now, busy ones when their sub-agent ends, waiting sub-agents are told)."""
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
            for ticket in self._waiters:
                ticket.why = "the Ray host pool was closed"
                ticket.filled.set()
            self._waiters.clear()

    # ---------------------------------------------------------- watching
    def _watch(self) -> None:
        """Drop dead actors (replacing them), hand actors that finished warming up to
        waiting sub-agents, end long-idle ones, make room for sub-agents that waited
        long; ends with the pool's last actor."""
        while True:
            with self._lock:
                if not self._hosts:
                    self._watcher = None
                    return
                refs = [h.life for h in self._hosts]
                refs += [h.ready for h in self._hosts if not h.node_id and not h.failed]
            done, _ = ray.wait(refs, num_returns=1, timeout=WATCH_EVERY)
            now = time.monotonic()
            with self._lock:
                for ref in done:
                    self._seen(ref)
                for host in [h for h in self._hosts if not h.busy]:
                    # one still starting for a waiting sub-agent is not idle
                    waited_for = not host.node_id and self._waiters
                    if now - host.idle_since > self.idle_seconds and not waited_for:
                        self._drop(host)
                self._serve()
                stuck = sum(1 for t in self._waiters if now - t.since > GIVE_WAY_AFTER)
            if stuck:
                _make_room(self, stuck)

    def _seen(self, ref: Any) -> None:
        """A watched call answered: an actor is gone (dropped, replaced up to the
        size) or warm; under the lock."""
        gone = next((h for h in self._hosts if h.life == ref), None)
        if gone is not None:
            log.info("agentkit: a Ray host actor of the pool is gone; replacing it")
            self._drop(gone)
            if not self._closed and len(self._hosts) < self.size:
                self._new_host()
            return
        warm = next((h for h in self._hosts if h.ready == ref), None)
        if warm is not None:
            warm.is_warm()

    def give_way(self, count: int) -> int:
        """End up to ``count`` idle warm actors (another pool's sub-agents wait for
        room on the cluster); returns how many ended."""
        with self._lock:
            idle = [h for h in self._hosts if not h.busy and h.node_id][:count]
            for host in idle:
                self._drop(host)
            return len(idle)

    def hosts(self) -> list[Host]:
        """The pool's actors now (a copy)."""
        with self._lock:
            return list(self._hosts)


_pools: dict[tuple[Any, ...], HostPool] = {}
_pools_lock = threading.Lock()


def has_room(options: dict[str, Any]) -> bool:
    """True when the cluster has the resources for one more actor with ``options``
    free now (CPUs, memory, custom resources; summed over the nodes, so a rough
    answer), or when Ray cannot say."""
    try:
        free = ray.available_resources()
    except Exception:  # Ray cannot say: nothing gives way on a guess
        return True
    need = {"CPU": float(options.get("num_cpus") or 0), "memory": options.get("memory") or 0}
    need.update(options.get("resources") or {})
    return all(free.get(name, 0.0) >= amount for name, amount in need.items() if amount)


def _make_room(asking: HostPool, waiting: int) -> None:
    """``waiting`` sub-agents of ``asking`` waited long: when the cluster lacks room
    for their actors, idle actors of the process's other pools give way."""
    if has_room(asking.options):
        return
    with _pools_lock:
        others = [pool for pool in _pools.values() if pool is not asking]
    for pool in others:
        waiting -= pool.give_way(waiting)
        if waiting <= 0:
            return


def pool_key(
    options: dict[str, Any], start_method: str, size: int, idle_seconds: float, keep: int = 0
) -> tuple[Any, ...]:
    """What makes two launchers share a pool: the same actor options and pool settings."""
    return (repr(sorted(options.items())), start_method, size, idle_seconds, keep)


def join_pool(
    options: dict[str, Any], start_method: str, size: int, idle_seconds: float, keep: int = 0
) -> HostPool:
    """Return the open pool for these actor options and settings (``keep``: see
    HostPool), made on first use, counting the caller as one more user (call
    :meth:`HostPool.leave` once done)."""
    key = pool_key(options, start_method, size, idle_seconds, keep)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = HostPool(options, start_method, size, idle_seconds, keep)
        pool.users += 1
        return pool
