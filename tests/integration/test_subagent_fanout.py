"""Creates made at once (one turn's create_sub_agent calls) start their workers in
parallel, and the admission rules still hold: at most five running, no overlapping
deliverables folders, each id once; one ended while its worker starts leaves nothing.

A Launcher that wraps the local one makes the overlap observable without timing:
its start waits at a barrier that only opens when several starts are in it at once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, finish, wait_until

from agentkit.process.tree import processes_with_mark
from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.launchers.local import LocalLauncher, LocalWorker
from agentkit.subagent.manager import SubAgentManager
from agentkit.testing import FakeOpenAIServer


class Gated:
    """A Launcher: each start waits at ``barrier`` (when given) or for ``release``,
    then starts the worker with the local launcher; counts the starts."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.barrier = barrier
        self.release = threading.Event()
        self.entered = threading.Event()
        self.local = LocalLauncher()
        self.started: list[int] = []
        self._lock = threading.Lock()

    def start(self, spec: WorkerSpec) -> LocalWorker:
        self.entered.set()
        if self.barrier is not None:
            self.barrier.wait()  # BrokenBarrierError (the create fails) unless parallel
        else:
            assert self.release.wait(60)
        with self._lock:
            self.started.append(spec.agent_id)
        return self.local.start(spec)


def settings_for(server: FakeOpenAIServer) -> Settings:
    return Settings(model="m", base_url=server.base_url, api_key="k", language="en")


def create_at_once(manager: SubAgentManager, requests: list[dict[str, Any]]) -> list[dict]:
    with ThreadPoolExecutor(len(requests)) as pool:
        futures = [
            pool.submit(manager.create, summary="s", task="t", run_in_background=True, **r)
            for r in requests
        ]
        return [f.result() for f in futures]


def test_creates_made_at_once_start_their_workers_in_parallel(workspace: Path) -> None:
    router = Router(main=["unused"], subs={i: [finish(f"{i} done")] for i in range(1, 6)})
    launcher = Gated(threading.Barrier(5, timeout=30))
    with FakeOpenAIServer(router) as server:
        manager = SubAgentManager(
            workspace=workspace, settings=settings_for(server), launcher=launcher
        )
        results = create_at_once(manager, [{"agent_id": i} for i in range(1, 6)])
        assert wait_until(lambda: all(a.done.is_set() for a in manager.agents.values()), 60)
        statuses = {a.status for a in manager.agents.values()}
        manager.shutdown()
    assert [r["status"] for r in results] == ["running"] * 5, results
    assert sorted(launcher.started) == [1, 2, 3, 4, 5]  # all five were in start at once
    assert statuses == {"completed"}


def test_admission_holds_for_creates_made_at_once(workspace: Path) -> None:
    router = Router(main=["unused"], subs={i: [finish()] for i in range(1, 20)})
    launcher = Gated()
    with FakeOpenAIServer(router) as server:
        manager = SubAgentManager(
            workspace=workspace, settings=settings_for(server), launcher=launcher
        )
        requests = [{"agent_id": i} for i in range(1, 8)]  # seven distinct: five fit
        requests += [{"agent_id": 8, "deliverables_dir": "shared"}]
        requests += [{"agent_id": 9, "deliverables_dir": "shared/inner"}]  # overlaps 8
        requests += [{"agent_id": 1}]  # a repeated id

        def creates() -> list[dict]:
            return create_at_once(manager, requests)

        done: list[list[dict]] = []
        thread = threading.Thread(target=lambda: done.append(creates()))
        thread.start()
        assert launcher.entered.wait(30)
        # While the starts wait, the reservations already count.
        assert wait_until(lambda: len(manager.running()) == 5, 30)
        launcher.release.set()
        thread.join(60)
        results = done[0]
        assert wait_until(lambda: all(a.done.is_set() for a in manager.agents.values()), 60)
        manager.shutdown()
    running = [r for r in results if r.get("status") == "running"]
    refused = [r for r in results if r["success"] is False]
    assert len(running) == 5 and len(refused) == len(requests) - 5
    assert len(launcher.started) == 5
    assert len({r["deliverables_dir"] for r in running}) == 5
    assert not {"shared", "shared/inner"} <= {r["deliverables_dir"] for r in running}
    errors = " ".join(r["error"] for r in refused)
    assert "at most 5 may run at once" in errors


@pytest.mark.parametrize("how", ["terminate", "shutdown"])
def test_a_sub_agent_ended_while_its_worker_starts_leaves_nothing(
    workspace: Path, how: str
) -> None:
    router = Router(main=["unused"], subs={1: [finish()]})
    launcher = Gated()
    with FakeOpenAIServer(router) as server:
        manager = SubAgentManager(
            workspace=workspace, settings=settings_for(server), launcher=launcher
        )
        done: list[dict] = []
        thread = threading.Thread(
            target=lambda: done.append(
                manager.create(agent_id=1, summary="s", task="t", run_in_background=True)
            )
        )
        thread.start()
        assert launcher.entered.wait(30)
        if how == "terminate":
            assert manager.terminate(1)["success"] is True
        else:
            manager.shutdown()
        launcher.release.set()  # the worker starts only now, after its agent ended
        thread.join(60)
        agent = manager.agents[1]
        mark = agent.spec.process_mark
        assert wait_until(lambda: not processes_with_mark(mark), 30)
        manager.shutdown()
    assert done[0]["success"] is False and done[0]["status"] == "terminated"
    assert agent.status == "terminated"
    assert launcher.started == [1]  # it did start, and was killed at once
    assert agent.handle is not None and agent.handle.exit_code is not None
