"""What an approval does, once, in process: a :class:`ToolGate` with ``ask`` rules whose
asks go to a conversation's :class:`ApprovalBroker` (a real Conversation), answered the
way every front end answers (``approve``). The front ends' own tests (terminal chat,
``--jsonl``, the web API, the browser, ACP, a Python callback) check only how their
words map onto these answers (docs/approvals.md)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentkit import events as ev
from agentkit.chat.approvals import ApprovalBroker
from agentkit.conversation import Conversation
from agentkit.errors import ApprovalError
from agentkit.policy.approvals import ApprovalPolicy
from agentkit.settings import Settings
from agentkit.tools.base import ToolResult
from agentkit.tools.gate import ToolGate

RULES = {"write_file": "ask", "write_file:*.md": "deny"}


@dataclass
class Asking:
    """A gate whose asks wait in ``broker`` for an answer; ``rows`` gets each request
    as the front ends get it; ``ran`` counts the calls that ran, by path."""

    broker: ApprovalBroker
    gate: ToolGate
    events: list[ev.Event]
    rows: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    ran: list[str] = field(default_factory=list)
    saves: list[dict[str, Any]] = field(default_factory=list)

    def call(self, path: str, cancel: threading.Event | None = None) -> ToolResult:
        """One write_file call through the gate (blocks until it is decided)."""

        def execute() -> ToolResult:
            self.ran.append(path)
            return ToolResult(f"wrote {path}")

        arguments = {"path": path, "content": "x"}
        return self.gate.run(
            "write_file", arguments, f"c_{path}", cancel or threading.Event(), execute
        )

    def call_in_thread(
        self, path: str, cancel: threading.Event | None = None
    ) -> tuple[threading.Thread, list[ToolResult]]:
        box: list[ToolResult] = []
        thread = threading.Thread(target=lambda: box.append(self.call(path, cancel)), daemon=True)
        thread.start()
        return thread, box

    def settled(self, path: str) -> ToolResult:
        """One call that must be decided without anyone answering."""
        thread, box = self.call_in_thread(path)
        thread.join(10)
        assert box, f"the call of {path} still waits for an answer"
        return box[0]

    def asked(self) -> dict[str, Any]:
        """The next request handed to the front ends."""
        return self.rows.get(timeout=10)

    def of(self, kind: type[ev.Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def make(conversation: Conversation, *, answerer: bool = True, **values: Any) -> Asking:
    settings = Settings(model="m", api_key="k", language="en", **values)
    events: list[ev.Event] = []
    saves: list[dict[str, Any]] = []
    broker = ApprovalBroker(
        conversation,
        settings=lambda: settings,
        emit=events.append,
        save=lambda: saves.append(dict(conversation.approvals)),
    )
    gate = ToolGate(
        ApprovalPolicy(RULES), broker.ask, None, "en", settings.approval_timeout_seconds
    )
    asking = Asking(broker, gate, events, saves=saves)
    if answerer:
        broker.subscribe(asking.rows.put)
    return asking


@pytest.fixture
def asking() -> Iterator[Asking]:
    made = make(Conversation())
    yield made
    made.broker.withdraw_all("the test ended")


def test_allow_runs_the_call_once_and_the_request_is_kept_meanwhile(asking: Asking) -> None:
    thread, box = asking.call_in_thread("a.txt")
    row = asking.asked()
    assert (row["tool"], row["arguments"]["path"], row["agent_id"]) == ("write_file", "a.txt", None)
    assert asking.ran == []  # it waits for the answer
    assert [r["request_id"] for r in asking.broker.pending()] == [row["request_id"]]
    assert asking.saves[-1]["pending"][0]["request_id"] == row["request_id"]  # in the file
    asking.broker.approve(row["request_id"], "allow")
    thread.join(10)
    assert box[0].output == "wrote a.txt" and asking.ran == ["a.txt"]
    assert asking.broker.pending() == []
    [answered] = asking.of(ev.ApprovalAnswered)
    assert (answered.decision, answered.note, answered.by) == ("allow", None, "user")


def test_deny_quotes_the_note_to_the_model_and_the_call_does_not_run(asking: Asking) -> None:
    thread, box = asking.call_in_thread("a.txt")
    asking.broker.approve(asking.asked()["request_id"], "deny", "  not in this folder ")
    thread.join(10)
    assert box[0].error_code == "denied"
    assert box[0].output.startswith("Error: denied: the user denied this write_file call")
    assert '"not in this folder"' in box[0].output
    assert asking.ran == []
    assert asking.of(ev.ApprovalAnswered)[0].note == "not in this folder"


def test_allow_always_asks_no_more_for_its_key_and_is_kept_in_the_conversation() -> None:
    conversation = Conversation()
    asking = make(conversation)
    thread, _ = asking.call_in_thread("a.txt")
    asking.broker.approve(asking.asked()["request_id"], "allow_always")
    thread.join(10)
    assert asking.settled("b.txt").output == "wrote b.txt"  # not asked
    assert asking.rows.empty() and len(asking.of(ev.ApprovalRequested)) == 1
    assert asking.broker.always() == ["write_file"]
    assert conversation.approvals["always"] == ["write_file"]
    reopened = make(conversation)  # the conversation opened again
    assert reopened.settled("c.txt").output == "wrote c.txt" and reopened.rows.empty()


def test_a_deny_rule_refuses_at_once_without_asking(asking: Asking) -> None:
    result = asking.settled("notes.md")
    assert result.output.startswith(
        "Error: denied: the approvals rule 'write_file:*.md' refuses write_file calls"
    )
    assert asking.rows.empty() and asking.of(ev.ApprovalRequested) == [] and asking.ran == []


def test_two_answers_at_once_one_wins_and_the_call_runs_once(asking: Asking) -> None:
    thread, box = asking.call_in_thread("a.txt")
    request_id = asking.asked()["request_id"]
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def answer(decision: str) -> None:
        barrier.wait()
        try:
            asking.broker.approve(request_id, decision)
            outcomes.append(decision)
        except ApprovalError as error:
            outcomes.append(f"refused: {error.code}")

    answers = [threading.Thread(target=answer, args=(d,)) for d in ("allow", "deny")]
    for t in answers:
        t.start()
    for t in answers:
        t.join(10)
    thread.join(10)
    assert len(outcomes) == 2 and outcomes.count("refused: answered") == 1
    assert len(asking.of(ev.ApprovalAnswered)) == 1
    assert asking.ran == (["a.txt"] if "allow" in outcomes else [])
    with pytest.raises(ApprovalError, match="already answered"):
        asking.broker.approve(request_id, "allow")
    with pytest.raises(ApprovalError, match="no approval request 'ap_nope'") as caught:
        asking.broker.approve("ap_nope", "allow")
    assert caught.value.code == "unknown"
    with pytest.raises(ApprovalError, match="allow, allow_always or deny"):
        asking.broker.approve(request_id, "yes")


def test_a_cancelled_call_withdraws_its_request(asking: Asking) -> None:
    cancel = threading.Event()
    thread, box = asking.call_in_thread("a.txt", cancel)
    request_id = asking.asked()["request_id"]
    cancel.set()  # the round was cancelled
    thread.join(10)
    assert box[0].error_code == "cancelled" and asking.ran == []
    assert asking.broker.pending() == []
    assert [e.request_id for e in asking.of(ev.ApprovalWithdrawn)] == [request_id]
    with pytest.raises(ApprovalError):
        asking.broker.approve(request_id, "allow")


def test_an_unanswered_request_is_denied_after_the_timeout() -> None:
    asking = make(Conversation(), approval_timeout_seconds=0.05)
    result = asking.settled("a.txt")  # no one answers
    assert result.error_code == "denied" and "0.05" in result.output and asking.ran == []
    assert [e.by for e in asking.of(ev.ApprovalAnswered)] == ["timeout"]


def test_no_one_to_ask_denies_unless_approvals_default_allows() -> None:
    asking = make(Conversation(), answerer=False)
    result = asking.settled("a.txt")
    assert result.error_code == "denied" and asking.ran == []
    [answered] = asking.of(ev.ApprovalAnswered)
    assert (answered.decision, answered.note, answered.by) == ("deny", "no one to ask", "default")
    allowing = make(Conversation(), answerer=False, approvals_default="allow")
    assert allowing.settled("a.txt").output == "wrote a.txt"
