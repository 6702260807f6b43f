"""Supervising running workers from the parent side.

One job: for each started sub-agent, a monitor thread reads its channel (progress,
write claims, the result), sends the wrap-up message at ``subagent_wrapup_at`` of
its timeout, kills it at the timeout (docs/specification.md §8), hands its approval
requests to the conversation (its timeout clock paused until the answer), and
finishes it exactly once: the final status, the write claims released, the record
finalised (agentkit.subagent.endings), the waiters woken, SubAgentFinished emitted
and the manager's ``on_finished`` called. The manager decides which agents exist;
this module only watches them. The control plane's messages (usage, budgets,
questions, receipts) go to its ``control`` (agentkit.subagent.control), which also
hears of each end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentkit import events as ev
from agentkit import prompts
from agentkit.output import typed_output
from agentkit.process.redact import scrub_error
from agentkit.settings import Settings
from agentkit.subagent.claims import Claims
from agentkit.subagent.contract import (
    ApprovalAnswer,
    ApprovalRequest,
    ChannelClosed,
    ClaimAnswer,
    ClaimRequest,
    ControlMessage,
    EndStatus,
    KillStatus,
    ParentMessage,
    Progress,
    Result,
    Terminate,
    WorkerHandle,
    WrapUp,
)
from agentkit.subagent.endings import end_summary, finalise, shown
from agentkit.subagent.record import Ending, read_record
from agentkit.subagent.record_folder import list_deliverables
from agentkit.subagent.state import SubAgent
from agentkit.subagent.table import SubAgentTable

if TYPE_CHECKING:
    from agentkit.tools.gate import AskAnswer

ApprovalHandler = Callable[[SubAgent, ApprovalRequest, Callable[["AskAnswer"], bool]], None]
"""``handler(agent, request, reply)``: a worker's approval request; ``reply(answer)``
sends the answer (False: the agent ended first) and restarts its timeout clock."""


class ControlHooks(Protocol):
    """What the supervisor tells the control plane (agentkit.subagent.control.ControlPlane)."""

    def on_message(self, agent: SubAgent, message: ControlMessage) -> None:
        """A control message from ``agent``'s worker (UsageReport, Question, Receipt...)."""

    def on_result(self, agent: SubAgent, result: Result) -> None:
        """``agent``'s Result arrived (before its end is recorded)."""

    def on_finished(self, agent: SubAgent) -> None:
        """``agent`` ended, whichever way."""


# How long a killed or finished worker gets to exit before its tree is killed.
JOIN_SECONDS = 5
KILL_GRACE = 0.5


def _stopped_by_signal(deliverables: Path) -> str | None:
    """Return the reason a worker gave in its final record when a signal (SIGTERM,
    SIGHUP: a closed terminal, a supervisor) stopped it before it could send a Result,
    else None. It then ended as terminated, not failed, whichever side saw it first."""
    record = read_record(deliverables)
    if record and record.get("status") == "terminated" and record.get("completed_at"):
        return str(record.get("error") or record.get("result_summary") or "terminated")
    return None


class Supervisor:
    """Watches the workers of one manager.

    Args:
        workspace: absolute workspace root (paths in messages are shown relative to it).
        settings: the main agent's Settings (wrap-up fraction, kill grace, list limit).
        claims: the manager's write-claims table.
        table: the manager's sub-agents (agentkit.subagent.table): every SubAgent
            field is read and changed through it, and its waiters are woken when one
            finishes.
        emit: event callback (SubAgentProgress, SubAgentFinished).
        on_finished: called with each agent once it finished (after SubAgentFinished).
        on_approval: takes the workers' approval requests (see :data:`ApprovalHandler`);
            None: ``approvals_default`` answers them at once (no one to ask).
    """

    def __init__(
        self,
        *,
        workspace: Path,
        settings: Settings,
        claims: Claims,
        table: SubAgentTable,
        emit: Callable[[ev.Event], None],
        on_finished: Callable[[SubAgent], None] | None = None,
        on_approval: ApprovalHandler | None = None,
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.claims = claims
        self.table = table
        self.emit = emit
        self.on_finished = on_finished
        self.on_approval = on_approval
        self.control: ControlHooks | None = None  # set by the manager

    def phrase(self, key: str, **values: Any) -> str:
        """Return the prompts phrase ``key`` in the settings' language."""
        return prompts.phrase(self.settings.language, key, **values)

    def adopt(self, agent: SubAgent, handle: WorkerHandle) -> bool:
        """The worker of ``agent`` started (outside the table's lock): watch it and
        return True, or, when the agent was ended meanwhile (a terminate, a shutdown:
        their kill did not see this worker), kill it at once and return False."""

        def take(agent: SubAgent) -> bool:  # True: it was ended meanwhile
            agent.handle = handle
            return agent.status != "running" or agent.kill_reason is not None

        if not self.table.update(agent, take):
            self.watch(agent)
            return True
        handle.kill(self.settings.command_kill_grace)
        handle.join(1)
        handle.close()
        return False

    def watch(self, agent: SubAgent) -> None:
        """Start the monitor thread of ``agent`` (its handle is set)."""
        agent.monitor = threading.Thread(
            target=self._monitor,
            args=(agent,),
            name=f"agentkit-monitor-{agent.spec.agent_id}",
            daemon=True,
        )
        agent.monitor.start()

    def wait_for_workers(self, agents: Iterable[SubAgent], timeout: float) -> None:
        """Wait up to ``timeout`` seconds in all for the monitors of ``agents`` to end:
        each has then joined, killed and closed its worker. A finished sub-agent's
        worker may still be exiting when its result is in; closing waits for it."""
        deadline = time.monotonic() + timeout
        for agent in agents:
            monitor = agent.monitor
            if monitor is not None and monitor is not threading.current_thread():
                monitor.join(max(0.0, deadline - time.monotonic()))

    # ---------------------------------------------------------------- monitor
    def _monitor(self, agent: SubAgent) -> None:
        handle = agent.handle
        assert handle is not None
        channel = handle.channel
        # Seconds on the timeout clock, which stops while the agent waits for its
        # parent or a person (SubAgent.pause_clock).
        deadline = float(agent.spec.timeout_seconds)
        wrapup_at = agent.spec.timeout_seconds * self.settings.subagent_wrapup_at
        wrapup_sent = False
        result: Result | None = None
        while agent.status == "running":
            elapsed = agent.timeout_elapsed()
            if elapsed >= deadline:
                self.kill(agent, "timeout")
                break
            if not wrapup_sent and elapsed >= wrapup_at:
                wrapup_sent = True
                self.send(agent, WrapUp(seconds_left=int(deadline - elapsed)))
            wait = max(0.0, (wrapup_at if not wrapup_sent else deadline) - elapsed)
            try:
                message = channel.receive(min(wait, 0.5))
            except ChannelClosed:
                break
            if isinstance(message, Progress):
                self.progress(agent, message)
            elif isinstance(message, ClaimRequest):
                self._answer_claim(agent, message)
            elif isinstance(message, ApprovalRequest):
                self._ask(agent, message)
            elif isinstance(message, Result):
                result = message
                break
            elif message is not None and self.control is not None:
                self.control.on_message(agent, message)  # the rest are ControlMessages
        if result is not None and self.control is not None:
            self.control.on_result(agent, result)
        if result is not None and agent.status == "running" and agent.kill_reason is None:
            # Announce first: the worker's exit and the leftover sweep come after,
            # off the critical path of whoever waits for this agent.
            self.progress(agent, result.progress, emit=False)
            agent.token_usage = result.progress.token_usage
            # The worker scrubbed its errors; this process may know more secrets (redact).
            ending = Ending(_scrubbed(result.result_summary), _scrubbed(result.error))
            record = result.record
            if isinstance(record, dict):
                record = {**record, **{k: _scrubbed(record.get(k)) for k in _WORKER_TEXTS}}
            self.finish(agent, result.status, ending, worker_record=record)
        handle.join(JOIN_SECONDS)
        # The worker and anything it started (commands left running) end here.
        handle.kill(self.settings.command_kill_grace)
        handle.join(1)
        if agent.status == "running" and agent.kill_reason is None:
            stopped = _stopped_by_signal(Path(agent.spec.deliverables_path))
            if stopped is not None:  # SIGTERM/SIGHUP to the worker: it said so itself
                self.finish(agent, "terminated", Ending(stopped, stopped))
            else:
                why = f"the worker process ended without a result (exit code {handle.exit_code})"
                self.finish(agent, "failed", Ending(None, why))
        # A finished sub-agent holds no pipe end or process resources (fds).
        handle.close()

    def send(self, agent: SubAgent, message: ParentMessage) -> None:
        """Send ``message`` to the agent's worker; a gone worker is ignored (its
        monitor notices)."""
        if agent.handle is not None:
            agent.handle.channel.send(message)

    def progress(self, agent: SubAgent, progress: Progress, emit: bool = True) -> None:
        """Take the worker's counters and last action; emit SubAgentProgress."""
        self.table.update(agent, lambda a: _take_progress(a, progress))
        if emit:
            row = agent.view_row()
            if row != agent.last_progress:  # a retry loop must not flood the stream
                agent.last_progress = row
                self.emit(ev.SubAgentProgress(info=row))

    def _answer_claim(self, agent: SubAgent, request: ClaimRequest) -> None:
        path = Path(request.path)
        owner = self.claims.claim_file(agent.spec.agent_id, path)
        error = None if owner is None else self.conflict_message(path, owner)
        self.send(agent, ClaimAnswer(request=request.request, error=error))

    def _ask(self, agent: SubAgent, request: ApprovalRequest) -> None:
        """Hand a worker's approval request on, its timeout clock stopped meanwhile."""
        agent.pause_clock()
        answered = threading.Event()  # the clock restarts once, whatever answers

        def reply(answer: AskAnswer) -> bool:
            if answered.is_set():
                return False
            answered.set()
            agent.resume_clock()
            alive = self.table.update(agent, _running)
            message = ApprovalAnswer(request.request, answer.decision, answer.note, answer.by)
            return alive and agent.handle is not None and agent.handle.channel.send(message)

        if self.on_approval is None:
            reply(_no_one_to_ask(self.settings.approvals_default))
        else:
            self.on_approval(agent, request, reply)

    def conflict_message(self, path: Path, owner: int) -> str:
        """Return the write_conflict refusal for ``path``, held by agent ``owner``."""
        other = self.table.get(owner)
        return self.phrase(
            "write_conflict",
            path=shown(self.workspace, path),
            owner=owner,
            summary=other.spec.summary if other else "",
        )

    # ------------------------------------------------------------ endings
    def kill(
        self,
        agent: SubAgent,
        status: KillStatus,
        *,
        interrupted: bool = False,
        summary_key: str | None = None,
    ) -> None:
        """End a running agent by force (timeout, terminate, shutdown); its summary
        lists the files it left. ``interrupted``: the main run was cancelled;
        ``summary_key``: the phrase that says who stopped it (default: by timeout, or
        by the main agent)."""

        def claim(agent: SubAgent) -> bool:  # False: it ended already
            if agent.status != "running":
                return False
            agent.kill_reason = status
            return True

        if not self.table.update(agent, claim):
            return
        if agent.handle is not None:
            self.send(agent, Terminate(reason=status))
            agent.handle.kill(KILL_GRACE)
        files, _ = list_deliverables(
            agent.deliverables_path, self.settings.deliverables_list_max, Path(agent.spec.workspace)
        )
        shown = ", ".join(files) if files else self.phrase("no_files")
        key = "timeout_summary" if status == "timeout" else "terminated_summary"
        if interrupted:
            key = "interrupted_summary"
        key = summary_key or key
        self.finish(agent, status, Ending(self.phrase(key, files=shown), status))

    def finish(
        self,
        agent: SubAgent,
        status: EndStatus,
        ending: Ending,
        *,
        worker_record: dict[str, Any] | None = None,
    ) -> None:
        """Record how ``agent`` ended (once; later calls do nothing): status, runtime
        by the parent's clock, a summary that says how it ended, claims released,
        record finalised (from ``worker_record`` when the worker could not write
        it; kept on the agent when no disk takes it); then wake waiters and emit
        SubAgentFinished.

        One truth: the record's first final write decides (under its folder lock,
        agentkit.subagent.record.may_replace). When the worker's own end got there
        first (finish_task at the moment of a terminate), the agent takes the
        record's status, summary and error; and its counters are always the ones
        saved with the record's transcript. So the record, the event, the session
        and the tool result say the same."""
        error = ending.error

        def end(agent: SubAgent) -> str | None:  # its summary; None: it ended already
            if agent.status != "running":
                return None
            agent.status = status
            # The parent's clock: it includes the worker's start-up.
            agent.runtime_seconds = int(time.monotonic() - agent.started)
            agent.result_summary = end_summary(
                self.settings.language, status, ending.result_summary, error
            )
            agent.error = error
            self.claims.release(agent.spec.agent_id)
            return agent.result_summary

        result_summary = self.table.update(agent, end)
        if result_summary is None:
            return
        try:
            final = Ending(result_summary, error, result=agent.result)
            finalise(self.table, agent, status, final, worker_record, self.workspace)
        finally:  # the record is final: another process may take the folder now
            self.claims.release_hold(agent.spec.agent_id)
        if self.control is not None:
            self.control.on_finished(agent)  # its question withdrawn, unread messages kept
        agent.done.set()
        self.table.notify()
        self.emit(
            ev.SubAgentFinished(
                info={**agent.view_row(), "result_summary": agent.result_summary},
                # finish_task's typed result (a profile's output_schema), an instance
                # of the profile's output_type when it has one (agentkit.output)
                output=typed_output(agent.spec.extra.get("profile"), agent.result),
            )
        )
        if self.on_finished is not None:
            self.on_finished(agent)


_WORKER_TEXTS = ("result_summary", "error")


def _scrubbed(text: Any) -> Any:
    """A text from a worker, scrubbed of this process's known secrets (others as given)."""
    return scrub_error(text) if isinstance(text, str) and text else text


def _take_progress(agent: SubAgent, progress: Progress) -> None:
    """Take a worker's counters, token usage and last action (under the table's lock)."""
    agent.counters.update(progress.counters)
    if progress.token_usage:
        agent.token_usage = dict(progress.token_usage)
    agent.finishing = progress.finishing
    if progress.last_action:
        agent.last_action = progress.last_action


def _running(agent: SubAgent) -> bool:
    return agent.status == "running"


def _no_one_to_ask(default: str) -> AskAnswer:
    """What an ask becomes without a conversation to hand it to (approvals_default)."""
    from agentkit.tools.gate import AskAnswer

    if default == "allow":
        return AskAnswer("allow", None, "default")
    return AskAnswer("deny", "no one to ask", "default")
