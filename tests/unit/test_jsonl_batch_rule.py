"""The JSON-lines chat's rule for lines read together (hardening issue 31, item 9):
while a round works they all join it at once, in order (so all reach its next turn
boundary); between rounds each waits for the round of the line before it."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from subagent_helpers import wait_until

from agentkit.cli.chat import JsonLinesChat


class Conversation:
    """Stands in for a Session: ``post`` queues a message; one posted between rounds
    starts a round (state ``running``) whose future the test resolves."""

    def __init__(self, state: str) -> None:
        self.state = state
        self.posted: list[str] = []
        self.futures: list[Future[Any]] = []

    def post(self, text: str) -> Future[Any]:
        self.posted.append(text)
        self.state = "running"
        future: Future[Any] = Future()
        self.futures.append(future)
        return future


def chat_on(conversation: Conversation) -> JsonLinesChat:
    """A JsonLinesChat acting on ``conversation`` (no workspace, no output)."""
    chat = JsonLinesChat.__new__(JsonLinesChat)
    chat._leave = threading.Event()
    chat._out_lock = threading.Lock()
    chat._posted = None
    chat.commands = SimpleNamespace(session=conversation)  # type: ignore[assignment]
    return chat


def test_lines_read_together_while_a_round_works_all_join_it_in_order() -> None:
    """Regression: the second line waited for the end of the round the first joined,
    so it reached the model a round later."""
    conversation = Conversation("running")
    chat = chat_on(conversation)
    done: list[bool] = []
    worker = threading.Thread(
        target=lambda: done.append(chat._handle_batch(["first", "second", "third"]))
    )
    worker.start()
    try:
        assert wait_until(lambda: bool(done), 10), f"lines held back: {conversation.posted}"
    finally:
        chat._leave.set()  # a chat waiting for a round's end gives up
        worker.join(20)
    assert conversation.posted == ["first", "second", "third"]
    assert not any(f.done() for f in conversation.futures)  # no round had to end


def test_lines_read_together_between_rounds_get_a_round_each() -> None:
    conversation = Conversation("idle")
    chat = chat_on(conversation)
    done: list[bool] = []
    worker = threading.Thread(target=lambda: done.append(chat._handle_batch(["one", "two"])))
    worker.start()
    try:
        assert wait_until(lambda: conversation.posted == ["one"])
        assert conversation.posted == ["one"]  # "two" waits for the round of "one"
        conversation.state = "idle"
        conversation.futures[0].set_result(None)
        worker.join(20)
    finally:
        chat._leave.set()
        worker.join(20)
    assert done == [True] and conversation.posted == ["one", "two"]
