"""Supervising running workers from the parent side.

One job: for each started sub-agent, a monitor thread reads its channel (progress,
write claims, the result), sends the wrap-up message at ``subagent_wrapup_at`` of
its timeout, kills it at the timeout (docs/specification.md §8), and finishes it exactly once: the
final status, the write claims released, the record finalised, the waiters woken
and SubAgentFinished emitted. The manager decides which agents exist; this module
only watches them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkit import events as ev
from agentkit import prompts
from agentkit.settings import Settings
from agentkit.subagent.claims import Claims
from agentkit.subagent.contract import (
    ChannelClosed,
    ClaimAnswer,
    ClaimRequest,
    ParentMessage,
    Progress,
    Result,
    Terminate,
    WrapUp,
)
from agentkit.subagent.record import (
    Ending,
    finalise_record,
    list_deliverables,
    read_record,
    record_path,
)
from agentkit.subagent.state import EndStatus, KillStatus, SubAgent

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
        agents: the manager's agents by id (read for the owner of a conflicting claim).
        changed: the manager's condition; its lock guards every SubAgent, and it is
            notified when one finishes.
        emit: event callback (SubAgentProgress, SubAgentFinished).
    """

    def __init__(
        self,
        *,
        workspace: Path,
        settings: Settings,
        claims: Claims,
        agents: dict[int, SubAgent],
        changed: threading.Condition,
        emit: Callable[[ev.Event], None],
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.claims = claims
        self.agents = agents
        self.changed = changed
        self.emit = emit

    def phrase(self, key: str, **values: Any) -> str:
        """Return the prompts phrase ``key`` in the settings' language."""
        return prompts.phrase(self.settings.language, key, **values)

    def watch(self, agent: SubAgent) -> None:
        """Start the monitor thread of ``agent`` (its handle is set)."""
        threading.Thread(
            target=self._monitor,
            args=(agent,),
            name=f"agentkit-monitor-{agent.spec.agent_id}",
            daemon=True,
        ).start()

    # ---------------------------------------------------------------- monitor
    def _monitor(self, agent: SubAgent) -> None:
        handle = agent.handle
        assert handle is not None
        channel = handle.channel
        deadline = agent.started + agent.spec.timeout_seconds
        wrapup_at = agent.started + agent.spec.timeout_seconds * self.settings.subagent_wrapup_at
        wrapup_sent = False
        result: Result | None = None
        while agent.status == "running":
            now = time.monotonic()
            if now >= deadline:
                self.kill(agent, "timeout")
                break
            if not wrapup_sent and now >= wrapup_at:
                wrapup_sent = True
                self.send(agent, WrapUp(seconds_left=int(deadline - now)))
            wait = max(0.0, min(deadline, wrapup_at if not wrapup_sent else deadline) - now)
            try:
                message = channel.receive(min(wait, 0.5))
            except ChannelClosed:
                break
            if isinstance(message, Progress):
                self.progress(agent, message)
            elif isinstance(message, ClaimRequest):
                self._answer_claim(agent, message)
            elif isinstance(message, Result):
                result = message
                break
        if result is not None and agent.status == "running" and agent.kill_reason is None:
            # Announce first: the worker's exit and the leftover sweep come after,
            # off the critical path of whoever waits for this agent.
            self.progress(agent, result.progress, emit=False)
            agent.token_usage = result.progress.token_usage
            ending = Ending(result.result_summary, result.error)
            self.finish(agent, result.status, ending, worker_record=result.record)
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
        with self.changed:
            agent.counters.update(progress.counters)
            agent.finishing = progress.finishing
            if progress.last_action:
                agent.last_action = progress.last_action
        if emit:
            row = agent.status_row()
            if row != agent.last_progress:  # a retry loop must not flood the stream
                agent.last_progress = row
                self.emit(ev.SubAgentProgress(info=row))

    def _answer_claim(self, agent: SubAgent, request: ClaimRequest) -> None:
        path = Path(request.path)
        owner = self.claims.claim_file(agent.spec.agent_id, path)
        error = None if owner is None else self.conflict_message(path, owner)
        self.send(agent, ClaimAnswer(request=request.request, error=error))

    def _shown(self, path: Path) -> str:
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)

    def conflict_message(self, path: Path, owner: int) -> str:
        """Return the write_conflict refusal for ``path``, held by agent ``owner``."""
        other = self.agents.get(owner)
        return self.phrase(
            "write_conflict",
            path=self._shown(path),
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
        with self.changed:
            if agent.status != "running":
                return
            agent.kill_reason = status
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
        SubAgentFinished."""
        result_summary, error = ending.result_summary, ending.error
        with self.changed:
            if agent.status != "running":
                return
            agent.status = status
            # The parent's clock: it includes the worker's start-up.
            agent.runtime_seconds = int(time.monotonic() - agent.started)
            if status != "completed":
                # The seed's notification templates say "finished"; the summary they
                # carry says how, so a failure never reads as a success.
                reason = error if status == "failed" and error and error != result_summary else ""
                if status == "failed" and not reason and not result_summary:
                    reason = self.phrase("crashed_summary", reason="unknown")
                note = self.phrase("status_note", status=status, reason=reason).strip()
                result_summary = f"{note}\n{result_summary}" if result_summary else note
            agent.result_summary = result_summary
            agent.error = error
            self.claims.release(agent.spec.agent_id)
        record, where = finalise_record(
            agent.spec,
            status,
            agent.stats(),
            agent.token_usage,
            Ending(result_summary, error),
            worker_record,
        )
        with self.changed:
            if where is None:
                agent.record = record  # no disk took it: the parent keeps it
            elif where != record_path(agent.deliverables_path):
                agent.record_elsewhere = self._shown(where)
        agent.done.set()
        with self.changed:
            self.changed.notify_all()
        self.emit(
            ev.SubAgentFinished(info={**agent.status_row(), "result_summary": agent.result_summary})
        )
