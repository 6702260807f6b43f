"""A sub-agent's copy merged twice (review: the page and the main agent may both ask).

Checked against real git, real files and real workers over FakeOpenAIServer: a second
merge of the same copy never moves ``refs/agentkit/before-merge/...`` (the only record of
the workspace before the first merge), and two merges asked for at once through the
manager apply once: the second is refused as ``merged``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from git_helpers import git, make_repo
from subagent_helpers import Router, call, calls, finish, scripted_settings, wait_until

from agentkit import Agent
from agentkit import isolation as iso
from agentkit.subagent import merging
from agentkit.testing import FakeOpenAIServer

REF = "refs/agentkit/before-merge/conv/agent-1"


def test_a_second_merge_of_a_copy_keeps_the_first_before_merge_ref(workspace: Path) -> None:
    make_repo(workspace, {"f.txt": "one\n"})
    copy = iso.create_copy(workspace, "conv", 1)
    (Path(copy.root) / "a.txt").write_text("sub-agent\n")
    assert iso.merge(workspace, copy).files == ("a.txt",)
    first = git(workspace, "rev-parse", REF).strip()
    (workspace / "f.txt").write_text("the person's edit after the merge\n")
    again = iso.merge(workspace, copy)
    assert again.status == "merged" and again.files == ()  # nothing left to apply
    assert git(workspace, "rev-parse", REF).strip() == first
    (Path(copy.root) / "b.txt").write_text("more\n")  # the copy goes on: merged again
    assert iso.merge(workspace, copy).files == ("b.txt",)
    assert git(workspace, "rev-parse", REF).strip() == first
    assert git(workspace, "show", f"{first}:f.txt") == "one\n"


class WatchedLock:
    """The manager's real merge lock, counting the threads that wait for it."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.waiting = 0
        self.count_lock = threading.Lock()

    def __enter__(self) -> None:
        with self.count_lock:
            self.waiting += 1
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_two_merges_asked_at_once_apply_once_and_the_second_is_refused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repo(workspace, {"f.txt": "one\n"})
    router = Router(
        main=["noted"],
        subs={
            1: [
                calls(call("write_file", path="a.txt", content="sub-agent\n")),
                finish("Wrote a.txt in the copy as the task asked."),
            ]
        },
    )
    with FakeOpenAIServer(router) as server:
        settings = scripted_settings(server, "en", subagent_isolation="available")
        with Agent(workspace=workspace, settings=settings) as agent:
            manager = agent.manager
            handle = agent.spawn("write a.txt", summary="write a.txt", isolation="isolated")
            assert handle.result(timeout=60).status == "completed"
            real = threading.Lock()
            watched = WatchedLock(real)
            monkeypatch.setattr(merging, "_merge_lock", lambda workspace: watched)
            outcomes: list[Any] = []

            def ask() -> None:
                try:
                    outcomes.append(merging.merge(manager, 1))
                except merging.IsolationRefused as exc:
                    outcomes.append(exc.reason)

            real.acquire()  # both callers pass the first look, then wait here
            threads = [threading.Thread(target=ask) for _ in range(2)]
            for thread in threads:
                thread.start()
            assert wait_until(lambda: watched.waiting == 2)
            real.release()
            for thread in threads:
                thread.join(60)
    reports = [o for o in outcomes if not isinstance(o, str)]
    assert len(reports) == 1 and reports[0].files == ("a.txt",), outcomes
    assert [o for o in outcomes if isinstance(o, str)] == ["merged"]
    assert (workspace / "a.txt").read_text() == "sub-agent\n"
    kept = git(workspace, "for-each-ref", "--format=%(objectname)", "refs/agentkit/before-merge")
    assert len(kept.split()) == 1  # the workspace before the merge, without a.txt
    assert git(workspace, "ls-tree", "--name-only", kept.strip()).split() == ["f.txt"]
