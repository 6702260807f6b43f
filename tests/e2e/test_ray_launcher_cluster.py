"""The Ray launcher on a real multi-node Ray cluster (loopback only, tests/ray_cluster.py):
placement on both nodes, the shared-workspace check, a node dying mid-task (the channel's
rules without a cluster are in tests/unit/test_ray_launcher.py). The sub-agent lifecycle
tests run against both launchers in tests/integration/test_subagents.py (the
``launcher`` fixture)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from subagent_helpers import Router, call, calls, finish, wait_until, who

from agentkit import Agent, Settings
from agentkit.testing import FakeOpenAIServer

# ------------------------------------------------------------ on the cluster


def ray_settings(server: FakeOpenAIServer, cluster: Any, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key": "k",
        "language": "en",
        "max_retries": 0,
        "subagent_timeout_min": 1,
        "subagent_launcher": "ray",
        "ray_address": cluster.address,
        "ray_num_cpus": 0.25,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def cluster(ray_cluster: Any) -> Iterator[Any]:
    """The session's cluster; afterwards no sub-agent host actor may be alive."""
    yield ray_cluster
    assert ray_cluster.wait_no_hosts() == [], "a sub-agent host actor outlived its test"


def node_with(resource: str) -> str:
    import ray

    return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"])


@pytest.mark.ray
@pytest.mark.slow
def test_sub_agents_are_placed_on_both_nodes_and_resources_pin_them(
    workspace: Path, cluster: Any
) -> None:
    from ray_cluster import NODE2_RESOURCE

    # The first four run at once (each answers once all four asked), so each needs an
    # actor of its own: else one warm actor, freed by a sub-agent that finished, may
    # run them all one after another on its node.
    passed = threading.Event()
    together = threading.Barrier(4, action=passed.set)

    def at_once(i: int) -> Any:
        def answer(request: dict[str, Any]) -> Any:
            if not passed.is_set():
                together.wait(60)
            return finish(f"agent {i} done")

        return answer

    subs = {i: [at_once(i)] for i in range(1, 5)}
    with FakeOpenAIServer(Router(main=["unused"], subs=subs)) as server:
        with Agent(workspace=workspace, settings=ray_settings(server, cluster)) as agent:
            for i in range(1, 5):
                agent.manager.create(agent_id=i, summary=f"s{i}", task="t", run_in_background=True)
            assert wait_until(lambda: all(a.done.is_set() for a in agent.manager.agents.values()))
            spread = {a.handle.node_id for a in agent.manager.agents.values()}
            statuses = {a.status for a in agent.manager.agents.values()}
        pinned_settings = ray_settings(server, cluster, ray_resources={NODE2_RESOURCE: 1})
        with Agent(workspace=workspace, settings=pinned_settings) as agent:
            for i in range(1, 3):
                agent.manager.create(
                    agent_id=i, summary=f"p{i}", task="t", deliverables_dir=f"pinned/{i}"
                )
            pinned = {a.handle.node_id for a in agent.manager.agents.values()}
            pinned_status = {a.status for a in agent.manager.agents.values()}
    assert statuses == pinned_status == {"completed"}
    assert len(spread) == 2 and "" not in spread  # SPREAD used both nodes
    assert pinned == {node_with(NODE2_RESOURCE)}


@pytest.mark.ray
@pytest.mark.slow
def test_a_node_without_the_shared_workspace_fails_the_sub_agent_clearly(
    tmp_path: Path, cluster: Any, ray_node_without_workspace: Path
) -> None:
    # A third node in its own mount namespace sees an empty tmpfs where the workspace is.
    workspace = ray_node_without_workspace / tmp_path.name / "ws"
    workspace.mkdir(parents=True)
    router = Router(
        main=[calls(call("create_sub_agent", agent_id=1, summary="s", task="t")), "went on"],
        subs={1: [finish()]},
    )
    with FakeOpenAIServer(router) as server:
        settings = ray_settings(
            server, cluster, ray_resources={"no_shared_disk": 1}, ray_num_cpus=0
        )
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("go")
        tool = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"][-1]
        data = json.loads(tool["content"])
        asked = [r for r in server.requests if who(r) is not None]
    assert result.status == "done" and result.final_text == "went on"
    assert data["status"] == "failed"
    assert "is not shared with this Ray node" in data["message"]
    assert "NFS" in data["result_summary"]
    assert asked == []  # the worker never started


@pytest.mark.ray
@pytest.mark.slow
def test_a_node_dying_mid_task_fails_the_sub_agent_and_the_conversation_goes_on(
    workspace: Path, cluster: Any
) -> None:
    from agentkit.process.tree import processes_with_mark

    mark = cluster.add_node({"doomed": 10})
    router = Router(
        main=[
            calls(call("create_sub_agent", agent_id=1, summary="dying node", task="t")),
            "went on",
        ],
        subs={1: [calls(call("run_command", command="sleep 1000", timeout_seconds=600))]},
    )
    with FakeOpenAIServer(router) as server:
        settings = ray_settings(server, cluster, ray_resources={"doomed": 1})
        with Agent(workspace=workspace, settings=settings) as agent:

            def killer() -> None:
                wait_until(lambda: 1 in agent.manager.agents, timeout=30)
                sub = agent.manager.agents[1]
                wait_until(lambda: sub.last_action.startswith("Running"), timeout=30)
                wait_until(lambda: len(processes_with_mark(sub.spec.process_mark)) >= 1)
                cluster.kill_node(mark)

            thread = threading.Thread(target=killer, daemon=True)
            thread.start()
            result = agent.run("go")
            thread.join(5)
            sub = agent.manager.agents[1]
        tool = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"][-1]
        data = json.loads(tool["content"])
    assert result.status == "done" and result.final_text == "went on"
    assert data["status"] == "failed"
    assert "Ray actor running this sub-agent's worker is gone" in data["message"]
    assert not processes_with_mark(sub.spec.process_mark)
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    # On disk too, whichever wrote first: the parent's "failed" replaces the worker's
    # own account of losing its parent, written when it outlived its relay actor.
    assert record["status"] == "failed", record
    assert "Ray actor running this sub-agent's worker is gone" in record["error"]


def test_an_address_nobody_answers_at_fails_at_once_with_the_reason() -> None:
    import subprocess
    import sys

    pytest.importorskip("ray")
    code = (
        "from agentkit.subagent.launchers.ray import connect\n"
        "try:\n    connect('127.0.0.1:9')\nexcept ConnectionError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "no Ray cluster answers at 127.0.0.1:9" in done.stdout, done
    assert "ray_address" in done.stdout


@pytest.mark.ray
@pytest.mark.slow
def test_the_pool_reuses_a_warm_actor_and_replaces_one_that_died(
    workspace: Path, cluster: Any
) -> None:
    import ray

    subs = {i: [finish(f"agent {i} done")] for i in range(1, 4)}
    with FakeOpenAIServer(Router(main=["unused"], subs=subs)) as server:
        settings = ray_settings(server, cluster, ray_pool_size=1)
        with Agent(workspace=workspace, settings=settings) as agent:
            manager = agent.manager
            actors = []

            def idle() -> bool:  # the ended agent's actor is back in the pool
                pool = manager.launcher._pool
                return pool is not None and not any(h.busy for h in pool.hosts())

            for i in (1, 2):  # one after another: the second gets the first's actor back
                manager.create(agent_id=i, summary=f"s{i}", task="t", deliverables_dir=f"d{i}")
                actors.append(manager.agents[i].handle.actor._actor_id)
                assert wait_until(idle, timeout=60)
            pool = manager.launcher._pool
            ray.kill(pool.hosts()[0].actor, no_restart=True)  # an idle actor dies
            assert wait_until(
                lambda: (
                    [h.actor._actor_id for h in pool.hosts() if h.is_warm()]
                    not in ([], [actors[0]])
                ),
                timeout=120,
            )
            manager.create(agent_id=3, summary="s3", task="t", deliverables_dir="d3")
            actors.append(manager.agents[3].handle.actor._actor_id)
            results = {i: a.result_summary for i, a in manager.agents.items()}
            statuses = {a.status for a in manager.agents.values()}
    assert statuses == {"completed"}
    assert results == {i: f"agent {i} done" for i in (1, 2, 3)}  # no job saw another's
    assert actors[0] == actors[1] and actors[2] != actors[0]


@pytest.mark.ray
@pytest.mark.slow
def test_a_sub_agent_started_while_an_actor_is_released_waits_for_it(
    workspace: Path, cluster: Any
) -> None:
    """Regression (benchmarks/ray_launcher.py, issue 27): a sub-agent created while the
    previous one's actor was still being released (its leftovers killed) got a new,
    cold actor (about 2 s of CPU), so fan-out on Ray ran 4-7x slower than local. A
    blocking sub-agent's create returns at its result, before that release ends."""
    subs = {i: [finish(f"agent {i} done")] for i in range(1, 4)}
    with FakeOpenAIServer(Router(main=["unused"], subs=subs)) as server:
        settings = ray_settings(server, cluster, ray_pool_size=1)
        with Agent(workspace=workspace, settings=settings) as agent:
            manager = agent.manager
            actors = []
            for i in (1, 2, 3):  # each at once after the previous one's result
                manager.create(agent_id=i, summary=f"s{i}", task="t", deliverables_dir=f"d{i}")
                actors.append(manager.agents[i].handle.actor._actor_id)
            hosts = len(manager.launcher._pool.hosts())
            statuses = {a.status for a in manager.agents.values()}
    assert statuses == {"completed"}
    assert actors[0] == actors[1] == actors[2]
    assert hosts == 1


def pool_of(agent: Agent) -> Any:
    """The Ray host pool the agent's launcher joined."""
    return agent.manager.launcher._pool


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)  # five cold actors on two busy cores
def test_a_second_batch_of_five_finds_five_warm_actors_with_the_default_pool(
    workspace: Path, cluster: Any
) -> None:
    """Regression (issue 31): with the default pool (ray_pool_size 2) only two of the
    five actors a batch of five background sub-agents (the seed's limit) used stayed
    warm, so the next batch started three cold ones (1.6 s each against 0.23 s
    locally). Counted by the pool's own counter of started actors."""
    subs = {i: [finish(f"agent {i} done")] for i in range(1, 11)}
    with (
        FakeOpenAIServer(Router(main=["unused"], subs=subs)) as server,
        Agent(workspace=workspace, settings=ray_settings(server, cluster)) as agent,
    ):
        manager = agent.manager

        def batch(ids: range) -> set[Any]:
            for i in ids:
                manager.create(agent_id=i, summary=f"s{i}", task="t", run_in_background=True)
            assert wait_until(lambda: all(manager.agents[i].done.is_set() for i in ids), 120)
            return {manager.agents[i].handle.actor._actor_id for i in ids}

        def all_idle() -> bool:  # every actor of the batch is warm and back in the pool
            hosts = pool_of(agent).hosts()
            return len(hosts) == 5 and all(h.is_warm() and not h.busy for h in hosts)

        batch(range(1, 6))
        kept = wait_until(all_idle, timeout=60)
        started, waited = pool_of(agent).started, pool_of(agent).waited
        warm = {h.actor._actor_id for h in pool_of(agent).hosts()}
        second = batch(range(6, 11))
        started_after, waited_after = pool_of(agent).started, pool_of(agent).waited
        statuses = {a.status for a in manager.agents.values()}
    assert statuses == {"completed"}
    assert kept, "the pool did not keep the five actors warm"
    assert started == started_after == 5  # no cold start in the second batch
    assert waited_after == waited  # each of the five found a warm actor at once
    assert second <= warm  # the second batch ran on the actors the first one left


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)  # five cold actors on two busy cores
def test_a_pool_larger_than_the_cluster_never_leaves_a_sub_agent_without_a_record(
    workspace: Path, cluster: Any
) -> None:
    """Regression (issue 31): with ray_pool_size 5 on the two-node cluster (2 CPUs a
    node, 1 per sub-agent) the fifth sub-agent of a batch got an actor that could
    not be placed, and waited with no record at all until an idle actor ended (five
    minutes); the next batch stalled the same way. Now it waits for the first free
    actor, its record and status say it waits for cluster resources, its timeout
    runs, and the next batch runs on the actors the first one left warm."""
    release = threading.Event()

    def held(request: dict[str, Any]) -> Any:
        release.wait(120)  # busy (its CPU held) until the test lets it finish
        return finish("held agent done")

    subs: dict[int, list[Any]] = {i: [held] for i in range(1, 5)}
    subs.update({i: [finish(f"agent {i} done")] for i in range(5, 11)})
    with FakeOpenAIServer(Router(main=["unused"], subs=subs)) as server:
        settings = ray_settings(server, cluster, ray_num_cpus=1, ray_pool_size=5)
        with Agent(workspace=workspace, settings=settings) as agent:
            manager = agent.manager
            for i in range(1, 5):
                manager.create(agent_id=i, summary=f"s{i}", task="t", run_in_background=True)
            assert wait_until(lambda: server.requests and len(server.requests) >= 4, 120)
            manager.create(
                agent_id=5, summary="s5", task="t", run_in_background=True, timeout_seconds=5
            )
            record_path = workspace / "sub_agent_results/agent_5/.subagent/conversations.json"
            waiting = json.loads(record_path.read_text()) if record_path.exists() else {}
            fifth = manager.agents[5]
            said = wait_until(lambda: "cluster resources" in fifth.last_action, 30)
            timed_out = wait_until(fifth.done.is_set, 60)
            final = json.loads(record_path.read_text())
            release.set()
            assert wait_until(lambda: all(manager.agents[i].done.is_set() for i in range(1, 5)), 60)
            for i in range(6, 11):  # the next batch: four actors placed, one not
                manager.create(agent_id=i, summary=f"s{i}", task="t", run_in_background=True)
            assert wait_until(lambda: all(a.done.is_set() for a in manager.agents.values()), 120)
            statuses = {i: a.status for i, a in manager.agents.items()}
            asked = {who(r) for r in server.requests}
    assert waiting.get("status") == "running", waiting
    assert "Waiting for Ray cluster resources" in waiting.get("waiting_for", ""), waiting
    assert said and timed_out
    assert fifth.status == "timeout" and final["status"] == "timeout"
    assert statuses == {
        **dict.fromkeys(range(1, 5), "completed"),
        5: "timeout",
        **dict.fromkeys(range(6, 11), "completed"),
    }
    assert 5 not in asked  # it never ran: no actor was free before its timeout
