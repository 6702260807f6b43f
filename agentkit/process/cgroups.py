"""Command cgroups: where this agent may create them, and their life (agentkit.process.limits).

One job: find the folders a command's cgroup can be created in (:func:`candidates`,
:func:`usable`), create one with its limit files (:func:`create`), and remove it once
empty (:func:`remove`, :func:`remove_later`), including the empty ones agents that
are gone left behind (:func:`sweep`). The policy (which limit, by what) lives in
:mod:`agentkit.process.limits`.

Entering: a cgroup cannot be given to a process at ``fork`` from Python, and moving a
process after it started races with its first children. So the launch starts with
:data:`ENTER`, a ``sh`` that writes itself into each ``cgroup.procs`` (writing ``0``
moves the writer) and execs the rest: everything of the command descends from a
process already inside. Which folders: cgroup v2 where the agent's own group enables
the controllers for children (it must hold no process then: in practice the root
group), or its parent where the agent's group sets no limit of its own (commands
become the agent's siblings, escaping nothing); then the cgroup v1 ``pids`` hierarchy.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

__all__ = [
    "ENTER",
    "PREFIX",
    "candidates",
    "create",
    "enter_argv",
    "remove",
    "remove_later",
    "sweep",
    "usable",
]

log = logging.getLogger(__name__)

PREFIX = "agentkit-"
"""Command groups are named ``agentkit-<agent pid>-<random>``."""

ENTER = (
    'while [ "$1" != -- ]; do echo 0 >"$1" 2>/dev/null || { echo "agentkit: the command '
    'could not enter its cgroup ($1); it was not run"; exit 125; }; shift; done; '
    'shift; exec "$@"'
)
"""``sh -c ENTER agentkit-cgroup PROCS... -- ARGV``: enter each ``cgroup.procs`` given,
then exec ARGV; a refusal stops the launch (status 125) with a line saying why."""


def enter_argv(procs: list[str]) -> list[str]:
    """The argv head entering the ``cgroup.procs`` files ``procs`` (see :data:`ENTER`)."""
    return ["/bin/sh", "-c", ENTER, "agentkit-cgroup", *procs, "--"]


_FILES = {
    "pids": ("pids.max",),
    "memory": ("memory.max", "memory.swap.max"),
    "cpu": ("cpu.weight",),
}


def create(base: Path, values: dict[str, str]) -> Path:
    """Create a command group in ``base`` with ``values`` (controller → limit text:
    ``pids``, ``memory`` (bytes; swap is then 0: the hog ends, not the machine),
    ``cpu`` (a weight)). Returns its folder; raises OSError (nothing is left behind)."""
    group = base / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    try:
        for controller, value in values.items():
            limit, *rest = _FILES[controller]
            (group / limit).write_text(value)
            for extra in rest:
                with contextlib.suppress(FileNotFoundError):
                    (group / extra).write_text("0")
    except OSError:
        remove(group)
        raise
    return group


def candidates() -> list[tuple[str, Path]]:
    """(controller, folder to create command groups in), best first: cgroup v2 (the
    agent's own group, then its parent), then the v1 ``pids`` hierarchy."""
    own = _own_groups()
    found: list[tuple[str, Path]] = []
    for mount, root, fstype, options in _cgroup_mounts():
        if fstype == "cgroup2" and "" in own:
            here = _below(mount, root, own[""])
            # The parent makes commands siblings of the agent: only when that escapes no
            # limit set on the agent's own group.
            places = [here, here.parent] if here is not None and _unlimited(here) else [here]
            for place in places:
                if place is not None and place.is_relative_to(mount):
                    with contextlib.suppress(OSError):
                        enabled = (place / "cgroup.subtree_control").read_text().split()
                        found += [(c, place) for c in ("pids", "memory", "cpu") if c in enabled]
        elif fstype == "cgroup" and "pids" in options.split(",") and "pids" in own:
            here = _below(mount, root, own["pids"])
            if here is not None:
                found.append(("pids", here))
    v2 = [f for f in found if (f[1] / "cgroup.controllers").exists()]
    return v2 + [f for f in found if f not in v2]


def _unlimited(group: Path) -> bool:
    """True when ``group`` sets no pids or memory limit of its own."""
    for name in ("pids.max", "memory.max", "memory.high"):
        with contextlib.suppress(OSError):
            if (group / name).read_text().strip() != "max":
                return False
    return True


def _own_groups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for v2), from /proc/self/cgroup."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                groups[name] = path
    return groups


def _cgroup_mounts() -> list[tuple[Path, str, str, str]]:
    """(mount point, root inside the hierarchy, fstype, super options) of cgroup mounts."""
    mounts: list[tuple[Path, str, str, str]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                mounts.append((Path(fields[4]), fields[3], rest[0], rest[2]))
    return mounts


def _below(mount: Path, root: str, path: str) -> Path | None:
    """The folder of cgroup ``path`` on a mount of the hierarchy at ``root``, or None."""
    if path != root and not path.startswith(root.rstrip("/") + "/"):
        return None
    return mount / path[len(root.rstrip("/")) :].lstrip("/")


def usable(base: Path) -> bool:
    """True when a group created in ``base`` can be entered by a new process (probed
    with ``true``; the probe group is removed)."""
    if not os.access(base, os.W_OK):
        return False
    probe = base / f"{PREFIX}{os.getpid()}-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        argv = [*enter_argv([str(probe / "cgroup.procs")]), "true"]
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        for _ in range(50):  # the probe's exit leaves the group a moment later
            if remove(probe):
                break
            time.sleep(0.01)


def sweep(base: Path) -> None:
    """Remove empty command groups left in ``base`` by agents that are gone."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            owner = entry.name[len(PREFIX) :].split("-", 1)[0]
            if entry.name.startswith(PREFIX) and owner.isdigit() and not _alive(int(owner)):
                remove(entry)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove(group: Path) -> bool:
    """rmdir ``group``; False while processes remain in it (EBUSY)."""
    try:
        group.rmdir()
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:  # not empty yet
            return False
        log.debug("agentkit: cannot remove the cgroup %s (%s)", group, exc)
    return True


class _Reaper:
    """Removes groups that were busy when their command ended, once they are empty."""

    def __init__(self) -> None:
        self.pending: set[Path] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def add(self, group: Path) -> None:
        with self.lock:
            self.pending.add(group)
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="agentkit-cgroup-reaper", daemon=True
                )
                self.thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            with self.lock:
                self.pending = {g for g in self.pending if not remove(g)}
                if not self.pending:
                    self.thread = None
                    return


_reaper = _Reaper()


def remove_later(group: Path) -> None:
    """Remove ``group`` now, or as soon as its processes are gone (checked every 0.5 s
    by one daemon thread)."""
    if not remove(group):
        _reaper.add(group)
