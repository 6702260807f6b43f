"""The Ray launcher's channel without a cluster: the mailbox's ordering and
exactly-once rules, and the messages surviving pickling. The cluster tests are in
tests/e2e/test_ray_launcher_cluster.py."""

from __future__ import annotations

from agentkit.subagent.contract import Progress, Result
from agentkit.subagent.launchers.ray_channel import Mailbox, empty_progress


def test_mailbox_forwards_in_order_once_and_take_acknowledges() -> None:
    forwarded: list[str] = []
    box = Mailbox(forward=lambda m: forwarded.append(m) or True)
    for seq, message in [(2, "b"), (1, "a"), (2, "b"), (4, "d"), (3, "c"), (1, "a")]:
        box.deliver(seq, message)
    assert forwarded == ["a", "b", "c", "d"]

    box.put("x")
    box.put("y")
    first, closed, _ = box.take(0, 0)
    again, _, _ = box.take(0, 0)  # a lost answer: asked again, the same messages come
    assert first == again == [(1, "x"), (2, "y")] and not closed
    box.put("z")
    box.close(0)
    rest, closed, code = box.take(2, 0)  # "after 2" acknowledges x and y
    assert rest == [(3, "z")] and not closed  # closed only once everything was taken
    assert box.take(3, 0) == ([], True, 0)


def test_mailbox_holds_parent_messages_until_the_worker_is_attached() -> None:
    forwarded: list[str] = []
    box = Mailbox()  # a pool's actor: the job's calls may come before its worker runs
    box.deliver(2, "b")
    box.deliver(1, "a")
    assert forwarded == []
    box.attach(lambda m: forwarded.append(m) or True)
    box.deliver(3, "c")
    box.deliver(1, "a")
    assert forwarded == ["a", "b", "c"]


def test_progress_and_result_survive_pickling() -> None:
    import pickle

    message = Result("completed", "ok", None, empty_progress(), 1)
    assert pickle.loads(pickle.dumps(message)) == message
    assert isinstance(pickle.loads(pickle.dumps(empty_progress())), Progress)
