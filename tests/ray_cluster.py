"""A real multi-node Ray cluster on loopback for tests, inside a private network
namespace only.

Ray binds the machine's interface address unless that address is loopback, so
these helpers refuse to start anything unless the process runs in a network
namespace where no interface but ``lo`` is up (``unshare -n`` + ``ip link set lo
up``; see .ci/run). Every process a node starts carries ``CLUSTER_VAR=<mark>`` in
its environment, and nodes are stopped by killing exactly those processes
(agentkit.process.tree), never by ``ray stop`` (which kills every Ray process of the
machine).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from agentkit.process.tree import kill_tree, processes_with_mark

CLUSTER_VAR = "AGENTKIT_TEST_RAY_NODE"
ROOT = Path(__file__).resolve().parents[1]
NODE2_RESOURCE = "second_node"
HOST_CLASS = "SubAgentHost"


def skip_reason() -> str | None:
    """Why Ray tests cannot run here (None: they can)."""
    try:
        import ray  # noqa: F401
        import ray.util.state  # noqa: F401
    except ImportError:
        return "Ray is not installed (pip install -e '.[ray]')"
    stats = psutil.net_if_stats()
    up = sorted(name for name, st in stats.items() if st.isup and name != "lo")
    if up:
        return (
            f"Ray tests run only in a private network namespace (interfaces up: {', '.join(up)}); "
            "run: unshare -n bash -c 'ip link set lo up && python -m pytest -m ray'"
        )
    if not stats.get("lo") or not stats["lo"].isup:
        return "the loopback interface is down (ip link set lo up)"
    return None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RayTestCluster:
    """A head node and worker nodes started by ``ray start`` under ``temp_dir``."""

    temp_dir: Path
    port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    marks: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        """The GCS address to pass as ``ray_address``."""
        return f"127.0.0.1:{self.port}"

    def _ray_start(self, args: list[str], wrap: list[str] | None = None, cpus: int = 2) -> str:
        mark = f"raynode-{uuid.uuid4().hex}"
        env = {
            **os.environ,
            CLUSTER_VAR: mark,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        ray = str(Path(sys.executable).with_name("ray"))
        common = [f"--num-cpus={cpus}", "--object-store-memory=78643200", "--disable-usage-stats"]
        self.marks.append(mark)
        done = subprocess.run(
            [*(wrap or []), ray, "start", *common, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ray start failed:\n{done.stdout}\n{done.stderr}")
        return mark

    def use_own_token(self) -> None:
        """Give every node and this process's driver one token of the cluster's own
        (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH``). Ray 2.59 and later switch
        token authentication on for local clusters and keep a token in
        ``~/.ray/auth_token``; a node started while another process rewrote that file
        was refused (InvalidAuthToken). Older Rays ignore both variables."""
        token = self.temp_dir / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
        if "ray._raylet" in sys.modules:
            # Ray read both when it was imported (test collection imports it): without
            # reading them again this driver kept the old mode or token and its
            # ray.init retried InvalidAuthToken for a minute. Ray does the same when it
            # switches token mode on itself (authentication_token_setup).
            try:
                from ray._raylet import AuthenticationTokenLoader, Config
            except ImportError:  # a Ray without token authentication
                return
            Config.initialize("")
            AuthenticationTokenLoader.instance().reset_cache()

    def start(self) -> None:
        """Start the head (with its dashboard, which serves the state API) and a second
        node carrying the custom resource NODE2_RESOURCE."""
        self.use_own_token()
        self._ray_start(
            [
                "--head",
                f"--port={self.port}",
                "--node-ip-address=127.0.0.1",
                f"--temp-dir={self.temp_dir}",
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
            ]
        )
        self.add_node({NODE2_RESOURCE: 100})

    def add_node(
        self, resources: dict[str, float], wrap: list[str] | None = None, cpus: int = 2
    ) -> str:
        """Start one more node with ``resources`` and ``cpus`` CPUs; ``wrap``: a command
        prefix (such as ``unshare -m ...``) the node's ``ray start`` runs under. Returns
        its mark."""
        return self._ray_start(
            [
                f"--address={self.address}",
                "--node-ip-address=127.0.0.1",
                f"--resources={json.dumps(resources)}",
            ],
            wrap,
            cpus,
        )

    def kill_node(self, mark: str) -> None:
        """Kill every process of the node started with ``mark`` at once (a node crash)."""
        kill_tree(None, mark, grace=0, var=CLUSTER_VAR)

    def stop(self) -> None:
        """Kill every process the nodes started (workers first, the head last)."""
        for mark in reversed(self.marks):
            kill_tree(None, mark, grace=2, var=CLUSTER_VAR)

    def leftovers(self) -> list[int]:
        """Pids still carrying a node's mark (empty after stop)."""
        return [p.pid for m in self.marks for p in processes_with_mark(m, CLUSTER_VAR)]

    def live_hosts(self) -> list[dict[str, Any]]:
        """Sub-agent host actors not DEAD, and any detached actor, by Ray's state API."""
        from ray.util.state import list_actors

        actors = list_actors(
            address=f"http://127.0.0.1:{self.dashboard_port}",
            limit=10000,
            raise_on_missing_output=False,
        )
        return [
            a.__dict__
            for a in actors
            if (a.class_name == HOST_CLASS and a.state != "DEAD")
            or (a.state != "DEAD" and getattr(a, "is_detached", False))
        ]

    def wait_no_hosts(self, timeout: float = 20.0) -> list[dict[str, Any]]:
        """Wait until no host actor is alive; return those still alive at the end."""
        deadline = time.monotonic() + timeout
        live = self.live_hosts()
        while live and time.monotonic() < deadline:
            time.sleep(0.3)
            live = self.live_hosts()
        return live
