"""Typed events for progress displays and UIs (``Agent.run(on_event=...)``,
``Session.subscribe``, ``async for ... in Session.events()``).

Every event is a small frozen dataclass; ``type`` names it for JSON consumers and
``conversation_id`` says which conversation it belongs to (filled in by the
session that publishes it). A conversation's events form one ordered stream
(agentkit.chat.eventbus numbers them); callbacks are called one at a time.

Conversation events (docs/architecture.md §9): :class:`RoundStarted` /
:class:`RoundFinished` bracket each round; ``RoundFinished.background`` lists the
sub-agents still running (work goes on), and :class:`AllWorkDone` follows once no
round and no sub-agent is left (the moment to ring a bell).

Approvals (docs/approvals.md): every :class:`ApprovalRequested` is followed by exactly
one :class:`ApprovalAnswered` or :class:`ApprovalWithdrawn` with its ``request_id``.

Control-plane events (docs/control-plane.md): :class:`SubAgentMessage` (a message sent
to a running sub-agent), :class:`SubAgentQuestion` / :class:`SubAgentAnswered` (a
sub-agent waits for an answer; then how the wait ended) and :class:`BudgetWarning`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: this module stays plain dataclasses, cheap to import
    from agentkit.conversation import ConversationState
    from agentkit.engine_roles import RunStatus
    from agentkit.errors import ErrorKind, LLMErrorKind
    from agentkit.subagent.contract import Status as SubAgentStatus

__all__ = [
    "AllWorkDone",
    "ApprovalAnswered",
    "ApprovalRequested",
    "ApprovalWithdrawn",
    "AssistantMessage",
    "BudgetWarning",
    "ContextCompacted",
    "Event",
    "EventHandler",
    "HookFailed",
    "MessageQueued",
    "Notification",
    "RetryScheduled",
    "RoundFinished",
    "RoundStarted",
    "RunFinished",
    "RunStarted",
    "StateChanged",
    "SubAgentAnswered",
    "SubAgentEvent",
    "SubAgentFinished",
    "SubAgentMessage",
    "SubAgentProgress",
    "SubAgentQuestion",
    "SubAgentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "UserMessage",
]


@dataclass(frozen=True)
class Event:
    """Base of all events: a frozen dataclass whose ``type`` is its class name.

    ``conversation_id`` (keyword-only, default "") names the conversation.
    """

    conversation_id: str = field(default="", kw_only=True)

    @property
    def type(self) -> str:
        """The event's class name, e.g. ``"ToolCallStarted"``."""
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict with a ``type`` key."""
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class RunStarted(Event):
    """``Agent.run`` began on ``task`` (its first round; notification rounds follow
    until no sub-agent works, then :class:`RunFinished`)."""

    task: str


@dataclass(frozen=True)
class TextDelta(Event):
    """A piece of streamed assistant text (may be replaced if the request is retried)."""

    text: str


@dataclass(frozen=True)
class AssistantMessage(Event):
    """The model answered: ``content`` (text or None) and ``tool_calls`` (OpenAI shape), at model request number ``turn``; ``reasoning`` is the reply's reasoning text (``reasoning_content``), when the model sent one (not streamed: it comes whole with the reply)."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    turn: int
    reasoning: str | None = None


@dataclass(frozen=True)
class ToolCallStarted(Event):
    """A tool call began: ``name`` with parsed ``arguments`` (None when they did not parse); ``last_action`` is the short phrase shown in status rows."""

    call_id: str
    name: str
    arguments: dict[str, Any] | None
    last_action: str


@dataclass(frozen=True)
class ToolCallFinished(Event):
    """A tool call ended: ``ok`` False for an ``Error:`` result or a seed-tool refusal; ``output`` is the result text; ``duration_seconds`` wall time."""

    call_id: str
    name: str
    ok: bool
    output: str
    duration_seconds: float


@dataclass(frozen=True)
class RetryScheduled(Event):
    """A transient model error of ``kind`` (an LLMErrorKind); the request is retried
    after ``delay_seconds``."""

    kind: LLMErrorKind
    attempt: int
    delay_seconds: float
    message: str


@dataclass(frozen=True)
class ContextCompacted(Event):
    """The context budget shrank the history from ``tokens_before`` to ``tokens_after`` tokens; ``how`` names the step taken."""

    tokens_before: int
    tokens_after: int
    how: str


@dataclass(frozen=True)
class StateChanged(Event):
    """The conversation state changed; ``state`` a ConversationState (idle, running,
    waiting_for_subagents, done, failed)."""

    state: ConversationState


# The seed's stats object (docs/specification.md §1): runtime and the four counters.
_STATS_KEYS = ("runtime_seconds", "files_read", "searches", "web_pages", "commands")


@dataclass(frozen=True)
class SubAgentEvent(Event):
    """Base of the three sub-agent events: ``info`` is the sub-agent's status row (a
    dict, kept for compatibility); the typed fields say the same, read from it.

    Attributes:
        info: the get_sub_agent_status row (agent_id, summary, status, the counters,
            last_action, deliverables_dir) plus ``token_usage``, ``tokens``,
            ``cost_usd`` and, on :class:`SubAgentFinished`, ``result_summary``.
        agent_id: the sub-agent's id in its conversation (1-99).
        status: ``running``, or how it ended: ``completed``, ``failed``, ``timeout``,
            ``terminated`` or ``budget_exhausted``.
        summary: the short description it was created with.
        deliverables_dir: its deliverables folder, relative to the workspace.
        result_summary: its result summary once it ended (:class:`SubAgentFinished`),
            else None.
        stats: the seed's stats object: ``runtime_seconds``, ``files_read``,
            ``searches``, ``web_pages``, ``commands``.
        output: on :class:`SubAgentFinished`, the typed result its profile's
            ``output_schema`` asked for (the JSON value ``finish_task`` gave, checked),
            an instance of the profile's ``output_type`` when it has one (validated
            in this process), else None.
    """

    info: dict[str, Any]
    agent_id: int = field(default=0, init=False)
    status: SubAgentStatus = field(default="running", init=False)
    summary: str = field(default="", init=False)
    deliverables_dir: str = field(default="", init=False)
    result_summary: str | None = field(default=None, init=False)
    stats: dict[str, int] = field(default_factory=dict, init=False)
    output: Any = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        # The typed fields are views of ``info`` (one truth); a value of the wrong
        # type there leaves the field at its default rather than lying about it.
        info = self.info
        agent_id = info.get("agent_id")
        if isinstance(agent_id, int) and not isinstance(agent_id, bool):
            object.__setattr__(self, "agent_id", agent_id)
        from agentkit.subagent.contract import sub_agent_status

        status = sub_agent_status(info.get("status"))  # an unknown one leaves "running"
        if status is not None:
            object.__setattr__(self, "status", status)
        for name in ("summary", "deliverables_dir"):
            if isinstance(info.get(name), str):
                object.__setattr__(self, name, info[name])
        if isinstance(info.get("result_summary"), str):
            object.__setattr__(self, "result_summary", info["result_summary"])
        stats = {
            key: value
            for key in _STATS_KEYS
            if isinstance(value := info.get(key), int) and not isinstance(value, bool)
        }
        object.__setattr__(self, "stats", stats)

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict with a ``type`` key (an ``output``
        that is a pydantic instance dumped as JSON: ``model_dump(mode="json")``)."""
        from agentkit.output import to_json

        return {**super().to_dict(), "output": to_json(self.output)}


@dataclass(frozen=True)
class SubAgentStarted(SubAgentEvent):
    """A sub-agent's worker started; ``info`` is its get_sub_agent_status row (agent_id, summary, status, counters, last_action, deliverables_dir), also in the typed fields (:class:`SubAgentEvent`)."""


@dataclass(frozen=True)
class SubAgentProgress(SubAgentEvent):
    """A sub-agent's counters or last_action changed; ``info`` is a get_sub_agent_status row (typed fields: :class:`SubAgentEvent`)."""


@dataclass(frozen=True)
class SubAgentFinished(SubAgentEvent):
    """A sub-agent ended (completed, failed, timeout or terminated); ``info`` is its final status row with ``result_summary``; ``output`` its typed result, if any (:class:`SubAgentEvent`)."""


@dataclass(frozen=True)
class RunFinished(Event):
    """A run ended with ``status`` (done, failed, cancelled), the ``final_text`` answer, an ``error`` text when it failed, and ``stats``."""

    status: RunStatus
    final_text: str | None
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)


EventHandler = Callable[[Event], None]


@dataclass(frozen=True)
class UserMessage(Event):
    """A user message entered the conversation: at the start of a round, or at a turn
    boundary of a running round (``queued`` True: it waited for the current tool
    results)."""

    text: str
    queued: bool = False


@dataclass(frozen=True)
class MessageQueued(Event):
    """A user message arrived while a round runs; it waits for the next turn boundary.
    ``position`` is its place in the queue (1 = next)."""

    text: str
    position: int


@dataclass(frozen=True)
class Notification(Event):
    """Finished sub-agents were announced to the main agent with the specification's
    template (docs/specification.md §3): ``role`` "system" after a tool batch, "user"
    when it starts a round; ``agent_ids`` the sub-agents announced; ``text`` as sent."""

    agent_ids: list[int]
    role: str
    text: str


@dataclass(frozen=True)
class RoundStarted(Event):
    """A round began (``round`` counts from 1 per conversation, on across its
    reopenings); ``trigger`` is "user" (a message) or "notification" (a background
    sub-agent ended while no round ran)."""

    round: int
    trigger: str


@dataclass(frozen=True)
class RoundFinished(Event):
    """A round ended: ``status`` done, failed or cancelled; ``final_text`` the answer;
    ``background`` the ids of sub-agents still running (non-empty: the conversation
    waits for them and a completion will start a round by itself); ``error_kind`` the
    LLMError kind when a model error ended it (docs/providers.md §4.2), else None;
    ``explanation``, for a failed round, one sentence for people: what failed (naming
    the endpoint when it is at fault) and what to do (agentkit.chat.explain)."""

    round: int
    status: RunStatus
    final_text: str | None
    error: str | None = None
    background: list[int] = field(default_factory=list)
    error_kind: ErrorKind | None = None
    explanation: str | None = None


@dataclass(frozen=True)
class AllWorkDone(Event):
    """No round runs and no sub-agent works: the conversation is idle (after the last
    round, or after the last background sub-agent of a conversation whose round had
    already ended without news to announce)."""


@dataclass(frozen=True)
class ApprovalRequested(Event):
    """A tool call waits for a person's answer (``Session.approve``): ``request_id``
    names the request; ``agent_id`` the sub-agent asking (None: the main agent);
    ``tool`` and ``arguments`` the call; ``reason`` why it asks (the rule, or a hook's
    reason); ``key`` what ``allow_always`` would remember; ``call_id`` the model's id of
    the call; ``always`` what answering ``allow_always`` allows, in words (one line)."""

    request_id: str
    agent_id: int | None
    tool: str
    arguments: dict[str, Any]
    reason: str
    key: str = ""
    call_id: str | None = None
    always: str = ""


@dataclass(frozen=True)
class ApprovalAnswered(Event):
    """An approval request was answered: ``decision`` ``allow``, ``allow_always`` or
    ``deny``; ``note`` the reason given; ``by`` ``user`` (Session.approve), ``default``
    (no one to ask: Settings.approvals_default) or ``timeout``
    (approval_timeout_seconds passed)."""

    request_id: str
    agent_id: int | None
    decision: str
    note: str | None = None
    by: str = "user"


@dataclass(frozen=True)
class ApprovalWithdrawn(Event):
    """An approval request can no longer be answered (its sub-agent ended, its round
    was cancelled, the conversation was closed, or the process that asked ended):
    ``reason`` says which; the call did not run and the model is told."""

    request_id: str
    agent_id: int | None
    reason: str


@dataclass(frozen=True)
class HookFailed(Event):
    """A hook failed and was passed over (a timeout, an exit status other than 0 and 2,
    a program that cannot start, output that is not JSON): ``hook_event_name`` the
    event (PreToolUse...), ``hook`` its command, ``problem`` one line. It did not block."""

    hook_event_name: str
    hook: str
    problem: str
    agent_id: int | None = None


@dataclass(frozen=True)
class SubAgentMessage(Event):
    """A message was sent to running sub-agent ``agent_id`` (message_sub_agent, or a
    person: ``by`` "main" or "user"); ``delivered`` False when it was not (the agent
    ended or was finishing). A delivered one reaches its model before its next request."""

    agent_id: int
    text: str
    delivered: bool
    by: str = "main"


@dataclass(frozen=True)
class SubAgentQuestion(Event):
    """Sub-agent ``agent_id`` (its ``summary``) asked its parent ``question`` with
    ask_parent and waits for the answer (its timeout clock paused); answer it with
    ``Session.answer_subagent`` (or the main agent does, with answer_sub_agent)."""

    agent_id: int
    summary: str
    question: str


@dataclass(frozen=True)
class SubAgentAnswered(Event):
    """Sub-agent ``agent_id``'s question is no longer pending: ``outcome`` "answered"
    (``answer`` the text, ``by`` "main" or "user"), "timed_out" (it stopped waiting:
    ask_parent_max_wait_seconds) or "agent_ended" (withdrawn: it ended while it waited)."""

    agent_id: int
    answer: str | None
    outcome: str
    by: str = ""


@dataclass(frozen=True)
class BudgetWarning(Event):
    """A budget passed its wrap-up point (85 %) or, ``exhausted``, ran out: ``scope``
    "subagent" (``agent_id``'s run) or "session" (the whole conversation). ``tokens``
    and ``cost_usd`` used of ``max_tokens`` and ``max_cost_usd`` (None: no limit)."""

    scope: str
    exhausted: bool
    tokens: int
    max_tokens: int | None
    cost_usd: float | None
    max_cost_usd: float | None
    agent_id: int | None = None
