"""What a command may use: processes, memory and CPU (docs/architecture.md §6).

Settings: ``command_max_processes``, ``command_max_memory_mb``, ``command_cpu_weight``.
Each limit is enforced by the strongest mechanism this machine offers, found once per
process (:func:`plan`) and said in one log line at the first command:

* **A cgroup per command** where the agent may create cgroups: cgroup v2 delegated to
  it (its own cgroup, or its parent, with the controller enabled for children), or,
  for the process count only, the cgroup v1 ``pids`` hierarchy (writable by root).
  ``pids.max`` bounds every process and thread of the command together,
  ``memory.max`` (with ``memory.swap.max = 0``) its resident memory together (the
  kernel OOM-kills inside the group when it is full), ``cpu.weight`` its CPU share
  against the agent's 100. The command enters its group before anything of it runs:
  the launch starts with a tiny ``sh`` that writes itself into ``cgroup.procs`` and
  execs the rest (about 1 ms). The group is removed when the command's processes are
  gone (background services keep it until they end); one left by a killed agent is
  removed by the next agent's :func:`plan`.
* **rlimits** by ``prlimit`` elsewhere: ``RLIMIT_NPROC`` set *inside* the command's
  user namespace, where the kernel counts the user's processes of that namespace, i.e.
  the command's own (outside one it would count every process of the user, so it is
  not set there; and it never binds root, who is exempt); ``RLIMIT_AS``, the address
  space of each process, only when ``command_max_memory_mb`` is set (a default one
  would break programs that reserve large ranges: sanitizers, wasm runtimes, the JVM).

Not used, and why: the cgroup v1 ``memory`` and ``cpu`` controllers (v1 is legacy:
agentkit uses it only for what nothing else gives root, the process count);
``RLIMIT_CPU`` (CPU seconds per process bound no group, the wall-clock timeout already
bounds a command, and it would kill long-lived background services); ``nice`` (each
command is its own session, so where the kernel's autogroup is on, the command already
shares the CPU with the agent as one group). Outside the sandbox a command running as
root can lift its own rlimits (and, where it can write them, its cgroup files).

Public API: :class:`Plan`, :func:`plan`, :class:`Bounds`, :func:`prepare`,
:func:`limit_notes`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.process import cgroups

if TYPE_CHECKING:
    from agentkit.settings import Settings

__all__ = ["Bounds", "Plan", "limit_notes", "plan", "prepare"]

log = logging.getLogger(__name__)

# The launch's own processes in a command's group or user namespace (the cgroup
# entry sh / setpriv / unshare or bwrap, the namespace's init and its watcher, the
# loopback bridge): added to command_max_processes so that it counts the command's own.
_OVERHEAD = 4


@dataclass(frozen=True)
class Plan:
    """How this process limits commands (found once, :func:`plan`).

    Attributes:
        groups: per controller (``pids``, ``memory``, ``cpu``), the folder a command's
            cgroup is created in.
        prlimit: the ``prlimit`` program, or None when missing.
        root: the agent runs as root (RLIMIT_NPROC does not bind it).
    """

    groups: dict[str, Path]
    prlimit: str | None
    root: bool


@dataclass
class Bounds:
    """One command's limits, as launched.

    Attributes:
        enter: argv head that moves the launch into its cgroups (empty: none).
        rlimits: ``prlimit --…= --`` to place inside the command's user namespace
            (empty: none).
        groups: the command's cgroup folders.
        processes: the process limit in force and by what (``cgroup``/``RLIMIT_NPROC``),
            or None.
        memory_mb: the memory limit in force and by what (``cgroup``/``RLIMIT_AS``), or None.
    """

    enter: list[str] = field(default_factory=list)
    rlimits: list[str] = field(default_factory=list)
    groups: list[Path] = field(default_factory=list)
    processes: tuple[int, str] | None = None
    memory_mb: tuple[int, str] | None = None

    def events(self) -> dict[str, int]:
        """Counters of the command's cgroups: ``forks_refused`` (pids.events ``max``) and
        ``oom_kills`` (memory.events ``oom_kill``); empty without cgroups."""
        found: dict[str, int] = {}
        for group in self.groups:
            for name, key, out in (("pids.events", "max", "forks_refused"),
                                   ("memory.events", "oom_kill", "oom_kills")):  # fmt: skip
                with contextlib.suppress(OSError, ValueError):
                    for line in (group / name).read_text().splitlines():
                        word, _, value = line.partition(" ")
                        if word == key:
                            found[out] = found.get(out, 0) + int(value)
        return found

    def close(self) -> None:
        """Remove the command's cgroups, now or, while processes remain (background
        services, a namespace still ending), as soon as they are gone. Idempotent."""
        groups, self.groups = self.groups, []
        for group in groups:
            cgroups.remove_later(group)


_plan: Plan | None = None
_plan_lock = threading.Lock()


def plan() -> Plan:
    """Return how this process limits commands: probed once (a cgroup is created, entered
    by a ``true`` and removed: a few ms), stale groups of dead agents removed."""
    global _plan
    with _plan_lock:
        if _plan is None:
            groups: dict[str, Path] = {}
            tried: dict[Path, bool] = {}
            for controller, base in cgroups.candidates():
                if base not in tried:
                    tried[base] = cgroups.usable(base)
                if controller not in groups and tried[base]:
                    groups[controller] = base
            for base in set(groups.values()):
                cgroups.sweep(base)
            _plan = Plan(groups, shutil.which("prlimit"), os.geteuid() == 0)
        return _plan


def prepare(settings: Settings, user_namespace: bool) -> Bounds | None:
    """Create the cgroup (if any) of one command and return its :class:`Bounds`, or None
    when no limit applies. ``user_namespace``: the command runs in a user namespace of
    its own (RLIMIT_NPROC binds there only). Logs the limits in force once per process.
    Raises OSError when a cgroup that worked cannot be created now."""
    how = plan()
    bounds = Bounds()
    processes = settings.command_max_processes
    memory = settings.command_max_memory_mb
    values: dict[str, str] = {}
    if processes and "pids" in how.groups:
        values["pids"] = str(processes + _OVERHEAD)
        bounds.processes = (processes, "cgroup")
    memory_mb = _half_of_memory_mb() if memory is None else memory
    if memory_mb and "memory" in how.groups:
        values["memory"] = str(memory_mb * 1024 * 1024)
        bounds.memory_mb = (memory_mb, "cgroup")
    if settings.command_cpu_weight != 100 and "cpu" in how.groups:
        values["cpu"] = str(settings.command_cpu_weight)
    rlimits: list[str] = []
    if how.prlimit is not None:
        if processes and bounds.processes is None and user_namespace and not how.root:
            rlimits.append(f"--nproc={processes + _OVERHEAD}")
            bounds.processes = (processes, "RLIMIT_NPROC")
        if memory and bounds.memory_mb is None:
            rlimits.append(f"--as={memory * 1024 * 1024}")
            bounds.memory_mb = (memory, "RLIMIT_AS")
    if rlimits:
        bounds.rlimits = [how.prlimit or "prlimit", *rlimits, "--"]
    if values:
        _enter_groups(how, values, bounds)
    _say_once(settings, how, bounds, user_namespace)
    return bounds if bounds.enter or bounds.rlimits else None


def _half_of_memory_mb() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (2 * 1024 * 1024))
    except (OSError, ValueError):
        return 0


def _enter_groups(how: Plan, values: dict[str, str], bounds: Bounds) -> None:
    """Create the command's group in each base folder and set ``bounds.enter``."""
    try:
        for base in dict.fromkeys(how.groups[c] for c in values):
            mine = {c: v for c, v in values.items() if how.groups[c] == base}
            bounds.groups.append(cgroups.create(base, mine))
    except OSError:
        bounds.close()
        raise
    bounds.enter = cgroups.enter_argv([str(g / "cgroup.procs") for g in bounds.groups])


_FORK_FAILED = re.compile(
    r"Resource temporarily unavailable|fork: retry|[Cc]an(?:no|')t fork|BlockingIOError"
)
_ALLOC_FAILED = re.compile(
    r"Cannot allocate memory|MemoryError|bad_alloc|[Oo]ut of memory|memory exhausted"
)


def limit_notes(bounds: Bounds | None, output: str) -> list[str]:
    """Notes for the model when a command hit a limit: from its cgroups' counters
    (certain), or, under rlimits, from its output (``fork``/allocation failures).
    Call before :meth:`Bounds.close`."""
    if bounds is None:
        return []
    notes: list[str] = []
    events = bounds.events()
    if bounds.processes is not None:
        limit, how = bounds.processes
        refused = events.get("forks_refused", 0)
        if refused:
            starts = "1 start was" if refused == 1 else f"{refused} starts were"
            notes.append(
                f"limit: the command reached its limit of {limit} processes and threads "
                f"(command_max_processes, cgroup): {starts} refused"
            )
        elif how == "RLIMIT_NPROC" and _FORK_FAILED.search(output):
            notes.append(
                f"limit: a process start failed: the command may run {limit} processes and "
                "threads at once (command_max_processes, RLIMIT_NPROC)"
            )
    if bounds.memory_mb is not None:
        limit, how = bounds.memory_mb
        kills = events.get("oom_kills", 0)
        if kills:
            killed = "1 of its processes" if kills == 1 else f"{kills} of its processes"
            notes.append(
                f"limit: the command reached its memory limit of {limit} MB "
                f"(command_max_memory_mb, cgroup): the kernel killed {killed}"
            )
        elif how == "RLIMIT_AS" and _ALLOC_FAILED.search(output):
            notes.append(
                f"limit: an allocation failed: each process may use {limit} MB of address "
                "space (command_max_memory_mb, RLIMIT_AS)"
            )
    return notes


_said = threading.Event()


def _say_once(settings: Settings, how: Plan, bounds: Bounds, user_namespace: bool) -> None:
    """Log, once per process, what commands are limited by and what is not limited."""
    if _said.is_set():
        return
    _said.set()
    parts: list[str] = []
    missing = False
    if bounds.processes is not None:
        limit, by = bounds.processes
        parts.append(f"processes ≤ {limit} per command ({by})")
    elif settings.command_max_processes:
        missing = True
        why = (
            "RLIMIT_NPROC does not bind root"
            if how.root
            else "no user namespace for RLIMIT_NPROC"
            if not user_namespace
            else "no prlimit"
        )
        parts.append(f"processes NOT limited ({why}, and no writable cgroup pids controller)")
    else:
        parts.append("processes not limited (command_max_processes = 0)")
    parts.append(_memory_words(settings, how, bounds))
    missing = missing or (bool(settings.command_max_memory_mb) and bounds.memory_mb is None)
    weight = settings.command_cpu_weight
    if "cpu" in how.groups and bounds.groups:
        parts.append(f"CPU weight {weight} against the agent's 100 (cgroup)")
    else:
        auto = Path("/proc/sys/kernel/sched_autogroup_enabled")
        grouped = auto.exists() and auto.read_text().strip() == "1"
        parts.append(
            "CPU not weighted (no cgroup cpu controller"
            + (
                "; autogroup: each command shares the CPU with the agent as one group)"
                if grouped
                else ")"
            )
        )
    text = "agentkit: command limits: " + "; ".join(parts)
    (log.warning if missing else log.info)("%s", text)


def _memory_words(settings: Settings, how: Plan, bounds: Bounds) -> str:
    if bounds.memory_mb is not None:
        limit, by = bounds.memory_mb
        if by == "cgroup":
            return f"memory ≤ {limit} MB per command, all its processes together (cgroup)"
        return f"memory ≤ {limit} MB of address space per process (RLIMIT_AS)"
    if settings.command_max_memory_mb == 0:
        return "memory not limited (command_max_memory_mb = 0)"
    if settings.command_max_memory_mb is None:
        return (
            "memory not limited (no cgroup memory controller delegated; set "
            "command_max_memory_mb for a limit per process)"
        )
    return "memory NOT limited (no prlimit and no cgroup memory controller)"
