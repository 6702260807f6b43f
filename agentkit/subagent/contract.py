"""The parent/worker contract: what a worker is given, what crosses the pipe, and
what a launcher must provide.

One job: the shapes both processes agree on. The status names (:data:`Status`,
:data:`EndStatus`, :data:`KillStatus`) are the specification's; :class:`WorkerSpec` is everything a
worker needs (picklable); the messages are frozen dataclasses, one per kind;
:class:`Channel` (agentkit.subagent.channel) sends and receives them over any
:class:`Endpoint` (a multiprocessing ``Connection`` is one); :class:`Launcher` and
:class:`WorkerHandle` are what another execution engine (Ray, a job queue)
implements to run workers without touching the manager or the worker loop
(docs/architecture.md §4).

Worker → parent: :class:`Progress` after every tool call, :class:`ClaimRequest`
before a write, :class:`ApprovalRequest` when a call waits for a person, :class:`Result`
at the end. Parent → worker: :class:`ClaimAnswer`, :class:`ApprovalAnswer`,
:class:`WrapUp` (time is nearly up) and :class:`Terminate` (stop now).

The control plane (docs/control-plane.md) adds, worker → parent: :class:`UsageReport`
after every model response (tokens and cost, always), :class:`BudgetWarning` (its token
or cost budget passed the wrap-up point), :class:`Question` and
:class:`QuestionClosed` (ask_parent), :class:`Receipt` (a Steer or an Answer taken or
refused) and :class:`SteerRead` (steering messages now in its conversation);
parent → worker: :class:`Steer` (a message for its next request), :class:`Answer`
(to its question) and :class:`BudgetWrapUp` (the conversation's budget ran out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

# The transport, kept in its own module; named here for the launchers and the worker.
from agentkit.subagent.channel import SEND_TIMEOUT as SEND_TIMEOUT
from agentkit.subagent.channel import Channel as Channel
from agentkit.subagent.channel import ChannelClosed as ChannelClosed
from agentkit.subagent.channel import Endpoint as Endpoint

# How a sub-agent ended; "running" until then (docs/specification.md §1 statuses).
# budget_exhausted: its token or cost budget ran out (docs/control-plane.md).
EndStatus = Literal["completed", "failed", "timeout", "terminated", "budget_exhausted"]
Status = Literal["running", "completed", "failed", "timeout", "terminated", "budget_exhausted"]
# The endings the parent forces (timeout, terminate_sub_agent, shutdown).
KillStatus = Literal["timeout", "terminated"]

STATUSES: tuple[Status, ...] = get_args(Status)


def sub_agent_status(value: Any) -> Status | None:
    """``value`` (a status row's or a record's ``status``, read from outside) as a
    :data:`Status`, or None when it is not one (the caller keeps what it had)."""
    for status in STATUSES:
        if value == status:
            return status
    return None


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, picklable.

    Attributes:
        agent_id, summary, task, timeout_seconds: from create_sub_agent (seconds).
        deliverables_dir: as the model gave it (relative, for messages).
        deliverables_path: absolute folder.
        workspace: absolute workspace root.
        sub_conversation_id: the worker's conversation id.
        settings: ``Settings.model_dump()`` of the parent.
        process_mark: AGENTKIT_PROCESS_MARK value inherited by everything it starts.
        created_at: ISO UTC time of creation (docs/specification.md §6).
    """

    agent_id: int
    summary: str
    task: str
    timeout_seconds: int
    deliverables_dir: str
    deliverables_path: str
    workspace: str
    sub_conversation_id: str
    settings: dict[str, Any]
    process_mark: str
    created_at: str
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------ worker → parent
@dataclass(frozen=True)
class Progress:
    """The worker's counters after a tool call (docs/specification.md §1 status row fields).

    ``counters``: the four seed counters by name; ``token_usage``: ``{"prompt",
    "completion", "total"}`` tokens; ``last_action``: one line, may be empty;
    ``finishing``: it is calling finish_task (its Result follows), so a
    notification about to go out can wait for it (agents ending together share one).
    """

    counters: dict[str, int]
    last_action: str
    turns: int
    token_usage: dict[str, int]
    finishing: bool = False


@dataclass(frozen=True)
class ClaimRequest:
    """Ask for the right to write ``path`` (absolute); answered by ClaimAnswer."""

    request: int
    path: str


@dataclass(frozen=True)
class ApprovalRequest:
    """A tool call of the sub-agent waits for a person (docs/approvals.md §3); answered
    by ApprovalAnswer ``request``. ``tool``, ``arguments``: the call; ``reason``: why it
    asks; ``key``: what allow_always remembers; ``call_id``: the model's id of the call.
    The parent pauses the sub-agent's timeout clock until the answer."""

    request: int
    tool: str
    arguments: dict[str, Any]
    reason: str
    key: str
    call_id: str | None = None


@dataclass(frozen=True)
class Result:
    """How the worker ended; its last message. ``runtime_seconds`` by its own clock.

    ``record``: the worker's final record (record.build_record) when it could not
    write it itself (full disk); the parent writes it or keeps it. None otherwise.
    """

    status: EndStatus
    result_summary: str
    error: str | None
    progress: Progress
    runtime_seconds: int
    record: dict[str, Any] | None = None
    # finish_task's ``result`` object under a profile's output_schema (validated).
    result: Any = None
    # Steer messages it took but never read (it ended first): their refs.
    unread: tuple[int, ...] = ()


@dataclass(frozen=True)
class UsageReport:
    """One response's tokens (``cached``: part of ``prompt``), its USD cost (None: no
    known price), ``estimated`` (none reported); the totals so far (docs/control-plane.md §7)."""

    prompt: int
    cached: int
    completion: int
    cost_usd: float | None
    estimated: bool
    tokens_total: int
    cost_usd_total: float | None


@dataclass(frozen=True)
class BudgetWarning:
    """Its budget passed the wrap-up point, or (``exhausted``) is spent: used of limits."""

    tokens_used: int
    max_tokens: int | None
    cost_usd: float | None
    max_cost_usd: float | None
    exhausted: bool = False


@dataclass(frozen=True)
class Question:
    """ask_parent: the sub-agent waits for an Answer to ``request``."""

    request: int
    text: str


@dataclass(frozen=True)
class QuestionClosed:
    """It stopped waiting for the answer to ``request`` (``reason``: ``timed_out``)."""

    request: int
    reason: str


@dataclass(frozen=True)
class Receipt:
    """The Steer or Answer ``ref`` taken, or refused (``reason``: finishing,
    not_waiting, queue_full, too_long)."""

    ref: int
    accepted: bool
    reason: str = ""


@dataclass(frozen=True)
class SteerRead:
    """Steer messages ``refs`` are now in its conversation, before its next request."""

    refs: tuple[int, ...]


# ------------------------------------------------------------ parent → worker
@dataclass(frozen=True)
class ClaimAnswer:
    """Answer to ClaimRequest ``request``: None grants it, else the refusal text."""

    request: int
    error: str | None


@dataclass(frozen=True)
class ApprovalAnswer:
    """Answer to ApprovalRequest ``request``: ``decision`` ``allow`` or ``deny``;
    ``note`` the person's reason; ``by`` who decided (agentkit.tools.gate.AskAnswer)."""

    request: int
    decision: Literal["allow", "deny"]
    note: str | None = None
    by: str = "user"


@dataclass(frozen=True)
class WrapUp:
    """Time is nearly up: ``seconds_left`` until the parent kills the worker."""

    seconds_left: int


@dataclass(frozen=True)
class Terminate:
    """Stop now: record the end, kill every process started, exit. A launcher
    that cannot signal its worker (remote) relies on this message alone."""

    reason: str


@dataclass(frozen=True)
class Steer:
    """A message for its model's next request (``ref``: answered by a Receipt)."""

    ref: int
    text: str


@dataclass(frozen=True)
class Answer:
    """The answer to Question ``request`` (``ref``: answered by a Receipt)."""

    ref: int
    request: int
    text: str


@dataclass(frozen=True)
class BudgetWrapUp:
    """The conversation's budget is spent: wrap up now (once)."""

    reason: str = "session"


# The control plane's worker messages, handed to agentkit.subagent.control.
ControlMessage = UsageReport | BudgetWarning | Question | QuestionClosed | Receipt | SteerRead
# Approvals (docs/approvals.md §3) use their own messages, beside the control plane's.
WorkerMessage = Progress | ClaimRequest | ApprovalRequest | Result | ControlMessage
ParentMessage = ClaimAnswer | ApprovalAnswer | WrapUp | Terminate | Steer | Answer | BudgetWrapUp


class WorkerHandle(Protocol):
    """A started worker: the parent's end of its channel and process control."""

    channel: Channel[ParentMessage, WorkerMessage]

    @property
    def pid(self) -> int | None:
        """The worker's process id where it has one on this host, else None."""
        ...

    @property
    def exit_code(self) -> int | None:
        """The worker's exit code once it ended, else None."""
        ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the worker to end."""
        ...

    def kill(self, grace: float) -> None:
        """End the worker and every process it started (SIGTERM, ``grace`` seconds,
        SIGKILL, or the engine's equivalent). Never raises for a gone worker."""
        ...

    def close(self) -> None:
        """Release what the handle holds (its channel, process resources) once the
        worker ended; idempotent."""
        ...


class Launcher(Protocol):
    """Starts a worker for a spec; the worker runs
    ``agentkit.subagent.worker.worker_main(spec, endpoint)``. A launcher that holds
    resources between starts (Ray's pool of warm actors) also has ``close()``, which
    the manager calls when it shuts down."""

    def start(self, spec: WorkerSpec) -> WorkerHandle:
        """Start the worker; raises (any exception) when it cannot."""
        ...
